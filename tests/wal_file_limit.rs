//! Buffered acknowledgements under a file-size limit, with the real binary: `ulimit -f` stops
//! the first WAL segment at 512 KiB while eight clients send ~900 KiB of events with
//! `ingest.ack = "buffered"`. The failed write is cut off, the log moves to a new segment by
//! itself, and every acknowledged event — including those acknowledged in the failing batch —
//! is stored exactly once; events refused meanwhile are stored when retried.

use crate::common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use common::ids;
use common::process::{self, download, send};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wal_write_error_loses_no_buffered_acknowledgement() {
    let dir = tempfile::tempdir().unwrap();
    let env = [("STOWAGE_INGEST__ACK", "buffered")];
    // SIGXFSZ left at its default here: the server ignores it itself, so writing past the
    // limit fails with EFBIG instead of killing it.
    let limited = ["bash", "-c", "ulimit -f 512; exec \"$0\" \"$@\""];
    let proc = process::try_start_wrapped(dir.path(), &env, &limited)
        .await
        .unwrap_or_else(|log| panic!("server did not start:\n{log}"));
    let http = reqwest::Client::new();
    let acked: Arc<Mutex<Vec<String>>> = Arc::default();
    let refused: Arc<Mutex<Vec<String>>> = Arc::default();
    let mut clients = Vec::new();
    for c in 0..8 {
        let (http, demo) = (http.clone(), proc.demo.clone());
        let (acked, refused) = (acked.clone(), refused.clone());
        clients.push(tokio::spawn(async move {
            for n in 0..100 {
                let id = format!("c{c}-{n}");
                let body = json!({"event": "Limited", "messageId": id,
                                  "properties": {"pad": "x".repeat(1000)}});
                match send(&http, &demo, &body).await {
                    Some(200) => acked.lock().unwrap().push(id),
                    Some(503) => refused.lock().unwrap().push(id),
                    other => panic!("unexpected {other:?}"),
                }
            }
        }));
    }
    for c in clients {
        c.await.unwrap();
    }
    let log = proc.log_text();
    assert!(
        log.contains("WAL write failed"),
        "the limit was hit:\n{log}"
    );
    assert_eq!(proc.sigterm(), 0);

    let proc = process::start(dir.path(), &[]).await;
    let refused = refused.lock().unwrap().clone();
    for id in &refused {
        let body = json!({"event": "Limited", "messageId": id, "properties": {"pad": "retry"}});
        assert_eq!(send(&http, &proc.demo, &body).await, Some(200));
    }
    assert_eq!(proc.sigterm(), 0);
    let proc = process::start(dir.path(), &[]).await;
    let tracks = download(&http, &proc.demo, "element_id").await;
    assert_eq!(proc.sigterm(), 0);

    let mut counts: HashMap<String, usize> = HashMap::new();
    for id in ids(&tracks) {
        *counts.entry(id).or_default() += 1;
    }
    let acked = acked.lock().unwrap();
    eprintln!(
        "{} acknowledged, {} refused and retried",
        acked.len(),
        refused.len()
    );
    let lost: Vec<_> = acked
        .iter()
        .filter(|id| !counts.contains_key(*id))
        .collect();
    assert!(
        lost.is_empty(),
        "{} of {} acknowledged events lost: {:?}",
        lost.len(),
        acked.len(),
        &lost[..lost.len().min(5)]
    );
    let twice: Vec<_> = counts.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "stored twice: {twice:?}");
    assert_eq!(
        counts.len(),
        800,
        "every event stored once, refused ones after their retry"
    );
}
