//! Single events of one team submitted together (`ingest.gather_single`): each keeps its own
//! answer — a duplicate id, a limit one event passes, the rest stored — and its own receive
//! time in the WAL, so a restart after `kill -9` rebuilds the very rows it had; an event with
//! nothing of its team in flight, or of a team whose submissions held too few, goes on its own.
//!
//! The in-process tests submit through the library's `Ingest::submit` on one thread: the first
//! event goes on its own and, it being in flight, every later one is queued before the task
//! that takes them runs, so one submission holds them, which HTTP requests racing on two
//! workers would only make likely. What comes out is read back over HTTP from the real
//! warehouse.

use crate::common;

use std::sync::Arc;

use bytes::Bytes;
use common::TestServer;
use serde_json::{Value, json};
use stowage::catalog::{Change, SettingsChange};
use stowage::ingest::event::parse_event;
use stowage::ingest::{Accepted, IngestError, Wait};
use stowage::model::TeamId;

/// Submits `bodies` at once, each with its own receive time; the answers in order.
async fn submit_together(srv: &TestServer, bodies: &[Value]) -> Vec<Result<Accepted, IngestError>> {
    let ingest = srv.srv().state.ingest.clone();
    let team = TeamId(Arc::from(srv.seeded.team.as_str()));
    let base = chrono::Utc::now();
    let futures = bodies.iter().enumerate().map(|(i, body)| {
        let (ingest, team) = (ingest.clone(), team.clone());
        let text = Bytes::from(body.to_string());
        // Receive times a millisecond apart: a gathered submission must not give them one.
        let received_at = base + chrono::Duration::milliseconds(i as i64);
        async move {
            let rows = parse_event(&text, received_at, 1000).expect("a valid event");
            ingest
                .submit(&team, rows, text, received_at.timestamp_micros(), Wait::Ack)
                .await
        }
    });
    futures::future::join_all(futures).await
}

fn event(id: &str, name: &str, n: usize) -> Value {
    json!({"event": name, "messageId": id, "properties": {"n": n}})
}

/// `n` events named `name`, with ids of their own for round `round`.
fn events(name: &str, round: usize, n: usize) -> Vec<Value> {
    (0..n)
        .map(|i| event(&format!("{name}-{round}-{i}"), name, i))
        .collect()
}

#[tokio::test]
async fn events_submitted_together_keep_their_own_answers() {
    let srv = TestServer::start(|_| {}).await;
    let mut bodies: Vec<Value> = (0..40)
        .map(|i| event(&format!("g-{i}"), "Gathered", i))
        .collect();
    // The same id five times among them, with different properties: stored once.
    for (k, at) in [3, 11, 12, 25, 39].into_iter().enumerate() {
        bodies[at] = event("same-id", "Gathered", 1000 + k);
    }
    let before = srv.srv().state.ingest.gather_counts();
    let answers = submit_together(&srv, &bodies).await;
    let after = srv.srv().state.ingest.gather_counts();
    // The first goes on its own (nothing of the team's is in flight yet); it being in flight,
    // the second is gathered and the rest join it: one submission of the 35 with ids of their
    // own, the 4 repeats of an id after it, alone.
    let delta = (
        after.submissions - before.submissions,
        after.events - before.events,
        after.alone - before.alone,
        after.direct - before.direct,
    );
    assert_eq!(delta, (1, 35, 4, 1), "{before:?} -> {after:?}");

    let stored = answers
        .iter()
        .filter(|a| matches!(a, Ok(Accepted::Stored)))
        .count();
    let duplicates = answers
        .iter()
        .filter(|a| matches!(a, Ok(Accepted::Duplicate)))
        .count();
    assert_eq!((stored, duplicates), (36, 4), "{answers:?}");

    // The buffered rows die with the team's actor; its successor rebuilds them from the WAL
    // records, each read with the receive time its record keeps.
    let team = TeamId::from(srv.seeded.team.as_str());
    srv.srv().state.ingest.crash_team_actor(&team);
    // The next event starts its successor, which rebuilds first.
    srv.send(event("after", "Gathered", 0)).await;
    srv.flush().await;
    let element = srv.element("gathered", None);
    let mut rows = srv.rows(&element).await;
    rows.retain(|r| r["id"] != "after");
    assert_eq!(rows.len(), 36);
    let same: Vec<&Value> = rows.iter().filter(|r| r["id"] == "same-id").collect();
    assert_eq!(same.len(), 1, "{same:?}");
    // The first of the five was stored (the others waited for its outcome).
    assert_eq!(same[0]["n"], json!(1000), "{same:?}");
    // Each row has its own receive time, one of the 40 distinct ones (with one time for a
    // submission, all would have the latest).
    let mut times: Vec<i64> = rows
        .iter()
        .map(|r| common::micros(&r["received_at"]))
        .collect();
    times.sort();
    times.dedup();
    assert_eq!(times.len(), 36, "receive times: {times:?}");
}

