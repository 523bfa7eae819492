//! DuckDB as the oracle: each query, stored as an SQL element and downloaded as JSON, gives the
//! rows DuckDB gives for the same SQL over the same Parquet files (tests/py/sql_oracle.py).

use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use super::common::python;
use super::fixture::Fx;

/// Queries of the shapes analysts write. Every ORDER BY … LIMIT is over a total order, so the
/// rows kept do not depend on ties.
const QUERIES: &[&str] = &[
    // group by with count(DISTINCT)
    "SELECT plan, count(*) AS n, count(DISTINCT user_id) AS users FROM order_completed GROUP BY plan",
    // sums of properties (qty widened from int64 to float64 between files)
    "SELECT user_id, sum(revenue) AS revenue, sum(qty) AS qty FROM order_completed \
     WHERE user_id IS NOT NULL GROUP BY user_id",
    // events joined with identifies on user_id
    "SELECT o.user_id, i.country, sum(o.revenue) AS revenue FROM order_completed o \
     JOIN identifies i ON o.user_id = i.user_id GROUP BY o.user_id, i.country",
    "SELECT i.country, count(DISTINCT o.user_id) AS buyers, count(o.id) AS orders \
     FROM identifies i LEFT JOIN order_completed o ON o.user_id = i.user_id GROUP BY i.country",
    // date_trunc buckets
    "SELECT date_trunc('day', \"timestamp\") AS day, count(*) AS events FROM tracks GROUP BY 1",
    "SELECT date_trunc('hour', \"timestamp\") AS hour, sum(revenue) AS revenue \
     FROM order_completed GROUP BY 1",
    // dates (a `date` column, `YYYY-MM-DD`)
    "SELECT CAST(\"timestamp\" AS DATE) AS day, count(*) AS n FROM tracks GROUP BY 1",
    // window functions
    "SELECT id, user_id, row_number() OVER (PARTITION BY user_id ORDER BY \"timestamp\", id) AS n \
     FROM order_completed WHERE user_id IS NOT NULL",
    "SELECT id, sum(revenue) OVER (PARTITION BY user_id ORDER BY \"timestamp\", id \
     ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS running FROM order_completed",
    "SELECT id, lag(revenue) OVER (PARTITION BY user_id ORDER BY \"timestamp\", id) AS prev \
     FROM order_completed",
    // the latest row per user (CTE + window)
    "WITH ranked AS (SELECT user_id, plan, \"timestamp\", row_number() OVER \
     (PARTITION BY user_id ORDER BY \"timestamp\" DESC, id DESC) AS rn FROM order_completed \
     WHERE user_id IS NOT NULL) SELECT user_id, plan, \"timestamp\" FROM ranked WHERE rn = 1",
    // the first row per group, spelled otherwise (two keys, `<= 1`, a nullable sort key with
    // NULLS LAST, a null group): kept before the sort by stowage's GroupFirstExec
    "SELECT user_id, plan, id, coupon FROM (SELECT *, row_number() OVER (PARTITION BY user_id, plan \
     ORDER BY coupon DESC NULLS LAST, id) AS rn FROM order_completed) t WHERE rn <= 1",
    "SELECT id, anonymous_id, rn FROM (SELECT id, anonymous_id, row_number() OVER \
     (PARTITION BY user_id ORDER BY \"timestamp\" DESC, id DESC) AS rn FROM tracks) t WHERE 1 = rn",
    // CASE
    "SELECT CASE WHEN revenue >= 50 THEN 'big' WHEN revenue >= 20 THEN 'medium' ELSE 'small' END \
     AS bucket, count(*) AS n FROM order_completed GROUP BY 1",
    // string functions
    "SELECT id, lower(plan) AS p, upper(coalesce(coupon, 'none')) AS c, length(id) AS l \
     FROM order_completed",
    "SELECT path, concat('x-', path) AS c, substr(path, 2, 4) AS s, replace(path, '/', '_') AS r, \
     path || '?' AS q FROM page_viewed",
    // NULL handling
    "SELECT count(*) AS all_rows, count(coupon) AS with_coupon, count(*) - count(coupon) AS without \
     FROM order_completed",
    "SELECT coalesce(user_id, anonymous_id) AS who, count(*) AS n FROM tracks GROUP BY 1",
    "SELECT referrer IS NULL AS no_referrer, count(*) AS n FROM page_viewed GROUP BY 1",
    // ORDER BY … LIMIT
    "SELECT user_id, sum(revenue) AS r FROM order_completed WHERE user_id IS NOT NULL \
     GROUP BY user_id ORDER BY r DESC, user_id LIMIT 5",
    "SELECT id, revenue FROM order_completed ORDER BY revenue DESC, id LIMIT 7",
    // a funnel of CTEs
    "WITH v AS (SELECT DISTINCT user_id FROM page_viewed WHERE user_id IS NOT NULL), \
     b AS (SELECT DISTINCT user_id FROM order_completed WHERE user_id IS NOT NULL) \
     SELECT (SELECT count(*) FROM v) AS viewers, (SELECT count(*) FROM b) AS buyers, \
     (SELECT count(*) FROM v JOIN b ON v.user_id = b.user_id) AS both_steps",
    // mixed-schema columns: code int64 then string, qty int64 then float64
    "SELECT id, code, qty FROM order_completed",
    "SELECT sum(qty) AS q, count(code) AS c, min(code) AS m, max(code) AS x FROM order_completed",
    // a time range, pushed down to the reader
    "SELECT count(*) AS n FROM tracks WHERE \"timestamp\" >= '2024-03-03T00:00:00Z' \
     AND \"timestamp\" < '2024-03-05T00:00:00Z'",
    // HAVING, UNION ALL, IN (subquery), aggregates
    "SELECT user_id FROM order_completed GROUP BY user_id HAVING count(*) >= 4",
    "SELECT 'view' AS kind, user_id FROM page_viewed UNION ALL \
     SELECT 'buy' AS kind, user_id FROM order_completed",
    "SELECT count(*) AS n FROM page_viewed WHERE user_id IN \
     (SELECT user_id FROM identifies WHERE plan = 'pro')",
    "SELECT plan, avg(revenue) AS a, min(revenue) AS lo, max(revenue) AS hi, \
     round(sum(revenue * qty), 2) AS weighted FROM order_completed GROUP BY plan",
    "SELECT user_id, email, age FROM identifies WHERE age > 24 AND plan IN ('pro', 'team')",
];

