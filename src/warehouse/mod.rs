//! The warehouse: a table's rows buffered in Arrow builders ([`buffer`]), where files live
//! ([`layout`]), how Parquet is written ([`writer`]) and read back ([`reader`], a large file's
//! column groups on several threads: [`split`]), stored column chunks read without decoding for
//! copying ([`chunks`]), imports of CSV, NDJSON and Parquet ([`import`]), and how small files are
//! merged ([`compaction`]) and objects no commit names are collected ([`gc`]); batches of differing
//! schemas are brought under one by [`unify`]. Names, schemas,
//! values as text and filters are the ground floor's ([`crate::model`]).

pub mod buffer;
pub mod chunks;
mod column;
pub mod column_log;
pub mod compaction;
pub mod gc;
pub mod import;
pub mod layout;
pub mod logged_rows;
pub mod object_reader;
pub mod reader;
mod split;
pub mod unify;
pub mod writer;
