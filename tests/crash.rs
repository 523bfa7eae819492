//! Crashes of the real binary: `kill -9` at random points under concurrent load loses no
//! acknowledged event and stores none twice; a torn WAL tail is cut and reported; corruption in
//! the middle of the WAL stops start-up with the file and offset unless told to truncate.

use crate::common;

use common::ids;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use common::process::{self, download, send};
use serde_json::{Value, json};

/// A small pseudo-random number from the clock (no extra dependency; the exact value does not
/// matter, only that kill points differ).
fn jitter(max_ms: u64) -> u64 {
    let n = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos() as u64;
    n.wrapping_mul(6364136223846793005).rotate_left(17) % max_ms
}

/// Ids acknowledged to the clients.
type Acked = Arc<Mutex<HashSet<String>>>;

/// `rounds` times: starts the server, runs `clients` copies of `client` (given the demo, the
/// round and its number) against it, and kills it with `kill -9` at a random point; each client
/// returns once the server is gone. Then recovers, shuts down gracefully so everything is
/// committed, and starts it once more: the server to read from.
async fn crash_rounds<F, Fut>(
    dir: &std::path::Path,
    env: &[(&str, &str)],
    rounds: usize,
    clients: usize,
    client: F,
) -> process::Proc
where
    F: Fn(Value, usize, usize) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    for round in 0..rounds {
        let proc = process::start(dir, env).await;
        let tasks: Vec<_> = (0..clients)
            .map(|c| tokio::spawn(client(proc.demo.clone(), round, c)))
            .collect();
        tokio::time::sleep(Duration::from_millis(250 + jitter(600))).await;
        proc.kill9();
        for t in tasks {
            t.await.unwrap();
        }
    }
    let proc = process::start(dir, env).await;
    assert_eq!(proc.sigterm(), 0);
    process::start(dir, env).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_loses_no_acknowledged_event_and_duplicates_none() {
    let dir = tempfile::tempdir().unwrap();
    let env = [
        ("STOWAGE_FLUSH__INTERVAL", "150ms"),
        ("STOWAGE_WAL__SEGMENT_SIZE", "32KiB"),
    ];
    let acked: Acked = Arc::default();
    let http = reqwest::Client::new();
    let proc = crash_rounds(dir.path(), &env, 4, 4, |demo, round, c| {
        let (http, acked) = (http.clone(), acked.clone());
        async move {
            let mut last: Option<String> = None;
            for n in 0..100_000 {
                // Every 7th request retries the previous id, as a tracker would.
                let id = match &last {
                    Some(prev) if n % 7 == 0 => prev.clone(),
                    _ => format!("r{round}-c{c}-{n}"),
                };
                let body = json!({"event": "Crash Test", "messageId": id, "properties": {"round": round, "n": n}});
                match send(&http, &demo, &body).await {
                    Some(200) => {
                        acked.lock().unwrap().insert(id.clone());
                        last = Some(id);
                    }
                    Some(_) => {}
                    None => return, // the server is gone
                }
            }
        }
    })
    .await;
    let tracks = download(&http, &proc.demo, "element_id").await;
    assert_eq!(proc.sigterm(), 0);

    let acked = acked.lock().unwrap();
    assert!(
        acked.len() > 100,
        "the test drove real load: {} acked",
        acked.len()
    );
    assert_stored_once("tracks", &tracks, &acked);
}

/// Every id in `acked` is in the downloaded `table` exactly once.
fn assert_stored_once(table: &str, doc: &Value, acked: &HashSet<String>) {
    let mut counts: HashMap<String, usize> = HashMap::new();
    for id in ids(doc) {
        *counts.entry(id).or_default() += 1;
    }
    let missing: Vec<_> = acked
        .iter()
        .filter(|id| !counts.contains_key(*id))
        .collect();
    assert!(
        missing.is_empty(),
        "{table}: {} acknowledged events lost, e.g. {:?}",
        missing.len(),
        &missing[..missing.len().min(5)]
    );
    let twice: Vec<_> = counts.iter().filter(|(_, n)| **n > 1).collect();
    assert!(
        twice.is_empty(),
        "{table}: stored more than once: {:?}",
        &twice[..twice.len().min(5)]
    );
}

