//! `[limits]`: the warehouse's shape limits, columns per table and tables per team.

use serde::Deserialize;

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
