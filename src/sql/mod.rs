//! SQL elements (SPEC §3.4): one read-only query over a team's warehouse tables, planned and run
//! by DataFusion on every download. [`engine`] builds a fresh session per query holding only the
//! tables the query names, each a [`scan::SnapshotTable`] over the catalog's snapshot of its
//! committed files (no LIST of the store), read by the download's own table reader so files
//! written under older schemas read exactly as downloads read them; [`pushdown`] hands simple
//! predicates to that reader (statistics pruning, row filters). Anything but one `SELECT` is
//! refused ([`guard`]); `$name` parameters are typed by their use ([`params`]); results are
//! mapped onto the five warehouse column types ([`output`]) so the download encoders take them
//! as they are. Limits per query: a memory pool, a deadline, and a number of queries per team.
//! What refuses or stops a query is a [`SqlError`].

pub mod engine;
pub mod error;
mod executor;
mod group_first;
mod guard;
mod order;
pub mod output;
mod params;
mod pushdown;
mod row_number_rule;
pub mod scan;
mod sort_key;

pub use engine::{Page, QueryResult, SqlEngine};
pub use error::SqlError;
pub use guard::MAX_SQL_BYTES;
