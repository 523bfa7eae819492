//! The download client against a real server: share URLs, ids, formats, output files, and a
//! clear message and exit code for every error body.

use crate::common;

use std::process::Command;

use common::TestServer;
use common::process::BIN;
use serde_json::{Value, json};

fn run(args: &[&str]) -> (bool, Vec<u8>, String) {
    let out = Command::new(BIN)
        .arg("download")
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        out.stdout,
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn downloads_by_share_url_and_by_ids_with_clear_errors() {
    let t = TestServer::start(|_| {}).await;
    for i in 0..30 {
        t.send(json!({"event": "dl", "properties": {"i": i}})).await;
    }
    t.flush().await;
    let element = t.element("dl", None);
    let (_, expected) = t.download(&element, json!({})).await;
    let base = t.url("");
    let share = format!(
        "{base}/canvas/{}/element/{element}/new-canvas",
        t.seeded.canvas
    );
    let key = t.seeded.key.clone();

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("t.json");
    let (ok, _, stderr) = tokio::task::spawn_blocking({
        let (share, key, file) = (share.clone(), key.clone(), file.clone());
        move || run(&[&share, "--key", &key, "-o", file.to_str().unwrap()])
    })
    .await
    .unwrap();
    assert!(ok, "{stderr}");
    assert!(
        stderr.contains("30 rows"),
        "progress summary on stderr: {stderr}"
    );
    let got: Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    assert_eq!(got, expected);

    let (ok, stdout, _) = tokio::task::spawn_blocking({
        let (base, canvas, element, key) = (
            base.clone(),
            t.seeded.canvas.clone(),
            element.clone(),
            key.clone(),
        );
        move || {
            run(&[
                "--canvas",
                &canvas,
                "--element",
                &element,
                "--base-url",
                &base,
                "--key",
                &key,
                "--format",
                "csv",
            ])
        }
    })
    .await
    .unwrap();
    assert!(ok);
    let csv = String::from_utf8(stdout).unwrap();
    assert_eq!(csv.lines().count(), 31, "header + 30 rows");

    let (ok, _, stderr) = tokio::task::spawn_blocking({
        let share = share.clone();
        move || run(&[&share, "--key", "stw_data_wrong"])
    })
    .await
    .unwrap();
    assert!(!ok);
    assert!(
        stderr.contains("401 invalid_api_key") && stderr.contains("check the API key"),
        "{stderr}"
    );

    let missing = format!(
        "{base}/canvas/{}/element/el_nope/new-canvas",
        t.seeded.canvas
    );
    let (ok, _, stderr) = tokio::task::spawn_blocking(move || run(&[&missing, "--key", &key]))
        .await
        .unwrap();
    assert!(!ok);
    assert!(stderr.contains("404 not_found"), "{stderr}");

    let (ok, _, stderr) =
        tokio::task::spawn_blocking(|| run(&["https://example.invalid/nothing", "--key", "k"]))
            .await
            .unwrap();
    assert!(!ok);
    assert!(stderr.contains("share URL"), "{stderr}");
}