#[tokio::test]
async fn a_limit_in_a_gathered_submission_refuses_only_its_event() {
    // `tracks` and `known` are two tables; two more fit.
    let srv = TestServer::start(|c| c.limits.tables_per_team = 4).await;
    srv.send(event("first", "Known", 0)).await;
    let mut bodies: Vec<Value> = (0..30)
        .map(|i| event(&format!("k-{i}"), "Known", i))
        .collect();
    bodies.extend((0..10).map(|i| event(&format!("new-{i}"), &format!("New {i}"), i)));
    let before = srv.srv().state.ingest.gather_counts();
    let answers = submit_together(&srv, &bodies).await;
    let after = srv.srv().state.ingest.gather_counts();
    // The first event went on its own (nothing of the team's was in flight), the other 39
    // in one submission, refused and sent on one by one.
    assert!(
        after.alone - before.alone >= 39,
        "the refused submission's events went on their own: {before:?} -> {after:?}"
    );

    // Every event of a known table is stored, as it would have been on its own.
    for (i, a) in answers[..30].iter().enumerate() {
        assert!(matches!(a, Ok(Accepted::Stored)), "event {i}: {a:?}");
    }
    // Of the ten new tables, two fit; the others are refused with the limit.
    let new = &answers[30..];
    let fit = new.iter().filter(|a| a.is_ok()).count();
    let refused = new
        .iter()
        .filter(|a| {
            matches!(
                a,
                Err(IngestError::Append(
                    stowage::ingest::team::AppendError::TooManyTables(4)
                ))
            )
        })
        .count();
    assert_eq!((fit, refused), (2, 8), "{new:?}");

    srv.flush().await;
    let known = srv.element("known", None);
    assert_eq!(srv.rows(&known).await.len(), 31);
    let tracks = srv.element("tracks", None);
    assert_eq!(srv.rows(&tracks).await.len(), 31 + 2);
}

#[tokio::test]
async fn turned_off_each_event_is_submitted_on_its_own() {
    let srv = TestServer::start(|c| c.ingest.gather_single = false).await;
    let bodies: Vec<Value> = (0..20)
        .map(|i| event(&format!("o-{i}"), "Alone", i))
        .collect();
    let answers = submit_together(&srv, &bodies).await;
    assert!(answers.iter().all(|a| matches!(a, Ok(Accepted::Stored))));
    let counts = srv.srv().state.ingest.gather_counts();
    assert_eq!((counts.submissions, counts.events), (0, 0), "{counts:?}");
    srv.flush().await;
    let element = srv.element("alone", None);
    assert_eq!(srv.rows(&element).await.len(), 20);
}

#[tokio::test]
async fn gathered_events_each_take_from_the_rate_limit() {
    let mut srv = TestServer::start(|_| {}).await;
    let keep = Change::Keep;
    let change = SettingsChange {
        flush_interval_ms: keep,
        flush_max_rows: keep,
        flush_max_bytes: keep,
        budget_bytes: keep,
        rate_per_sec: Change::Set(0.001),
        rate_burst: Change::Set(10),
    };
    srv.catalog()
        .set_team_settings(&srv.seeded.team, change)
        .unwrap();
    srv.restart(|_| {}).await; // reads the team's settings at start
    let bodies: Vec<Value> = (0..30)
        .map(|i| event(&format!("r-{i}"), "Rated", i))
        .collect();
    let answers = submit_together(&srv, &bodies).await;
    let stored = answers.iter().filter(|a| a.is_ok()).count();
    let limited = answers
        .iter()
        .filter(|a| matches!(a, Err(IngestError::RateLimited(_))))
        .count();
    // A burst of ten: ten stored, as ten requests on their own would be, and twenty refused.
    assert_eq!((stored, limited), (10, 20), "{answers:?}");
    srv.flush().await;
    let element = srv.element("rated", None);
    assert_eq!(srv.rows(&element).await.len(), 10);
}

#[tokio::test]
async fn a_segment_single_call_is_routed_and_a_one_message_batch_keeps_its_index() {
    let srv = TestServer::start(|c| c.limits.tables_per_team = 2).await;
    let post = |path: &str, body: Value| {
        srv.http
            .post(srv.url(path))
            .header("X-Auth-Token", &srv.seeded.token)
            .header("Content-Type", "application/json")
            .body(body.to_string())
            .send()
    };
    let before = srv.srv().state.ingest.gather_counts();
    let msg = json!({"userId": "u1", "event": "Known", "messageId": "seg-1"});
    let (status, body) = common::status_json(post("/v1/track", msg).await.unwrap()).await;
    assert_eq!(status, 200, "{body}");
    let after = srv.srv().state.ingest.gather_counts();
    let routed = |c: stowage::ingest::GatherCounts| c.events + c.direct;
    assert_eq!(routed(after) - routed(before), 1, "{before:?} -> {after:?}");

    // `tracks` and `known` are the two tables allowed: a batch of one message naming a third
    // is refused with that message's index, as any batch is.
    let other = json!({"type": "track", "userId": "u1", "event": "Other", "messageId": "seg-2"});
    let resp = post("/v1/batch", json!({ "batch": [other] }))
        .await
        .unwrap();
    let (status, body) = common::status_json(resp).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["errors"][0]["index"], json!(0), "{body}");
    assert_eq!(
        body["error"]["errors"][0]["code"],
        json!("too_many_tables"),
        "{body}"
    );
    let last = srv.srv().state.ingest.gather_counts();
    assert_eq!(routed(last), routed(after), "a batch is not gathered");
}

