//! Parquet passthrough (issue 11): a Parquet download of a whole table copies the stored row
//! groups (`X-Stowage-Parquet: passthrough`) and reads, in pyarrow, DuckDB and polars, exactly
//! like the decode path's download of the same table (forced with a filter that matches every
//! row: `X-Stowage-Parquet: encode`); files written before a column was added or widened are
//! decoded and encoded into the same response; anything that selects rows or columns takes the
//! decode path.

use crate::common;

use std::process::Command;

use common::TestServer;
use serde_json::{Value, json};

/// A Parquet download: the `x-stowage-parquet` header and the body.
async fn parquet(
    t: &TestServer,
    element: &str,
    body: Value,
    headers: &[(&str, &str)],
) -> (String, Vec<u8>) {
    let mut b = json!({"canvasId": t.seeded.canvas, "elementId": element, "format": "parquet"});
    b.as_object_mut()
        .unwrap()
        .extend(body.as_object().unwrap().clone());
    let raw = reqwest::Client::builder().no_gzip().build().unwrap();
    let mut req = raw
        .post(t.url("/data/table"))
        .header("x-api-key", &t.seeded.key)
        .body(b.to_string());
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = req.send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(
        resp.headers()["content-type"],
        "application/vnd.apache.parquet"
    );
    let how = resp.headers()["x-stowage-parquet"]
        .to_str()
        .unwrap()
        .to_string();
    (how, resp.bytes().await.unwrap().to_vec())
}

/// Matches every row, so the download takes the decode path.
fn everything() -> Value {
    json!({"filters": [{"column": "id", "op": "not_null"}]})
}

/// Runs the Python checker on the two downloads; returns its description of the first.
fn compare(passthrough: &[u8], encoded: &[u8]) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (
        dir.path().join("copied.parquet"),
        dir.path().join("encoded.parquet"),
    );
    std::fs::write(&a, passthrough).unwrap();
    std::fs::write(&b, encoded).unwrap();
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/py/check_parquet_passthrough.py"
    );
    let out = Command::new(common::python())
        .arg(script)
        .arg(&a)
        .arg(&b)
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "passthrough and decode path disagree:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Row groups of the stored files of `table`.
fn stored_row_groups(t: &TestServer, table: &str) -> usize {
    use parquet::file::reader::{FileReader, SerializedFileReader};
    common::parquet_files(t.dir.path())
        .into_iter()
        .filter(|p| p.to_string_lossy().contains(&format!("/tables/{table}/")))
        .map(|p| {
            let f = std::fs::File::open(p).unwrap();
            SerializedFileReader::new(f).unwrap().num_row_groups()
        })
        .sum()
}

/// Sends `n` events of `name` from `first`, each with `props(i)`, then flushes (one file).
async fn flush_of(t: &TestServer, name: &str, first: i64, n: i64, props: impl Fn(i64) -> Value) {
    for i in first..first + n {
        t.send(json!({"event": name, "messageId": format!("{name}-{i}"), "properties": props(i),
                      "timestamp": format!("2024-03-{:02}T08:{:02}:{:02}.{:03}Z", 1 + i % 28, i % 60, i % 59, i * 7 % 1000)}))
            .await;
    }
    t.flush().await;
}

/// Same properties in the same order in every event, so every file has the table's schema.
fn steady(i: i64) -> Value {
    json!({"amount": i * 1_000_003, "label": format!("row \"{i}\"\n日本"), "ratio": i as f64 / 3.0,
           "vip": i % 4 == 0})
}

