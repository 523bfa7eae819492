//! The ground floor: what every layer may use and what imports nothing of the crate above it.
//! Ids ([`ids`]), time values ([`time`]), the row model ([`value`]: a typed `Value`, a named
//! `Cell`), an object's members as sent ([`members`]), a validating walk over a message's text
//! ([`valid_json`]) and where it found each object's members ([`tape`]), a JSON string's value
//! read from its text ([`unescape`]), how a JSON object becomes typed cells ([`flatten`]) and
//! the column of each key path, kept once named ([`column_names`]), warehouse names
//! ([`naming`]), table schemas and column types with their widening ([`schema`]), values as
//! text ([`text`]), the filter model and its evaluation with Arrow ([`filter`]), input refused
//! by a rule ([`invalid`]), a vector's room kept across lifetimes ([`reuse`]), and the rows a
//! writer lends to fresh reads ([`fresh`]). Ingest, download, the warehouse, the WAL and the
//! catalog all build on these, so the arrows between them run one way: http → ingest/download
//! → warehouse/wal → catalog → model.

pub mod column_names;
pub mod filter;
pub mod flatten;
pub mod fresh;
pub mod ids;
pub mod invalid;
pub mod members;
pub mod naming;
pub mod reuse;
pub mod schema;
pub mod tape;
pub mod text;
pub mod time;
pub mod unescape;
pub mod valid_json;
pub mod value;

pub use ids::TeamId;
pub use invalid::Invalid;
