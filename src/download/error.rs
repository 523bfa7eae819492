//! [`DownloadError`]: why a download cannot start — a refused field of the request, an element
//! that is not the caller's, a cursor whose snapshot is gone, no format the client accepts, or a
//! catalog that failed, a fresh read whose buffered rows could not be had, or an SQL element's query that was refused or failed. The HTTP edge answers each with its status.

use crate::catalog::CatalogError;
use crate::model::Invalid;

/// Why a download was not started.
#[derive(Debug, thiserror::Error)]
pub enum DownloadError {
    /// A field of the request is refused (400, with its code and field).
    #[error(transparent)]
    Invalid(#[from] Invalid),
    /// No such canvas or element for this key — the same when it is another team's (404).
    #[error("no such canvas or element for this key")]
    NotFound,
    /// The cursor's snapshot has been compacted away (410 `cursor_expired`).
    #[error("{0}")]
    CursorExpired(String),
    /// None of the media types the client accepts can be produced (406).
    #[error("{0}")]
    NotAcceptable(String),
    /// The catalog did not answer (500; the cause is logged, never sent).
    #[error("catalog read failed during download: {0}")]
    Catalog(CatalogError),
    /// A fresh read could not get the rows not yet committed (503).
    #[error(transparent)]
    Fresh(#[from] crate::model::fresh::FreshError),
    /// An SQL element's query was refused or failed before the body started.
    #[error(transparent)]
    Sql(#[from] crate::sql::SqlError),
}
