//! A submission whose caller goes away while its WAL write is still being fsync'd (a client
//! that disconnects, a timeout) is still settled by the real outcome: its `messageId` claim is
//! resolved — a retry is acknowledged as a duplicate and the event is stored once — and its
//! bytes go back to the budget once committed.

use crate::common;

use std::time::Duration;

use common::TestServer;
use serde_json::json;
use stowage::ingest::{Accepted, Wait};

#[tokio::test]
async fn a_cancelled_submission_still_settles_its_claim_and_budget() {
    // Each fsync waits until 400 ms after the previous one: a submission made right after a
    // write is still waiting when its caller gives up.
    let t = TestServer::start(|c| c.wal.sync_interval.0 = Duration::from_millis(400)).await;
    let ingest = t.srv().state.ingest.clone();
    let team = t.seeded.team.as_str().into();
    let event = |id: &str| {
        let body = json!({"event": "cancel", "messageId": id}).to_string();
        let rows =
            stowage::ingest::event::parse_event(body.as_bytes(), chrono::Utc::now(), 1000).unwrap();
        (rows, bytes::Bytes::from(body))
    };
    let now = || chrono::Utc::now().timestamp_micros();
    let (rows, body) = event("warm-up");
    ingest
        .submit(&team, rows, body, now(), Wait::Ack)
        .await
        .unwrap();

    let (rows, body) = event("m1");
    let gave_up = tokio::time::timeout(
        Duration::from_millis(50),
        ingest.submit(&team, rows, body, now(), Wait::Ack),
    )
    .await;
    assert!(gave_up.is_err(), "the caller gave up before the fsync");

    // The retry waits for the original's real outcome (it was stored) instead of hanging on a
    // claim nobody will settle.
    let (rows, body) = event("m1");
    let retry = tokio::time::timeout(
        Duration::from_secs(10),
        ingest.submit(&team, rows, body, now(), Wait::Ack),
    )
    .await
    .expect("the claim of the cancelled submission was settled")
    .unwrap();
    assert_eq!(retry, Accepted::Duplicate);

    t.flush().await;
    let element = t.element("cancel", None);
    let ids: Vec<String> = t
        .rows(&element)
        .await
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids, ["warm-up", "m1"]);
    assert_eq!(ingest.admission().team_bytes(&team), 0, "budget given back");
}
