//! Typed configuration: defaults, the TOML file, `STOWAGE_SECTION__KEY` environment overrides and
//! command-line flags, merged in that order of increasing precedence, with errors naming the key.
//! This file is the loader (the merge, the cross-key checks, derived paths); each section has
//! its own file, and the units values are written in are in `units.rs`. Imports nothing of the
//! crate: every layer may read its section.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

mod accounts;
pub mod catalog;
mod compaction;
mod dedup;
mod download;
mod flush;
mod ingest;
mod limits;
mod log;
mod node;
mod parquet;
mod read;
mod server;
mod sql;
mod storage;
mod units;
mod wal;

pub use self::accounts::AccountsConfig;
pub use self::catalog::CatalogConfig;
pub use self::compaction::CompactionConfig;
pub use self::dedup::DedupConfig;
pub use self::download::DownloadConfig;
pub use self::flush::FlushConfig;
pub use self::ingest::{AckMode, IngestConfig};
pub use self::limits::LimitsConfig;
pub use self::log::{LogConfig, LogFormat};
pub use self::node::NodeConfig;
pub use self::parquet::ParquetConfig;
pub use self::read::ReadConfig;
pub use self::server::ServerConfig;
pub use self::sql::SqlConfig;
pub use self::storage::StorageConfig;
pub use self::units::{ByteSize, HumanDuration, parse_size};
pub use self::wal::{RecoveryPolicy, WalConfig};

/// Everything the service can be told; `config/stowage.toml` documents each key.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// HTTP listener and public addresses.
    pub server: ServerConfig,
    /// Where state lives: data dir, catalog, object store.
    pub storage: StorageConfig,
    /// The catalog database: SQLite under the data dir, or PostgreSQL.
    pub catalog: CatalogConfig,
    /// Admission limits for the ingestion endpoint.
    pub ingest: IngestConfig,
    /// When team buffers are written out as Parquet.
    pub flush: FlushConfig,
    /// Write-ahead log.
    pub wal: WalConfig,
    /// Duplicate `messageId` suppression.
    pub dedup: DedupConfig,
    /// Warehouse shape limits.
    pub limits: LimitsConfig,
    /// Parquet encoding.
    pub parquet: ParquetConfig,
    /// Table download.
    pub download: DownloadConfig,
    /// Merging small files.
    pub compaction: CompactionConfig,
    /// SQL element queries: memory, time and concurrency per team.
    pub sql: SqlConfig,
    /// `[read]`: fresh reads across nodes.
    pub read: ReadConfig,
    /// Logging.
    pub log: LogConfig,
    /// Sign-in, sessions and one-time links (SPEC §5.1).
    pub accounts: AccountsConfig,
    /// This process among several sharing a catalog and a bucket (SPEC §7).
    pub node: NodeConfig,
}

/// A start-up configuration problem; the message names the key.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not valid TOML.
    #[error("config file {path} is not valid TOML: {message}")]
    Syntax {
        /// The file.
        path: PathBuf,
        /// Parser message.
        message: String,
    },
    /// A key has a bad value or is unknown.
    #[error("config key `{key}`: {message}")]
    Value {
        /// `section.key`.
        key: String,
        /// What is wrong.
        message: String,
    },
}

/// Flag values that override everything else (`serve --listen`, `--data-dir`).
#[derive(Debug, Default, Clone)]
pub struct Overrides {
    /// `--listen`
    pub listen: Option<String>,
    /// `--data-dir`
    pub data_dir: Option<PathBuf>,
}

