//! Filters against DuckDB on the same warehouse files, row-group pruning, element-level filters,
//! and cursor paging that reassembles the exact table.

use crate::common;

use common::ids;

use std::process::Command;

use common::TestServer;
use serde_json::{Value, json};

/// 300 rows over several files: int, float, string, bool and timestamp columns with nulls.
async fn table(t: &TestServer) -> String {
    for i in 0..300i64 {
        let mut props = json!({"n": i, "r": (i as f64) * 0.5 - 20.0, "s": format!("k{}", i % 17), "b": i % 4 == 0});
        if i % 11 == 0 {
            props["n"] = Value::Null;
            props["s"] = Value::Null;
        }
        t.send(
            json!({"event": "f", "messageId": format!("f{i:03}"), "properties": props,
                      "timestamp": format!("2024-03-{:02}T00:00:00Z", 1 + i / 12)}),
        )
        .await;
        if i % 70 == 69 {
            t.flush().await;
        }
    }
    t.flush().await;
    t.element("f", None)
}

#[tokio::test]
async fn every_filter_op_agrees_with_duckdb() {
    let t = TestServer::start(|c| c.parquet.row_group_rows = 16).await;
    let element = table(&t).await;
    let all = ids(&t.download(&element, json!({})).await.1);
    let cases = [
        (json!({"column": "n", "op": "eq", "value": 42}), "int64"),
        (json!({"column": "n", "op": "ne", "value": 42}), "int64"),
        (json!({"column": "n", "op": "lt", "value": 100}), "int64"),
        (json!({"column": "n", "op": "lte", "value": "100"}), "int64"),
        (
            json!({"column": "r", "op": "gt", "value": 50.25}),
            "float64",
        ),
        (json!({"column": "r", "op": "gte", "value": -3}), "float64"),
        (
            json!({"column": "s", "op": "in", "value": ["k1", "k5", "nope"]}),
            "string",
        ),
        (json!({"column": "s", "op": "is_null"}), "string"),
        (json!({"column": "n", "op": "not_null"}), "int64"),
        (json!({"column": "b", "op": "eq", "value": true}), "boolean"),
        (
            json!({"column": "timestamp", "op": "gte", "value": "2024-03-20T00:00:00Z"}),
            "timestamp",
        ),
        (
            json!({"column": "timestamp", "op": "lt", "value": "2024-03-03T00:00:00+00:00"}),
            "timestamp",
        ),
    ];
    let mut checks = Vec::new();
    for (filter, ty) in &cases {
        let (status, doc) = t.download(&element, json!({"filters": [filter]})).await;
        assert_eq!(status, 200, "{filter}: {doc}");
        let got = ids(&doc);
        let in_order: Vec<&String> = all.iter().filter(|id| got.contains(id)).collect();
        assert_eq!(
            got.iter().collect::<Vec<_>>(),
            in_order,
            "{filter}: rows keep table order"
        );
        checks.push(json!({"filter": filter, "type": ty, "ids": got}));
    }
    // Two filters AND together.
    let (_, doc) = t.download(&element, json!({"filters": [{"column": "n", "op": "gte", "value": 10}, {"column": "n", "op": "lt", "value": 20}]})).await;
    assert_eq!(ids(&doc).len(), 9, "10..19 minus the null at 11");

    let dir = tempfile::tempdir().unwrap();
    let cases_file = dir.path().join("cases.json");
    std::fs::write(&cases_file, serde_json::to_vec(&checks).unwrap()).unwrap();
    let glob = t
        .dir
        .path()
        .join("warehouse/teams")
        .join(&t.seeded.team)
        .join("tables/f/*/*.parquet");
    let out = Command::new(common::python())
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/py/check_filters.py"
        ))
        .arg(&glob)
        .arg(&cases_file)
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    // Bad filters are clear 400s.
    let (status, doc) = t
        .download(
            &element,
            json!({"filters": [{"column": "n", "op": "gt", "value": "ten"}]}),
        )
        .await;
    assert_eq!(
        (
            status,
            doc["error"]["code"].as_str(),
            doc["error"]["field"].as_str()
        ),
        (400, Some("invalid_filter"), Some("filters[0].value"))
    );
}