#[tokio::test]
async fn a_whole_table_is_copied_and_reads_like_the_decode_path() {
    let t = TestServer::start(|c| {
        c.parquet.row_group_rows = 4;
        c.download.batch_rows = 3;
    })
    .await;
    let mut first = 0;
    for n in [10, 7, 1, 9] {
        flush_of(&t, "steady", first, n, steady).await;
        first += n;
    }
    let element = t.element("steady", None);
    let (how, copied) = parquet(&t, &element, json!({}), &[]).await;
    assert_eq!(how, "passthrough");
    let (how, encoded) = parquet(&t, &element, everything(), &[]).await;
    assert_eq!(how, "encode");
    let seen = compare(&copied, &encoded);
    assert_eq!(seen["rows"], 27);
    assert_eq!(
        seen["columns"],
        json!([
            "id",
            "event",
            "event_text",
            "timestamp",
            "received_at",
            "amount",
            "label",
            "ratio",
            "vip"
        ])
    );
    // The stored row groups of 4 rows, copied with their statistics and page index (the
    // decode path's encoder writes no column index) — except the 1-row file, smaller than one
    // read batch, which is encoded.
    let groups: Vec<(u64, bool)> = seen["row_groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            assert_eq!(g["stats"], true, "{g}");
            (g["rows"].as_u64().unwrap(), g["column_index"] == true)
        })
        .collect();
    let copied_groups = [(4, true), (4, true), (2, true), (4, true), (3, true)];
    let tail = [(1, false), (4, true), (4, true), (1, true)];
    assert_eq!(groups, [&copied_groups[..], &tail[..]].concat());
    assert_eq!(stored_row_groups(&t, "steady"), 9);

    // The same bytes through zstd, and when Accept picks the format.
    let (how, zstd) = parquet(&t, &element, json!({}), &[("Accept-Encoding", "zstd")]).await;
    assert_eq!(how, "passthrough");
    assert_eq!(zstd::decode_all(&zstd[..]).unwrap(), copied);
    let mut b = json!({"canvasId": t.seeded.canvas, "elementId": element});
    let resp = t
        .http
        .post(t.url("/data/table"))
        .header("x-api-key", &t.seeded.key)
        .header("Accept", "application/vnd.apache.parquet")
        .body(b.take().to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.headers()["x-stowage-parquet"], "passthrough");
    assert_eq!(resp.bytes().await.unwrap().to_vec(), copied);

    // An element that lists every column in table order is the whole table too.
    let all = [
        "id",
        "event",
        "event_text",
        "timestamp",
        "received_at",
        "amount",
        "label",
        "ratio",
        "vip",
    ];
    let listed = t.element("steady", Some(&all[..]));
    let (how, body) = parquet(&t, &listed, json!({}), &[]).await;
    assert_eq!((how.as_str(), body == copied), ("passthrough", true));
    let (how, body) = parquet(&t, &element, json!({"columns": all}), &[]).await;
    assert_eq!((how.as_str(), body == copied), ("passthrough", true));
}

