//! The limits of one query: memory (`sql.memory_limit`), time (`sql.timeout`) and queries per
//! team (`sql.max_concurrent`) — each a clean error, with the server still healthy after.

use std::time::Duration;

use serde_json::json;
use stowage::config::{ByteSize, HumanDuration};

use super::fixture::Fx;

/// A cross join that explodes (70 rows cubed), sorted whole: the sort must hold every row in
/// memory, and nothing may spill.
const EXPLODING: &str = "SELECT a.id, b.id AS b, c.id AS c FROM order_completed a \
     CROSS JOIN order_completed b CROSS JOIN order_completed c ORDER BY c, b, a.id";

async fn healthy(fx: &Fx) {
    let resp = fx.t.http.get(fx.t.url("/healthz")).send().await.unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let element = fx.sql_element("SELECT count(*) AS n FROM tracks").await;
    let (status, body) = fx.t.download(&element, json!({})).await;
    assert_eq!(status, 200, "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exploding_query_fails_cleanly_under_a_small_memory_limit() {
    let fx = Fx::start_with(|c| {
        c.sql.memory_limit = ByteSize(4 << 20);
        c.sql.timeout = HumanDuration(Duration::from_secs(30));
    })
    .await;
    let element = fx.sql_element(EXPLODING).await;
    let (status, body) = fx.t.download(&element, json!({})).await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["error"]["code"], "query_too_large", "{body}");
    healthy(&fx).await;
}

/// The first row of each of 343,000 groups (the keys of a cross join) under a small pool: a
/// clean 422 whatever runs out first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_many_groups_for_the_first_row_per_group_fail_cleanly() {
    let fx = Fx::start_with(|c| {
        c.sql.memory_limit = ByteSize(4 << 20);
        c.sql.timeout = HumanDuration(Duration::from_secs(30));
    })
    .await;
    let element = fx
        .sql_element(
            "SELECT k, v FROM (SELECT k, v, row_number() OVER (PARTITION BY k ORDER BY v DESC) AS rn \
             FROM (SELECT a.id || b.id || c.id AS k, a.qty AS v FROM order_completed a \
             CROSS JOIN order_completed b CROSS JOIN order_completed c) x) y WHERE rn = 1",
        )
        .await;
    let (status, body) = fx.t.download(&element, json!({})).await;
    assert_eq!(status, 422, "{body}");
    // Which reservation fails first — the operator's groups or the repartition's queue in front
    // of it — depends on timing; the operator's own is asserted in src/sql/group_first.rs.
    assert_eq!(body["error"]["code"], "query_too_large", "{body}");
    healthy(&fx).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_query_past_its_deadline_fails_cleanly() {
    let fx = Fx::start_with(|c| {
        c.sql.timeout = HumanDuration(Duration::from_millis(500));
    })
    .await;
    // 70 rows to the fifth power, each one computed (a bare count(*) would be answered from
    // the files' row counts): stopped by the deadline.
    let element = fx
        .sql_element(
            "SELECT sum(a.qty * b.qty * c.qty * d.qty * e.qty) AS n FROM order_completed a \
             CROSS JOIN order_completed b CROSS JOIN order_completed c \
             CROSS JOIN order_completed d CROSS JOIN order_completed e",
        )
        .await;
    let started = std::time::Instant::now();
    let (status, body) = fx.t.download(&element, json!({})).await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["error"]["code"], "query_timeout", "{body}");
    assert!(started.elapsed() < Duration::from_secs(10));
    healthy(&fx).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_team_runs_at_most_max_concurrent_queries() {
    let fx = Fx::start_with(|c| {
        c.sql.max_concurrent = 1;
        c.sql.timeout = HumanDuration(Duration::from_secs(3));
    })
    .await;
    // A slow query holds the team's only slot while its body streams.
    let slow = fx
        .sql_element(
            "SELECT a.id FROM order_completed a CROSS JOIN order_completed b \
             CROSS JOIN order_completed c CROSS JOIN order_completed d",
        )
        .await;
    let resp =
        fx.t.http
            .post(fx.t.url("/data/table"))
            .header("x-api-key", &fx.t.seeded.key)
            .body(
                json!({"canvasId": fx.t.seeded.canvas, "elementId": slow, "format": "ndjson"})
                    .to_string(),
            )
            .send()
            .await
            .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let quick = fx.sql_element("SELECT 1 AS one").await;
    let (status, body) = fx.t.download(&quick, json!({})).await;
    assert_eq!(status, 429, "{body}");
    assert_eq!(body["error"]["code"], "rate_limited");
    // The slow body ends broken at the deadline (never a short body that looks complete).
    assert!(
        resp.bytes().await.is_err(),
        "the body is aborted at the deadline"
    );
    let (status, body) = fx.t.download(&quick, json!({})).await;
    assert_eq!(status, 200, "the slot is free again: {body}");
}
