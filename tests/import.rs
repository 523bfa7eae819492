//! Import of CSV and NDJSON (HTTP) and Parquet (CLI): names and types like events, tables
//! downloadable through elements, and bad input refused whole with nothing half-imported.

use crate::common;

use std::process::Command;

use common::process::BIN;
use common::{TestServer, status_json};
use serde_json::{Value, json};
use stowage::model::TeamId;

async fn post(t: &TestServer, query: &str, content_type: &str, body: Vec<u8>) -> (u16, Value) {
    let resp = t
        .http
        .post(t.url(&format!("/v1/import?{query}")))
        .header("X-Auth-Token", &t.seeded.token)
        .header("Content-Type", content_type)
        .body(body)
        .send()
        .await
        .unwrap();
    status_json(resp).await
}

fn meta(doc: &Value) -> Vec<(String, String)> {
    doc["meta"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["name"].as_str().unwrap().into(),
                m["type"].as_str().unwrap().into(),
            )
        })
        .collect()
}

fn objects_under(t: &TestServer, table: &str) -> usize {
    let dir = t
        .dir
        .path()
        .join("warehouse/teams")
        .join(&t.seeded.team)
        .join("tables")
        .join(table);
    walk(&dir)
}

fn walk(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |rd| {
        rd.map(|e| e.unwrap().path())
            .map(|p| if p.is_dir() { walk(&p) } else { 1 })
            .sum()
    })
}

#[tokio::test]
async fn csv_and_ndjson_import_with_event_typing() {
    let t = TestServer::start(|_| {}).await;
    let csv = "Order ID,amount,paid,when,note\n1,9.5,true,2024-01-02T03:04:05Z,\"a, b\"\n2,10,false,2024-01-03T00:00:00Z,\n3,,true,,plain\n";
    let (status, stats) = post(&t, "table=Orders", "text/csv", csv.into()).await;
    assert_eq!(status, 200, "{stats}");
    assert_eq!(stats, json!({"table": "orders", "rows": 3, "files": 1}));
    let (_, doc) = t.download(&t.element("orders", None), json!({})).await;
    assert_eq!(
        meta(&doc),
        vec![
            ("order_id".into(), "int64".into()),
            ("amount".into(), "float64".into()),
            ("paid".into(), "boolean".into()),
            ("when".into(), "timestamp".into()),
            ("note".into(), "string".into())
        ]
    );
    assert_eq!(
        doc["data"][0],
        json!({"order_id": 1, "amount": 9.5, "paid": true, "when": "2024-01-02T03:04:05Z", "note": "a, b"})
    );
    assert_eq!(
        doc["data"][2],
        json!({"order_id": 3, "amount": null, "paid": true, "when": null, "note": "plain"})
    );

    let nd = "{\"userId\": 1, \"geo\": {\"city\": \"Oslo\"}}\n\n{\"userId\": \"u2\", \"tags\": [1, 2]}\n";
    let (status, stats) = post(
        &t,
        "table=people&format=ndjson",
        "application/octet-stream",
        nd.into(),
    )
    .await;
    assert_eq!(status, 200, "{stats}");
    let (_, doc) = t.download(&t.element("people", None), json!({})).await;
    assert!(
        meta(&doc).contains(&("user_id".into(), "string".into())),
        "int then string widens: {:?}",
        meta(&doc)
    );
    assert_eq!(doc["data"][0]["geo_city"], json!("Oslo"));
    assert_eq!(doc["data"][0]["user_id"], json!("1"));
    assert_eq!(
        doc["data"][1]["tags"],
        json!("[1, 2]"),
        "arrays keep the JSON text as sent"
    );

    // A second import appends, in order.
    let (status, _) = post(&t, "table=orders", "text/csv", "Order ID\n4\n".into()).await;
    assert_eq!(status, 200);
    let (_, doc) = t
        .download(&t.element("orders", None), json!({"columns": ["order_id"]}))
        .await;
    assert_eq!(
        doc["data"],
        json!([{"order_id": 1}, {"order_id": 2}, {"order_id": 3}, {"order_id": 4}])
    );
}

