//! The S3 warehouse against a real S3-compatible server (moto, `tests/common/s3.rs`):
//! conditional create answers 412 there and is never an overwrite; large files go up in parts;
//! ingestion, download, compaction, Parquet import and orphan collection work on a bucket, with
//! the service in-process and as the real binary; the server going away gives 503s and loses
//! nothing once it is back.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use common::process::{self, download, send};
use common::s3::Moto;
use common::{TestServer, ids, wait_for};
use futures::TryStreamExt;
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions};
use serde_json::json;
use stowage::config::{CompactionConfig, Config};
use stowage::model::TeamId;
use stowage::warehouse::compaction::Compactor;

/// Every object key in the store, sorted.
async fn keys(store: &Arc<dyn ObjectStore>) -> Vec<String> {
    let mut keys: Vec<String> = store
        .list(None)
        .map_ok(|m| m.location.to_string())
        .try_collect()
        .await
        .unwrap();
    keys.sort();
    keys
}

/// The bucket keys of every committed file of `tables`, sorted.
fn committed(t: &TestServer, tables: &[&str]) -> Vec<String> {
    let team = TeamId::from(t.seeded.team.as_str());
    let mut keys: Vec<String> = tables
        .iter()
        .filter_map(|table| t.catalog().snapshot(&team, table).unwrap())
        .flat_map(|s| s.files)
        .map(|f| format!("wh/{}", f.path))
        .collect();
    keys.sort();
    keys
}

#[tokio::test]
async fn conditional_create_answers_412_and_never_overwrites() {
    let moto = Moto::start("stowage-cc").await;
    // The server itself: a second `If-None-Match: *` PUT of a key answers 412.
    let http = reqwest::Client::new();
    let url = format!("{}/{}/raw.bin", moto.endpoint(), moto.bucket);
    // Signed-looking: moto answers an anonymous PUT to an existing key 403 before any
    // precondition, and does not verify signatures.
    let auth = "AWS4-HMAC-SHA256 Credential=k/20250101/us-east-1/s3/aws4_request, \
                SignedHeaders=host, Signature=0";
    let put = || {
        http.put(&url)
            .header("Authorization", auth)
            .header("If-None-Match", "*")
            .body("one")
            .send()
    };
    assert_eq!(put().await.unwrap().status(), 200);
    assert_eq!(
        put().await.unwrap().status(),
        412,
        "moto honours If-None-Match"
    );

    // object_store's S3 backend, as stowage opens it: `PutMode::Create` answers AlreadyExists.
    let mut config = Config::default();
    moto.configure(&mut config, "wh");
    let store = Moto::store(&config);
    let path = Path::from("teams/t/tables/x/date=2024-01-01/a.parquet");
    let create = PutOptions {
        mode: PutMode::Create,
        ..Default::default()
    };
    store
        .put_opts(&path, "first".into(), create.clone())
        .await
        .unwrap();
    let again = store.put_opts(&path, "second".into(), create).await;
    assert!(
        matches!(again, Err(object_store::Error::AlreadyExists { .. })),
        "{again:?}"
    );

    // stowage's create: a retry finding its own bytes is done; other bytes are refused.
    stowage::store::create(store.as_ref(), &path, Bytes::from("first"))
        .await
        .unwrap();
    let err = stowage::store::create(store.as_ref(), &path, Bytes::from("other"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("refusing to overwrite"), "{err}");
    let kept = store.get(&path).await.unwrap().bytes().await.unwrap();
    assert_eq!(kept, "first", "the existing object is untouched");
    // The URL's prefix is a prefix inside the bucket.
    assert_eq!(
        keys(&moto.bucket_store()).await,
        vec!["raw.bin".to_string(), format!("wh/{path}")]
    );
}

#[tokio::test]
async fn large_files_go_up_in_parts_and_are_not_overwritten() {
    let moto = Moto::start("stowage-mp").await;
    let mut config = Config::default();
    moto.configure(&mut config, "");
    config.storage.s3_multipart_threshold.0 = 4096;
    config.storage.s3_multipart_part_size.0 = 1024;
    let store = Moto::store(&config);
    let data: Bytes = (0..5000u32)
        .map(|i| (i % 251) as u8)
        .collect::<Vec<_>>()
        .into();
    let path = Path::from("big.parquet");
    stowage::store::create(store.as_ref(), &path, data.clone())
        .await
        .unwrap();
    assert_eq!(store.get(&path).await.unwrap().bytes().await.unwrap(), data);
    // A multipart object's ETag ends in "-<parts>": 5000 bytes in 1024-byte parts is 5.
    let etag = store.head(&path).await.unwrap().e_tag.unwrap();
    assert!(etag.trim_matches('"').ends_with("-5"), "{etag}");
    // Same bytes again (a retry): done; other bytes: refused, the object kept.
    stowage::store::create(store.as_ref(), &path, data.clone())
        .await
        .unwrap();
    let other: Bytes = vec![7u8; 5000].into();
    let err = stowage::store::create(store.as_ref(), &path, other)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("refusing to overwrite"), "{err}");
    assert_eq!(store.get(&path).await.unwrap().bytes().await.unwrap(), data);
    // Below the threshold: one plain PUT (an MD5 ETag, no part count).
    let small = Path::from("small.parquet");
    stowage::store::create(store.as_ref(), &small, Bytes::from(vec![1u8; 4095]))
        .await
        .unwrap();
    let etag = store.head(&small).await.unwrap().e_tag.unwrap();
    assert!(!etag.contains('-'), "{etag}");
}

