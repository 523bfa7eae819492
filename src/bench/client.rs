//! The bench's HTTP client: one raw hyper HTTP/1.1 keep-alive connection per worker over a
//! `TcpStream`, with the request head built once and cloned per request. No pool, no
//! redirects, no proxy: as little client CPU as possible, so the server under test gets the
//! machine.

use std::net::SocketAddr;
use std::time::Duration;

use base64::Engine;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::{self, SendRequest};
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::{Method, Request, Uri};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use super::{Auth, BenchError, Mode};

/// Where the requests go: the parsed `--url`, resolved once.
#[derive(Clone, Debug)]
pub struct Target {
    /// The socket address the host name resolved to.
    pub addr: SocketAddr,
    /// `host[:port]` for the `Host` header.
    pub authority: String,
    /// The URL's path without its trailing slash, prefixed to `/v1/…`.
    pub prefix: String,
}

/// The scheme-less parts of an `http://` URL: authority, host, port and path prefix.
pub fn parse_url(url: &str) -> Result<(String, String, u16, String), BenchError> {
    let bad = |reason: &str| BenchError::Url {
        url: url.to_string(),
        reason: reason.to_string(),
    };
    let uri: Uri = url.parse().map_err(|_| bad("not a URL"))?;
    match uri.scheme_str() {
        Some("http") => {}
        Some("https") => return Err(bad("https is not supported; bench a plain http:// port")),
        _ => return Err(bad("expected http://host[:port]")),
    }
    let authority = uri.authority().ok_or_else(|| bad("no host"))?;
    if authority.as_str().contains('@') {
        return Err(bad("credentials in the URL are not supported; use --token"));
    }
    let host = authority
        .host()
        .trim_start_matches('[')
        .trim_end_matches(']');
    if host.is_empty() {
        return Err(bad("no host"));
    }
    if uri.query().is_some() {
        return Err(bad("a query string is not supported"));
    }
    let prefix = uri.path().trim_end_matches('/').to_string();
    Ok((
        authority.as_str().to_string(),
        host.to_string(),
        authority.port_u16().unwrap_or(80),
        prefix,
    ))
}

impl Target {
    /// Parses `url` and resolves its host.
    pub async fn resolve(url: &str) -> Result<Target, BenchError> {
        let (authority, host, port, prefix) = parse_url(url)?;
        let addr = tokio::net::lookup_host((host.as_str(), port))
            .await
            .ok()
            .and_then(|mut a| a.next())
            .ok_or_else(|| BenchError::Url {
                url: url.to_string(),
                reason: format!("cannot resolve host {host:?}"),
            })?;
        Ok(Target {
            addr,
            authority,
            prefix,
        })
    }
}

/// The parts of a request that never change during a run.
#[derive(Clone, Debug)]
pub struct RequestHead {
    /// `/v1/event` or `/v1/batch` under the URL's prefix.
    pub uri: Uri,
    /// Host, content type, auth and encoding.
    pub headers: HeaderMap,
}

impl RequestHead {
    /// The head for `mode` with `token` sent as `auth` says.
    pub fn new(
        target: &Target,
        mode: Mode,
        token: &str,
        auth: Auth,
        gzip: bool,
    ) -> Result<Self, BenchError> {
        let uri: Uri = format!("{}{}", target.prefix, mode.path())
            .parse()
            .map_err(|_| BenchError::Url {
                url: target.prefix.clone(),
                reason: "the path is not valid in a request".into(),
            })?;
        let value = |s: &str, what: &str| {
            HeaderValue::from_str(s).map_err(|_| BenchError::Header(what.to_string()))
        };
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, value(&target.authority, "host")?);
        let content_type = match mode {
            Mode::Ndjson => "application/x-ndjson",
            Mode::Single | Mode::Batch => "application/json",
        };
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
        match auth {
            Auth::Header => {
                let mut v = value(token, "token")?;
                v.set_sensitive(true);
                headers.insert("x-auth-token", v);
            }
            Auth::Basic => {
                // Segment SDKs send the write key as the user name and an empty password.
                let creds = base64::engine::general_purpose::STANDARD.encode(format!("{token}:"));
                let mut v = value(&format!("Basic {creds}"), "token")?;
                v.set_sensitive(true);
                headers.insert(header::AUTHORIZATION, v);
            }
        }
        if gzip {
            headers.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
        }
        Ok(RequestHead { uri, headers })
    }

    fn request(&self, body: Bytes) -> Request<Full<Bytes>> {
        let mut req = Request::new(Full::new(body));
        *req.method_mut() = Method::POST;
        *req.uri_mut() = self.uri.clone();
        *req.headers_mut() = self.headers.clone();
        req
    }
}

