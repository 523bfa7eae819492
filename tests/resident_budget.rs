//! The budgets count the process's resident size beyond `ingest.resident_allowance`, and a
//! request with no room waits up to `ingest.admission_wait` for a flush before it is refused.
//! The test process holds far more than the 1 MiB allowed here, so a team with anything
//! buffered is over its budget, whatever else the process is doing.

use crate::common;

use std::time::Duration;

use common::{TestServer, post_events};
use serde_json::{Value, json};
use stowage::config::{ByteSize, Config, HumanDuration};

fn over_allowance(c: &mut Config, wait: Duration) {
    c.ingest.resident_allowance = ByteSize(1 << 20);
    c.ingest.team_budget = ByteSize(1 << 20);
    c.ingest.admission_wait = HumanDuration(wait);
}

async fn post(t: &TestServer, i: u32) -> (u16, Value) {
    post_with(&t.http, t.url("/v1/batch"), &t.seeded.token, i).await
}

async fn post_with(http: &reqwest::Client, url: String, token: &str, i: u32) -> (u16, Value) {
    let body =
        json!({"batch": [{"type": "track", "userId": "u", "event": "e", "properties": {"i": i}}]});
    post_events(http, url, token, &body.to_string(), &[]).await
}

#[tokio::test]
async fn resident_memory_beyond_the_allowance_fills_the_team_budget() {
    let t = TestServer::start(|c| over_allowance(c, Duration::from_millis(50))).await;
    let admission = || t.srv().state.ingest.admission();
    let (s, b) = post(&t, 0).await;
    assert_eq!(s, 200, "an empty buffer admits: {b}");
    assert!(admission().uncounted_bytes() > 0);
    // The wait (50 ms) passes without a flush: refused.
    let (s, b) = post(&t, 1).await;
    assert_eq!(
        (s, b["error"]["code"].clone()),
        (429, json!("team_buffer_full")),
        "{b}"
    );
    t.flush().await;
    let (s, b) = post(&t, 2).await;
    assert_eq!(s, 200, "{b}");

    // Counting buffered bytes only, the same budget holds both events.
    let t = TestServer::start(|c| {
        over_allowance(c, Duration::ZERO);
        c.ingest.resident_allowance = ByteSize(0);
    })
    .await;
    assert_eq!(post(&t, 0).await.0, 200);
    assert_eq!(post(&t, 1).await.0, 200);
    assert_eq!(t.srv().state.ingest.admission().uncounted_bytes(), 0);
}

#[tokio::test]
async fn a_request_without_room_waits_for_a_flush_and_is_admitted() {
    let t = TestServer::start(|c| over_allowance(c, Duration::from_secs(60))).await;
    let ingest = t.srv().state.ingest.clone();
    assert_eq!(post(&t, 0).await.0, 200);
    let waiting = tokio::spawn({
        let (http, url, token) = (t.http.clone(), t.url("/v1/batch"), t.seeded.token.clone());
        async move { post_with(&http, url, &token, 1).await }
    });
    let waits = common::wait_for(Duration::from_secs(30), || async {
        ingest.admission().waiting() == 1
    })
    .await;
    assert!(waits, "the second request waits for room");
    assert!(!waiting.is_finished());
    t.flush().await;
    let (s, b) = waiting.await.unwrap();
    assert_eq!(s, 200, "admitted once the flush made room: {b}");
    assert_eq!(ingest.admission().waiting(), 0);
}
