//! `[dedup]`: how long and how many `messageId`s are remembered to store a resent event once.

use std::time::Duration;

use serde::Deserialize;

use super::units::HumanDuration;

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