impl Config {
    /// Loads the config: defaults < `file` < `STOWAGE_*__*` variables in `env` < `overrides`.
    pub fn load(
        file: Option<&Path>,
        env: impl IntoIterator<Item = (String, String)>,
        overrides: &Overrides,
    ) -> Result<Config, ConfigError> {
        let mut root = toml::Table::new();
        if let Some(path) = file {
            let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
                path: path.into(),
                source,
            })?;
            root = text
                .parse::<toml::Table>()
                .map_err(|e| ConfigError::Syntax {
                    path: path.into(),
                    message: e.to_string(),
                })?;
        }
        for (name, value) in env {
            let Some(rest) = name.strip_prefix("STOWAGE_") else {
                continue;
            };
            let Some((section, key)) = rest.split_once("__") else {
                continue;
            };
            set(
                &mut root,
                &section.to_lowercase(),
                &key.to_lowercase(),
                env_value(&value),
            );
        }
        if let Some(listen) = &overrides.listen {
            set(
                &mut root,
                "server",
                "listen",
                toml::Value::String(listen.clone()),
            );
        }
        if let Some(dir) = &overrides.data_dir {
            let dir = dir.to_string_lossy().into_owned();
            set(&mut root, "storage", "data_dir", toml::Value::String(dir));
        }
        let mut config: Config = serde_path_to_error::deserialize(toml::Value::Table(root))
            .map_err(|e| ConfigError::Value {
                key: e.path().to_string(),
                message: e.inner().message().to_string(),
            })?;
        config.check()?;
        config.node.id = config.node.resolved_id();
        Ok(config)
    }

    /// Defaults suited to tests: memory-light budgets and a short flush interval.
    pub fn for_tests(data_dir: &Path) -> Config {
        let mut c = Config::default();
        c.server.listen = "127.0.0.1:0".into();
        c.server.metrics_listen = "127.0.0.1:0".into();
        c.storage.data_dir = data_dir.into();
        c.flush.interval = HumanDuration(Duration::from_secs(3600));
        c.log.level = "warn".into();
        // Many servers share a test process: its resident size is no one server's.
        c.ingest.resident_allowance = ByteSize(0);
        c.ingest.admission_wait = HumanDuration(Duration::ZERO);
        c
    }

    /// Cross-key rules serde cannot express.
    fn check(&self) -> Result<(), ConfigError> {
        let bad = |key: &str, message: &str| {
            Err(ConfigError::Value {
                key: key.into(),
                message: message.into(),
            })
        };
        for (key, d) in [
            ("server.header_timeout", self.server.header_timeout),
            ("server.body_timeout", self.server.body_timeout),
            ("server.idle_timeout", self.server.idle_timeout),
        ] {
            if d.0.is_zero() {
                return bad(key, "must be greater than zero");
            }
        }
        if !(1..=tokio::sync::Semaphore::MAX_PERMITS).contains(&self.server.max_connections) {
            return bad("server.max_connections", "must be at least 1");
        }
        if self.server.max_connections_per_address == 0 {
            return bad("server.max_connections_per_address", "must be at least 1");
        }
        if self.ingest.admission_wait.0 >= self.server.body_timeout.0 {
            // The body's deadline runs from the request's head, so the wait comes out of it.
            return bad(
                "ingest.admission_wait",
                "must be shorter than server.body_timeout (the wait comes out of it)",
            );
        }
        if self.accounts.hash_concurrency == 0 {
            return bad("accounts.hash_concurrency", "must be at least 1");
        }
        let id = self.node.id.trim();
        if id.len() > 64
            || !id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
        {
            return bad(
                "node.id",
                "at most 64 letters, digits, '.', '-' or '_' (or empty for the host name)",
            );
        }
        if self.flush.interval.0.is_zero() {
            return bad("flush.interval", "must be greater than zero");
        }
        if self.flush.max_rows == 0 {
            return bad("flush.max_rows", "must be at least 1");
        }
        if self.ingest.max_body.0 == 0 {
            return bad("ingest.max_body", "must be greater than zero");
        }
        if self.ingest.max_batch_body.0 == 0 {
            return bad("ingest.max_batch_body", "must be greater than zero");
        }
        if self.ingest.max_batch_events == 0 {
            return bad("ingest.max_batch_events", "must be greater than zero");
        }
        if self.ingest.team_budget.0 > self.ingest.global_budget.0 {
            return bad("ingest.team_budget", "must not exceed ingest.global_budget");
        }
        if !(1..=22).contains(&self.parquet.zstd_level) {
            return bad("parquet.zstd_level", "must be between 1 and 22");
        }
        if self.storage.s3_multipart_part_size.0 == 0 {
            return bad(
                "storage.s3_multipart_part_size",
                "must be greater than zero",
            );
        }
        if self.read.fresh_timeout.0.is_zero() {
            return bad("read.fresh_timeout", "must be greater than zero");
        }
        if self.sql.max_concurrent == 0 {
            return bad("sql.max_concurrent", "must be at least 1");
        }
        if self.sql.memory_limit.0 == 0 {
            return bad("sql.memory_limit", "must be greater than zero");
        }
        if self.parquet.row_group_rows == 0 || self.download.batch_rows == 0 {
            return bad("parquet.row_group_rows", "row counts must be at least 1");
        }
        Ok(())
    }

    /// The WAL directory.
    pub fn wal_dir(&self) -> PathBuf {
        if self.wal.dir.as_os_str().is_empty() {
            self.storage.data_dir.join("wal")
        } else {
            self.wal.dir.clone()
        }
    }

    /// Path of the SQLite catalog (used when `catalog.url` is empty).
    pub fn catalog_path(&self) -> PathBuf {
        self.storage.data_dir.join("catalog.sqlite")
    }
}

