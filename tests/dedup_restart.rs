//! The dedup window survives WAL trimming and restarts, with the real binary: events are
//! committed, their (tiny) WAL segments deleted, the server restarted, and a client retries every
//! event; each is acknowledged and stored once.

use crate::common;

use std::collections::HashMap;
use std::time::Duration;

use common::process::{self, download, send};
use common::{ids, wait_for, wal_segments};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_after_a_restart_are_stored_once_when_their_segments_are_gone() {
    let dir = tempfile::tempdir().unwrap();
    let env = [
        ("STOWAGE_WAL__SEGMENT_SIZE", "1KiB"),
        ("STOWAGE_FLUSH__INTERVAL", "100ms"),
    ];
    let http = reqwest::Client::new();
    let proc = process::start(dir.path(), &env).await;
    let sent: Vec<String> = (0..30).map(|i| format!("retry-{i}")).collect();
    for id in &sent {
        let body = json!({"event": "Retried", "messageId": id, "properties": {"v": id}});
        assert_eq!(send(&http, &proc.demo, &body).await, Some(200));
    }
    let committed = wait_for(Duration::from_secs(30), || {
        let (http, demo) = (http.clone(), proc.demo.clone());
        async move { download(&http, &demo, "element_id").await["rows"] == 30 }
    })
    .await;
    assert!(committed, "the events were committed");
    // Every segment but the one being written is deleted once committed.
    let trimmed = wait_for(Duration::from_secs(30), || async {
        wal_segments(&dir.path().join("wal")) <= 1
    })
    .await;
    assert!(
        trimmed,
        "{} WAL segments left",
        wal_segments(&dir.path().join("wal"))
    );
    assert_eq!(proc.sigterm(), 0);

    // A tracker that never saw its 200s retries everything after the restart.
    let proc = process::start(dir.path(), &env).await;
    for id in &sent {
        let body = json!({"event": "Retried", "messageId": id, "properties": {"v": id}});
        assert_eq!(send(&http, &proc.demo, &body).await, Some(200));
    }
    assert_eq!(proc.sigterm(), 0); // commits whatever was buffered

    let proc = process::start(dir.path(), &env).await;
    let tracks = download(&http, &proc.demo, "element_id").await;
    assert_eq!(proc.sigterm(), 0);
    let mut counts: HashMap<String, usize> = HashMap::new();
    for id in ids(&tracks) {
        *counts.entry(id).or_default() += 1;
    }
    let twice: Vec<_> = counts.iter().filter(|(_, n)| **n > 1).collect();
    assert!(
        twice.is_empty(),
        "{} of 30 retried ids stored twice: {twice:?}",
        twice.len()
    );
    assert_eq!(ids(&tracks), sent, "every event once, in order");
}