/// Why a request got no status.
#[derive(Debug)]
pub enum SendError {
    /// Connecting, writing or reading failed.
    Transport,
    /// No complete response within the timeout.
    Timeout,
}

/// One keep-alive connection; reconnects lazily after a failure or a server-side close.
pub struct Conn {
    /// The server's address.
    addr: SocketAddr,
    /// The open connection's request handle; `None` until connected or after a failure.
    sender: Option<SendRequest<Full<Bytes>>>,
}

impl Conn {
    /// Opens a connection to `addr` (so connecting is not timed as part of a request).
    pub async fn connect(addr: SocketAddr) -> std::io::Result<Self> {
        let sender = Some(Self::open(addr).await?);
        Ok(Conn { addr, sender })
    }

    /// Opens the TCP connection and the HTTP/1 handshake, driving it on its own task.
    async fn open(addr: SocketAddr) -> std::io::Result<SendRequest<Full<Bytes>>> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let (sender, conn) = http1::handshake(TokioIo::new(stream))
            .await
            .map_err(std::io::Error::other)?;
        tokio::spawn(async move {
            // Ends when the server closes the connection or the sender is dropped.
            let _ = conn.await;
        });
        Ok(sender)
    }

    /// Sends one request and reads the whole response; its status.
    pub async fn send(
        &mut self,
        head: &RequestHead,
        body: Bytes,
        timeout: Duration,
    ) -> Result<u16, SendError> {
        let result = tokio::time::timeout(timeout, self.exchange(head, body)).await;
        match result {
            Ok(Ok(status)) => Ok(status),
            Ok(Err(e)) => {
                self.sender = None;
                Err(e)
            }
            Err(_) => {
                self.sender = None;
                Err(SendError::Timeout)
            }
        }
    }

    async fn exchange(&mut self, head: &RequestHead, body: Bytes) -> Result<u16, SendError> {
        // A connection the server closed after its last response (keep-alive timeout, an
        // error response) is replaced before sending: that is not a failed request.
        let mut open = self.sender.take().filter(|s| !s.is_closed());
        if let Some(s) = open.as_mut()
            && s.ready().await.is_err()
        {
            open = None;
        }
        let open = match open {
            Some(s) => s,
            None => Self::open(self.addr)
                .await
                .map_err(|_| SendError::Transport)?,
        };
        let sender = self.sender.insert(open);
        let resp = sender
            .send_request(head.request(body))
            .await
            .map_err(|_| SendError::Transport)?;
        let status = resp.status().as_u16();
        // Read the body to the end so the connection can carry the next request.
        resp.into_body()
            .collect()
            .await
            .map_err(|_| SendError::Transport)?;
        Ok(status)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let ok = |u: &str| parse_url(u).unwrap();
        assert_eq!(
            ok("http://127.0.0.1:8080"),
            ("127.0.0.1:8080".into(), "127.0.0.1".into(), 8080, "".into())
        );
        assert_eq!(ok("http://localhost/").2, 80);
        assert_eq!(ok("http://h:1/api/").3, "/api");
        assert_eq!(ok("http://[::1]:9/").1, "::1");
        for bad in [
            "",
            "127.0.0.1:8080",
            "https://x",
            "ftp://x",
            "http://",
            "http://u:p@h/",
            "http://h/?q=1",
            "not a url",
        ] {
            let err = parse_url(bad).unwrap_err().to_string();
            assert!(err.contains("URL"), "{bad}: {err}");
        }
    }

    #[test]
    fn basic_auth_carries_the_token_as_user_name() {
        let target = Target {
            addr: "127.0.0.1:1".parse().unwrap(),
            authority: "h:1".into(),
            prefix: "".into(),
        };
        let head = RequestHead::new(&target, Mode::Ndjson, "stw_evt_x", Auth::Basic, true).unwrap();
        assert_eq!(head.uri, "/v1/batch");
        assert_eq!(head.headers["authorization"], "Basic c3R3X2V2dF94Og==");
        assert_eq!(head.headers["content-type"], "application/x-ndjson");
        assert_eq!(head.headers["content-encoding"], "gzip");
        assert_eq!(head.headers["host"], "h:1");
        let head = RequestHead::new(&target, Mode::Single, "t", Auth::Header, false).unwrap();
        assert_eq!(head.uri, "/v1/event");
        assert_eq!(head.headers["x-auth-token"], "t");
        assert!(head.headers.get("content-encoding").is_none());
        assert!(
            RequestHead::new(&target, Mode::Single, "bad\ntoken", Auth::Header, false).is_err()
        );
    }
}
