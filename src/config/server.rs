//! `[server]`: the public listener, its addresses and the edge's limits (SPEC §2.2.2, §5.2), and
//! the separate metrics listener.

use std::time::Duration;

use serde::Deserialize;

use super::units::{ByteSize, HumanDuration};

/// `[server]`
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    /// Address to listen on (`host:port`; port 0 picks a free one).
    pub listen: String,
    /// Base URL clients use to reach this service; empty means `http://<listen address>`.
    pub public_url: String,
    /// Base of share URLs (`{app_url}/canvas/…/element/…/new-canvas`); empty means `public_url`.
    pub app_url: String,
    /// Time to receive a complete request head: from the connection's opening for its first
    /// request (a connection that sends nothing is closed then), from the first byte for a
    /// later one.
    pub header_timeout: HumanDuration,
    /// Time to receive a whole request body, from the end of its head; then 408 and close.
    pub body_timeout: HumanDuration,
    /// A keep-alive connection with no request in flight is closed after this long; so is one
    /// whose client reads nothing of a response for this long.
    pub idle_timeout: HumanDuration,
    /// Most open connections; further ones wait in the listen backlog until one closes.
    pub max_connections: usize,
    /// Open connections per client address at most (a trusted proxy's are not capped);
    /// beyond, a new connection is answered 429 and closed.
    pub max_connections_per_address: usize,
    /// Proxies (addresses or networks, comma-separated) whose `X-Forwarded-For` names the
    /// client; empty: the connection's peer is the client (`http::forwarded`).
    pub trusted_proxies: String,
    /// Where `/metrics` is served (`host:port`; port 0 picks a free one); empty: not served.
    /// Never on the public listener.
    pub metrics_listen: String,
    /// Whether responses name the node that answered (`X-Stowage-Node`).
    pub node_header: bool,
    /// Resident size below which memory the allocator freed stays with it for a second, to be
    /// reused; at or above it, freed memory goes back to the OS within 10 ms (`allocator`).
    /// 0: always within 10 ms.
    pub reuse_memory_below: ByteSize,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:8080".into(),
            public_url: String::new(),
            app_url: String::new(),
            header_timeout: HumanDuration(Duration::from_secs(10)),
            body_timeout: HumanDuration(Duration::from_secs(30)),
            idle_timeout: HumanDuration(Duration::from_secs(60)),
            max_connections: 10_000,
            max_connections_per_address: 256,
            trusted_proxies: String::new(),
            metrics_listen: "127.0.0.1:9464".into(),
            node_header: false,
            reuse_memory_below: ByteSize(288 << 20),
        }
    }
}
