//! stowage: event ingestion into per-team Parquet warehouses, and streamed table downloads.
//!
//! Data flow. A tracker's `POST /v1/event` enters [`http`] through its public edge
//! ([`http::edge`]: connection cap, header/body/idle timeouts; a request id per request), is
//! authenticated against the [`catalog`], and validated and mapped to warehouse rows by
//! [`ingest::event`] (JSON flattened into typed cells, names and types by the ground floor,
//! [`model`]). [`ingest::admission`] checks the byte budgets, then [`ingest::Ingest::submit`] —
//! the single acknowledgement point — appends the event to the write-ahead log ([`wal`]), whose
//! group-commit writer fsyncs many events at once; the [`ingest::dispatch`]er then hands logged
//! events, in log order, to the team's actor ([`ingest::team`]), which buffers them per table in
//! Arrow builders ([`warehouse::buffer`]). On a timer, a row count or a byte size, the actor
//! hands its buffers to [`ingest::flush`], which encodes Parquet off the actor loop
//! ([`warehouse::writer`]), reserves the [`warehouse::layout`] path in the catalog, puts the file
//! (synced) in the object store, commits it to the catalog together with the team's WAL
//! watermark, and only then releases the buffer and, eventually, the WAL segments (their client
//! ids archived for the dedup window). A download (`POST /data/table`) resolves the element in
//! the catalog, takes a snapshot of the table's committed files, reads them with Arrow
//! ([`warehouse::reader`], filtered by the [`model::filter`]s) and streams them out batch by
//! batch through [`download`].
//!
//! An SQL element's query ([`sql`]) is planned by DataFusion over the same snapshots, read by
//! the same reader, and streamed by [`download`] through the same encoders.
//!
//! Owners and members manage their team through [`accounts`] (sign-in, sessions, tokens,
//! permissions, audit), reached over the management API and the settings page in [`http`].
//!
//! Floors. Imports run one way, down: [`http`] (and [`app`], [`cli`], [`demo`]) →
//! [`accounts`], [`ingest`], [`download`] (accounts checks element filters with download's
//! parser) → [`sql`] → [`warehouse`], [`wal`] → [`store`], [`catalog`] → [`config`], [`files`] →
//! [`model`], the ground floor, which imports nothing of the crate. Each layer returns its own
//! error ([`model::Invalid`] for input a rule refused, `IngestError`, `DownloadError`,
//! `AccountError`, `CatalogError`, …); the HTTP edge alone turns them into its
//! [`http::error::ApiError`]. `../shared/tools/layers.py src` finds no circle among files or
//! rooms, and CI keeps it so.

pub mod accounts;
pub mod allocator;
pub mod app;
pub mod bench;
pub mod catalog;
pub mod cli;
pub mod config;
pub mod demo;
pub mod download;
pub mod files;
pub mod fresh;
pub mod http;
pub mod ingest;
pub mod model;
pub mod resident;
pub mod sql;
pub mod store;
pub mod wal;
pub mod warehouse;
