//! The client address behind a trusted proxy: when a request's peer is one of
//! `server.trusted_proxies` (a load balancer such as the nginx of `config/nginx-scaleout.conf`),
//! the address the edge recorded ([`ClientAddr`]) is replaced by the right-most address of
//! `X-Forwarded-For` that is not itself a trusted proxy — the one the last trusted hop saw.
//! Addresses further left are whatever the client wrote and are ignored. A peer that is not
//! trusted keeps its own address whatever headers it sends. Audit entries, the sign-in throttle
//! and the request log all read the replaced address.

use std::net::{IpAddr, SocketAddr};

use axum::extract::Request;
use axum::http::HeaderMap;

use super::edge::ClientAddr;
use super::state::Net;

/// Parses `server.trusted_proxies`: comma-separated addresses and networks.
pub fn parse_list(text: &str) -> Result<Vec<Net>, String> {
    text.split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(Net::parse)
        .collect()
}

/// The client behind `peer`: `peer` itself unless it is trusted and `X-Forwarded-For` names
/// an untrusted hop.
pub fn resolve(trusted: &[Net], peer: IpAddr, headers: &HeaderMap) -> IpAddr {
    let is_trusted = |ip: IpAddr| trusted.iter().any(|n| n.contains(ip));
    if !is_trusted(peer) {
        return peer;
    }
    let hops: Vec<&str> = headers
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .collect();
    for hop in hops.iter().rev() {
        match hop.trim().parse::<IpAddr>() {
            Ok(ip) if is_trusted(ip) => continue,
            Ok(ip) => return ip,
            // A hop we cannot read: stop at the last address a trusted proxy vouched for.
            Err(_) => break,
        }
    }
    peer
}

/// Replaces the request's [`ClientAddr`] as described in the module doc.
pub fn replace_client(trusted: &[Net], req: &mut Request) {
    if !trusted.is_empty()
        && let Some(ClientAddr(peer)) = req.extensions().get::<ClientAddr>().copied()
    {
        let ip = resolve(trusted, peer.ip(), req.headers());
        if ip != peer.ip() {
            req.extensions_mut()
                .insert(ClientAddr(SocketAddr::new(ip, 0)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(xff: &[&str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in xff {
            h.append("x-forwarded-for", v.parse().unwrap());
        }
        h
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn networks_match_by_prefix() {
        let n = Net::parse("10.1.0.0/16").unwrap();
        assert!(n.contains(ip("10.1.200.3")));
        assert!(!n.contains(ip("10.2.0.1")));
        assert!(n.contains(ip("::ffff:10.1.0.9")), "v4-mapped v6");
        assert!(Net::parse("0.0.0.0/0").unwrap().contains(ip("8.8.8.8")));
        assert!(Net::parse("::1").unwrap().contains(ip("::1")));
        assert!(!Net::parse("::1").unwrap().contains(ip("127.0.0.1")));
        assert!(Net::parse("fd00::/8").unwrap().contains(ip("fd12::1")));
        for bad in ["10.0.0.0/33", "nope", "1.2.3.4/x", "::/129"] {
            assert!(Net::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_list(" 127.0.0.1 , 10.0.0.0/8,").unwrap().len(), 2);
    }

    #[test]
    fn only_a_trusted_peer_is_looked_through() {
        let trusted = parse_list("127.0.0.1, 10.0.0.0/8").unwrap();
        // Untrusted peer: its header is ignored.
        assert_eq!(
            resolve(&trusted, ip("203.0.113.9"), &headers(&["1.2.3.4"])),
            ip("203.0.113.9")
        );
        // Trusted peer: the right-most untrusted hop, not what the client wrote to the left.
        assert_eq!(
            resolve(
                &trusted,
                ip("127.0.0.1"),
                &headers(&["6.6.6.6, 198.51.100.7"])
            ),
            ip("198.51.100.7")
        );
        // Chains of trusted proxies are skipped, across several header lines.
        assert_eq!(
            resolve(
                &trusted,
                ip("127.0.0.1"),
                &headers(&["6.6.6.6, 198.51.100.7", "10.0.0.5"])
            ),
            ip("198.51.100.7")
        );
        // No header, or only trusted hops, or garbage: the peer.
        assert_eq!(
            resolve(&trusted, ip("127.0.0.1"), &headers(&[])),
            ip("127.0.0.1")
        );
        assert_eq!(
            resolve(&trusted, ip("127.0.0.1"), &headers(&["10.0.0.1"])),
            ip("127.0.0.1")
        );
        assert_eq!(
            resolve(&trusted, ip("127.0.0.1"), &headers(&["6.6.6.6, junk"])),
            ip("127.0.0.1")
        );
    }
}
