//! An SQL element in every format, read back by pyarrow: the same rows and types as its JSON —
//! dates as dates (`YYYY-MM-DD` in the text formats), nested values as JSON text.

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
             bool_or(coupon IS NOT NULL) AS couponed, CAST(min(\"timestamp\") AS DATE) AS first_day, \
             min(\"timestamp\") AS first, array_agg(DISTINCT plan) AS plans \
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
            "date",
            "timestamp",
            "string"
        ]
    );
    for row in json_body["data"].as_array().unwrap() {
        let first = row["first"].as_str().unwrap();
        assert_eq!(row["first_day"].as_str().unwrap(), &first[..10], "{row}");
        let plans: Vec<String> = serde_json::from_str(row["plans"].as_str().unwrap()).unwrap();
        assert!(
            !plans.is_empty()
                && plans
                    .iter()
                    .all(|p| ["free", "pro", "team"].contains(&p.as_str()))
        );
    }
    // A date column filters by `YYYY-MM-DD`.
    let days: Vec<&str> = json_body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["first_day"].as_str().unwrap())
        .collect();
    let since = "2024-03-02";
    let filters = json!([{"column": "first_day", "op": "gte", "value": since}]);
    let (status, filtered) = fx.t.download(&element, json!({"filters": filters})).await;
    assert_eq!(status, 200, "{filtered}");
    let want = days.iter().filter(|d| **d >= since).count();
    assert!(want > 0 && want < days.len(), "{days:?}");
    assert_eq!(filtered["rows"], want, "{filtered}");
    let bad = json!([{"column": "first_day", "op": "eq", "value": "March 2nd"}]);
    let (status, refused) = fx.t.download(&element, json!({"filters": bad})).await;
    assert_eq!(
        (status, refused["error"]["code"].as_str()),
        (400, Some("invalid_filter")),
        "{refused}"
    );
    let rows = json_body["rows"].as_u64().unwrap();
    let dir = tempfile::tempdir().unwrap();
    // The text formats carry no types: pyarrow's CSV reader infers a date from `YYYY-MM-DD`,
    // its JSON reader a timestamp at midnight.
    for (format, reader, date) in [
        ("csv", "pyarrow.csv.read_csv(p)", "date32[day]"),
        ("ndjson", "pyarrow.json.read_json(p)", "timestamp[s]"),
        (
            "arrow",
            "pyarrow.ipc.open_stream(open(p, 'rb')).read_all()",
            "date32[day]",
        ),
        ("parquet", "pyarrow.parquet.read_table(p)", "date32[day]"),
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
             p = sys.argv[1]\nt = {reader}\nprint(t.num_rows, ','.join(t.column_names), t.schema.field('first_day').type)"
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
            format!("{rows} user_id,n,revenue,last,couponed,first_day,first,plans {date}"),
            "{format}"
        );
    }
}
