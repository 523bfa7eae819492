//! An SQL element in every format, read back by pyarrow: the same rows and types as its JSON.

use std::process::Command;

use serde_json::json;

use super::common::python;
use super::fixture::Fx;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_format_reads_back_with_pyarrow() {
    let fx = Fx::start().await;
    let element = fx
        .sql_element(
            "SELECT user_id, count(*) AS n, sum(revenue) AS revenue, max(\"timestamp\") AS last, \
             bool_or(coupon IS NOT NULL) AS couponed, CAST(min(\"timestamp\") AS DATE) AS first_day \
             FROM order_completed GROUP BY user_id ORDER BY user_id",
        )
        .await;
    let (status, json_body) = fx.t.download(&element, json!({})).await;
    assert_eq!(status, 200, "{json_body}");
    let types: Vec<&str> = json_body["meta"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        types,
        [
            "string",
            "int64",
            "float64",
            "timestamp",
            "boolean",
            "string"
        ]
    );
    let rows = json_body["rows"].as_u64().unwrap();
    let dir = tempfile::tempdir().unwrap();
    for (format, reader) in [
        ("csv", "pyarrow.csv.read_csv(p)"),
        ("ndjson", "pyarrow.json.read_json(p)"),
        ("arrow", "pyarrow.ipc.open_stream(open(p, 'rb')).read_all()"),
        ("parquet", "pyarrow.parquet.read_table(p)"),
    ] {
        let resp =
            fx.t.http
                .post(fx.t.url("/data/table"))
                .header("x-api-key", &fx.t.seeded.key)
                .body(
                    json!({"canvasId": fx.t.seeded.canvas, "elementId": element, "format": format})
                        .to_string(),
                )
                .send()
                .await
                .unwrap();
        assert_eq!(resp.status().as_u16(), 200, "{format}");
        let path = dir.path().join(format!("out.{format}"));
        std::fs::write(&path, resp.bytes().await.unwrap()).unwrap();
        let script = format!(
            "import sys, pyarrow, pyarrow.csv, pyarrow.json, pyarrow.ipc, pyarrow.parquet\n\
             p = sys.argv[1]\nt = {reader}\nprint(t.num_rows, ','.join(t.column_names))"
        );
        let out = Command::new(python())
            .args(["-c", &script, path.to_str().unwrap()])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{format}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8(out.stdout).unwrap();
        assert_eq!(
            text.trim(),
            format!("{rows} user_id,n,revenue,last,couponed,first_day"),
            "{format}"
        );
    }
}