#[tokio::test]
async fn flush_download_compaction_import_and_orphans_on_s3() {
    let moto = Moto::start("stowage-wh").await;
    let mut config = Config::default();
    moto.configure(&mut config, "wh");
    let configure = |c: &mut Config| {
        moto.configure(c, "wh");
        c.compaction.enabled = false; // driven by hand below
        // Flushed files are a few KiB: most go up in parts.
        c.storage.s3_multipart_threshold.0 = 2048;
        c.storage.s3_multipart_part_size.0 = 1024;
    };
    configure(&mut config);
    let t = TestServer::start_on(configure, Some(Moto::store(&config))).await;
    let mut sent = Vec::new();
    for i in 0..30 {
        sent.push(t.send(json!({"event": "s", "messageId": format!("m{i:02}"), "properties": {"n": i, "pad": "x".repeat(300)}})).await);
        if i % 10 == 9 {
            t.flush().await; // one file per 10 rows
        }
    }
    let element = t.element("s", None);
    let (status, doc) = t.download(&element, json!({})).await;
    assert_eq!(status, 200, "{doc}");
    assert_eq!(ids(&doc), sent, "every event, in order, read back from S3");
    let team = TeamId::from(t.seeded.team.as_str());
    let files = t.catalog().snapshot(&team, "s").unwrap().unwrap().files;
    assert_eq!(files.len(), 3, "one file per 10 rows");
    let bucket = moto.bucket_store();
    let on_s3 = keys(&bucket).await;
    for f in &files {
        assert!(
            on_s3.contains(&format!("wh/{}", f.path)),
            "{f:?} in {on_s3:?}"
        );
        let etag = bucket.head(&Path::from(format!("wh/{}", f.path))).await;
        let etag = etag.unwrap().e_tag.unwrap();
        assert!(
            f.bytes < 2048 || etag.contains('-'),
            "{} bytes went up in parts: {etag}",
            f.bytes
        );
    }
    assert!(files.iter().any(|f| f.bytes >= 2048), "{files:?}");

    // Compaction merges the three files into one; the download is unchanged.
    let compactor = Compactor {
        catalog: t.srv().state.catalog.clone(),
        store: t.srv().state.store.clone(),
        prefix: String::new(),
        parquet: Default::default(),
        cfg: CompactionConfig {
            min_files: 2,
            ..Default::default()
        },
    };
    let stats = compactor.compact_once().await.unwrap();
    assert_eq!(
        stats.merged, 6,
        "each table's 3 files (s, tracks): {stats:?}"
    );
    compactor.delete_retired(Duration::ZERO).await.unwrap();
    let after = t.catalog().snapshot(&team, "s").unwrap().unwrap().files;
    assert_eq!(after.len(), 1);
    assert_eq!(
        keys(&bucket).await,
        committed(&t, &["s", "tracks"]),
        "the merged files only: the inputs are deleted"
    );
    assert_eq!(ids(&t.download(&element, json!({})).await.1), sent);

    // Parquet import through the CLI, which opens the bucket from config and AWS_* variables.
    let resp = t
        .http
        .post(t.url("/data/table"))
        .header("x-api-key", &t.seeded.key)
        .body(
            json!({"canvasId": t.seeded.canvas, "elementId": element, "format": "parquet"})
                .to_string(),
        )
        .send()
        .await
        .unwrap();
    let input = t.dir.path().join("in.parquet");
    std::fs::write(&input, resp.bytes().await.unwrap()).unwrap();
    let env = moto.process_env("wh");
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let team_arg = t.seeded.team.clone();
    let args = [
        "admin",
        "--json",
        "table",
        "import",
        "--team",
        &team_arg,
        "--table",
        "copy",
        input.to_str().unwrap(),
    ];
    let (ok, stats, stderr) = process::cli(t.dir.path(), &args, &env);
    assert!(ok, "{stderr}");
    assert_eq!(stats["rows"], 30, "{stats}");
    let copy = t.element("copy", None);
    assert_eq!(ids(&t.download(&copy, json!({})).await.1), sent);
    let live = committed(&t, &["s", "tracks", "copy"]);
    assert_eq!(live.len(), 3);
    assert_eq!(keys(&bucket).await, live, "the import's file is on S3");

    // Orphan collection deletes an unreserved object and keeps the committed ones.
    let store = t.srv().state.store.clone();
    let orphan = Path::from("teams/tm_x/tables/s/date=2024-01-01/orphan.parquet");
    store.put(&orphan, "half-written".into()).await.unwrap();
    let catalog = t.srv().state.catalog.clone();
    let collect = stowage::warehouse::gc::collect_orphans;
    let n = collect(&store, &catalog, "", Duration::from_secs(3600)).await;
    assert_eq!(n.unwrap(), 0, "a young orphan is kept");
    let n = collect(&store, &catalog, "", Duration::ZERO).await;
    assert_eq!(n.unwrap(), 1);
    assert!(matches!(
        store.head(&orphan).await,
        Err(object_store::Error::NotFound { .. })
    ));
    assert_eq!(keys(&bucket).await, live, "committed files kept");
    assert_eq!(ids(&t.download(&element, json!({})).await.1), sent);
    assert_eq!(ids(&t.download(&copy, json!({})).await.1), sent);
}

