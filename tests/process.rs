//! The real `stowage` binary: SIGTERM flushes and exits 0, data survives a restart, the admin
//! CLI works beside a running server, bad config stops start-up naming the key, transparent
//! huge pages are off.

use crate::common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::process::{self, BIN, download};
use common::{SEED_EVENT, TestServer, status_json};
use serde_json::{Value, json};

#[tokio::test]
async fn sigterm_flushes_everything_and_a_restart_serves_it() {
    let dir = tempfile::tempdir().unwrap();
    let proc = process::start(
        dir.path(),
        &[
            ("STOWAGE_NODE__ID", "node-7"),
            ("STOWAGE_SERVER__NODE_HEADER", "true"),
        ],
    )
    .await;
    let demo = proc.demo.clone();
    let http = reqwest::Client::new();
    let health = http
        .get(format!("{}/healthz", demo["base_url"].as_str().unwrap()))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    // The node names itself, in a header on every response (opted in) and in /healthz.
    assert_eq!(health.headers()["x-stowage-node"], "node-7");
    let health: Value = serde_json::from_str(&health.text().await.unwrap()).unwrap();
    assert_eq!(health["node"], "node-7");
    for i in 0..20 {
        let body = if i == 0 {
            SEED_EVENT.to_string()
        } else {
            json!({"event": "Purchased an Item", "properties": {"i": i}}).to_string()
        };
        let resp = http
            .post(format!("{}/v1/event", demo["events_url"].as_str().unwrap()))
            .header("X-Auth-Token", demo["events_token"].as_str().unwrap())
            .header("Content-Type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
    }
    // Transparent huge pages are off for the server (kernels that report it, 5.0+).
    let status = std::fs::read_to_string(format!("/proc/{}/status", proc.child.id())).unwrap();
    if let Some(line) = status.lines().find(|l| l.starts_with("THP_enabled:")) {
        assert_eq!(line.split_whitespace().nth(1), Some("0"), "{line}");
    }
    // The flush interval is an hour: only the shutdown can have committed these.
    assert_eq!(proc.sigterm(), 0, "graceful shutdown exits 0");

    let proc = process::start(dir.path(), &[]).await;
    let demo2 = proc.demo.clone();
    assert_eq!(
        demo2["data_api_key"], demo["data_api_key"],
        "demo seeding is idempotent and keeps live secrets"
    );
    assert_eq!(demo2["element_id"], demo["element_id"]);
    let table = download(&http, &demo2, "event_element_id").await;
    assert_eq!(table["rows"], json!(20));
    assert_eq!(
        table["data"][0]["timestamp"],
        json!("2012-12-02T00:30:08.276Z")
    );
    assert_eq!(table["data"][0]["shipping_method"], json!("Premium"));
    let tracks = download(&http, &demo2, "element_id").await;
    assert_eq!(tracks["rows"], json!(20));
    assert_eq!(proc.sigterm(), 0);
}

#[tokio::test]
async fn in_process_restart_keeps_committed_and_buffered_data() {
    let mut t = TestServer::start(|_| {}).await;
    let committed = t.send(json!({"event": "e", "properties": {"k": 1}})).await;
    t.flush().await;
    let buffered = t.send(json!({"event": "e", "properties": {"k": 2}})).await;
    t.restart(|_| {}).await;
    let rows = t.rows(&t.element("e", None)).await;
    let ids: Vec<&str> = rows.iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(ids, vec![committed.as_str(), buffered.as_str()]);
}

fn admin(dir: &Path, args: &[&str]) -> (bool, Value, String) {
    process::cli(dir, args, &[])
}

#[tokio::test]
async fn admin_cli_end_to_end_against_a_running_server() {
    let t = TestServer::start(|_| {}).await;
    let dir = t.dir.path();
    // Global flags anywhere on the line.
    let (ok, team, _) = admin(
        dir,
        &["--json", "admin", "team", "create", "--name", "acme"],
    );
    assert!(ok);
    let team_id = team["id"].as_str().unwrap().to_string();
    assert!(team_id.starts_with("tm_"));
    let (ok, owner, _) = admin(
        dir,
        &[
            "admin",
            "user",
            "create",
            "--team",
            &team_id,
            "--email",
            "ann@example.com",
            "--name",
            "ann",
            "--role",
            "owner",
            "--json",
        ],
    );
    assert!(ok);
    let owner_id = owner["id"].as_str().unwrap().to_string();
    let link = owner["set_password_url"].as_str().unwrap();
    assert!(link.contains("/invite/stw_link_"), "{link}");
    let (ok, _, _) = admin(
        dir,
        &[
            "admin",
            "--json",
            "user",
            "create",
            "--team",
            "acme",
            "--email",
            "bob@example.com",
            "--name",
            "bob",
            "--role",
            "member",
        ],
    );
    assert!(ok);

    // Only owners create keys; tokens also need events enabled.
    let (ok, err, _) = admin(
        dir,
        &[
            "--json", "admin", "key", "create", "--team", "acme", "--user", "bob",
        ],
    );
    assert!(!ok);
    assert_eq!(err["error"]["code"], json!("refused"));
    let (ok, err, _) = admin(
        dir,
        &[
            "--json", "admin", "token", "create", "--team", "acme", "--user", &owner_id,
        ],
    );
    assert!(!ok);
    assert!(err["error"]["message"].as_str().unwrap().contains("events"));
    let (ok, _, _) = admin(
        dir,
        &["--json", "admin", "events", "enable", "--team", "acme"],
    );
    assert!(ok);
    let (ok, tok, _) = admin(
        dir,
        &[
            "--json", "admin", "token", "create", "--team", "acme", "--user", "ann",
        ],
    );
    assert!(ok);
    let token = tok["token"].as_str().unwrap().to_string();
    assert!(token.starts_with("stw_evt_"));
    let (ok, key, _) = admin(
        dir,
        &[
            "--json", "admin", "key", "create", "--team", "acme", "--user", "ann",
        ],
    );
    assert!(ok);
    let api_key = key["key"].as_str().unwrap().to_string();
    let (ok, canvas, _) = admin(
        dir,
        &[
            "--json", "admin", "canvas", "create", "--team", "acme", "--name", "c",
        ],
    );
    assert!(ok);
    let canvas_id = canvas["id"].as_str().unwrap().to_string();
    let (ok, el, _) = admin(
        dir,
        &[
            "--json",
            "admin",
            "element",
            "create",
            "--canvas",
            &canvas_id,
            "--table",
            "Signed Up",
            "--columns",
            "id,plan",
        ],
    );
    assert!(ok);
    let element_id = el["id"].as_str().unwrap().to_string();
    assert!(el["share_url"].as_str().unwrap().ends_with(&format!(
        "/canvas/{canvas_id}/element/{element_id}/new-canvas"
    )));

    // The running server sees all of it at once.
    let send = |tok: String| {
        let req = t
            .http
            .post(t.url("/v1/event"))
            .header("X-Auth-Token", tok)
            .header("Content-Type", "application/json")
            .body(json!({"event": "Signed Up", "properties": {"plan": "pro"}}).to_string());
        async move { status_json(req.send().await.unwrap()).await }
    };
    let (s, _) = send(token.clone()).await;
    assert_eq!(s, 200);
    t.flush().await;
    let resp = t
        .http
        .post(t.url("/data/table"))
        .header("x-api-key", &api_key)
        .body(json!({"canvasId": canvas_id, "elementId": element_id}).to_string())
        .send()
        .await
        .unwrap();
    let (s, table) = status_json(resp).await;
    assert_eq!(s, 200);
    assert_eq!(table["data"][0]["plan"], json!("pro"));
    assert_eq!(table["meta"].as_array().unwrap().len(), 2);

    // list shows prefixes, never secrets; revoke stops the token on the running server.
    let (ok, list, _) = admin(dir, &["--json", "admin", "token", "list", "--team", "acme"]);
    assert!(ok);
    let listed = list.to_string();
    assert!(!listed.contains(&token), "a listing never shows the secret");
    let tok_id = list[0]["id"].as_str().unwrap().to_string();
    let (ok, _, _) = admin(
        dir,
        &["--json", "admin", "token", "revoke", "--id", &tok_id],
    );
    assert!(ok);
    let (s, b) = send(token.clone()).await;
    assert_eq!(
        (s, b["error"]["code"].as_str()),
        (401, Some("invalid_token"))
    );
    let (ok, _, _) = admin(dir, &["admin", "events", "disable", "--team", "acme"]);
    assert!(ok);

    // Human output and errors without --json.
    let (ok, _, stderr) = admin(dir, &["admin", "team", "create", "--name", "acme"]);
    assert!(!ok);
    assert!(stderr.contains("already exists"), "{stderr}");
}

#[test]
fn bad_config_stops_startup_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path())
        .env("STOWAGE_FLUSH__INTERVAL", "whenever")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
        .wait_with_output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("flush.interval"), "{stderr}");
    let file = dir.path().join("bad.toml");
    std::fs::write(&file, "[ingest]\nmax_body = \"huge\"\n").unwrap();
    let out = Command::new(BIN)
        .args(["serve", "--config"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("ingest.max_body"));
    let _ = Duration::ZERO;
}
