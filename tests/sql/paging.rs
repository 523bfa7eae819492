//! Cursor paging of SQL elements (SPEC §3.4): a query with a total `ORDER BY` pages over the
//! snapshots its first page read — new data committed between pages does not show, request
//! filters apply before rows are counted, the old snapshot's files going away is 410 — and a
//! query whose rows may tie hands out no cursor and refuses one with 400 `cursor_needs_order`.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Value, json};
use stowage::config::CompactionConfig;
use stowage::download::cursor::{self, QueryCursor};
use stowage::model::TeamId;
use stowage::warehouse::compaction::Compactor;

use super::fixture::Fx;

/// Orders per user with the user's email: one row per (user, email), sorted by both.
const PER_USER: &str = "SELECT o.user_id, i.email, count(*) AS orders, sum(o.revenue) AS revenue \
     FROM order_completed o LEFT JOIN identifies i ON o.user_id = i.user_id \
     GROUP BY o.user_id, i.email ORDER BY o.user_id NULLS FIRST, i.email";

/// Every page of `element` of at most `limit` rows, from the first on: the rows of each.
async fn pages(fx: &Fx, element: &str, limit: u64, extra: Value) -> Vec<Vec<Value>> {
    let mut out = Vec::new();
    let mut cursor = Value::Null;
    loop {
        let mut body = extra.clone();
        body["limit"] = json!(limit);
        if !cursor.is_null() {
            body["cursor"] = cursor.clone();
        }
        let (status, page) = fx.t.download(element, body).await;
        assert_eq!(status, 200, "{page}");
        let rows = page["data"].as_array().unwrap().clone();
        assert!(rows.len() as u64 <= limit);
        let full = rows.len() as u64 == limit;
        assert_eq!(
            !page["next_cursor"].is_null(),
            full,
            "a full page, and only one, has a cursor: {page}"
        );
        out.push(rows);
        cursor = page["next_cursor"].clone();
        if cursor.is_null() {
            return out;
        }
        assert!(out.len() < 100, "paging never ends");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_totally_ordered_query_pages_over_its_first_snapshot() {
    let fx = Fx::start().await;
    let element = fx.sql_element(PER_USER).await;
    let (status, whole) = fx.t.download(&element, json!({})).await;
    assert_eq!(status, 200, "{whole}");
    let all = whole["data"].as_array().unwrap().clone();
    assert!(all.len() >= 14, "one row per user: {whole}");

    let paged: Vec<Value> = pages(&fx, &element, 4, json!({})).await.concat();
    assert_eq!(paged, all, "pages reassemble the whole result");

    // New orders commit between the first page and the rest: the pages keep the first
    // snapshot, while a new download sees them.
    let (_, first) = fx.t.download(&element, json!({"limit": 5})).await;
    fx.batch(vec![json!({
        "type": "track", "event": "Order Completed", "userId": "u0", "messageId": "late-0",
        "properties": {"revenue": 1000.0, "qty": 1}
    }), json!({
        "type": "track", "event": "Order Completed", "userId": "a-new-user", "messageId": "late-1",
        "properties": {"revenue": 1.0, "qty": 1}
    })])
    .await;
    fx.t.flush().await;
    let mut rest = first["data"].as_array().unwrap().clone();
    let mut cursor = first["next_cursor"].clone();
    while let Some(c) = cursor.as_str() {
        let (status, page) =
            fx.t.download(&element, json!({"limit": 5, "cursor": c}))
                .await;
        assert_eq!(status, 200, "{page}");
        rest.extend(page["data"].as_array().unwrap().iter().cloned());
        cursor = page["next_cursor"].clone();
    }
    assert_eq!(rest, all, "the pages read the first page's snapshot");
    let (_, now) = fx.t.download(&element, json!({})).await;
    assert_eq!(
        now["data"].as_array().unwrap().len(),
        all.len() + 1,
        "{now}"
    );

    // The request's filters apply before rows are counted.
    let filters = json!([{"column": "orders", "op": "gte", "value": 3}]);
    let (_, filtered) = fx.t.download(&element, json!({"filters": filters})).await;
    let filtered = filtered["data"].as_array().unwrap().clone();
    assert!(filtered.len() >= 4 && filtered.len() < now["data"].as_array().unwrap().len());
    let paged = pages(&fx, &element, 3, json!({"filters": filters}))
        .await
        .concat();
    assert_eq!(paged, filtered);

    // Compaction swaps the files: a cursor still reads its snapshot until the old objects are
    // deleted, then it has expired.
    let (_, first) = fx.t.download(&element, json!({"limit": 2})).await;
    let compactor = Compactor {
        catalog: fx.t.srv().state.catalog.clone(),
        store: fx.t.srv().state.store.clone(),
        prefix: String::new(),
        parquet: Default::default(),
        cfg: CompactionConfig {
            min_files: 2,
            ..Default::default()
        },
    };
    assert!(compactor.compact_once().await.unwrap().merged >= 2);
    let next = json!({"limit": 2, "cursor": first["next_cursor"]});
    let (status, page) = fx.t.download(&element, next.clone()).await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(page["data"], json!(now["data"].as_array().unwrap()[2..4]));
    assert!(compactor.delete_retired(Duration::ZERO).await.unwrap() >= 2);
    let (status, page) = fx.t.download(&element, next).await;
    assert_eq!(
        (status, page["error"]["code"].as_str()),
        (410, Some("cursor_expired")),
        "{page}"
    );
    assert_eq!(page["error"]["field"], "cursor");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn now_is_the_first_pages_time_on_every_page() {
    let fx = Fx::start().await;
    let element = fx
        .sql_element(
            "SELECT user_id, count(*) AS n, max(now()) AS asked FROM order_completed \
             WHERE \"timestamp\" < now() GROUP BY user_id ORDER BY user_id NULLS FIRST",
        )
        .await;
    let pages = pages(&fx, &element, 3, json!({})).await;
    assert!(pages.len() >= 3);
    let asked: Vec<&Value> = pages.iter().flatten().map(|r| &r["asked"]).collect();
    assert!(asked.iter().all(|a| *a == asked[0]), "{asked:?}");
    // A new first page is a new time.
    let (_, again) = fx.t.download(&element, json!({"limit": 3})).await;
    assert_ne!(&again["data"][0]["asked"], asked[0]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_that_may_tie_are_not_paged() {
    let fx = Fx::start().await;
    let by_count =
        "SELECT user_id, count(*) AS n FROM order_completed GROUP BY user_id ORDER BY n DESC";
    let element = fx.sql_element(by_count).await;
    let (status, page) = fx.t.download(&element, json!({"limit": 3})).await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(page["rows"], 3);
    assert!(
        page["next_cursor"].is_null(),
        "no cursor for rows that may tie: {page}"
    );

    // A well-formed cursor for this very request is still refused: the order is not total.
    let team = TeamId::from(fx.t.seeded.team.as_str());
    let snap =
        fx.t.catalog()
            .snapshot(&team, "order_completed")
            .unwrap()
            .unwrap();
    let forged = QueryCursor {
        v: cursor::QUERY_CURSOR_VERSION,
        snaps: BTreeMap::from([("order_completed".to_string(), snap.as_of)]),
        sent: 3,
        cols: "any".into(),
        t: 0,
        q: cursor::query_fingerprint(&element, &None, &None, &None),
    };
    let body = json!({"limit": 3, "cursor": cursor::encode(&forged)});
    let (status, doc) = fx.t.download(&element, body).await;
    assert_eq!(
        (status, doc["error"]["code"].as_str()),
        (400, Some("cursor_needs_order")),
        "{doc}"
    );
    assert_eq!(doc["error"]["field"], "cursor");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cursor_serves_only_the_request_it_came_from() {
    let fx = Fx::start().await;
    let element = fx
        .sql_element(
            "SELECT user_id, count(*) AS n FROM order_completed WHERE revenue >= $min \
             GROUP BY user_id ORDER BY user_id",
        )
        .await;
    let params = json!({"min": 10});
    let (status, first) =
        fx.t.download(&element, json!({"limit": 2, "params": params}))
            .await;
    assert_eq!(status, 200, "{first}");
    let c = first["next_cursor"]
        .as_str()
        .expect("a full page has a cursor")
        .to_string();
    let (status, second) =
        fx.t.download(&element, json!({"limit": 2, "params": params, "cursor": c}))
            .await;
    assert_eq!(status, 200, "{second}");
    assert_ne!(first["data"], second["data"]);

    let other_params = json!({"limit": 2, "params": {"min": 20}, "cursor": c});
    let other_columns = json!({"limit": 2, "params": params, "columns": ["n"], "cursor": c});
    let garbage = json!({"limit": 2, "params": params, "cursor": "bm90IGEgY3Vyc29y"});
    let table = fx.t.element("order_completed", None);
    let (_, table_page) = fx.t.download(&table, json!({"limit": 2})).await;
    let table_cursor = json!({"limit": 2, "params": params, "cursor": table_page["next_cursor"]});
    for body in [other_params, other_columns, garbage, table_cursor] {
        let (status, doc) = fx.t.download(&element, body.clone()).await;
        assert_eq!(
            (status, doc["error"]["code"].as_str()),
            (400, Some("invalid_cursor")),
            "{body}: {doc}"
        );
    }
    // Well-formed cursors that do not fit: a snapshot missing for a table the query reads, a
    // count of rows past what a query can skip.
    let decoded: QueryCursor = serde_json::from_slice(
        &base64::Engine::decode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, &c).unwrap(),
    )
    .unwrap();
    let without_table = QueryCursor {
        snaps: BTreeMap::new(),
        ..decoded.clone()
    };
    let too_far = QueryCursor {
        sent: u64::MAX,
        ..decoded
    };
    for forged in [without_table, too_far] {
        let body = json!({"limit": 2, "params": params, "cursor": cursor::encode(&forged)});
        let (status, doc) = fx.t.download(&element, body).await;
        assert_eq!(
            (status, doc["error"]["code"].as_str()),
            (400, Some("invalid_cursor")),
            "{doc}"
        );
    }
    // The largest limit a request may ask for is no error.
    let (status, doc) =
        fx.t.download(&element, json!({"limit": u64::MAX, "params": params}))
            .await;
    assert_eq!(status, 200, "{doc}");

    let (status, doc) =
        fx.t.download(
            &element,
            json!({"limit": 2, "params": params, "cursor": c, "fresh": true}),
        )
        .await;
    assert_eq!(
        (status, doc["error"]["code"].as_str()),
        (400, Some("fresh_with_cursor")),
        "{doc}"
    );
}
