//! Durability in process: dedup (also across a restart), a panicking actor rebuilt from the WAL,
//! an object-store outage ending in 503s and no loss, read-after-write, WAL segment deletion.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::{TestServer, seed, wait_for};
use object_store::ObjectStore;
use object_store::memory::InMemory;
use serde_json::json;
use stowage::model::TeamId;
use stowage::store::faulty::FaultyStore;

#[tokio::test]
async fn duplicate_message_ids_are_stored_once_also_across_a_restart() {
    let mut t = TestServer::start(|_| {}).await;
    let ev = json!({"event": "order", "messageId": "order-1", "properties": {"n": 1}});
    assert_eq!(t.send(ev.clone()).await, "order-1");
    assert_eq!(
        t.send(ev.clone()).await,
        "order-1",
        "a retry is acknowledged with the same id"
    );
    t.send(json!({"event": "order", "messageId": "order-2"}))
        .await;
    t.restart(|_| {}).await; // graceful: commits, and the ids are still in the WAL
    assert_eq!(t.send(ev.clone()).await, "order-1");
    t.flush().await;
    let rows = t.rows(&t.element("order", None)).await;
    let ids: Vec<&str> = rows.iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(ids, vec!["order-1", "order-2"]);

    // Another team may use the same id.
    let other = seed(t.catalog(), "team-b");
    let (status, _) = t.send_as(&other.token, &ev.to_string(), &[]).await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn a_panicking_team_actor_is_rebuilt_from_the_wal_and_others_go_on() {
    let t = TestServer::start(|_| {}).await;
    let b = seed(t.catalog(), "team-b");
    for i in 0..5 {
        t.send(json!({"event": "e", "messageId": format!("a{i}")}))
            .await;
        let (s, _) = t
            .send_as(
                &b.token,
                &json!({"event": "e", "messageId": format!("b{i}")}).to_string(),
                &[],
            )
            .await;
        assert_eq!(s, 200);
    }
    let team_a = TeamId::from(t.seeded.team.as_str());
    t.srv().state.ingest.crash_team_actor(&team_a);
    // The buffered a0..a4 were only in the dead actor's memory and the WAL.
    for i in 5..8 {
        t.send(json!({"event": "e", "messageId": format!("a{i}")}))
            .await;
        let (s, _) = t
            .send_as(
                &b.token,
                &json!({"event": "e", "messageId": format!("b{i}")}).to_string(),
                &[],
            )
            .await;
        assert_eq!(s, 200, "the other team keeps ingesting");
    }
    t.flush().await;
    let rows = t.rows(&t.element("e", None)).await;
    let ids: Vec<&str> = rows.iter().map(|r| r["id"].as_str().unwrap()).collect();
    let want: Vec<String> = (0..8).map(|i| format!("a{i}")).collect();
    assert_eq!(ids, want, "every event of the crashed team, once, in order");
    let snap = t
        .catalog()
        .snapshot(&TeamId::from(b.team.as_str()), "e")
        .unwrap()
        .unwrap();
    assert_eq!(snap.files.iter().map(|f| f.rows).sum::<u64>(), 8);
}

#[tokio::test]
async fn object_store_outage_ends_in_503s_and_loses_nothing() {
    let store = Arc::new(FaultyStore::new(Arc::new(InMemory::new())));
    let t = TestServer::start_on(
        |c| {
            c.flush.max_rows = 5;
            c.flush.retry_backoff.0 = Duration::from_millis(20);
            c.ingest.team_budget.0 = 20_000;
            c.ingest.global_budget.0 = 20_000;
        },
        Some(store.clone() as Arc<dyn ObjectStore>),
    )
    .await;
    store.fail_writes(true);
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
        let status = resp.status().as_u16();
        match status {
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
    assert!(store.failed_puts() > 0, "flushes were attempted and failed");
    let before = t.srv().state.ingest.admission().global_bytes();
    assert!(
        before <= 20_000 + 1_000,
        "memory stays within the budget: {before}"
    );

    store.fail_writes(false); // the store comes back; flushes retry by themselves
    let drained = wait_for(Duration::from_secs(20), || async {
        t.srv().state.ingest.admission().global_bytes() == 0
    })
    .await;
    assert!(drained, "buffers committed after the outage");
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

#[tokio::test]
async fn wait_committed_holds_the_response_until_the_file_is_committed() {
    let t = TestServer::start(|c| c.flush.interval.0 = Duration::from_millis(100)).await;
    let element = t.element("rw", None);
    let (status, body) = t
        .send_as(
            &t.seeded.token,
            &json!({"event": "rw", "messageId": "w1"}).to_string(),
            &[("X-Stowage-Wait", "committed")],
        )
        .await;
    assert_eq!(status, 200, "{body}");
    // No flush call: the response itself promised the data is readable now.
    let rows = t.rows(&element).await;
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["id"], json!("w1"));
    let (status, body) = t
        .send_as(
            &t.seeded.token,
            &json!({"event": "rw"}).to_string(),
            &[("X-Stowage-Wait", "soonish")],
        )
        .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("invalid_header"))
    );
}