#[tokio::test]
async fn files_from_before_a_column_was_added_or_widened_are_encoded_into_the_same_file() {
    let t = TestServer::start(|c| {
        c.parquet.row_group_rows = 3;
        c.download.batch_rows = 2;
    })
    .await;
    // amount int64, no `zflag` yet: decoded.
    flush_of(
        &t,
        "widened",
        0,
        5,
        |i| json!({"amount": i, "label": "old"}),
    )
    .await;
    // amount widened to float64, `zflag` added: these files have the table's schema.
    let newer = |i: i64| json!({"amount": i as f64 + 0.5, "label": "new", "zflag": i % 2 == 0});
    flush_of(&t, "widened", 5, 7, newer).await;
    // A float64 column holding an integer float64 cannot represent is stored as text: decoded.
    flush_of(&t, "widened", 12, 2, |i| {
        json!({"amount": if i == 12 { json!(9007199254740993i64) } else { json!(0.25) },
               "label": "text", "zflag": true})
    })
    .await;
    flush_of(&t, "widened", 14, 4, newer).await;
    let element = t.element("widened", None);
    let (how, copied) = parquet(&t, &element, json!({}), &[]).await;
    assert_eq!(how, "passthrough");
    let (_, encoded) = parquet(&t, &element, everything(), &[]).await;
    let seen = compare(&copied, &encoded);
    assert_eq!(seen["rows"], 18);
    let groups: Vec<(u64, bool)> = seen["row_groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| (g["rows"].as_u64().unwrap(), g["column_index"] == true))
        .collect();
    // Encoded (no column index): the 5 old rows; copied: 3+3+1; encoded: 2; copied: 3+1.
    assert_eq!(
        groups,
        [
            (5, false),
            (3, true),
            (3, true),
            (1, true),
            (2, false),
            (3, true),
            (1, true)
        ]
    );
    // The JSON download agrees on the values the readers compared.
    let rows = t.rows(&element).await;
    assert_eq!(rows[0]["amount"], json!(0.0));
    assert_eq!(rows[12]["amount"], json!(9007199254740992.0));
    assert_eq!(rows[4]["zflag"], Value::Null);
}

#[tokio::test]
async fn files_smaller_than_a_read_batch_share_encoded_row_groups() {
    let t = TestServer::start(|c| {
        c.parquet.row_group_rows = 4;
        c.download.batch_rows = 5;
    })
    .await;
    let mut first = 0;
    for n in [2, 3, 1, 6, 4, 4, 9] {
        flush_of(&t, "steady", first, n, steady).await;
        first += n;
    }
    let element = t.element("steady", None);
    let (how, copied) = parquet(&t, &element, json!({}), &[]).await;
    assert_eq!(how, "passthrough");
    let (_, encoded) = parquet(&t, &element, everything(), &[]).await;
    let seen = compare(&copied, &encoded);
    let groups: Vec<(u64, bool)> = seen["row_groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| (g["rows"].as_u64().unwrap(), g["column_index"] == true))
        .collect();
    // 2+3+1 encoded together, 6 copied (4+2), 4+4 encoded together, 9 copied (4+4+1).
    assert_eq!(
        groups,
        [
            (6, false),
            (4, true),
            (2, true),
            (8, false),
            (4, true),
            (4, true),
            (1, true)
        ]
    );
}

#[tokio::test]
async fn anything_that_selects_rows_or_columns_takes_the_decode_path() {
    let t = TestServer::start(|c| c.parquet.row_group_rows = 4).await;
    flush_of(&t, "steady", 0, 6, steady).await;
    let element = t.element("steady", None);
    for body in [
        everything(),
        json!({"filters": [{"column": "amount", "op": "gt", "value": 0}]}),
        json!({"columns": ["id", "amount"]}),
        json!({"columns": ["event", "id", "event_text", "timestamp", "received_at", "amount", "label", "ratio", "vip"]}),
        json!({"limit": 100}),
    ] {
        let (how, _) = parquet(&t, &element, body.clone(), &[]).await;
        assert_eq!(how, "encode", "{body}");
    }
    let subset = t.element("steady", Some(&["id", "label"]));
    assert_eq!(parquet(&t, &subset, json!({}), &[]).await.0, "encode");
    let limited = t
        .catalog()
        .create_element(&stowage::catalog::NewElement {
            canvas: t.seeded.canvas.clone(),
            table: "steady".into(),
            limit: Some(3),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(parquet(&t, &limited, json!({}), &[]).await.0, "encode");
    let filtered = t
        .catalog()
        .create_element(&stowage::catalog::NewElement {
            canvas: t.seeded.canvas.clone(),
            table: "steady".into(),
            filters: Some(json!([{"column": "vip", "op": "eq", "value": true}])),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(parquet(&t, &filtered, json!({}), &[]).await.0, "encode");
    // Other formats never say.
    let resp = t
        .http
        .post(t.url("/data/table"))
        .header("x-api-key", &t.seeded.key)
        .body(
            json!({"canvasId": t.seeded.canvas, "elementId": element, "format": "arrow"})
                .to_string(),
        )
        .send()
        .await
        .unwrap();
    assert!(resp.headers().get("x-stowage-parquet").is_none());
}

#[tokio::test]
async fn an_empty_table_and_a_missing_object() {
    let t = TestServer::start(|c| {
        c.parquet.row_group_rows = 4;
        c.download.batch_rows = 2;
    })
    .await;
    // No data yet: the known columns and no rows, either way.
    let tracks = t.element("tracks", None);
    let (how, copied) = parquet(&t, &tracks, json!({}), &[]).await;
    assert_eq!(how, "passthrough");
    let (_, encoded) = parquet(&t, &tracks, everything(), &[]).await;
    assert_eq!(compare(&copied, &encoded)["rows"], 0);

    // A stored object that has gone: the body is cut off, never a short file that looks whole.
    for first in [0, 8, 16] {
        flush_of(&t, "steady", first, 8, steady).await;
    }
    let element = t.element("steady", None);
    let mut files: Vec<_> = common::parquet_files(t.dir.path())
        .into_iter()
        .filter(|p| p.to_string_lossy().contains("/tables/steady/"))
        .collect();
    files.sort(); // uuid v7 names: commit order
    std::fs::remove_file(files.last().unwrap()).unwrap();
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
    assert_eq!(resp.status(), 200);
    assert!(resp.bytes().await.is_err(), "the transfer is aborted");
}
