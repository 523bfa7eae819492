//! Downloads of SQL elements (SPEC §3.4): the element's query runs on the [`SqlEngine`] with
//! the request's `params`; the request's `filters`, `columns` and `limit` then apply to its
//! result, in that order, exactly as they apply to a table, and the batches stream through the
//! same encoders. A failure after the first byte aborts the body. Cursors are refused: paging
//! a query needs a total order the service cannot check yet.

use axum::body::Body;
use futures::StreamExt;
use futures::stream::BoxStream;

use super::compress::Compressor;
use super::encode::Encoder;
use super::error::DownloadError;
use super::request::DownloadRequest;
use super::stream::{Output, spawn_body};
use super::{filter, plan};
use crate::catalog::Element;
use crate::model::filter::{Filter, mask_all};
use crate::model::schema::TableSchema;
use crate::model::{Invalid, TeamId};
use crate::sql::{SqlEngine, SqlError};
use arrow::record_batch::RecordBatch;

/// A started SQL download: what it returns and the query's batches.
pub struct SqlDownload {
    /// Output columns, in order, with their warehouse types.
    pub columns: TableSchema,
    /// Positions of the output columns in the query's result.
    project: Vec<usize>,
    /// The request's filters over the query's result.
    filters: Vec<Filter>,
    /// Most rows to send.
    limit: Option<usize>,
    /// The query's batches.
    batches: BoxStream<'static, Result<RecordBatch, SqlError>>,
}

/// Starts the element's query; refuses what the request asks that cannot apply to its result.
pub async fn start(
    engine: &SqlEngine,
    team: &TeamId,
    element: &Element,
    sql: &str,
    req: &DownloadRequest,
    fresh: bool,
) -> Result<SqlDownload, DownloadError> {
    if req.cursor.is_some() {
        return Err(Invalid::new(
            "cursor_needs_order",
            "SQL elements are not paged with cursors yet; use limit, or filters on the query's \
             columns",
        )
        .field("cursor")
        .into());
    }
    let none = serde_json::Map::new();
    let params = req.params.as_ref().unwrap_or(&none);
    let result = engine.run(team, sql, params, fresh).await?;
    let all = &result.schema.columns;
    let columns = plan::select(all, req.columns.as_deref())?;
    let filters = match &req.filters {
        Some(f) => filter::parse(f, all, "filters")?,
        None => Vec::new(),
    };
    let project = columns
        .iter()
        .map(|c| all.iter().position(|a| a.name == c.name).expect("selected"))
        .collect();
    let limit = match (element.limit, req.limit) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    Ok(SqlDownload {
        columns: TableSchema { columns },
        project,
        filters,
        limit: limit.map(|l| l.min(usize::MAX as u64) as usize),
        batches: result.batches,
    })
}

/// The response body of a started SQL download.
pub fn body(download: SqlDownload, encoder: Box<dyn Encoder>, compressor: Compressor) -> Body {
    spawn_body(compressor, move |out| produce(download, encoder, out))
}

/// Sends every batch: filtered, projected, cut at the limit; `Ok(None)` if the client left.
async fn produce(
    mut d: SqlDownload,
    mut encoder: Box<dyn Encoder>,
    mut out: Output,
) -> Result<Option<u64>, String> {
    let mut buf = Vec::new();
    encoder.header(&mut buf).map_err(|e| e.to_string())?;
    let mut rows = 0u64;
    let mut left = d.limit;
    while left != Some(0) {
        if !out.send(std::mem::take(&mut buf)).await? {
            return Ok(None);
        }
        let Some(batch) = d.batches.next().await else {
            break;
        };
        let batch = batch.map_err(|e| e.to_string())?;
        let batch = match mask_all(&d.filters, &batch).map_err(|e| e.to_string())? {
            Some(mask) => {
                arrow::compute::filter_record_batch(&batch, &mask).map_err(|e| e.to_string())?
            }
            None => batch,
        };
        let mut batch = batch.project(&d.project).map_err(|e| e.to_string())?;
        if let Some(n) = &mut left {
            batch = batch.slice(0, batch.num_rows().min(*n));
            *n -= batch.num_rows();
        }
        if batch.num_rows() == 0 {
            continue;
        }
        rows += batch.num_rows() as u64;
        encoder.batch(&batch, &mut buf).map_err(|e| e.to_string())?;
    }
    // Ends the query (and frees its slot) before the last bytes go out.
    drop(d.batches);
    encoder.footer(&mut buf).map_err(|e| e.to_string())?;
    Ok(out.finish(buf).await?.then_some(rows))
}
