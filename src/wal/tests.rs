//! The log end to end: concurrent appends share commit groups, keep their numbering and order,
//! and are all read back — across pre-allocated and appended segments — by recovery.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::mpsc;

use super::*;
use crate::model::TeamId;

fn entry(n: u32) -> Entry<u32> {
    Entry {
        team: TeamId::from("tm_test"),
        flags: record::FLAG_CLIENT_ID,
        received_at: 1_700_000_000_000_000 + i64::from(n),
        id: format!("id-{n}"),
        body: Bytes::from(format!(
            "{{\"event\":\"e\",\"n\":{n},\"pad\":\"{}\"}}",
            "x".repeat(200)
        )),
        payload: n,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_appends_share_groups_and_all_come_back() {
    let dir = tempfile::tempdir().unwrap();
    let recovered = recover(dir.path(), crate::config::RecoveryPolicy::Strict).unwrap();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let opts = WalOptions {
        dir: dir.path().to_path_buf(),
        sync_interval: Duration::ZERO,
        batch_bytes: 1 << 20,
        group_wait: Duration::from_micros(250),
        // Small segments: the run rotates through several, pre-allocated once a spare is ready.
        segment_size: 64 << 10,
    };
    let wal = Arc::new(Wal::start(opts, &recovered, 0, None, tx));
    let (clients, each) = (32u32, 40u32);
    let mut tasks = Vec::new();
    for c in 0..clients {
        let wal = wal.clone();
        tasks.push(tokio::spawn(async move {
            let mut seqs = Vec::new();
            for k in 0..each {
                let receipt = wal
                    .append(Append::one(entry(c * each + k), true))
                    .unwrap()
                    .expect("a waited append has a receipt");
                receipt.group.wait().await.unwrap();
                seqs.push(receipt.last_seq);
            }
            seqs
        }));
    }
    let mut acked = Vec::new();
    for t in tasks {
        acked.extend(t.await.unwrap());
    }
    let total = (clients * each) as usize;
    acked.sort_unstable();
    assert_eq!(
        acked,
        (1..=total as u64).collect::<Vec<_>>(),
        "each append its own number"
    );
    let mut delivered = Vec::new();
    while delivered.len() < total {
        delivered.extend(rx.recv().await.unwrap());
    }
    assert!(
        delivered.windows(2).all(|w| w[0].seq < w[1].seq),
        "handed on in sequence order"
    );
    let fsyncs = wal.stats.fsyncs.load(Ordering::Relaxed);
    assert!(
        fsyncs < total as u64,
        "{fsyncs} fsyncs for {total} appends: no group was shared"
    );

    // The client ids each segment collected as it was written (a chunk a group, moved in whole)
    // archive to every id, in order.
    let segments = wal.segments.lock().unwrap().clone();
    assert!(
        segments
            .iter()
            .any(|s| s.ids.as_ref().is_some_and(|i| i.chunks.len() > 1)),
        "a segment holds several groups' ids"
    );
    let archive = ids::IdArchive::new(dir.path(), Duration::from_secs(3600), usize::MAX);
    let now = 1_700_000_000_000_000 + i64::from(clients * each);
    for seg in &segments {
        archive.archive(seg, now).unwrap();
    }
    let mut archived = Vec::new();
    archive.load(now, |r| archived.push(r.seq)).unwrap();
    assert_eq!(archived, (1..=total as u64).collect::<Vec<_>>());

    // Read back as after a crash (the writer never closed its segment): every record, in order,
    // and nothing reported dropped — a pre-allocated segment's zero tail is not damage.
    let again = recover(dir.path(), crate::config::RecoveryPolicy::Strict).unwrap();
    assert_eq!(again.dropped, Vec::<String>::new());
    let seqs: Vec<u64> = again.records.iter().map(|r| r.seq).collect();
    assert_eq!(seqs, (1..=total as u64).collect::<Vec<_>>());
    assert!(again.segments.len() > 1, "the run rotated segments");
    wal.close();
    // A closed log leaves no spare behind, and its last segment trimmed to its records.
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(!names.iter().any(|n| n.ends_with(".tmp")), "{names:?}");
    let after = recover(dir.path(), crate::config::RecoveryPolicy::Strict).unwrap();
    assert_eq!(after.records.len(), total);
}

#[tokio::test]
async fn a_closed_log_refuses_appends() {
    let dir = tempfile::tempdir().unwrap();
    let recovered = recover(dir.path(), crate::config::RecoveryPolicy::Strict).unwrap();
    let (tx, _rx) = mpsc::unbounded_channel();
    let opts = WalOptions {
        dir: dir.path().to_path_buf(),
        sync_interval: Duration::ZERO,
        batch_bytes: 1 << 20,
        group_wait: Duration::ZERO,
        segment_size: 1 << 20,
    };
    let wal = Wal::start(opts, &recovered, 0, None, tx);
    wal.close();
    assert!(matches!(
        wal.append(Append::one(entry(1), true)),
        Err(WalError::Closed)
    ));
}

#[tokio::test]
async fn a_dead_writer_fails_what_waits_instead_of_leaving_it_hanging() {
    let queue = group::Queue::<u32>::new(1);
    let first = queue
        .push(Append::one(entry(1), true), true)
        .unwrap()
        .unwrap();
    // The writer took the first group and died while writing it; a second append queued since.
    let taken = queue.take(None, None, 1 << 20);
    assert_eq!(taken.appends.len(), 1);
    let second = queue
        .push(Append::one(entry(2), true), true)
        .unwrap()
        .unwrap();
    queue.abandon();
    assert!(matches!(first.group.wait().await, Err(WalError::Closed)));
    assert!(matches!(second.group.wait().await, Err(WalError::Closed)));
    assert!(matches!(
        queue.push(Append::one(entry(3), true), true),
        Err(WalError::Closed)
    ));
}
