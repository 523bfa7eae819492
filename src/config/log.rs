//! `[log]`: the log line format and the `tracing` filter.

use serde::Deserialize;

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
