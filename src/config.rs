//! Typed configuration: defaults, the TOML file, `STOWAGE_SECTION__KEY` environment overrides and
//! command-line flags, merged in that order of increasing precedence, with errors naming the key.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Deserializer};

mod accounts;
mod server;

pub use accounts::AccountsConfig;
pub use server::ServerConfig;

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
    /// Logging.
    pub log: LogConfig,
    /// Sign-in, sessions and one-time links (SPEC §5.1).
    pub accounts: AccountsConfig,
    /// This process among several sharing a catalog and a bucket (SPEC §7).
    pub node: NodeConfig,
}

/// `[node]`
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NodeConfig {
    /// The node's name in logs, `/healthz`, the `X-Stowage-Node` response header (when
    /// `server.node_header` is on) and its writer id; empty means the host name.
    pub id: String,
}

impl NodeConfig {
    /// The configured id, else the host name, else `node`.
    pub fn resolved_id(&self) -> String {
        let configured = self.id.trim();
        if !configured.is_empty() {
            return configured.to_string();
        }
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .or_else(|| std::env::var("HOSTNAME").ok())
            .map(|h| h.trim().to_string())
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "node".into())
    }
}

/// `[storage]`
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StorageConfig {
    /// Directory for runtime state: the SQLite catalog, `demo.json`, the local warehouse.
    pub data_dir: PathBuf,
    /// Object store for the warehouse: empty for `<data_dir>/warehouse` on the local filesystem,
    /// `file:///abs/path`, `s3://bucket/prefix` (S3 or an S3-compatible server; credentials from
    /// `AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY`), or `memory://` (tests; lost on exit).
    pub url: String,
    /// Path prefix inside the object store under which `teams/…` is laid out.
    pub prefix: String,
    /// S3 endpoint URL for S3-compatible servers (`http://127.0.0.1:9000`); empty for AWS.
    pub s3_endpoint: String,
    /// S3 region; empty for `AWS_REGION` / `AWS_DEFAULT_REGION`, else `us-east-1`.
    pub s3_region: String,
    /// Allow a plain `http://` endpoint (S3-compatible servers on a trusted network).
    pub s3_allow_http: bool,
    /// Objects at least this large are uploaded to S3 in parts (multipart upload).
    pub s3_multipart_threshold: ByteSize,
    /// Size of each part of a multipart upload but the last (S3 requires at least 5 MiB).
    pub s3_multipart_part_size: ByteSize,
}

impl Default for StorageConfig {
    fn default() -> Self {
        Self {
            data_dir: PathBuf::from("var"),
            url: String::new(),
            prefix: String::new(),
            s3_endpoint: String::new(),
            s3_region: String::new(),
            s3_allow_http: false,
            s3_multipart_threshold: ByteSize(16 << 20),
            s3_multipart_part_size: ByteSize(8 << 20),
        }
    }
}

/// `[catalog]`
#[derive(Clone, Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub struct CatalogConfig {
    /// Empty: SQLite at `<data_dir>/catalog.sqlite` (the embedded default). Else
    /// `postgres://user:password@host:port/db`: a PostgreSQL catalog several nodes can share.
    pub url: String,
}

impl std::fmt::Debug for CatalogConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CatalogConfig")
            .field("url", &crate::catalog::db::postgres::redact(&self.url))
            .finish()
    }
}

/// When `200` is sent for an event.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum AckMode {
    /// After the event is in the WAL and fsync'd.
    Durable,
    /// As soon as the event is queued in memory (faster; a crash may lose the last moments).
    Buffered,
}

/// `[ingest]`
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct IngestConfig {
    /// `durable` or `buffered`.
    pub ack: AckMode,
    /// Largest accepted event body (after gzip decompression).
    pub max_body: ByteSize,
    /// Largest accepted `POST /v1/batch` body (after gzip decompression).
    pub max_batch_body: ByteSize,
    /// Most messages in one `POST /v1/batch`.
    pub max_batch_events: usize,
    /// Largest accepted `POST /v1/import` body (after gzip decompression).
    pub max_import_body: ByteSize,
    /// Bytes a single team may hold in buffers not yet committed; beyond it → 429.
    pub team_budget: ByteSize,
    /// Bytes all teams together may hold; beyond it → 503.
    pub global_budget: ByteSize,
    /// `Retry-After` sent with 429/503.
    pub retry_after: HumanDuration,
    /// A team actor with nothing buffered stops after this long without events.
    pub idle_timeout: HumanDuration,
}