#[tokio::test]
async fn bad_input_is_refused_whole() {
    let t = TestServer::start(|_| {}).await;
    let team = TeamId::from(t.seeded.team.as_str());
    let cases: [(&str, &str, Vec<u8>, &str); 5] = [
        (
            "table=bad_csv",
            "text/csv",
            b"a,b\n1,2\n3,4,5\n".to_vec(),
            "line 3",
        ),
        (
            "table=bad_nd&format=ndjson",
            "text/plain",
            b"{\"a\":1}\n[1,2]\n".to_vec(),
            "line 2",
        ),
        (
            "table=bad_nd2&format=ndjson",
            "text/plain",
            b"{\"a\":1}\n{\"a\":\n".to_vec(),
            "line 2",
        ),
        (
            "table=bad_pq",
            "application/vnd.apache.parquet",
            b"PAR1 not really".to_vec(),
            "Parquet",
        ),
        ("table=!!!", "text/csv", b"a\n1\n".to_vec(), "table name"),
    ];
    for (query, ct, body, mention) in cases {
        let (status, err) = post(&t, query, ct, body).await;
        assert_eq!(
            (status, err["error"]["code"].as_str()),
            (400, Some("invalid_import")),
            "{query}: {err}"
        );
        assert!(
            err["error"]["message"].as_str().unwrap().contains(mention),
            "{query}: {err}"
        );
    }
    for table in ["bad_csv", "bad_nd", "bad_nd2", "bad_pq"] {
        assert!(
            t.catalog().snapshot(&team, table).unwrap().is_none(),
            "{table} was half-imported"
        );
        assert_eq!(objects_under(&t, table), 0, "{table} left objects behind");
    }
    let (status, _) = post(&t, "table=x", "image/png", b"..".to_vec()).await;
    assert_eq!(status, 415);
    let (status, err) = post(&t, "format=csv", "text/csv", b"a\n1\n".to_vec()).await;
    assert_eq!(
        (status, err["error"]["field"].as_str()),
        (400, Some("table"))
    );
}

#[tokio::test]
async fn parquet_import_through_the_cli() {
    let t = TestServer::start(|_| {}).await;
    for i in 0..50 {
        t.send(json!({"event": "src", "properties": {"n": i, "r": i as f64 / 3.0, "s": format!("s{i}"), "b": i % 2 == 0}})).await;
    }
    t.flush().await;
    let src = t.element("src", None);
    let (_, original) = t.download(&src, json!({})).await;
    // The table's own Parquet download is the input.
    let resp = t
        .http
        .post(t.url("/data/table"))
        .header("x-api-key", &t.seeded.key)
        .body(
            json!({"canvasId": t.seeded.canvas, "elementId": src, "format": "parquet"}).to_string(),
        )
        .send()
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("copy.parquet");
    std::fs::write(&file, resp.bytes().await.unwrap()).unwrap();
    let cli_import = |table: &str, file: &std::path::Path| {
        Command::new(BIN)
            .args(["admin", "--json", "table", "import", "--team"])
            .args([&t.seeded.team, "--table", table])
            .arg(file)
            .arg("--data-dir")
            .arg(t.dir.path())
            .output()
            .unwrap()
    };
    let out = cli_import("Copy Of Src", &file);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stats: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (stats["table"].as_str(), stats["rows"].as_u64()),
        (Some("copy_of_src"), Some(50))
    );
    let (_, copy) = t.download(&t.element("copy_of_src", None), json!({})).await;
    assert_eq!(copy["meta"], original["meta"], "types survive");
    assert_eq!(copy["data"], original["data"], "values and order survive");

    // A Parquet column with no warehouse type is refused, nothing imported.
    let lists = dir.path().join("lists.parquet");
    let py = format!(
        "import pyarrow as pa, pyarrow.parquet as pq; pq.write_table(pa.table({{'a': [[1, 2]], 'b': [1]}}), '{}')",
        lists.display()
    );
    assert!(
        Command::new(common::python())
            .args(["-c", &py])
            .status()
            .unwrap()
            .success()
    );
    let out = cli_import("lists", &lists);
    assert!(!out.status.success());
    let err: Value = serde_json::from_slice(&out.stderr).unwrap();
    assert_eq!(
        err["error"]["code"], "invalid_import",
        "the API's code: {err}"
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no warehouse type"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        t.catalog()
            .snapshot(&TeamId::from(t.seeded.team.as_str()), "lists")
            .unwrap()
            .is_none()
    );

    // The CLI reads a Parquet file in place (footer first): a truncated copy, whose footer is
    // gone, is refused the same way.
    let whole = std::fs::read(&file).unwrap();
    let cut = dir.path().join("cut.parquet");
    std::fs::write(&cut, &whole[..whole.len() / 2]).unwrap();
    let out = cli_import("cut", &cut);
    assert!(!out.status.success());
    let err: Value = serde_json::from_slice(&out.stderr).unwrap();
    assert_eq!(err["error"]["code"], "invalid_import", "{err}");
    assert!(
        err["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("not a valid Parquet file")),
        "{err}"
    );
}

