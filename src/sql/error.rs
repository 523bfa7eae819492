//! [`SqlError`]: why a query was refused or stopped. Planner and parser messages are kept word
//! for word (they are what the author of the query needs); failures of the service itself are
//! kept apart so the HTTP edge can hide them.

use datafusion::error::DataFusionError;

use crate::catalog::CatalogError;

/// Why a query did not run, or stopped.
#[derive(Debug, thiserror::Error)]
pub enum SqlError {
    /// Not one read-only `SELECT` over the team's tables, or a parse, name or type error (400
    /// `invalid_sql`).
    #[error("{0}")]
    Invalid(String),
    /// A `$name` parameter is missing or its value does not fit its use (400 `invalid_params`).
    #[error("{0}")]
    Params(String),
    /// The query needed more memory than `sql.memory_limit` (422 `query_too_large`).
    #[error("the query needs more memory than sql.memory_limit allows: {0}")]
    TooLarge(String),
    /// The query ran longer than `sql.timeout` (422 `query_timeout`).
    #[error("the query ran longer than sql.timeout ({0:?})")]
    Timeout(std::time::Duration),
    /// A value made the query fail while running, e.g. a failed cast or a division by zero
    /// (422 `query_failed`).
    #[error("{0}")]
    Failed(String),
    /// A cursor was given for a query whose result has no total order (400
    /// `cursor_needs_order`).
    #[error(
        "this query's rows are not paged with cursors: its outermost ORDER BY must decide every \
         row (sort by the GROUP BY keys, or by every column)"
    )]
    Unordered,
    /// A cursor that does not fit the query (400 `invalid_cursor`).
    #[error("cursor is not valid: {0}")]
    Cursor(String),
    /// The snapshot a cursor's first page read is gone (410 `cursor_expired`).
    #[error("{0}")]
    Expired(String),
    /// The team already runs `sql.max_concurrent` queries on this node (429 `rate_limited`).
    #[error("this team already runs {0} queries at once; retry shortly")]
    Busy(usize),
    /// The catalog did not answer (500/503; the cause is logged, never sent).
    #[error("catalog read failed: {0}")]
    Catalog(#[from] CatalogError),
    /// A fresh read could not get the rows not yet committed (503).
    #[error(transparent)]
    Fresh(crate::model::fresh::FreshError),
    /// Reading the warehouse or another failure of the service (500; logged, never sent).
    #[error("query failed inside the service: {0}")]
    Internal(String),
}

impl SqlError {
    /// Sorts a DataFusion error raised while planning: everything but a failure of the service
    /// itself is the query's fault.
    pub fn planning(e: DataFusionError) -> SqlError {
        match e.find_root() {
            DataFusionError::ResourcesExhausted(m) => SqlError::TooLarge(m.clone()),
            DataFusionError::External(_) | DataFusionError::IoError(_) => {
                SqlError::Internal(e.to_string())
            }
            _ => SqlError::Invalid(strip(&e)),
        }
    }

    /// Sorts a DataFusion error raised while running.
    pub fn running(e: DataFusionError) -> SqlError {
        match e.find_root() {
            DataFusionError::ResourcesExhausted(m) => SqlError::TooLarge(m.clone()),
            DataFusionError::External(_)
            | DataFusionError::IoError(_)
            | DataFusionError::ObjectStore(_)
            | DataFusionError::ParquetError(_)
            | DataFusionError::Internal(_) => SqlError::Internal(e.to_string()),
            _ => SqlError::Failed(strip(&e)),
        }
    }
}

/// The root cause's message, without DataFusion's nesting of contexts.
fn strip(e: &DataFusionError) -> String {
    e.find_root().to_string()
}