impl Default for IngestConfig {
    fn default() -> Self {
        Self {
            ack: AckMode::Durable,
            max_body: ByteSize(32 * 1024),
            max_batch_body: ByteSize(512 * 1024),
            max_batch_events: 2500,
            max_import_body: ByteSize(1 << 30),
            team_budget: ByteSize(256 << 20),
            global_budget: ByteSize(1 << 30),
            retry_after: HumanDuration(Duration::from_secs(1)),
            idle_timeout: HumanDuration(Duration::from_secs(300)),
        }
    }
}

/// `[flush]`
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FlushConfig {
    /// Flush a team when its oldest buffered row is this old (fires with no new traffic too).
    pub interval: HumanDuration,
    /// Flush a team when one of its tables buffers this many rows.
    pub max_rows: usize,
    /// Flush a team when its buffers hold this many bytes.
    pub max_bytes: ByteSize,
    /// First delay before retrying a failed flush; doubles up to 30 s.
    pub retry_backoff: HumanDuration,
    /// Objects in the warehouse that no committed file names (a crash between put and commit)
    /// are deleted once older than this.
    pub orphan_grace: HumanDuration,
}

impl Default for FlushConfig {
    fn default() -> Self {
        Self {
            interval: HumanDuration(Duration::from_secs(10)),
            max_rows: 100_000,
            max_bytes: ByteSize(64 << 20),
            retry_backoff: HumanDuration(Duration::from_millis(100)),
            orphan_grace: HumanDuration(Duration::from_secs(3600)),
        }
    }
}

/// `[wal]`
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WalConfig {
    /// Segment directory; empty means `<data_dir>/wal`. Keep it on local disk.
    pub dir: PathBuf,
    /// At most one fsync per this interval; requests arriving meanwhile share it.
    pub sync_interval: HumanDuration,
    /// Write a batch as soon as it holds this many bytes.
    pub batch_bytes: ByteSize,
    /// Start a new segment when the current one reaches this size.
    pub segment_size: ByteSize,
    /// `strict` stops start-up on a corrupt record mid-log; `truncate` cuts it off and goes on.
    pub recovery: crate::wal::RecoveryPolicy,
}

impl Default for WalConfig {
    fn default() -> Self {
        Self {
            dir: PathBuf::new(),
            sync_interval: HumanDuration(Duration::ZERO),
            batch_bytes: ByteSize(1 << 20),
            segment_size: ByteSize(64 << 20),
            recovery: crate::wal::RecoveryPolicy::Strict,
        }
    }
}

/// `[dedup]`
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DedupConfig {
    /// A `messageId` seen for the team within this window is acknowledged but stored once.
    pub window: HumanDuration,
    /// Most remembered ids (oldest forgotten first), bounding memory.
    pub capacity: usize,
}

impl Default for DedupConfig {
    fn default() -> Self {
        Self {
            window: HumanDuration(Duration::from_secs(24 * 3600)),
            capacity: 1_000_000,
        }
    }
}

/// `[limits]`
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LimitsConfig {
    /// Most columns one warehouse table may have; an event that needs more is rejected (400).
    pub columns_per_table: usize,
    /// Most warehouse tables one team may have; an event that needs more is rejected (400).
    pub tables_per_team: usize,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        Self {
            columns_per_table: 1000,
            tables_per_team: 10_000,
        }
    }
}

/// `[parquet]`
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ParquetConfig {
    /// ZSTD level (1–22).
    pub zstd_level: i32,
    /// Most rows per row group.
    pub row_group_rows: usize,
}

impl Default for ParquetConfig {
    fn default() -> Self {
        Self {
            zstd_level: 3,
            row_group_rows: 100_000,
        }
    }
}

/// `[download]`
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DownloadConfig {
    /// Rows per Arrow batch read from Parquet and encoded as one response chunk.
    pub batch_rows: usize,
}

impl Default for DownloadConfig {
    fn default() -> Self {
        Self { batch_rows: 8192 }
    }
}

/// `[compaction]`
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CompactionConfig {
    /// Run the background compactor.
    pub enabled: bool,
    /// Time between passes.
    pub interval: HumanDuration,
    /// A table is compacted once it has this many small files.
    pub min_files: usize,
    /// Files smaller than this are merged.
    pub small_file: ByteSize,
    /// Merged files grow up to about this size.
    pub target_size: ByteSize,
    /// Replaced objects are deleted this long after the swap (longer than any download).
    pub grace: HumanDuration,
}

