//! Every download format, read by independent readers: pyarrow and DuckDB (tests/py) must agree
//! with the JSON download value for value and type for type. Also compression and negotiation.

use crate::common;

use std::io::Read;
use std::process::Command;

use common::TestServer;
use serde_json::{Value, json};

async fn fetch(
    t: &TestServer,
    element: &str,
    body: Value,
    headers: &[(&str, &str)],
) -> (u16, reqwest::header::HeaderMap, Vec<u8>) {
    let mut b = json!({"canvasId": t.seeded.canvas, "elementId": element});
    b.as_object_mut()
        .unwrap()
        .extend(body.as_object().unwrap().clone());
    // No transparent decoding: the test checks the compressed bytes itself.
    let raw = reqwest::Client::builder().no_gzip().build().unwrap();
    let mut req = raw
        .post(t.url("/data/table"))
        .header("x-api-key", &t.seeded.key)
        .body(b.to_string());
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    (status, headers, resp.bytes().await.unwrap().to_vec())
}

/// A table with every type, nulls, awkward strings and several files.
async fn varied_table(t: &TestServer) -> String {
    for i in 0..40i64 {
        let mut props = json!({
            "name": format!("row {i}, \"quoted\"\nline"),
            "count": i * 1_000_000_007,
            "ratio": (i as f64) / 7.0,
            "flag": i % 3 == 0,
            "when": "ignored-as-string",
        });
        if i % 5 == 0 {
            props["count"] = Value::Null;
            props["name"] = Value::Null;
        }
        t.send(json!({"event": "varied", "messageId": format!("v{i}"), "properties": props,
                      "timestamp": format!("2024-02-{:02}T10:{:02}:00.{:03}Z", 1 + i % 28, i % 60, i * 7 % 1000)}))
            .await;
        if i % 13 == 12 {
            t.flush().await;
        }
    }
    t.flush().await;
    t.element("varied", None)
}

#[tokio::test]
async fn pyarrow_and_duckdb_agree_with_the_json_download() {
    let t = TestServer::start(|c| c.download.batch_rows = 16).await;
    let element = varied_table(&t).await;
    let dir = tempfile::tempdir().unwrap();
    for (format, file, content_type) in [
        ("json", "table.json", "application/json"),
        ("ndjson", "table.ndjson", "application/x-ndjson"),
        ("csv", "table.csv", "text/csv; charset=utf-8"),
        (
            "arrow",
            "table.arrow",
            "application/vnd.apache.arrow.stream",
        ),
        ("parquet", "table.parquet", "application/vnd.apache.parquet"),
    ] {
        let (status, headers, body) = fetch(&t, &element, json!({"format": format}), &[]).await;
        assert_eq!(status, 200, "{format}: {}", String::from_utf8_lossy(&body));
        assert_eq!(headers["content-type"], content_type);
        std::fs::write(dir.path().join(file), body).unwrap();
    }
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/py/check_formats.py");
    let out = Command::new(common::python())
        .arg(script)
        .arg(dir.path())
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "independent readers disagree:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("all formats agree"));
}

