//! Table download: parse the request ([`request`]), negotiate format and compression
//! ([`format`]), resolve the element and take a snapshot of its table's committed files
//! ([`plan`]), then read, encode ([`encode`]) and compress ([`compress`]) batch by batch into a
//! bounded channel that feeds the response body ([`stream`]). Memory stays bounded by the batch
//! size and the channel depth, whatever the table size. A Parquet download of a whole table
//! copies the stored column chunks instead ([`passthrough`]). An SQL element's query runs on
//! the SQL engine and its result streams through the same encoders ([`query`]). What refuses a
//! download is a
//! [`DownloadError`]; the HTTP edge turns it into its answer.

pub mod compress;
pub mod cursor;
pub mod encode;
pub mod error;
pub mod filter;
pub mod format;
pub mod passthrough;
pub mod plan;
pub mod query;
pub mod request;
pub mod stream;

pub use error::DownloadError;