/// The same with Segment batches: small ones, whose events the team actor appends one by one,
/// and large ones, whose rows of large tables are built into batches on the request's task and
/// reach the actor whole with the events of small tables (`ingest::bulk`), some of them retried
/// whole, some sharing a context (so both kinds of WAL record replay: envelopes and the
/// messages as sent). `tracks` and the event table hold every acknowledged event exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_during_batches_loses_and_duplicates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let env = [
        ("STOWAGE_FLUSH__INTERVAL", "150ms"),
        ("STOWAGE_WAL__SEGMENT_SIZE", "64KiB"),
    ];
    let acked: Acked = Arc::default();
    let http = reqwest::Client::new();
    let proc = crash_rounds(dir.path(), &env, 3, 3, |demo, round, c| {
        let (http, acked) = (http.clone(), acked.clone());
        async move {
            let mut last: Vec<String> = Vec::new();
            for n in 0..100_000 {
                // Every 5th batch retries the previous one whole.
                let ids: Vec<String> = if n % 5 == 4 {
                    last.clone()
                } else {
                    // A large batch: its refunds and tracks rows are built into batches, its
                    // few purchases go to the actor one by one. A small one: refunds, all to
                    // the actor.
                    let size = if n % 2 == 0 { 100 } else { 5 };
                    (0..size)
                        .map(|i| {
                            let kind = if i % 10 == 9 { "p" } else { "r" };
                            format!("b{round}-c{c}-{n}-{i}-{kind}")
                        })
                        .collect()
                };
                let batch: Vec<Value> = ids
                    .iter()
                    .map(|id| {
                        let event = if id.ends_with("-r") {
                            "Refund"
                        } else {
                            "Purchased an Item"
                        };
                        json!({"type": "track", "event": event,
                               "userId": "u", "messageId": id, "properties": {"n": n}})
                    })
                    .collect();
                // Every 3rd batch shares a context with its messages: those are logged as
                // envelopes, the others as the messages sent (sliced out of the body).
                let body = if n % 3 == 0 {
                    json!({"writeKey": demo["events_token"], "context": {"ip": "10.1.2.3"},
                           "batch": batch})
                } else {
                    json!({"writeKey": demo["events_token"], "batch": batch})
                };
                let sent = http
                    .post(format!("{}/v1/batch", demo["events_url"].as_str().unwrap()))
                    .header("Content-Type", "application/json")
                    .body(body.to_string())
                    .send()
                    .await;
                match sent.map(|r| r.status().as_u16()) {
                    Ok(200) => {
                        acked.lock().unwrap().extend(ids.iter().cloned());
                        last = ids;
                    }
                    Ok(_) => {}
                    Err(_) => return, // the server is gone
                }
            }
        }
    })
    .await;
    let tracks = download(&http, &proc.demo, "element_id").await;
    let purchases = download(&http, &proc.demo, "event_element_id").await;
    assert_eq!(proc.sigterm(), 0);

    let acked = acked.lock().unwrap();
    assert!(acked.len() > 500, "real load: {} acked", acked.len());
    assert_stored_once("tracks", &tracks, &acked);
    let purchased = acked.iter().filter(|id| id.ends_with("-p")).cloned();
    assert_stored_once("purchased_an_item", &purchases, &purchased.collect());
    // Each row has the shared context of the batch that first carried it, or none: replayed
    // envelopes and replayed messages alike (a retry is a duplicate of an acknowledged batch).
    for row in tracks["data"].as_array().unwrap() {
        let id = row["id"].as_str().unwrap();
        let n: u64 = id.split('-').nth(2).unwrap().parse().unwrap();
        let expected = if n.is_multiple_of(3) {
            json!("10.1.2.3")
        } else {
            Value::Null
        };
        assert_eq!(
            row.get("context_ip").unwrap_or(&Value::Null),
            &expected,
            "{row}"
        );
    }
}

/// Sends `n` events with ids `{prefix}{i}` and returns once all are acknowledged.
async fn send_all(http: &reqwest::Client, demo: &Value, prefix: &str, n: usize) {
    for i in 0..n {
        let body = json!({"event": "w", "messageId": format!("{prefix}{i}")});
        assert_eq!(send(http, demo, &body).await, Some(200));
    }
}

