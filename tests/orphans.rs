//! A flush whose catalog commit keeps failing for longer than the orphan grace, with the real
//! binary: another process installs a trigger in the catalog that aborts every data-file commit,
//! while the flush's objects age past a 1 s grace and the collector runs every second. The collector must not delete objects a live flush will
//! still commit: once the lock goes, every acknowledged event is downloadable and the table
//! reads cleanly, also after a restart (when the WAL has been trimmed).

use crate::common;

use std::time::{Duration, SystemTime};

use common::process::{self, download, send};
use common::{ids, parquet_files, wait_for};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_stalled_past_the_orphan_grace_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let env = [
        ("STOWAGE_FLUSH__ORPHAN_GRACE", "1s"),
        ("STOWAGE_FLUSH__INTERVAL", "100ms"),
        ("STOWAGE_COMPACTION__ENABLED", "false"),
    ];
    let proc = process::start(dir.path(), &env).await;
    let http = reqwest::Client::new();
    // One event first, so the token's last-used time is fresh and no request needs a write.
    assert_eq!(
        send(
            &http,
            &proc.demo,
            &json!({"event": "stall", "messageId": "warm"})
        )
        .await,
        Some(200)
    );
    let warehouse = dir.path().join("warehouse");
    assert!(
        wait_for(Duration::from_secs(30), || async {
            !parquet_files(&warehouse).is_empty()
        })
        .await
    );
    let catalog = rusqlite::Connection::open(dir.path().join("catalog.sqlite")).unwrap();
    catalog.busy_timeout(Duration::from_secs(10)).unwrap();
    // Its object is put before its commit: wait for the commit too, or the stall below would
    // catch this flush instead of the next one (and hold that one back behind it).
    let committed = || {
        catalog
            .query_row("SELECT count(*) FROM data_files", [], |r| {
                r.get::<_, i64>(0)
            })
            .unwrap()
    };
    assert!(
        wait_for(Duration::from_secs(30), || async { committed() > 0 }).await,
        "the first flush never committed"
    );
    let committed_before = parquet_files(&warehouse).len();

    // Another process makes every commit of a data file fail until told otherwise: the flush
    // can reserve and put its objects, but its commit keeps failing (and retrying).
    catalog
        .execute_batch(
            "CREATE TRIGGER stall_commits BEFORE INSERT ON data_files
             BEGIN SELECT RAISE(ABORT, 'commit stalled by the test'); END;",
        )
        .unwrap();

    let mut acked = vec!["warm".to_string()];
    for i in 0..60 {
        let id = format!("stalled-{i}");
        let body = json!({"event": "stall", "messageId": id, "properties": {"i": i}});
        assert_eq!(send(&http, &proc.demo, &body).await, Some(200));
        acked.push(id);
    }
    // The flush has put its objects and is stuck at the commit.
    assert!(
        wait_for(Duration::from_secs(30), || async {
            parquet_files(&warehouse).len() > committed_before
        })
        .await,
        "the flush never wrote its objects"
    );
    let written = SystemTime::now();
    // The stall: the objects age past the grace while the collector runs every second.
    while written.elapsed().unwrap() < Duration::from_secs(4) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let during = proc.log_text();
    assert!(
        during.contains("commit stalled by the test"),
        "the commit did fail: {during}"
    );
    catalog.execute_batch("DROP TRIGGER stall_commits").unwrap();

    // The commit lands; every acknowledged event is there and the table reads cleanly.
    let complete = wait_for(Duration::from_secs(60), || {
        let (http, demo) = (http.clone(), proc.demo.clone());
        async move { download(&http, &demo, "element_id").await["rows"] == 61 }
    })
    .await;
    let tracks = download(&http, &proc.demo, "element_id").await;
    assert!(
        complete,
        "not every acknowledged event was committed: {}",
        tracks["rows"]
    );
    assert_eq!(ids(&tracks), acked);
    let log = proc.log_text();
    assert!(
        !log.contains("deleted orphan object"),
        "a live flush's object was deleted: {log}"
    );
    assert_eq!(proc.sigterm(), 0);

    // After a restart (the WAL trimmed), the same table, readable from its files alone.
    let proc = process::start(dir.path(), &env).await;
    let tracks = download(&http, &proc.demo, "element_id").await;
    assert_eq!(ids(&tracks), acked);
    assert_eq!(proc.sigterm(), 0);
}