#[tokio::test]
async fn the_real_binary_stores_events_on_s3() {
    let moto = Moto::start("stowage-bin").await;
    let dir = tempfile::tempdir().unwrap();
    let mut env = moto.process_env("node-a");
    env.push(("STOWAGE_FLUSH__INTERVAL".into(), "100ms".into()));
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let proc = process::start(dir.path(), &env).await;
    let http = reqwest::Client::new();
    let mut sent = Vec::new();
    for i in 0..20 {
        let id = format!("b{i:02}");
        let ev = json!({"event": "Purchased an Item", "messageId": id, "properties": {"n": i}});
        assert_eq!(send(&http, &proc.demo, &ev).await, Some(200));
        sent.push(id);
    }
    let bucket = moto.bucket_store();
    // Flushed by the 100 ms timer; all 20 rows committed once the download has them.
    let landed = wait_for(Duration::from_secs(30), || async {
        keys(&bucket)
            .await
            .iter()
            .any(|k| k.starts_with("node-a/teams/"))
            && ids(&download(&http, &proc.demo, "event_element_id").await).len() == 20
    })
    .await;
    assert!(
        landed,
        "a data file under the URL's prefix:\n{}",
        proc.log_text()
    );
    let doc = download(&http, &proc.demo, "event_element_id").await;
    assert_eq!(ids(&doc), sent, "every event, in order, from S3");
    assert_eq!(proc.sigterm(), 0);
    assert!(
        common::parquet_files(dir.path()).is_empty(),
        "nothing in a local warehouse"
    );
}