#[tokio::test]
async fn compression_accept_negotiation_and_int64_as_string() {
    let t = TestServer::start(|_| {}).await;
    let element = varied_table(&t).await;
    let (_, _, plain) = fetch(&t, &element, json!({"format": "ndjson"}), &[]).await;

    let (status, headers, gz) = fetch(
        &t,
        &element,
        json!({"format": "ndjson"}),
        &[("Accept-Encoding", "gzip")],
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(headers["content-encoding"], "gzip");
    let mut unzipped = Vec::new();
    flate2::read::GzDecoder::new(&gz[..])
        .read_to_end(&mut unzipped)
        .unwrap();
    assert_eq!(unzipped, plain);
    assert!(gz.len() < plain.len());

    let (_, headers, zs) = fetch(
        &t,
        &element,
        json!({"format": "ndjson"}),
        &[("Accept-Encoding", "gzip;q=0.5, zstd")],
    )
    .await;
    assert_eq!(headers["content-encoding"], "zstd");
    assert_eq!(zstd::decode_all(&zs[..]).unwrap(), plain);

    // Accept chooses the format when the body does not; q-values are honoured.
    let (status, headers, _) = fetch(
        &t,
        &element,
        json!({}),
        &[("Accept", "application/json;q=0.2, text/csv")],
    )
    .await;
    assert_eq!(
        (status, headers["content-type"].to_str().unwrap()),
        (200, "text/csv; charset=utf-8")
    );
    let (status, _, body) = fetch(&t, &element, json!({}), &[("Accept", "image/png")]).await;
    assert_eq!(status, 406, "{}", String::from_utf8_lossy(&body));
    let (status, headers, _) = fetch(
        &t,
        &element,
        json!({"format": "arrow"}),
        &[("Accept", "text/csv")],
    )
    .await;
    assert_eq!(
        (status, headers["content-type"].to_str().unwrap()),
        (200, "application/vnd.apache.arrow.stream"),
        "body wins"
    );
    let (status, _, body) = fetch(&t, &element, json!({"format": "xml"}), &[]).await;
    let err: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (400, Some("unsupported_format"))
    );

    // int64_as_string: exact big integers for JavaScript.
    let (_, _, body) = fetch(
        &t,
        &element,
        json!({"int64_as_string": true, "columns": ["count"]}),
        &[],
    )
    .await;
    let doc: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(doc["data"][1]["count"], json!("1000000007"));
    assert_eq!(doc["meta"][0]["type"], json!("int64"));
}

/// Small batches (three rows each), so a table spans many pipeline slots: every text format gives
/// the rows in order and complete, and a filter that matches nothing gives an empty but
/// well-formed document (the pipeline sizes itself from a first batch that then never comes).
#[tokio::test]
async fn text_formats_in_order_across_many_batches_and_empty_results() {
    let t = TestServer::start(|c| c.download.batch_rows = 3).await;
    let element = varied_table(&t).await;
    let (_, doc) = t.download(&element, json!({})).await;
    let want: Vec<Value> = doc["data"].as_array().unwrap().clone();
    assert_eq!((want.len(), doc["rows"].as_u64()), (40, Some(40)));
    // In the order sent: files in flush order, rows in arrival order.
    let ids: Vec<&str> = want.iter().map(|r| r["id"].as_str().unwrap()).collect();
    let sent: Vec<String> = (0..40).map(|i| format!("v{i}")).collect();
    assert_eq!(ids, sent);
    let (_, _, body) = fetch(&t, &element, json!({"format": "ndjson"}), &[]).await;
    let lines: Vec<Value> = String::from_utf8(body)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines, want);
    let (_, _, body) = fetch(&t, &element, json!({"format": "csv"}), &[]).await;
    let mut csv = csv::Reader::from_reader(&body[..]);
    let names: Vec<String> = csv.headers().unwrap().iter().map(String::from).collect();
    let records: Vec<csv::StringRecord> = csv.records().map(Result::unwrap).collect();
    assert_eq!(records.len(), 40);
    let id = names.iter().position(|n| n == "id").unwrap();
    for (record, row) in records.iter().zip(&want) {
        assert_eq!(Some(&record[id]), row["id"].as_str());
    }

    let none = json!({"filters": [{"column": "id", "op": "eq", "value": "absent"}]});
    let (status, doc) = t.download(&element, none.clone()).await;
    assert_eq!(status, 200);
    assert_eq!(
        (doc["data"].clone(), doc["rows"].clone()),
        (json!([]), json!(0))
    );
    assert_eq!(doc["meta"].as_array().map(Vec::len), Some(names.len()));
    let mut ndjson = none.clone();
    ndjson["format"] = json!("ndjson");
    let (status, _, body) = fetch(&t, &element, ndjson, &[]).await;
    assert_eq!((status, body.len()), (200, 0));
    let mut as_csv = none;
    as_csv["format"] = json!("csv");
    let (status, _, body) = fetch(&t, &element, as_csv, &[]).await;
    assert_eq!(status, 200);
    let text = String::from_utf8(body).unwrap();
    assert!(text.starts_with(&names.join(",")), "{text}");
    assert_eq!(text.lines().count(), 1, "{text}");
}
