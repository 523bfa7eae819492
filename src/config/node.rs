//! `[node]`: this process among several sharing a catalog and a bucket (SPEC §7).

use serde::Deserialize;

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
