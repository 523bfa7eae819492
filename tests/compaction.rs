//! Compaction: merged files keep row order; a download and a cursor that started on the old
//! snapshot finish correctly after the swap; retired objects go only after the grace period.

use crate::common;

use common::ids;

use std::time::Duration;

use common::TestServer;
use serde_json::{Value, json};
use stowage::config::CompactionConfig;
use stowage::model::TeamId;
use stowage::warehouse::compaction::Compactor;

#[tokio::test]
async fn compaction_under_a_slow_download_and_a_paging_cursor() {
    let t = TestServer::start(|c| {
        c.compaction.enabled = false; // driven by hand below
        c.download.batch_rows = 5;
    })
    .await;
    for f in 0..30 {
        for i in 0..20 {
            let n = f * 20 + i;
            let props = if n % 2 == 0 {
                json!({"n": n, "pad": "x".repeat(400)})
            } else {
                json!({"n": n as f64 + 0.5})
            };
            t.send(json!({"event": "c", "messageId": format!("c{n:04}"), "properties": props}))
                .await;
        }
        t.flush().await; // one small file per flush
    }
    let element = t.element("c", None);
    let (_, before) = t.download(&element, json!({})).await;
    assert_eq!(ids(&before).len(), 600);
    let team = TeamId::from(t.seeded.team.as_str());
    let files_before = t
        .catalog()
        .snapshot(&team, "c")
        .unwrap()
        .unwrap()
        .files
        .len();
    assert_eq!(files_before, 30);

    // A slow download: the first chunk only, then compaction, then the rest.
    let mut resp = t
        .http
        .post(t.url("/data/table"))
        .header("x-api-key", &t.seeded.key)
        .body(json!({"canvasId": t.seeded.canvas, "elementId": element}).to_string())
        .send()
        .await
        .unwrap();
    let mut body = resp.chunk().await.unwrap().unwrap().to_vec();
    // And a cursor from before the swap.
    let (_, page1) = t.download(&element, json!({"limit": 100})).await;

    let compactor = Compactor {
        catalog: t.srv().state.catalog.clone(),
        store: t.srv().state.store.clone(),
        prefix: String::new(),
        parquet: Default::default(),
        cfg: CompactionConfig {
            min_files: 8,
            ..Default::default()
        },
    };
    let stats = compactor.compact_once().await.unwrap();
    assert!(
        stats.merged >= 60,
        "both tables' 30 files merged: {stats:?}"
    );
    assert_eq!(
        compactor
            .delete_retired(Duration::from_secs(3600))
            .await
            .unwrap(),
        0,
        "grace keeps old objects"
    );

    while let Some(chunk) = resp.chunk().await.unwrap() {
        body.extend_from_slice(&chunk);
    }
    let during: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        during, before,
        "the in-flight download is the full, correct table"
    );

    let mut paged = ids(&page1);
    let mut cursor = page1["next_cursor"].clone();
    while let Some(c) = cursor.as_str() {
        let (status, page) = t
            .download(&element, json!({"limit": 100, "cursor": c}))
            .await;
        assert_eq!(status, 200, "{page}");
        paged.extend(ids(&page));
        cursor = page["next_cursor"].clone();
    }
    assert_eq!(
        paged,
        ids(&before),
        "a cursor from before the swap reads its own snapshot"
    );

    let files_after = t
        .catalog()
        .snapshot(&team, "c")
        .unwrap()
        .unwrap()
        .files
        .len();
    assert_eq!(files_after, 1, "30 small files became one");
    let (_, after) = t.download(&element, json!({})).await;
    assert_eq!(after, before, "downloads are unchanged, row order included");
    assert_eq!(
        compactor.compact_once().await.unwrap().merged,
        0,
        "nothing left to merge"
    );

    // Past the grace period the old objects go, and so does the old snapshot.
    assert_eq!(compactor.delete_retired(Duration::ZERO).await.unwrap(), 60);
    let (status, doc) = t
        .download(
            &element,
            json!({"limit": 100, "cursor": page1["next_cursor"]}),
        )
        .await;
    assert_eq!(
        (status, doc["error"]["code"].as_str()),
        (410, Some("cursor_expired")),
        "{doc}"
    );
    let (_, again) = t.download(&element, json!({})).await;
    assert_eq!(again, before);
}

/// Several nodes compacting the same catalog at once (here two writers, each with its own
/// catalog connection as another process would have): every partition is merged exactly once —
/// one takes each partition's lease, the other skips it — and no row is lost or repeated.
#[tokio::test(flavor = "multi_thread")]
async fn two_compactors_at_once_merge_each_partition_once() {
    two_compactors_at_once(String::new()).await;
}

/// The same on a PostgreSQL catalog (leases and swaps under its write lock).
#[tokio::test(flavor = "multi_thread")]
async fn two_compactors_at_once_merge_each_partition_once_on_postgres() {
    two_compactors_at_once(common::pg::database_url()).await;
}

/// `catalog_url`: empty for SQLite under the data dir.
async fn two_compactors_at_once(catalog_url: String) {
    let url = catalog_url.clone();
    let t = TestServer::start(move |c| {
        c.compaction.enabled = false;
        c.catalog.url = url;
    })
    .await;
    for f in 0..12 {
        for i in 0..5 {
            let n = f * 5 + i;
            for table in ["p", "q"] {
                t.send(
                    json!({"event": table, "messageId": format!("{table}{n:03}"),
                              "properties": {"n": n}}),
                )
                .await;
            }
        }
        t.flush().await;
    }
    let location =
        stowage::catalog::Location::from_url(&catalog_url, t.dir.path().join("catalog.sqlite"))
            .unwrap();
    let compactor = |catalog| Compactor {
        catalog,
        store: t.srv().state.store.clone(),
        prefix: String::new(),
        parquet: Default::default(),
        cfg: CompactionConfig {
            min_files: 4,
            ..Default::default()
        },
    };
    let a = compactor(std::sync::Arc::new(
        stowage::catalog::Catalog::open_location(&location).unwrap(),
    ));
    let b = compactor(std::sync::Arc::new(
        stowage::catalog::Catalog::open_location(&location).unwrap(),
    ));
    let (sa, sb) = tokio::join!(a.compact_once(), b.compact_once());
    let (sa, sb) = (sa.unwrap(), sb.unwrap());
    // Three tables (p, q and `tracks`, which every track event also goes to), one partition
    // each, twelve files each.
    assert_eq!(
        sa.written + sb.written,
        3,
        "one merged file per partition: {sa:?} {sb:?}"
    );
    assert_eq!(
        sa.merged + sb.merged,
        36,
        "all 12 files of each table, once"
    );
    assert_eq!(
        (sa.lost, sb.lost),
        (0, 0),
        "no merge done twice and thrown away"
    );
    let team = TeamId::from(t.seeded.team.as_str());
    assert_eq!(
        t.catalog()
            .snapshot(&team, "tracks")
            .unwrap()
            .unwrap()
            .files
            .len(),
        1
    );
    for table in ["p", "q"] {
        let snap = t.catalog().snapshot(&team, table).unwrap().unwrap();
        assert_eq!(snap.files.len(), 1, "{table}: one live file");
        let element = t.element(table, None);
        let (_, doc) = t.download(&element, json!({})).await;
        let want: Vec<String> = (0..60).map(|n| format!("{table}{n:03}")).collect();
        assert_eq!(ids(&doc), want, "{table}: every row once, in order");
    }
}
