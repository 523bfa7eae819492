//! `[read]`: downloads that read rows not yet committed (fresh reads, SPEC §3.5).

use std::time::Duration;

use serde::Deserialize;

use super::units::HumanDuration;

/// `[read]`
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ReadConfig {
    /// Several nodes: how long a fresh read waits for every other node to commit the team's
    /// acknowledged events; a node that has not answered by then (down, unreachable) fails the
    /// read with 503 `fresh_timeout` rather than leave its events out.
    pub fresh_timeout: HumanDuration,
}

impl Default for ReadConfig {
    fn default() -> Self {
        Self {
            fresh_timeout: HumanDuration(Duration::from_secs(10)),
        }
    }
}