/// Runs the oracle over `cases` (`[{sql, ours}]`) and the tables' files.
fn duckdb(tables: Value, cases: Vec<Value>) -> Value {
    let mut child = Command::new(python())
        .arg("tests/py/sql_oracle.py")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python runs");
    let input = json!({ "tables": tables, "cases": cases }).to_string();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "oracle failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn analysts_queries_agree_with_duckdb_over_the_same_files() {
    let fx = Fx::start().await;
    let mut cases = Vec::new();
    for sql in QUERIES {
        let element = fx.sql_element(sql).await;
        let (status, body) = fx.t.download(&element, json!({})).await;
        assert_eq!(status, 200, "{sql}: {body}");
        assert_eq!(
            body["rows"].as_u64().unwrap() as usize,
            body["data"].as_array().unwrap().len()
        );
        cases.push(json!({ "sql": sql, "ours": body }));
    }
    let tables = fx.files(&["order_completed", "page_viewed", "identifies", "tracks"]);
    let files = tables["order_completed"].as_array().unwrap().len();
    assert!(files >= 2, "order_completed has files of two schemas");
    let report = duckdb(tables, cases);
    assert_eq!(report["checked"], QUERIES.len());
    assert_eq!(
        report["failures"],
        json!([]),
        "{}",
        serde_json::to_string_pretty(&report["failures"]).unwrap()
    );
    assert!(QUERIES.len() >= 20);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parameters_are_typed_by_their_use_and_columns_filters_limit_apply_on_top() {
    let fx = Fx::start().await;
    let element = fx
        .sql_element(
            "SELECT user_id, plan, revenue FROM order_completed \
             WHERE revenue > $min AND plan = $plan",
        )
        .await;
    let (status, body) = fx.t.download(&element, json!({})).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], "invalid_params", "{body}");
    let params = json!({"params": {"min": 20, "plan": "pro"}});
    let (status, body) = fx.t.download(&element, params.clone()).await;
    assert_eq!(status, 200, "{body}");
    let rows = body["data"].as_array().unwrap();
    assert!(!rows.is_empty());
    assert!(
        rows.iter()
            .all(|r| r["plan"] == "pro" && r["revenue"].as_f64().unwrap() > 20.0)
    );
    let (status, body) =
        fx.t.download(&element, json!({"params": {"min": "lots", "plan": "pro"}}))
            .await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (400, &json!("invalid_params")),
        "{body}"
    );
    // columns, filters and limit of a table download apply to the query's result.
    let mut on_top = params.clone();
    on_top["columns"] = json!(["revenue"]);
    on_top["filters"] = json!([{"column": "revenue", "op": "gte", "value": 40}]);
    on_top["limit"] = json!(2);
    let (status, body) = fx.t.download(&element, on_top).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["meta"],
        json!([{"name": "revenue", "type": "float64"}])
    );
    let rows = body["data"].as_array().unwrap();
    assert!(rows.len() <= 2 && !rows.is_empty(), "{body}");
    assert!(rows.iter().all(|r| r["revenue"].as_f64().unwrap() >= 40.0));
    let mut unknown = params;
    unknown["columns"] = json!(["nope"]);
    let (status, body) = fx.t.download(&element, unknown).await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (400, &json!("unknown_column")),
        "{body}"
    );
}