#[tokio::test]
async fn events_one_at_a_time_go_on_their_own() {
    let srv = TestServer::start(|_| {}).await;
    let before = srv.srv().state.ingest.gather_counts();
    for i in 0..5 {
        srv.send(event(&format!("one-{i}"), "One", i)).await;
    }
    let after = srv.srv().state.ingest.gather_counts();
    // Nothing of the team's was in flight when each arrived: nothing to gather with.
    assert_eq!(after.direct - before.direct, 5, "{before:?} -> {after:?}");
    assert_eq!(after.submissions, before.submissions, "{after:?}");
}

#[tokio::test]
async fn a_team_whose_submissions_hold_few_goes_on_its_own() {
    let srv = TestServer::start(|_| {}).await;
    let three = |round: usize| events("Few", round, 3);
    let start = srv.srv().state.ingest.gather_counts();
    // The first alone, the other two gathered: a submission of two.
    let answers = submit_together(&srv, &three(0)).await;
    assert!(answers.iter().all(|a| matches!(a, Ok(Accepted::Stored))));
    let after = srv.srv().state.ingest.gather_counts();
    assert_eq!(
        (
            after.submissions - start.submissions,
            after.events - start.events
        ),
        (1, 2),
        "{start:?} -> {after:?}"
    );
    // Two is too few to pay: the next three go on their own, though one is in flight.
    let answers = submit_together(&srv, &three(1)).await;
    assert!(answers.iter().all(|a| matches!(a, Ok(Accepted::Stored))));
    let last = srv.srv().state.ingest.gather_counts();
    assert_eq!(last.submissions, after.submissions, "{after:?} -> {last:?}");
    assert_eq!(last.direct - after.direct, 3, "{after:?} -> {last:?}");
    srv.flush().await;
    let element = srv.element("few", None);
    assert_eq!(srv.rows(&element).await.len(), 6);
}

/// One small submission among large ones does not stop gathering: whether gathering pays is
/// judged by a moving mean of a team's submissions, so a busy team's next events are still
/// gathered after a submission of two (by the last submission's size alone, the next 64 would
/// go on their own).
#[tokio::test]
async fn one_small_submission_among_large_ones_keeps_gathering() {
    let srv = TestServer::start(|_| {}).await;
    let batch = |round: usize, n: usize| events("Mean", round, n);
    let start = srv.srv().state.ingest.gather_counts();
    // A large submission (the first alone, 30 gathered), then a small one (1 alone, 2).
    submit_together(&srv, &batch(0, 31)).await;
    submit_together(&srv, &batch(1, 3)).await;
    let small = srv.srv().state.ingest.gather_counts();
    assert_eq!(
        (
            small.submissions - start.submissions,
            small.events - start.events
        ),
        (2, 32),
        "{start:?} -> {small:?}"
    );
    // The next events are gathered again: the first alone, the other three together.
    let answers = submit_together(&srv, &batch(2, 4)).await;
    assert!(answers.iter().all(|a| matches!(a, Ok(Accepted::Stored))));
    let last = srv.srv().state.ingest.gather_counts();
    assert_eq!(
        (
            last.submissions - small.submissions,
            last.events - small.events,
            last.direct - small.direct
        ),
        (1, 3, 1),
        "{small:?} -> {last:?}"
    );
    srv.flush().await;
    assert_eq!(srv.rows(&srv.element("mean", None)).await.len(), 38);
}

/// A run of small submissions after a large one stops gathering: the large one counts for at
/// most a few events in the mean.
#[tokio::test]
async fn a_run_of_small_submissions_after_a_large_one_stops_gathering() {
    let srv = TestServer::start(|_| {}).await;
    let batch = |round: usize, n: usize| events("Run", round, n);
    // A large submission, then two of two (each round's first event goes alone).
    submit_together(&srv, &batch(0, 31)).await;
    submit_together(&srv, &batch(1, 3)).await;
    submit_together(&srv, &batch(2, 3)).await;
    let small = srv.srv().state.ingest.gather_counts();
    // Now every event of the next round goes on its own.
    let answers = submit_together(&srv, &batch(3, 3)).await;
    assert!(answers.iter().all(|a| matches!(a, Ok(Accepted::Stored))));
    let last = srv.srv().state.ingest.gather_counts();
    assert_eq!(
        (
            last.submissions - small.submissions,
            last.direct - small.direct
        ),
        (0, 3),
        "{small:?} -> {last:?}"
    );
    srv.flush().await;
    assert_eq!(srv.rows(&srv.element("run", None)).await.len(), 40);
}