/// Files from pyarrow (defaults, every codec, v1 plain pages, one-row row groups), pandas,
/// polars and DuckDB with their defaults, every type of SPEC §3.2: imported over HTTP and
/// downloaded, each equal to the writer's own reading (tests/py/import_matrix.py).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parquet_from_every_writer_imports_value_for_value() {
    let t = TestServer::start(|_| {}).await;
    let work = tempfile::tempdir().unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/py/import_matrix.py");
    let (url, s, dir, w) = (
        t.url(""),
        t.seeded.clone(),
        t.dir.path().to_path_buf(),
        work.path().to_path_buf(),
    );
    let out = tokio::task::spawn_blocking(move || {
        Command::new(common::python())
            .arg(script)
            .args([&url, &s.token, &s.key, &s.canvas, BIN])
            .arg(&dir)
            .arg(&w)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains(" files checked, 0 problems"), "{stdout}");
}

/// CSV as spreadsheets write it: a byte-order mark, `;` or tab delimiters, CRLF line ends and
/// quoted fields with embedded line breaks; an unusable delimiter is refused.
#[tokio::test]
async fn csv_dialects_import() {
    let t = TestServer::start(|_| {}).await;
    let semi = "\u{feff}Name;Amount;Note\r\nAda;1,5;\"two\r\nlines; here\"\r\nBob;;plain\r\n";
    let (status, stats) = post(&t, "table=semi&delimiter=;", "text/csv", semi.into()).await;
    assert_eq!(status, 200, "{stats}");
    let (_, doc) = t.download(&t.element("semi", None), json!({})).await;
    assert_eq!(
        doc["data"],
        json!([
            {"name": "Ada", "amount": "1,5", "note": "two\r\nlines; here"},
            {"name": "Bob", "amount": null, "note": "plain"}
        ]),
        "the BOM is not part of the first header; a decimal comma stays text"
    );
    let tsv = "a\tb\n1\tx y\n";
    let (status, _) = post(&t, "table=tsv&delimiter=tab", "text/csv", tsv.into()).await;
    assert_eq!(status, 200);
    let (_, doc) = t.download(&t.element("tsv", None), json!({})).await;
    assert_eq!(doc["data"], json!([{"a": 1, "b": "x y"}]));
    for bad in [
        "table=x&delimiter=%22",
        "table=x&delimiter=ab",
        "table=x&format=ndjson&delimiter=;",
    ] {
        let (status, body) = post(&t, bad, "text/csv", "a\n1\n".into()).await;
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (400, Some("invalid_field")),
            "{bad}"
        );
    }
}
