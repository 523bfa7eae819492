//! Test harness: a real server on 127.0.0.1:0 over a real SQLite catalog and a real local
//! warehouse in a temp dir, with a seeded team, and helpers that speak HTTP to it.
#![allow(dead_code)]

pub mod cluster;
pub mod pg;
pub mod process;
pub mod s3;
pub mod segment;

use std::sync::Arc;
use std::time::{Duration, Instant};

use object_store::ObjectStore;

use serde_json::{Value, json};
use stowage::app::RunningServer;
use stowage::catalog::{Catalog, NewElement, Role, SecretKind};
use stowage::config::Config;
use tempfile::TempDir;

/// A seeded team: ids and secrets.
#[derive(Clone, Debug)]
pub struct Seeded {
    pub team: String,
    pub token: String,
    pub key: String,
    pub canvas: String,
}

/// Creates a team with an owner, events enabled, a token, a key and a canvas.
pub fn seed(catalog: &Catalog, name: &str) -> Seeded {
    let team = catalog.create_team(name).unwrap();
    catalog
        .create_user(&team, None, "owner", Role::Owner)
        .unwrap();
    catalog.set_events_enabled(&team, true).unwrap();
    let (_, token) = catalog
        .create_secret(SecretKind::EventsToken, &team, "owner")
        .unwrap();
    let (_, key) = catalog
        .create_secret(SecretKind::DataKey, &team, "owner")
        .unwrap();
    let canvas = catalog.create_canvas(&team, "canvas").unwrap();
    Seeded {
        team,
        token,
        key,
        canvas,
    }
}

pub struct TestServer {
    pub dir: TempDir,
    pub server: Option<RunningServer>,
    pub http: reqwest::Client,
    pub seeded: Seeded,
}

impl TestServer {
    /// A server with test defaults changed by `tweak`.
    pub async fn start(tweak: impl FnOnce(&mut Config)) -> TestServer {
        Self::start_on(tweak, None).await
    }

    /// Like [`TestServer::start`], on a given object store.
    pub async fn start_on(
        tweak: impl FnOnce(&mut Config),
        store: Option<Arc<dyn ObjectStore>>,
    ) -> TestServer {
        let dir = tempfile::tempdir().unwrap();
        let mut config = Config::for_tests(dir.path());
        tweak(&mut config);
        let server = match store {
            Some(store) => RunningServer::start_with_store(config, store)
                .await
                .unwrap(),
            None => RunningServer::start(config).await.unwrap(),
        };
        let seeded = seed(&server.state.catalog, "team-a");
        TestServer {
            dir,
            server: Some(server),
            http: reqwest::Client::new(),
            seeded,
        }
    }

    /// Restarts on the same data dir (graceful stop first).
    pub async fn restart(&mut self, tweak: impl FnOnce(&mut Config)) {
        self.server.take().unwrap().stop().await.unwrap();
        let mut config = Config::for_tests(self.dir.path());
        tweak(&mut config);
        self.server = Some(RunningServer::start(config).await.unwrap());
    }

    pub fn srv(&self) -> &RunningServer {
        self.server.as_ref().unwrap()
    }

    pub fn catalog(&self) -> &Catalog {
        &self.srv().state.catalog
    }

    pub fn url(&self, path: &str) -> String {
        self.srv().url(path)
    }

    /// Waits until everything buffered is committed.
    pub async fn flush(&self) {
        self.srv().state.ingest.flush_all().await;
    }

    /// POSTs a raw event body with the seeded token.
    pub async fn send_raw(&self, body: &str) -> (u16, Value) {
        self.send_as(&self.seeded.token, body, &[]).await
    }

    /// POSTs a raw event body with a token and extra headers.
    pub async fn send_as(&self, token: &str, body: &str, headers: &[(&str, &str)]) -> (u16, Value) {
        post_events(&self.http, self.url("/v1/event"), token, body, headers).await
    }

