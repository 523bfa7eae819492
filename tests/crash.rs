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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_loses_no_acknowledged_event_and_duplicates_none() {
    let dir = tempfile::tempdir().unwrap();
    let env = [
        ("STOWAGE_FLUSH__INTERVAL", "150ms"),
        ("STOWAGE_WAL__SEGMENT_SIZE", "32KiB"),
    ];
    let acked: Arc<Mutex<HashSet<String>>> = Arc::default();
    let http = reqwest::Client::new();
    for round in 0..4 {
        let proc = process::start(dir.path(), &env).await;
        let mut clients = Vec::new();
        for c in 0..4 {
            let (http, demo, acked) = (http.clone(), proc.demo.clone(), acked.clone());
            clients.push(tokio::spawn(async move {
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
            }));
        }
        tokio::time::sleep(Duration::from_millis(250 + jitter(600))).await;
        proc.kill9();
        for c in clients {
            c.await.unwrap();
        }
    }
    // A clean run: recover, then shut down gracefully so everything is committed.
    let proc = process::start(dir.path(), &env).await;
    assert_eq!(proc.sigterm(), 0);
    let proc = process::start(dir.path(), &env).await;
    let tracks = download(&http, &proc.demo, "element_id").await;
    assert_eq!(proc.sigterm(), 0);

    let mut counts: HashMap<String, usize> = HashMap::new();
    for id in ids(&tracks) {
        *counts.entry(id).or_default() += 1;
    }
    let acked = acked.lock().unwrap();
    assert!(
        acked.len() > 100,
        "the test drove real load: {} acked",
        acked.len()
    );
    let missing: Vec<_> = acked
        .iter()
        .filter(|id| !counts.contains_key(*id))
        .collect();
    assert!(
        missing.is_empty(),
        "{} acknowledged events lost, e.g. {:?}",
        missing.len(),
        &missing[..missing.len().min(5)]
    );
    let twice: Vec<_> = counts.iter().filter(|(_, n)| **n > 1).collect();
    assert!(
        twice.is_empty(),
        "stored more than once: {:?}",
        &twice[..twice.len().min(5)]
    );
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
    let text = http
        .get(proc.metrics_url())
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
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