#[tokio::test]
async fn wal_segments_are_deleted_once_committed() {
    let t = TestServer::start(|c| c.wal.segment_size.0 = 4096).await;
    let wal_dir = t.dir.path().join("wal");
    let count = || common::wal_segments(&wal_dir);
    for i in 0..200 {
        t.send(json!({"event": "seg", "properties": {"i": i, "pad": "p".repeat(50)}}))
            .await;
    }
    assert!(count() > 5, "small segments rotated: {}", count());
    t.flush().await;
    let collected = wait_for(Duration::from_secs(10), || async { count() <= 1 }).await;
    assert!(
        collected,
        "committed segments were not deleted: {}",
        count()
    );
    assert_eq!(t.rows(&t.element("seg", None)).await.len(), 200);
}

#[tokio::test]
async fn buffered_ack_mode_acknowledges_and_stores() {
    let t = TestServer::start(|c| c.ingest.ack = stowage::config::AckMode::Buffered).await;
    for i in 0..50 {
        t.send(json!({"event": "buf", "messageId": format!("b{i}")}))
            .await;
    }
    t.flush().await;
    assert_eq!(t.rows(&t.element("buf", None)).await.len(), 50);
}

#[tokio::test]
async fn orphan_objects_are_collected_and_committed_files_kept() {
    let t = TestServer::start(|_| {}).await;
    t.send(json!({"event": "kept", "properties": {"v": 1}}))
        .await;
    t.flush().await;
    let store = t.srv().state.store.clone();
    let orphan =
        object_store::path::Path::from("teams/tm_x/tables/kept/date=2024-01-01/orphan.parquet");
    object_store::ObjectStoreExt::put(&store, &orphan, b"half-written".to_vec().into())
        .await
        .unwrap();
    let catalog = t.srv().state.catalog.clone();
    // A long grace keeps a young orphan (it could be a flush about to commit).
    let n =
        stowage::warehouse::gc::collect_orphans(&store, &catalog, "", Duration::from_secs(3600))
            .await
            .unwrap();
    assert_eq!(n, 0);
    let n = stowage::warehouse::gc::collect_orphans(&store, &catalog, "", Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(n, 1, "the orphan is deleted once past the grace period");
    assert!(
        object_store::ObjectStoreExt::head(&store, &orphan)
            .await
            .is_err()
    );
    assert_eq!(
        t.rows(&t.element("kept", None)).await.len(),
        1,
        "committed files are untouched"
    );

    // /metrics answers in Prometheus text with the WAL and flush series, on its own listener
    // (not the public one).
    let public = t.http.get(t.url("/metrics")).send().await.unwrap();
    assert_eq!(public.status(), 404, "/metrics is not on the public port");
    let text = common::get_text(&t.http, &t.srv().metrics_url()).await;
    for series in [
        "stowage_wal_fsync_seconds",
        "stowage_wal_batch_entries",
        "stowage_wal_bytes_pending",
        "stowage_flush_seconds",
        "stowage_http_requests_total",
    ] {
        assert!(
            text.contains(series),
            "{series} missing from /metrics:\n{text}"
        );
    }
}

#[tokio::test]
async fn a_restart_during_an_outage_does_not_hold_up_other_teams() {
    let store = Arc::new(FaultyStore::new(Arc::new(InMemory::new())));
    let t = TestServer::start_on(
        |c| {
            c.flush.max_rows = 1; // every event starts a flush
            c.flush.retry_backoff.0 = Duration::from_millis(20);
        },
        Some(store.clone() as Arc<dyn ObjectStore>),
    )
    .await;
    store.fail_writes(true);
    t.send(json!({"event": "e", "messageId": "a1"})).await;
    let ingest = &t.srv().state.ingest;
    // Team A's flush is now retrying against the failing store, holding A's flush lock.
    assert!(
        wait_for(Duration::from_secs(10), || async {
            store.failed_puts() > 0
        })
        .await
    );
    ingest.crash_team_actor(&TeamId::from(t.seeded.team.as_str()));
    t.send(json!({"event": "e", "messageId": "a2"})).await;
    // Team B is new: its actor must start although A's replacement waits for A's flush.
    let b = seed(t.catalog(), "team-b");
    let (s, _) = t
        .send_as(
            &b.token,
            &json!({"event": "e", "messageId": "b1"}).to_string(),
            &[],
        )
        .await;
    assert_eq!(s, 200);
    let both = wait_for(Duration::from_secs(10), || async {
        ingest.active_teams() == 2
    })
    .await;
    assert!(
        both,
        "team B got no actor while team A was rebuilding: {}",
        ingest.active_teams()
    );
    store.fail_writes(false);
    t.flush().await;
    let ids: Vec<String> = t
        .rows(&t.element("e", None))
        .await
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        ids,
        vec!["a1", "a2"],
        "team A's events, once each, in order"
    );
}
