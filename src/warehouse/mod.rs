//! The warehouse model: how events become tables and columns ([`naming`], [`schema`]), where
//! files live ([`layout`]), how Parquet is written ([`writer`]), values as text when a column
//! widens to string ([`text`]) and read back ([`reader`], a large file's column groups on
//! several threads: [`split`]), stored column chunks read without
//! decoding for copying ([`chunks`]), and how small files are merged ([`compaction`]) and
//! objects no commit names are collected ([`gc`]).

pub mod chunks;
pub mod compaction;
pub mod gc;
pub mod import;
mod import_parquet;
pub mod layout;
pub mod naming;
pub mod object_reader;
pub mod reader;
pub mod schema;
mod split;
pub mod text;
pub mod writer;
