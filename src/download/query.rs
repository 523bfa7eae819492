//! Downloads of SQL elements (SPEC §3.4): the element's query runs on the [`SqlEngine`] with
//! the request's `params`; the request's `filters`, `columns` and `limit` then apply to its
//! result, in that order, exactly as they apply to a table, and the batches stream through the
//! same encoders. A failure after the first byte aborts the body. A full page of a query
//! whose result has a total order hands out a cursor: the next page reruns the query over the
//! same snapshots of its tables and skips the rows sent before (in the plan — so a top-N sort
//! keeps only what it needs — unless the request's filters must see them first). A fresh read
//! hands out none.

use axum::body::Body;
use futures::StreamExt;
use futures::stream::BoxStream;

use super::compress::Compressor;
use super::cursor::{self, QueryCursor};
use super::encode::Encoder;
use super::error::DownloadError;
use super::request::DownloadRequest;
use super::stream::{Output, spawn_body};
use super::{filter, plan};
use crate::catalog::Element;
use crate::model::TeamId;
use crate::model::filter::{Filter, mask_all};
use crate::model::schema::TableSchema;
use crate::sql::{Page, SqlEngine, SqlError};
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
    /// Rows (after the filters) to pass over before the first one sent.
    skip: usize,
    /// What the next page's cursor holds, rows sent aside (`None`: no cursor is handed out).
    next: Option<QueryCursor>,
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
    let fingerprint =
        cursor::query_fingerprint(&element.id, &req.columns, &req.filters, &req.params);
    let resume = req
        .cursor
        .as_deref()
        .map(|c| cursor::decode_query(c, &fingerprint))
        .transpose()?;
    let limit = plan::row_limit(element, req);
    let sent = resume.as_ref().map_or(0, |c| c.sent as usize);
    // The request's filters apply to the query's result: rows they drop are not counted.
    let in_plan = req.filters.is_none();
    let page = Page {
        as_of: resume.as_ref().map(|c| c.snaps.clone()),
        skip: if in_plan { sent } else { 0 },
        fetch: if in_plan { limit } else { None },
        started_at: resume.as_ref().map(|c| c.t),
    };
    let none = serde_json::Map::new();
    let params = req.params.as_ref().unwrap_or(&none);
    let result = engine.run(team, sql, params, fresh, page).await?;
    let columns_digest = cursor::columns_digest(&result.schema);
    if resume.as_ref().is_some_and(|c| c.cols != columns_digest) {
        return Err(DownloadError::CursorExpired(
            "the query's columns changed since the first page (a table gained a column or \
             widened one); start again without a cursor"
                .into(),
        ));
    }
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
    let next = (result.ordered && !fresh && limit.is_some()).then_some(QueryCursor {
        v: cursor::QUERY_CURSOR_VERSION,
        snaps: result.snapshots,
        sent: sent as u64,
        cols: columns_digest,
        t: result.started_at,
        q: fingerprint,
    });
    Ok(SqlDownload {
        columns: TableSchema { columns },
        project,
        filters,
        limit,
        skip: if in_plan { 0 } else { sent },
        next,
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
        if d.skip > 0 {
            let passed = batch.num_rows().min(d.skip);
            batch = batch.slice(passed, batch.num_rows() - passed);
            d.skip -= passed;
        }
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
    // A full page may have more after it: hand out a cursor (the next page may be empty).
    if let (Some(mut next), Some(limit)) = (d.next, d.limit)
        && rows == limit as u64
    {
        next.sent += rows;
        encoder.set_next_cursor(Some(cursor::encode(&next)));
    }
    encoder.footer(&mut buf).map_err(|e| e.to_string())?;
    Ok(out.finish(buf).await?.then_some(rows))
}
