//! When a change that ends secrets is in force on every node (SPEC §7: once the revoking call
//! has answered, no node accepts the secret): the revocation lease and the instant a revoking
//! call waits for. `auth` enforces the lease on the cache side.

/// How long after a revocation commits every node is sure to refuse the secret: a node trusts
/// its cache only while a heartbeat it sent within this has come back through the notification
/// channel (PostgreSQL); SQLite processes re-check `data_version` every `auth::RECHECK` (1 ms).
pub const REVOCATION_LEASE: std::time::Duration = std::time::Duration::from_secs(1);

/// When a change that ends secrets (a revocation, events turned off) is in force everywhere:
/// the revoking call answers once this instant has passed.
#[derive(Debug, Clone, Copy)]
#[must_use = "a revocation is in force on every node only once it has settled"]
pub struct Settled(pub std::time::Instant);

impl Settled {
    /// Blocks until then (the CLI).
    pub fn wait_blocking(self) {
        std::thread::sleep(self.0.saturating_duration_since(std::time::Instant::now()));
    }

    /// Waits until then (a request handler).
    pub async fn wait(self) {
        tokio::time::sleep_until(tokio::time::Instant::from_std(self.0)).await;
    }
}
