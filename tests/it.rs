//! The integration tests, in one binary: each module is one area of the product driven from
//! outside (the real binary or the library over real sockets, real SQLite and PostgreSQL, real
//! object stores). One binary instead of one per file: each links arrow, parquet, DataFusion
//! and the rest (~480 MB with line tables), and forty of them filled CI's disk. Two tests keep a
//! binary of their own because they change process-wide state: `wal_write_errors` (the file-size
//! limit) and `catalog_pg_restart` (restarts the process's PostgreSQL cluster).

mod common;

mod api;
mod bench_cli;
mod browser;
mod cancel;
mod catalog_postgres;
mod catalog_writes;
mod client;
mod cluster_auth;
mod compaction;
mod crash;
mod dedup_restart;
mod direct_build;
mod durability;
mod edge;
mod errors;
mod fidelity;
mod fidelity_regressions;
mod formats;
mod fresh;
mod fresh_cluster;
mod gather;
mod hardening;
mod import;
mod orphans;
mod pages;
mod paging;
mod parquet_passthrough;
mod process;
mod resident_budget;
mod roundtrip;
mod s3;
mod s3_outage;
mod scaleout;
mod sdk;
mod segment;
mod segment_rules;
mod sql;
mod sync_order;
mod tuning;
mod wal_file_limit;
