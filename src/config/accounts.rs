//! `[accounts]`: sessions, one-time links, the sign-in throttle, the bound on password hashing
//! and the per-team ceilings on what owners and members create (SPEC §5.1, §5.2).

use std::time::Duration;

use serde::Deserialize;

use super::units::HumanDuration;

/// `[accounts]`
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AccountsConfig {
    /// A session unused this long has expired.
    pub session_idle: HumanDuration,
    /// A session this old has expired, however active.
    pub session_max: HumanDuration,
    /// Set-password and invite links are valid this long.
    pub link_ttl: HumanDuration,
    /// Failed sign-ins for one email before each further one locks it, for twice as long as
    /// the last lock (1 s, 2 s, 4 s … up to `lockout_max`).
    pub max_failures_per_account: u32,
    /// The same, per client address.
    pub max_failures_per_address: u32,
    /// Longest lock after repeated failures.
    pub lockout_max: HumanDuration,
    /// Password hashes (sign-in, set-password) run at once at most; each holds
    /// ~19 MiB while it runs, so this bounds their memory.
    pub hash_concurrency: usize,
    /// How long a sign-in waits for a hashing slot before 503 `overloaded`.
    pub hash_wait: HumanDuration,
    /// Live data API keys per team; beyond, 409 `limit_reached`.
    pub max_keys: u64,
    /// Live events tokens per team.
    pub max_tokens: u64,
    /// Live personal access tokens per user.
    pub max_pats_per_user: u64,
    /// Canvases per team.
    pub max_canvases: u64,
    /// Elements per team, over all its canvases.
    pub max_elements: u64,
    /// Pending invites per team.
    pub max_invites: u64,
}

impl Default for AccountsConfig {
    fn default() -> Self {
        Self {
            session_idle: HumanDuration(Duration::from_secs(12 * 3600)),
            session_max: HumanDuration(Duration::from_secs(7 * 24 * 3600)),
            link_ttl: HumanDuration(Duration::from_secs(7 * 24 * 3600)),
            max_failures_per_account: 5,
            max_failures_per_address: 20,
            lockout_max: HumanDuration(Duration::from_secs(15 * 60)),
            hash_concurrency: 2,
            hash_wait: HumanDuration(Duration::from_secs(5)),
            max_keys: 50,
            max_tokens: 50,
            max_pats_per_user: 25,
            max_canvases: 200,
            max_elements: 1000,
            max_invites: 50,
        }
    }
}