/// Queries over an imported table (two CSV files: `credit` numbers then text, `region` only in
/// the second) and events sent by the unmodified Segment Python SDK.
const MIXED_SOURCES: &[&str] = &[
    "SELECT segment, count(*) AS n, count(region) AS with_region FROM customers GROUP BY segment",
    "SELECT user_id, credit, region FROM customers",
    "SELECT c.segment, count(o.id) AS orders, sum(o.revenue) AS revenue FROM customers c \
     LEFT JOIN order_completed o ON o.user_id = c.user_id GROUP BY c.segment",
    "SELECT plan, count(*) AS n, sum(seats) AS seats FROM signed_up GROUP BY plan",
    "SELECT s.user_id, s.plan, c.segment FROM signed_up s JOIN customers c ON s.user_id = c.user_id",
    "SELECT date_trunc('day', \"timestamp\") AS day, count(DISTINCT user_id) AS users \
     FROM signed_up GROUP BY 1",
    "SELECT coalesce(region, 'unknown') AS r, count(*) AS n FROM customers GROUP BY 1",
];

/// Loads a CSV file into `table` through `/v1/import`.
async fn import_csv(fx: &Fx, table: &str, csv: &str) {
    let resp =
        fx.t.http
            .post(fx.t.url(&format!("/v1/import?table={table}")))
            .header("X-Auth-Token", &fx.t.seeded.token)
            .header("Content-Type", "text/csv")
            .body(csv.to_string())
            .send()
            .await
            .unwrap();
    assert_eq!(resp.status(), 200, "{}", resp.text().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn imported_and_sdk_sent_data_agree_with_duckdb() {
    let fx = Fx::start().await;
    let first: String = std::iter::once("user_id,segment,credit,signup\n".to_string())
        .chain((0..12).map(|i| {
            format!(
                "u{i},{},{}.25,2024-02-{:02}T10:00:00Z\n",
                ["smb", "ent"][i % 2],
                i * 10,
                i + 1
            )
        }))
        .collect();
    import_csv(&fx, "customers", &first).await;
    import_csv(
        &fx,
        "customers",
        "user_id,segment,credit,region\nu12,smb,n/a,emea\nu13,ent,55.5,\nu14,smb,7,apac\n",
    )
    .await;
    // The real SDK, as a customer's backend sends.
    let calls: Vec<Value> = (0..15)
        .map(|i| {
            let plan = ["free", "pro"][i % 2];
            json!({"type": "track", "event": "Signed Up", "userId": format!("u{}", i % 9),
                   "messageId": format!("sdk-{i}"),
                   "timestamp": format!("2024-03-{:02}T08:{i:02}:00Z", 1 + i % 3),
                   "properties": {"plan": plan, "seats": i % 4 + 1}})
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("calls.json");
    std::fs::write(&spec, serde_json::to_vec(&calls).unwrap()).unwrap();
    let mut cmd = Command::new(python());
    cmd.arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/py/sdk_send.py"))
        .args(["segment", &fx.t.url(""), &fx.t.seeded.token])
        .arg(&spec);
    let out = tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    fx.t.flush().await;

    let mut cases = Vec::new();
    for sql in MIXED_SOURCES {
        let element = fx.sql_element(sql).await;
        let (status, body) = fx.t.download(&element, json!({})).await;
        assert_eq!(status, 200, "{sql}: {body}");
        cases.push(json!({ "sql": sql, "ours": body }));
    }
    let signups: u64 = cases[3]["ours"]["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["n"].as_u64().unwrap())
        .sum();
    assert_eq!(signups, 15, "every SDK call arrived");
    assert_eq!(cases[1]["ours"]["rows"], 15, "both imports' rows");
    let tables = fx.files(&["customers", "signed_up", "order_completed"]);
    assert!(
        tables["customers"].as_array().unwrap().len() >= 2,
        "two imported files"
    );
    let report = duckdb(tables, cases);
    assert_eq!(report["checked"], MIXED_SOURCES.len());
    assert_eq!(
        report["failures"],
        json!([]),
        "{}",
        serde_json::to_string_pretty(&report["failures"]).unwrap()
    );
}
