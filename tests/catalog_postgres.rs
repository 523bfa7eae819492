//! The server on a PostgreSQL catalog (a throwaway cluster, `common::pg`): events go in and
//! come back out, and two nodes sharing the catalog see a revocation made on either at once;
//! the real binary and the admin CLI (separate processes) share one, and neither logs the
//! URL's password.

use crate::common;

use std::time::{Duration, Instant};

use common::{TestServer, process};
use serde_json::json;
use stowage::app::RunningServer;
use stowage::catalog::SecretKind;
use stowage::config::Config;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodes_share_a_postgres_catalog() {
    let url = common::pg::database_url();
    let a = TestServer::start(|c| c.catalog.url = url.clone()).await;
    for i in 0..20 {
        a.send(json!({"type": "track", "event": "Clicked", "userId": "u", "properties": {"n": i}}))
            .await;
    }
    a.flush().await;
    let element = a.element("clicked", None);
    let rows = a.rows(&element).await;
    let ns: Vec<_> = rows.iter().map(|r| r["n"].as_i64().unwrap()).collect();
    assert_eq!(ns, (0..20).collect::<Vec<_>>(), "in order");

    // A second node: its own data dir (WAL), the same catalog.
    let dir = tempfile::tempdir().unwrap();
    let mut config = Config::for_tests(dir.path());
    config.catalog.url = url.clone();
    let b = RunningServer::start(config).await.unwrap();
    let download = |node: &RunningServer| {
        a.http
            .post(node.url("/data/table"))
            .header("x-api-key", &a.seeded.key)
            .header("Content-Type", "application/json")
            .body(json!({"canvasId": a.seeded.canvas, "elementId": element}).to_string())
            .send()
    };
    for node in [a.srv(), &b] {
        let resp = download(node).await.unwrap();
        assert_eq!(resp.status(), 200);
    }
    // Revoked through node A's catalog: refused by node B at its next request.
    let keys = a
        .catalog()
        .list_secrets(SecretKind::DataKey, &a.seeded.team)
        .unwrap();
    // Node B refuses it once the revocation has settled (no sleep guessing at the notice).
    a.catalog()
        .revoke_secret(SecretKind::DataKey, &keys[0].id)
        .unwrap()
        .wait()
        .await;
    for node in [a.srv(), &b] {
        let resp = download(node).await.unwrap();
        assert_eq!(resp.status(), 401);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_and_the_admin_cli_share_a_postgres_catalog() {
    // The test cluster trusts every connection, so any password is accepted.
    let url = common::pg::database_url().replacen("postgres@", "postgres:hunter2@", 1);
    let env = [("STOWAGE_CATALOG__URL", url.as_str())];
    let dir = tempfile::tempdir().unwrap();
    let proc = process::start(dir.path(), &env).await;
    let demo = proc.demo.clone();
    let http = reqwest::Client::new();
    let event = json!({"event": "Before"});
    assert_eq!(process::send(&http, &demo, &event).await, Some(200));
    assert!(
        !dir.path().join("catalog.sqlite").exists(),
        "no SQLite catalog beside a PostgreSQL one"
    );

    // Another process, the admin CLI, turns events off in the same catalog.
    let team = demo["team_id"].as_str().unwrap();
    let (ok, out, err) = process::cli(
        dir.path(),
        &["--json", "admin", "events", "disable", "--team", team],
        &env,
    );
    assert!(ok, "{out} {err}");
    assert!(!err.contains("hunter2"), "{err}");
    // Its NOTIFY reaches the server's listener (no polling): the token is refused at once.
    let disabled = Instant::now();
    loop {
        match process::send(&http, &demo, &event).await {
            Some(403) => break,
            Some(200) => {}
            other => panic!("unexpected answer {other:?}"),
        }
        assert!(
            disabled.elapsed() < Duration::from_secs(1),
            "the server still takes the events of a disabled team"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    eprintln!("refused {:?} after the CLI exited", disabled.elapsed());
    let log = proc.log_text();
    assert!(log.contains("postgres:***@"), "the catalog is named: {log}");
    assert!(!log.contains("hunter2"), "the password was logged: {log}");
}
