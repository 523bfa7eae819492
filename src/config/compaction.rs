//! `[compaction]`: when small files are merged, into what size, and how long replaced objects
//! are kept.

use std::time::Duration;

use serde::Deserialize;

use super::units::{ByteSize, HumanDuration};

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
