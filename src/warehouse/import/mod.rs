//! Import of CSV, NDJSON or Parquet into a named warehouse table, with the naming and typing
//! rules of events (snake_case names, int64 → float64 → string widening, nested JSON flattened).
//! Files are written as the input is read (bounded memory) and committed in one catalog
//! transaction at the end: on any error nothing is committed and the written objects are
//! removed, so an import is all or nothing.

use std::io::Read;
use std::sync::Arc;

use arrow::record_batch::RecordBatch;
use object_store::{ObjectStore, ObjectStoreExt};

mod parquet;
mod rows;
mod sink;

pub use sink::ImportError;

use self::parquet::decode_parquet;
use crate::catalog::{Catalog, NewDataFile};
use crate::config::ParquetConfig;
use crate::model::TeamId;
use crate::model::naming::normalize;
use crate::model::schema::TableSchema;
use crate::warehouse::layout::{self, DataFilePath};
use rows::{csv_rows, decode_rows, ndjson_rows};
use sink::Sink;

/// Input formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImportFormat {
    /// Header row, then values, separated by this byte (`,` by default).
    Csv(u8),
    /// One JSON object per line.
    Ndjson,
    /// A Parquet file.
    Parquet,
}

impl ImportFormat {
    /// From a name (`csv`, `ndjson`/`jsonl`, `parquet`) or a file extension.
    pub fn parse(s: &str) -> Option<ImportFormat> {
        Some(match s.to_ascii_lowercase().as_str() {
            "csv" => ImportFormat::Csv(b','),
            "ndjson" | "jsonl" | "json" => ImportFormat::Ndjson,
            "parquet" | "pq" => ImportFormat::Parquet,
            _ => return None,
        })
    }

    /// CSV with another delimiter: one ASCII character other than a quote or a line break, or
    /// `tab`. `None` for other formats or an unusable delimiter.
    pub fn with_delimiter(self, d: &str) -> Option<ImportFormat> {
        let byte = match d {
            "tab" | "\t" | "\t\t" => b'\t',
            d if d.len() == 1 && d.is_ascii() && !matches!(d, "\"" | "\n" | "\r") => {
                d.as_bytes()[0]
            }
            _ => return None,
        };
        matches!(self, ImportFormat::Csv(_)).then_some(ImportFormat::Csv(byte))
    }
}

/// What an import did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ImportStats {
    /// Warehouse table name.
    pub table: String,
    /// Rows imported.
    pub rows: u64,
    /// Files committed.
    pub files: usize,
}

/// Where imports go.
pub struct Importer<'a> {
    /// The catalog.
    pub catalog: &'a Arc<Catalog>,
    /// The warehouse.
    pub store: &'a Arc<dyn ObjectStore>,
    /// Encoding.
    pub parquet: &'a ParquetConfig,
    /// Object path prefix.
    pub prefix: &'a str,
}

/// What an import reads.
pub enum Source {
    /// Bytes already in memory (an HTTP body, bounded by `ingest.max_import_body`).
    Bytes(bytes::Bytes),
    /// A file (the CLI's). Parquet is read in place — the footer, then one row group's pages at
    /// a time — so a file of any size imports in the memory of a few chunks; CSV and NDJSON are
    /// read through a buffer.
    File(std::fs::File),
}

impl Source {
    /// The source as a byte stream.
    fn into_read(self) -> Box<dyn Read + Send> {
        match self {
            Source::Bytes(b) => Box::new(std::io::Cursor::new(b)),
            Source::File(f) => Box::new(std::io::BufReader::new(f)),
        }
    }
}

/// Imports `input` into `table` of `team`.
pub async fn import(
    to: &Importer<'_>,
    team: &TeamId,
    table: &str,
    format: ImportFormat,
    input: Source,
) -> Result<ImportStats, ImportError> {
    let Importer {
        catalog,
        store,
        parquet,
        prefix,
    } = *to;
    let name = normalize(table);
    if name.is_empty() {
        return Err(ImportError::Input(format!(
            "{table:?} has no letter or digit to make a table name from"
        )));
    }
    // Decode and encode on a blocking thread; objects are put from here as they come.
    let (tx, mut rx) = tokio::sync::mpsc::channel::<(RecordBatch, bytes::Bytes)>(2);
    let cfg = parquet.clone();
    // A decode makes and drops large blocks at a high rate: mimalloc's own placement.
    let decoder = tokio::task::spawn_blocking(move || {
        crate::allocator::placement::unplaced(|| decode(format, input, &cfg, &tx))
    });
    let mut written: Vec<NewDataFile> = Vec::new();
    let date = chrono::Utc::now().date_naive();
    let mut failure = None;
    while let Some((batch, data)) = rx.recv().await {
        let path = DataFilePath::new(prefix, team.as_str(), &name, date, &layout::new_file_id());
        let meta = NewDataFile {
            table: name.clone(),
            path: path.as_str().to_string(),
            partition: format!("date={}", date.format("%Y-%m-%d")),
            rows: batch.num_rows() as u64,
            bytes: data.len() as u64,
            min_ts: None,
            max_ts: None,
            schema: TableSchema::from_arrow(&batch.schema()),
        };
        // Reserved before it exists, so no orphan collector deletes it before the commit.
        let (cat, reserved) = (catalog.clone(), vec![meta.path.clone()]);
        let reserved = tokio::task::spawn_blocking(move || cat.reserve_objects(&reserved))
            .await
            .map_err(|e| ImportError::Internal(e.to_string()))
            .and_then(|r| r.map_err(|e| ImportError::Internal(e.to_string())));
        if let Err(e) = reserved {
            failure = Some(e);
            break;
        }
        written.push(meta);
        if let Err(e) = crate::store::create(store.as_ref(), &path.0, data).await {
            failure = Some(ImportError::Internal(e.to_string()));
            break;
        }
    }
    drop(rx);
    let decoded = decoder
        .await
        .map_err(|e| ImportError::Internal(e.to_string()))?;
    let result = match (failure, decoded) {
        (Some(e), _) | (None, Err(e)) => Err(e),
        (None, Ok(())) => {
            let (cat, t, files) = (catalog.clone(), team.clone(), written.clone());
            tokio::task::spawn_blocking(move || cat.commit_files(&t, &files, 0))
                .await
                .map_err(|e| ImportError::Internal(e.to_string()))?
                .map_err(|e| ImportError::Internal(e.to_string()))
        }
    };
    if let Err(e) = result {
        for f in &written {
            let _ = store
                .delete(&object_store::path::Path::from(f.path.as_str()))
                .await;
        }
        let (cat, paths) = (
            catalog.clone(),
            written.iter().map(|f| f.path.clone()).collect::<Vec<_>>(),
        );
        let _ = tokio::task::spawn_blocking(move || cat.release_objects(&paths)).await;
        return Err(e);
    }
    Ok(ImportStats {
        table: name,
        rows: written.iter().map(|f| f.rows).sum(),
        files: written.len(),
    })
}

fn decode(
    format: ImportFormat,
    input: Source,
    cfg: &ParquetConfig,
    tx: &Sink,
) -> Result<(), ImportError> {
    match (format, input) {
        (ImportFormat::Parquet, Source::Bytes(b)) => decode_parquet(b, cfg, tx),
        (ImportFormat::Parquet, Source::File(f)) => decode_parquet(f, cfg, tx),
        (ImportFormat::Csv(delimiter), input) => {
            decode_rows(csv_rows(input.into_read(), delimiter)?, cfg, tx)
        }
        (ImportFormat::Ndjson, input) => decode_rows(ndjson_rows(input.into_read()), cfg, tx),
    }
}
