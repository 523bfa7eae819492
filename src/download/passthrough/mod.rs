//! Parquet passthrough: a Parquet download of a whole table (no filters, every column of the
//! table in its order, no limit, no cursor) is written from the stored files' encoded column
//! chunks instead of decoded and re-encoded rows. Each file of the snapshot, in row order, is
//! either copied row group by row group — when its Parquet schema is exactly the response's, the
//! table's current schema — or, when it was written before a column was added or widened (or
//! holds a float column as text) or is smaller than one read batch, read through the normal
//! reader and encoded like the Parquet encoder does (consecutive such files share row groups). Either way one response file with the table's current schema comes out, with
//! the same rows in the same order as the decoding path.
//!
//! Memory stays bounded: a file's column chunks are fetched in range reads of about
//! [`FETCH_BYTES`] (two in flight) and what the writer produces is drained into the response after
//! each range, so a row group is never held whole; only the footer's metadata (a few hundred
//! bytes per column chunk) grows with the table until the end. Copied chunks keep their
//! statistics and page index; bloom filters are not copied (the warehouse writes none).
//!
//! The response says `X-Stowage-Parquet: passthrough` (or `encode` from the decoding path); the
//! log line `parquet passthrough` and `stowage_download_parquet_row_groups_total{how}` count the
//! row groups copied and encoded.

#[cfg(test)]
mod tests;
mod writer;

use std::sync::Arc;

use axum::body::Body;
use futures::StreamExt;
use object_store::ObjectStore;
use object_store::path::Path;
use tracing::info;

use super::compress::Compressor;
use super::plan::Plan;
use super::stream::{Output, spawn_body};
use crate::catalog::DataFile;
use crate::warehouse::chunks;
use crate::warehouse::reader::{ReadSpec, TableReader};

use writer::CopyWriter;
pub use writer::Counts;

/// Target size of one range read of column chunks.
pub const FETCH_BYTES: u64 = 4 << 20;

/// The response header that tells how a Parquet download was produced: `passthrough` (stored
/// column chunks copied where the file's schema allows) or `encode` (rows decoded and encoded).
pub const HEADER: &str = "x-stowage-parquet";

/// Whether a Parquet download of `plan` can copy stored row groups: every column of the table,
/// in table order, and nothing that selects rows.
pub fn applies(plan: &Plan) -> bool {
    plan.filters.is_empty()
        && plan.buffered.is_empty()
        && plan.limit.is_none()
        && plan.start.is_none()
        && plan.columns == plan.table
}

/// The response body of a passthrough download of `plan`.
pub fn body(
    store: Arc<dyn ObjectStore>,
    plan: Plan,
    batch_rows: usize,
    compressor: Compressor,
) -> Body {
    spawn_body(compressor, move |out| async move {
        let started = std::time::Instant::now();
        let counts = produce(store, plan, batch_rows, out).await?;
        if let Some(c) = counts {
            info!(
                copied_row_groups = c.copied,
                encoded_row_groups = c.encoded,
                ms = started.elapsed().as_millis() as u64,
                "parquet passthrough"
            );
            metrics::counter!("stowage_download_parquet_row_groups_total", "how" => "copied")
                .increment(c.copied);
            metrics::counter!("stowage_download_parquet_row_groups_total", "how" => "encoded")
                .increment(c.encoded);
        }
        Ok(counts.map(|c| c.rows))
    })
}

/// Whether `file` is worth copying as it is: a file with fewer rows than one read batch
/// (`download.batch_rows`) is encoded with its neighbours into full row groups instead, so a
/// table of many small files (before compaction) does not become a response of many tiny row
/// groups with a footer that grows with the number of files.
fn big_enough(file: &DataFile, batch_rows: usize) -> bool {
    file.rows >= batch_rows as u64
}

/// Writes the whole response; `Ok(None)` if the client went away.
async fn produce(
    store: Arc<dyn ObjectStore>,
    plan: Plan,
    batch_rows: usize,
    mut out: Output,
) -> Result<Option<Counts>, String> {
    let err = |e: &dyn std::fmt::Display| e.to_string();
    let mut w = CopyWriter::new(plan.columns.to_arrow()).map_err(|e| err(&e))?;
    let sink = w.sink();
    for file in plan.files {
        let meta = if big_enough(&file, batch_rows) {
            let path = Path::from(file.path.as_str());
            let meta = chunks::metadata_with_page_index(&store, &path, file.bytes)
                .await
                .map_err(|e| format!("reading {}: {e}", file.path))?;
            Some(meta).filter(|m| w.can_copy(m))
        } else {
            None
        };
        let sent = match meta {
            Some(meta) => copy_file(&store, &file, &meta, &mut w, &mut out).await?,
            None => encode_file(&store, &plan.columns, file, batch_rows, &mut w, &mut out).await?,
        };
        if !sent {
            return Ok(None);
        }
    }
    let counts = w.finish().map_err(|e| err(&e))?;
    Ok(out.finish(sink.take()).await?.then_some(counts))
}

/// Copies every row group of `file` (footer `meta`); `Ok(false)` if the client went away.
async fn copy_file(
    store: &Arc<dyn ObjectStore>,
    file: &DataFile,
    meta: &parquet::file::metadata::ParquetMetaData,
    w: &mut CopyWriter,
    out: &mut Output,
) -> Result<bool, String> {
    let at = |e: &dyn std::fmt::Display| format!("copying {}: {e}", file.path);
    let sink = w.sink();
    let fetches = chunks::plan_fetches(meta, FETCH_BYTES).map_err(|e| at(&e))?;
    let path = Path::from(file.path.as_str());
    let mut ranges = chunks::fetch_all(store.clone(), path, file.bytes, fetches);
    for g in 0..meta.num_row_groups() {
        let mut rg = w.copy_row_group(meta, g).map_err(|e| at(&e))?;
        let mut remaining = meta.row_group(g).num_columns();
        while remaining > 0 {
            let (fetch, bytes) = match ranges.next().await {
                Some(r) => r.map_err(|e| at(&e))?,
                None => return Err(at(&"fewer column chunks than the footer lists")),
            };
            if fetch.row_group != g {
                return Err(at(&"column chunks out of order"));
            }
            for _ in fetch.columns.clone() {
                rg.append(&bytes).map_err(|e| at(&e))?;
            }
            remaining = remaining.saturating_sub(fetch.columns.len());
            drop(bytes);
            if !out.send(sink.take()).await? {
                return Ok(false);
            }
        }
        rg.close().map_err(|e| at(&e))?;
    }
    out.send(sink.take()).await
}

/// Decodes `file` into the table's current schema and encodes its rows; `Ok(false)` if the
/// client went away.
async fn encode_file(
    store: &Arc<dyn ObjectStore>,
    columns: &crate::model::schema::TableSchema,
    file: DataFile,
    batch_rows: usize,
    w: &mut CopyWriter,
    out: &mut Output,
) -> Result<bool, String> {
    let sink = w.sink();
    let schema = columns.to_arrow();
    let spec = ReadSpec {
        output: schema.clone(),
        read: schema,
        filters: Vec::new(),
        limit: None,
        batch_rows,
        start: None,
        string_views: false,
    };
    let mut reader = TableReader::new(store.clone(), vec![file], spec);
    while let Some(batch) = reader.next_batch().await.map_err(|e| e.to_string())? {
        w.encode(&batch).map_err(|e| e.to_string())?;
        if !out.send(sink.take()).await? {
            return Ok(false);
        }
    }
    Ok(true)
}
