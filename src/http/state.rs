//! [`AppState`], what every handler shares — one `Arc` of [`Shared`] parts — and [`Net`], a
//! trusted proxy network of `server.trusted_proxies` it carries. The handlers, the router and the
//! middlewares all import it; it imports none of them.

use std::net::IpAddr;
use std::sync::Arc;

use object_store::ObjectStore;

use super::pages::flash::Flash;
use crate::accounts::Accounts;
use crate::catalog::Catalog;
use crate::config::Config;
use crate::ingest::Ingest;
use crate::model::fresh::Buffers;
use crate::sql::SqlEngine;

/// Everything handlers share, behind one `Arc`: extracting it per request costs one reference
/// count, not one per field.
#[derive(Clone)]
pub struct AppState(Arc<Shared>);

impl AppState {
    /// Wraps the shared parts.
    pub fn new(shared: Shared) -> AppState {
        AppState(Arc::new(shared))
    }
}

impl std::ops::Deref for AppState {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.0
    }
}

/// What [`AppState`] holds.
pub struct Shared {
    /// Effective configuration.
    pub config: Arc<Config>,
    /// Teams, secrets, elements, tables, files.
    pub catalog: Arc<Catalog>,
    /// Event ingestion.
    pub ingest: Arc<Ingest>,
    /// Where fresh reads get the rows not yet committed (SPEC §3.5).
    pub buffers: Arc<dyn Buffers>,
    /// The warehouse.
    pub store: Arc<dyn ObjectStore>,
    /// Sign-in, sessions and team management.
    pub accounts: Arc<Accounts>,
    /// SQL element queries (SPEC §3.4).
    pub sql: Arc<SqlEngine>,
    /// Secrets and notices the settings page shows once, after a form's redirect.
    pub flash: Arc<Flash>,
    /// `server.trusted_proxies`, parsed.
    pub trusted_proxies: Arc<[Net]>,
}

/// One trusted network: an address and how many leading bits must match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Net {
    addr: IpAddr,
    bits: u8,
}

impl Net {
    /// Parses `10.0.0.0/8`, `::1` or `127.0.0.1` (a single address is a whole-length prefix).
    pub fn parse(text: &str) -> Result<Net, String> {
        let (addr, bits) = match text.split_once('/') {
            Some((a, b)) => (a, Some(b)),
            None => (text, None),
        };
        let addr: IpAddr = addr
            .trim()
            .parse()
            .map_err(|_| format!("{text:?} is not an IP address or network"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let bits = match bits {
            None => max,
            Some(b) => b
                .trim()
                .parse::<u8>()
                .ok()
                .filter(|&b| b <= max)
                .ok_or_else(|| format!("{text:?}: the prefix length must be 0..={max}"))?,
        };
        Ok(Net { addr, bits })
    }

    /// Whether `ip` is in this network.
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        let shift = |max: u32| max - u32::from(self.bits);
        match (self.addr, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let s = shift(32);
                s >= 32 || u32::from(net) >> s == u32::from(ip) >> s
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let s = shift(128);
                s >= 128 || u128::from(net) >> s == u128::from(ip) >> s
            }
            _ => false,
        }
    }
}