fn set(root: &mut toml::Table, section: &str, key: &str, value: toml::Value) {
    let entry = root
        .entry(section.to_string())
        .or_insert_with(|| toml::Value::Table(toml::Table::new()));
    if let toml::Value::Table(t) = entry {
        t.insert(key.to_string(), value);
    }
}

/// An environment value is read as a TOML scalar when it is one (`1000`, `true`), else as a string.
fn env_value(raw: &str) -> toml::Value {
    format!("v = {raw}")
        .parse::<toml::Table>()
        .ok()
        .and_then(|mut t| t.remove("v"))
        .filter(|v| !v.is_table() && !v.is_array())
        .unwrap_or_else(|| toml::Value::String(raw.to_string()))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// `STOWAGE_*` pairs as `Config::load` takes the environment.
    pub(crate) fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn precedence_is_flag_env_file_default() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("s.toml");
        std::fs::write(
            &file,
            "[flush]\ninterval = \"5s\"\nmax_rows = 7\n[server]\nlisten = \"1.2.3.4:1\"\n",
        )
        .unwrap();
        let c = Config::load(
            Some(&file),
            env(&[
                ("STOWAGE_FLUSH__INTERVAL", "200ms"),
                ("STOWAGE_SERVER__LISTEN", "0.0.0.0:9"),
            ]),
            &Overrides {
                listen: Some("127.0.0.1:0".into()),
                data_dir: None,
            },
        )
        .unwrap();
        assert_eq!(
            c.flush.interval.0,
            Duration::from_millis(200),
            "env beats file"
        );
        assert_eq!(c.flush.max_rows, 7, "file beats default");
        assert_eq!(c.server.listen, "127.0.0.1:0", "flag beats env");
        assert_eq!(c.ingest.max_body.0, 32 * 1024, "default");
    }

    #[test]
    fn edge_settings_come_from_the_environment() {
        let c = Config::load(
            None,
            env(&[
                ("STOWAGE_SERVER__HEADER_TIMEOUT", "2s"),
                ("STOWAGE_SERVER__BODY_TIMEOUT", "3s"),
                ("STOWAGE_SERVER__IDLE_TIMEOUT", "4s"),
                ("STOWAGE_SERVER__MAX_CONNECTIONS", "50"),
            ]),
            &Overrides::default(),
        )
        .unwrap();
        assert_eq!(c.server.header_timeout.0, Duration::from_secs(2));
        assert_eq!(c.server.body_timeout.0, Duration::from_secs(3));
        assert_eq!(c.server.idle_timeout.0, Duration::from_secs(4));
        assert_eq!(c.server.max_connections, 50);
        for (key, value) in [
            ("STOWAGE_SERVER__IDLE_TIMEOUT", "0s"),
            ("STOWAGE_SERVER__MAX_CONNECTIONS", "0"),
        ] {
            let err = Config::load(None, env(&[(key, value)]), &Overrides::default())
                .unwrap_err()
                .to_string();
            assert!(err.contains("server."), "{err}");
        }
    }

    #[test]
    fn bad_values_name_the_key() {
        let err = Config::load(
            None,
            env(&[("STOWAGE_FLUSH__INTERVAL", "soon")]),
            &Overrides::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("flush.interval"), "{err}");
        let err = Config::load(
            None,
            env(&[("STOWAGE_INGEST__MAX_BODY", "lots")]),
            &Overrides::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("ingest.max_body"), "{err}");
        let err = Config::load(
            None,
            env(&[("STOWAGE_FLUSH__NOPE", "1")]),
            &Overrides::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("nope"), "{err}");
        let err = Config::load(
            None,
            env(&[("STOWAGE_INGEST__ADMISSION_WAIT", "30s")]),
            &Overrides::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("ingest.admission_wait"), "{err}");
    }

    #[test]
    fn the_node_id_defaults_to_the_host_name_and_is_checked() {
        let load =
            |v: &str| Config::load(None, env(&[("STOWAGE_NODE__ID", v)]), &Overrides::default());
        assert_eq!(load("node-2").unwrap().node.id, "node-2");
        let host = load("").unwrap().node.id;
        assert!(!host.is_empty(), "empty id resolves to the host name");
        for bad in ["has space", "a/b", &"x".repeat(65)] {
            let err = load(bad).unwrap_err().to_string();
            assert!(err.contains("node.id"), "{err}");
        }
    }

    #[test]
    fn documented_config_file_matches_defaults() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/stowage.toml");
        let c = Config::load(Some(&path), Vec::new(), &Overrides::default()).unwrap();
        let d = Config::default();
        assert_eq!(c.flush.interval, d.flush.interval);
        assert_eq!(c.flush.max_rows, d.flush.max_rows);
        assert_eq!(c.flush.max_bytes, d.flush.max_bytes);
        assert_eq!(c.ingest.max_body, d.ingest.max_body);
        assert_eq!(c.ingest.max_import_body, d.ingest.max_import_body);
        assert_eq!(c.ingest.team_budget, d.ingest.team_budget);
        assert_eq!(c.ingest.global_budget, d.ingest.global_budget);
        assert_eq!(c.ingest.resident_allowance, d.ingest.resident_allowance);
        assert_eq!(c.ingest.admission_wait, d.ingest.admission_wait);
        assert_eq!(c.server.listen, d.server.listen);
        assert_eq!(c.server.header_timeout, d.server.header_timeout);
        assert_eq!(c.server.body_timeout, d.server.body_timeout);
        assert_eq!(c.server.idle_timeout, d.server.idle_timeout);
        assert_eq!(c.server.max_connections, d.server.max_connections);
        assert_eq!(c.storage.data_dir, d.storage.data_dir);
        assert_eq!(c.limits.columns_per_table, d.limits.columns_per_table);
        assert_eq!(c.parquet.zstd_level, d.parquet.zstd_level);
        assert_eq!(c.download.batch_rows, d.download.batch_rows);
        assert_eq!(c.ingest.ack, d.ingest.ack);
        assert_eq!(c.wal.sync_interval, d.wal.sync_interval);
        assert_eq!(c.wal.segment_size, d.wal.segment_size);
        assert_eq!(c.wal.batch_bytes, d.wal.batch_bytes);
        assert_eq!(c.wal.group_wait, d.wal.group_wait);
        assert_eq!(c.wal.recovery, d.wal.recovery);
        assert_eq!(c.dedup.window, d.dedup.window);
        assert_eq!(c.dedup.capacity, d.dedup.capacity);
        assert_eq!(c.flush.orphan_grace, d.flush.orphan_grace);
        assert_eq!(c.compaction.enabled, d.compaction.enabled);
        assert_eq!(c.compaction.interval, d.compaction.interval);
        assert_eq!(c.compaction.min_files, d.compaction.min_files);
        assert_eq!(c.compaction.small_file, d.compaction.small_file);
        assert_eq!(c.compaction.target_size, d.compaction.target_size);
        assert_eq!(c.compaction.grace, d.compaction.grace);
        let (a, b) = (&c.accounts, &d.accounts);
        assert_eq!(a.session_idle, b.session_idle);
        assert_eq!(a.session_max, b.session_max);
        assert_eq!(a.link_ttl, b.link_ttl);
        assert_eq!(a.max_failures_per_account, b.max_failures_per_account);
        assert_eq!(a.max_failures_per_address, b.max_failures_per_address);
        assert_eq!(a.lockout_max, b.lockout_max);
    }
}