#[tokio::test]
async fn cursor_paging_reassembles_the_table_exactly() {
    let t = TestServer::start(|c| {
        c.parquet.row_group_rows = 16;
        c.download.batch_rows = 7;
    })
    .await;
    let element = table(&t).await;
    let all = ids(&t.download(&element, json!({})).await.1);
    assert_eq!(all.len(), 300);
    let filter = json!([{"column": "b", "op": "eq", "value": false}]);
    let filtered = ids(&t.download(&element, json!({"filters": filter})).await.1);
    for (page, filters) in [
        (1u64, None),
        (13, None),
        (64, None),
        (299, None),
        (300, None),
        (1000, None),
        (17, Some(filter.clone())),
    ] {
        let mut got = Vec::new();
        let mut cursor: Option<String> = None;
        let mut pages = 0;
        loop {
            let mut body = json!({"limit": page});
            if let Some(f) = &filters {
                body["filters"] = f.clone();
            }
            if let Some(c) = &cursor {
                body["cursor"] = json!(c);
            }
            let (status, doc) = t.download(&element, body).await;
            assert_eq!(status, 200, "{doc}");
            assert!(ids(&doc).len() as u64 <= page);
            got.extend(ids(&doc));
            pages += 1;
            match doc["next_cursor"].as_str() {
                Some(c) => cursor = Some(c.to_string()),
                None => break,
            }
            assert!(pages < 400, "paging does not end");
        }
        let want = if filters.is_some() { &filtered } else { &all };
        assert_eq!(&got, want, "page size {page}");
    }

    // A cursor keeps its snapshot: rows committed after the first page do not appear.
    let (_, first) = t.download(&element, json!({"limit": 250})).await;
    t.send(json!({"event": "f", "messageId": "late"})).await;
    t.flush().await;
    let (_, rest) = t
        .download(
            &element,
            json!({"limit": 250, "cursor": first["next_cursor"]}),
        )
        .await;
    assert_eq!(ids(&first).len() + ids(&rest).len(), 300);
    assert!(!ids(&rest).contains(&"late".to_string()));

    // A cursor is tied to its query, and garbage is refused clearly.
    let (status, doc) = t
        .download(
            &element,
            json!({"limit": 5, "columns": ["id"], "cursor": first["next_cursor"]}),
        )
        .await;
    assert_eq!(
        (status, doc["error"]["code"].as_str()),
        (400, Some("invalid_cursor"))
    );
    let (status, doc) = t
        .download(&element, json!({"cursor": "not-a-cursor"}))
        .await;
    assert_eq!(
        (status, doc["error"]["code"].as_str()),
        (400, Some("invalid_cursor"))
    );
}

#[tokio::test]
async fn element_filters_and_limit_apply_before_the_request() {
    let t = TestServer::start(|_| {}).await;
    table(&t).await;
    let element = t
        .catalog()
        .create_element(&stowage::catalog::NewElement {
            canvas: t.seeded.canvas.clone(),
            table: "f".into(),
            columns: Some(vec!["id".into(), "n".into()]),
            filters: Some(json!([{"column": "b", "op": "eq", "value": true}])),
            limit: Some(20),
            ..Default::default()
        })
        .unwrap();
    let (_, doc) = t.download(&element, json!({})).await;
    let rows = doc["data"].as_array().unwrap();
    assert_eq!(rows.len(), 20, "element limit");
    assert!(rows.iter().all(|r| r.as_object().unwrap().len() == 2));
    assert!(
        rows.iter()
            .all(|r| r["n"].is_null() || r["n"].as_i64().unwrap() % 4 == 0),
        "element filter on a hidden column"
    );
    let (_, doc) = t
        .download(
            &element,
            json!({"filters": [{"column": "n", "op": "gt", "value": 100}], "limit": 5}),
        )
        .await;
    let ns: Vec<i64> = doc["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["n"].as_i64().unwrap())
        .collect();
    assert_eq!(ns, vec![104, 108, 112, 116, 120]);
}