    /// POSTs an event object; panics unless it is accepted.
    pub async fn send(&self, event: Value) -> String {
        let (status, body) = self.send_raw(&event.to_string()).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["success"], json!(true));
        body["id"].as_str().unwrap().to_string()
    }

    /// Sends Segment messages through `/v1/batch` with the seeded token; panics unless accepted.
    pub async fn batch(&self, messages: Vec<Value>) {
        let resp = self
            .http
            .post(self.url("/v1/batch"))
            .header("X-Auth-Token", &self.seeded.token)
            .header("Content-Type", "application/json")
            .body(json!({ "batch": messages }).to_string())
            .send()
            .await
            .unwrap();
        let (status, body) = status_json(resp).await;
        assert_eq!(status, 200, "{body}");
    }

    /// Creates a table element on the seeded canvas.
    pub fn element(&self, table: &str, columns: Option<&[&str]>) -> String {
        self.catalog()
            .create_element(&NewElement {
                canvas: self.seeded.canvas.clone(),
                table: table.into(),
                columns: columns.map(|c| c.iter().map(|s| s.to_string()).collect()),
                ..Default::default()
            })
            .unwrap()
    }

    /// Downloads an element with extra body fields; returns status and JSON.
    pub async fn download(&self, element: &str, extra: Value) -> (u16, Value) {
        let mut body = json!({"canvasId": self.seeded.canvas, "elementId": element});
        if let Value::Object(extra) = extra {
            body.as_object_mut().unwrap().extend(extra);
        }
        let key = [("x-api-key", self.seeded.key.as_str())];
        post_json(&self.http, self.url("/data/table"), &key, body.to_string()).await
    }

    /// Downloads and asserts 200; returns the `data` rows.
    pub async fn rows(&self, element: &str) -> Vec<Value> {
        let (status, body) = self.download(element, json!({})).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(
            body["rows"].as_u64().unwrap() as usize,
            body["data"].as_array().unwrap().len()
        );
        body["data"].as_array().unwrap().clone()
    }
}

/// The body of a GET of `url`, as text (`/metrics`, for one).
pub async fn get_text(http: &reqwest::Client, url: &str) -> String {
    http.get(url).send().await.unwrap().text().await.unwrap()
}

/// POSTs a JSON body to an ingest route (`url`) with an events token and extra headers: the
/// status and the JSON answer. A free function, so a spawned task can send with a cloned client.
pub async fn post_events(
    http: &reqwest::Client,
    url: String,
    token: &str,
    body: &str,
    headers: &[(&str, &str)],
) -> (u16, Value) {
    let mut all = vec![("X-Auth-Token", token)];
    all.extend_from_slice(headers);
    post_json(http, url, &all, body.to_string()).await
}

/// POSTs a JSON `body` with `headers` (auth among them); the status and the JSON answer.
pub async fn post_json(
    http: &reqwest::Client,
    url: String,
    headers: &[(&str, &str)],
    body: String,
) -> (u16, Value) {
    let mut req = http.post(url).header("Content-Type", "application/json");
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    status_json(req.body(body).send().await.unwrap()).await
}

pub async fn status_json(resp: reqwest::Response) -> (u16, Value) {
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap();
    let json = serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"));
    (status, json)
}

/// The `id` of every row of a JSON download, in order.
pub fn ids(doc: &Value) -> Vec<String> {
    doc["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect()
}

/// Polls `check` until it returns true or `timeout` passes.
pub async fn wait_for<F, Fut>(timeout: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if check().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

/// A time of a JSON download (RFC 3339) in µs since the epoch.
pub fn micros(v: &Value) -> i64 {
    chrono::DateTime::parse_from_rfc3339(v.as_str().unwrap_or_else(|| panic!("not a time: {v}")))
        .unwrap()
        .timestamp_micros()
}

/// The seed's exact sample event.
pub const SEED_EVENT: &str = r#"{"version":1,"type":"event","event":"Purchased an Item","properties":{"revenue":"39.95","shippingMethod":"Premium"},"timestamp":"2012-12-02T00:30:08.276Z"}"#;

/// The Python that has the checkers' packages (pyarrow, DuckDB): `STOWAGE_PYTHON` (set by
/// `scripts/test` to its virtual environment), else `python3`.
pub fn python() -> String {
    std::env::var("STOWAGE_PYTHON").unwrap_or_else(|_| "python3".into())
}

/// Every `.parquet` file under `root` (none if it does not exist yet).
/// How many WAL segment files (`*.wal`) are in `wal_dir`.
pub fn wal_segments(wal_dir: &std::path::Path) -> usize {
    std::fs::read_dir(wal_dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "wal")
        })
        .count()
}

pub fn parquet_files(root: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "parquet") {
                out.push(p);
            }
        }
    }
    out
}
