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
