//! The S3 server going away, as `durability.rs`'s local store outage but with the real server
//! killed: flushes fail and retry, ingestion answers 429/503 with Retry-After once the budget is
//! full, memory stays within it, and once S3 is back (the same port) every acknowledged event is
//! stored, once, in order.

use crate::common;

use std::time::Duration;

use common::s3::Moto;
use common::{TestServer, wait_for};
use futures::TryStreamExt;
use object_store::ObjectStore;
use serde_json::json;
use stowage::config::Config;

#[tokio::test]
async fn s3_going_away_ends_in_503s_and_loses_nothing() {
    let mut moto = Moto::start("stowage-outage").await;
    let mut config = Config::default();
    moto.configure(&mut config, "wh");
    let t = TestServer::start_on(
        |c| {
            moto.configure(c, "wh");
            c.flush.max_rows = 5;
            c.flush.retry_backoff.0 = Duration::from_millis(20);
            c.ingest.team_budget.0 = 20_000;
            c.ingest.global_budget.0 = 20_000;
        },
        Some(Moto::store(&config)),
    )
    .await;
    let bucket = moto.bucket_store();
    let stored = || async {
        bucket
            .list(None)
            .try_collect::<Vec<_>>()
            .await
            .unwrap()
            .len()
    };
    // The restarted moto is empty: this test is only fair if nothing was stored before.
    assert_eq!(stored().await, 0);
    moto.kill();

    let mut accepted = Vec::new();
    let mut refused = 0;
    let mut retry_after = None;
    for i in 0..400 {
        let ev = json!({"event": "e", "messageId": format!("m{i}"), "properties": {"pad": "x".repeat(100)}});
        let resp = t
            .http
            .post(t.url("/v1/event"))
            .header("X-Auth-Token", &t.seeded.token)
            .header("Content-Type", "application/json")
            .body(ev.to_string())
            .send()
            .await
            .unwrap();
        match resp.status().as_u16() {
            200 => accepted.push(format!("m{i}")),
            429 | 503 => {
                refused += 1;
                retry_after = resp.headers().get("retry-after").cloned();
            }
            other => panic!("unexpected status {other}"),
        }
    }
    assert!(refused > 0, "the budget filled during the outage");
    assert!(retry_after.is_some(), "refusals carry Retry-After");
    let pending = t.srv().state.ingest.admission().global_bytes();
    assert!(pending > 0, "nothing could be flushed while S3 was away");
    assert!(
        pending <= 20_000 + 1_000,
        "memory stays within the budget: {pending}"
    );

    moto.up().await; // S3 is back; flushes retry by themselves
    let drained = wait_for(Duration::from_secs(90), || async {
        t.srv().state.ingest.admission().global_bytes() == 0
    })
    .await;
    assert!(drained, "buffers committed after the outage");
    assert!(stored().await > 0);
    t.send(json!({"event": "e", "messageId": "after"})).await;
    t.flush().await;
    let rows = t.rows(&t.element("e", None)).await;
    let ids: Vec<String> = rows
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect();
    accepted.push("after".into());
    assert_eq!(ids, accepted, "every acknowledged event, once, in order");
}