fn newest_segment(dir: &std::path::Path) -> std::path::PathBuf {
    let mut segs: Vec<_> = std::fs::read_dir(dir.join("wal"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "wal"))
        .collect();
    segs.sort();
    segs.pop().unwrap()
}

#[tokio::test]
async fn torn_wal_tail_is_cut_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    let http = reqwest::Client::new();
    let proc = process::start(dir.path(), &[]).await;
    send_all(&http, &proc.demo, "t", 10).await;
    proc.kill9();
    // A crash mid-write: the last record lost its final bytes — cut off an appended segment,
    // still zeros in a pre-allocated one.
    let seg = newest_segment(dir.path());
    let mut data = std::fs::read(&seg).unwrap();
    let end = data.iter().rposition(|b| *b != 0).unwrap() + 1;
    if end == data.len() {
        data.truncate(end - 5);
    } else {
        data[end - 5..end].fill(0);
    }
    std::fs::write(&seg, &data).unwrap();

    let proc = process::start(dir.path(), &[]).await;
    let log = proc.log_text();
    assert!(log.contains("torn tail"), "recovery reports the cut: {log}");
    assert_eq!(proc.sigterm(), 0);
    let proc = process::start(dir.path(), &[]).await;
    let got = ids(&download(&http, &proc.demo, "element_id").await);
    proc.sigterm();
    let want: Vec<String> = (0..9).map(|i| format!("t{i}")).collect();
    assert_eq!(got, want, "everything before the torn record, once");
}

#[tokio::test]
async fn corrupt_record_mid_log_stops_startup_unless_told_to_truncate() {
    let dir = tempfile::tempdir().unwrap();
    let http = reqwest::Client::new();
    let proc = process::start(dir.path(), &[]).await;
    send_all(&http, &proc.demo, "c", 10).await;
    proc.kill9();
    let seg = newest_segment(dir.path());
    let mut data = std::fs::read(&seg).unwrap();
    data[12] ^= 0xff; // inside the first record's payload; nine good records follow
    std::fs::write(&seg, &data).unwrap();

    let err = process::try_start(dir.path(), &[])
        .await
        .err()
        .expect("start-up must stop");
    let name = seg.file_name().unwrap().to_str().unwrap();
    assert!(
        err.contains(name) && err.contains("offset 0"),
        "names file and offset: {err}"
    );
    assert!(
        err.contains("STOWAGE_WAL__RECOVERY=truncate"),
        "says how to proceed: {err}"
    );

    let proc = process::start(dir.path(), &[("STOWAGE_WAL__RECOVERY", "truncate")]).await;
    assert!(
        proc.log_text().contains("dropped"),
        "reports what was dropped"
    );
    assert_eq!(proc.sigterm(), 0);
}

/// The value of a counter in `/metrics`.
async fn metric(http: &reqwest::Client, proc: &process::Proc, name: &str) -> f64 {
    let text = common::get_text(http, &proc.metrics_url()).await;
    text.lines()
        .find(|l| l.starts_with(name) && l[name.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap_or(0.0)
}

#[tokio::test]
async fn idle_restarts_never_cost_the_live_segment() {
    let dir = tempfile::tempdir().unwrap();
    let http = reqwest::Client::new();
    // A run without events leaves an empty segment behind, which the next run used to reopen
    // and then collect as if it were an old one: the live file.
    assert_eq!(process::start(dir.path(), &[]).await.sigterm(), 0);
    let proc = process::start(dir.path(), &[]).await;
    send_all(&http, &proc.demo, "i", 20).await;
    // Let segment collection run a few times over the live segment before the crash.
    let runs = metric(&http, &proc, "stowage_wal_gc_runs_total").await;
    while metric(&http, &proc, "stowage_wal_gc_runs_total").await < runs + 3.0 {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    proc.kill9();
    let proc = process::start(dir.path(), &[]).await;
    assert_eq!(proc.sigterm(), 0);
    let proc = process::start(dir.path(), &[]).await;
    let got = ids(&download(&http, &proc.demo, "element_id").await);
    proc.sigterm();
    assert_eq!(got, (0..20).map(|i| format!("i{i}")).collect::<Vec<_>>());
}
