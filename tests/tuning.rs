//! Live per-team tuning with the real binary (SPEC §2.2.1, §2.2.2): `admin team set` in another
//! process changes a running server's flush interval, budget and rate limit within a second;
//! `admin team show` prints the effective values; an empty value resets.

use crate::common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::process;
use common::status_json;
use serde_json::{Value, json};
use stowage::config::{ByteSize, HumanDuration};

fn admin(dir: &Path, args: &[&str]) -> (bool, Value, String) {
    let args: Vec<&str> = ["--json", "admin", "team"]
        .into_iter()
        .chain(args.iter().copied())
        .collect();
    // The same configuration as the server (the defaults `show` reports come from it).
    process::cli(dir, &args, &[("STOWAGE_FLUSH__INTERVAL", "1h")])
}

async fn send(http: &reqwest::Client, demo: &Value, body: Value) -> (u16, Value, Option<String>) {
    let resp = http
        .post(format!("{}/v1/event", demo["events_url"].as_str().unwrap()))
        .header("X-Auth-Token", demo["events_token"].as_str().unwrap())
        .header("Content-Type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let retry = resp
        .headers()
        .get("retry-after")
        .map(|v| v.to_str().unwrap().to_string());
    let (s, v) = status_json(resp).await;
    (s, v, retry)
}

#[tokio::test]
async fn admin_team_set_retunes_a_running_server_within_a_second() {
    let dir = tempfile::tempdir().unwrap();
    // The global flush interval is an hour (process::start sets it).
    let proc = process::start(dir.path(), &[]).await;
    let demo = proc.demo.clone();
    let team = demo["team_id"].as_str().unwrap().to_string();
    let http = reqwest::Client::new();

    let (ok, shown, err) = admin(dir.path(), &["show", "--team", &team]);
    assert!(ok, "{err}");
    assert_eq!(shown["flush_interval_ms"], json!(3_600_000));
    assert_eq!(shown["rate_per_sec"], Value::Null);

    for i in 0..5 {
        let (s, v, _) = send(
            &http,
            &demo,
            json!({"event": "Tuned", "properties": {"i": i}}),
        )
        .await;
        assert_eq!(s, 200, "{v}");
    }
    let files = || common::parquet_files(dir.path());
    assert!(files().is_empty(), "nothing flushes within the hour");

    // The oldest row is already older than the new interval: the server flushes as soon as it
    // applies the change.
    let (ok, shown, err) = admin(
        dir.path(),
        &["set", "--team", &team, "--flush-interval", "100ms"],
    );
    let changed_at = Instant::now();
    assert!(ok, "{err}");
    assert_eq!(shown["flush_interval_ms"], json!(100));
    let applied = loop {
        if proc.log_text().contains("team tuning changed") {
            break changed_at.elapsed();
        }
        assert!(
            changed_at.elapsed() < Duration::from_secs(5),
            "never applied"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert!(
        applied < Duration::from_secs(1),
        "applied after {applied:?}"
    );
    while files().is_empty() {
        assert!(
            changed_at.elapsed() < Duration::from_secs(5),
            "never flushed"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    eprintln!(
        "applied after {applied:?}, committed after {:?}",
        changed_at.elapsed()
    );

    // Rate limit: a burst of 3 at 1 event/s, then 429 with Retry-After.
    let (ok, shown, err) = admin(
        dir.path(),
        &["set", "--team", &team, "--rate", "1", "--burst", "3"],
    );
    assert!(ok, "{err}");
    assert_eq!(
        (shown["rate_per_sec"].as_f64(), shown["rate_burst"].as_u64()),
        (Some(1.0), Some(3))
    );
    let limited = Instant::now();
    let mut statuses = Vec::new();
    loop {
        let (s, v, retry) = send(&http, &demo, json!({"event": "Tuned"})).await;
        if s == 429 {
            assert_eq!(v["error"]["code"], json!("rate_limited"), "{v}");
            assert!(retry.is_some_and(|r| r.parse::<u64>().unwrap() >= 1));
            break;
        }
        assert_eq!(s, 200, "{v}");
        statuses.push(s);
        assert!(limited.elapsed() < Duration::from_secs(5), "never limited");
    }
    assert!(statuses.len() >= 3, "the burst passes first: {statuses:?}");

    // An empty value resets to the default: no limit.
    let (ok, shown, err) = admin(
        dir.path(),
        &["set", "--team", &team, "--rate", "", "--flush-interval", ""],
    );
    assert!(ok, "{err}");
    assert_eq!(shown["rate_per_sec"], Value::Null);
    assert_eq!(shown["flush_interval_ms"], json!(3_600_000));
    let reset = Instant::now();
    loop {
        let (s, _, _) = send(&http, &demo, json!({"event": "Tuned"})).await;
        if s == 200 {
            break;
        }
        assert!(
            reset.elapsed() < Duration::from_secs(2),
            "the reset never applied"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // Bad values are refused with a clear error and change nothing.
    let (ok, err, _) = admin(
        dir.path(),
        &["set", "--team", &team, "--flush-interval", "soon"],
    );
    assert!(!ok);
    assert_eq!(err["error"]["code"], json!("invalid_argument"), "{err}");
    let (ok, err, _) = admin(dir.path(), &["show", "--team", "nope"]);
    assert!(!ok);
    assert_eq!(err["error"]["code"], json!("not_found"), "{err}");
    assert_eq!(proc.sigterm(), 0);
}

/// A quiet team (`flush.idle_interval`, issue 31): a small buffer outlives `flush.interval`
/// and is committed, in one flush, once its oldest row is `idle_interval` old; a buffer of
/// `idle_bytes` or more flushes at `interval` as before.
#[tokio::test]
async fn a_quiet_teams_small_buffer_waits_for_company_up_to_the_idle_interval() {
    let t = common::TestServer::start(|c| {
        c.flush.interval = HumanDuration(Duration::from_millis(50));
        c.flush.idle_interval = HumanDuration(Duration::from_millis(1500));
        c.flush.idle_bytes = ByteSize(4 << 10);
    })
    .await;
    let sent = Instant::now();
    t.send(json!({"event": "Quiet", "properties": {"n": 1}}))
        .await;
    t.send(json!({"event": "Quiet", "properties": {"n": 2}}))
        .await;
    let files = || common::parquet_files(t.dir.path()).len();
    assert!(
        common::wait_for(Duration::from_secs(10), || async { files() >= 2 }).await,
        "the quiet team's rows were never committed"
    );
    let waited = sent.elapsed();
    assert!(
        waited >= Duration::from_millis(1400),
        "committed after {waited:?}, before the idle interval"
    );
    assert_eq!(files(), 2, "both events in one flush: tracks and quiet");

    // A buffer past idle_bytes is not quiet: it flushes at `interval`.
    let before = files();
    let big = "x".repeat(10 << 10);
    let sent = Instant::now();
    t.send(json!({"event": "Loud", "properties": {"s": big}}))
        .await;
    assert!(common::wait_for(Duration::from_secs(10), || async { files() >= before + 2 }).await);
    assert!(
        sent.elapsed() < Duration::from_millis(1400),
        "a big buffer waited {:?}",
        sent.elapsed()
    );
}