impl Default for CompactionConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            interval: HumanDuration(Duration::from_secs(60)),
            min_files: 8,
            small_file: ByteSize(16 << 20),
            target_size: ByteSize(128 << 20),
            grace: HumanDuration(Duration::from_secs(15 * 60)),
        }
    }
}

/// `[log]`
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LogConfig {
    /// `human` or `json`.
    pub format: LogFormat,
    /// A `tracing` filter, e.g. `info` or `stowage=debug,info`; `RUST_LOG` wins when set.
    pub level: String,
}

impl Default for LogConfig {
    fn default() -> Self {
        Self {
            format: LogFormat::Human,
            level: "info".into(),
        }
    }
}

/// Log line format.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Readable single lines.
    Human,
    /// One JSON object per line.
    Json,
}

/// A duration written like `"10s"`, `"200ms"` or `"5m"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HumanDuration(pub Duration);

impl<'de> Deserialize<'de> for HumanDuration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        humantime::parse_duration(s.trim())
            .map(HumanDuration)
            .map_err(|e| {
                serde::de::Error::custom(format!(
                    "invalid duration {s:?} ({e}); write e.g. \"10s\" or \"200ms\""
                ))
            })
    }
}

/// A byte size written like `"64MiB"`, `"32KiB"`, `"1GB"` or a plain integer of bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteSize(pub u64);

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Int(u64),
            Str(String),
        }
        match Raw::deserialize(d)? {
            Raw::Int(n) => Ok(ByteSize(n)),
            Raw::Str(s) => parse_size(&s).map(ByteSize).ok_or_else(|| {
                serde::de::Error::custom(format!(
                    "invalid size {s:?}; write e.g. \"64MiB\", \"32KiB\" or a number of bytes"
                ))
            }),
        }
    }
}

/// Parses `"64MiB"`, `"1.5 GB"`, `"512"`; binary (KiB) and decimal (KB) units.
pub fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let num: f64 = num.parse().ok()?;
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" => 1_000,
        "kib" => 1 << 10,
        "m" | "mb" => 1_000_000,
        "mib" => 1 << 20,
        "g" | "gb" => 1_000_000_000,
        "gib" => 1 << 30,
        "t" | "tb" => 1_000_000_000_000,
        "tib" => 1 << 40,
        _ => return None,
    };
    let v = num * mult as f64;
    (v.is_finite() && v >= 0.0).then_some(v as u64)
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

    /// Where the catalog lives: `catalog.url`, or the SQLite file under the data dir.
    pub fn catalog_location(
        &self,
    ) -> Result<crate::catalog::Location, crate::catalog::CatalogError> {
        crate::catalog::Location::from_url(&self.catalog.url, self.catalog_path())
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
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn sizes_parse() {
        assert_eq!(parse_size("64MiB"), Some(64 << 20));
        assert_eq!(parse_size("32 KiB"), Some(32 << 10));
        assert_eq!(parse_size("1GB"), Some(1_000_000_000));
        assert_eq!(parse_size("512"), Some(512));
        assert_eq!(parse_size("12 parsecs"), None);
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
    fn the_catalog_url_comes_from_the_environment_and_its_password_stays_out_of_logs() {
        let c = Config::load(
            None,
            env(&[(
                "STOWAGE_CATALOG__URL",
                "postgres://u:hunter2@db:5432/stowage",
            )]),
            &Overrides::default(),
        )
        .unwrap();
        assert!(matches!(
            c.catalog_location().unwrap(),
            crate::catalog::Location::Postgres(url) if url.ends_with("@db:5432/stowage")
        ));
        let shown = format!("{:?} {:?}", c, c.catalog_location().unwrap());
        assert!(!shown.contains("hunter2"), "{shown}");
        let d = Config::default();
        assert_eq!(
            d.catalog_location().unwrap(),
            crate::catalog::Location::Sqlite(d.catalog_path())
        );
        let mut bad = Config::default();
        bad.catalog.url = "mysql://u:hunter2@db/x".into();
        let err = bad.catalog_location().unwrap_err().to_string();
        assert!(
            err.contains("catalog.url") && !err.contains("hunter2"),
            "{err}"
        );
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
