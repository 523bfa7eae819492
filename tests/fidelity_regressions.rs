//! One regression test per value-fidelity bug found by the differential test (issue 8), each
//! against a real server over HTTP: float parsing, widening across flush boundaries (and
//! compaction), names normalised after flattening, limits on every table, SQL float equality in
//! filters, collision losers kept, arrays kept as sent.

use crate::common;

use common::TestServer;
use serde_json::{Value, json};

/// Sends raw JSON bodies; panics unless each is accepted.
async fn send_all(t: &TestServer, bodies: &[&str]) {
    for b in bodies {
        let (s, resp) = t.send_raw(b).await;
        assert_eq!(s, 200, "{b}: {resp}");
    }
}

async fn column(t: &TestServer, table: &str, col: &str) -> Vec<Value> {
    t.rows(&t.element(table, None))
        .await
        .iter()
        .map(|r| r[col].clone())
        .collect()
}

#[tokio::test]
async fn floats_are_parsed_exactly() {
    let t = TestServer::start(|_| {}).await;
    send_all(
        &t,
        &[r#"{"event":"floaty","properties":{"v":91343.24026397243,"w":5e-324}}"#],
    )
    .await;
    t.flush().await;
    let rows = t.rows(&t.element("floaty", None)).await;
    assert_eq!(rows[0]["v"].as_f64(), Some(91343.24026397243));
    assert_eq!(rows[0]["w"].as_f64(), Some(5e-324));
}

#[tokio::test]
async fn widening_gives_the_same_text_whatever_the_flush_boundaries() {
    let want = json!(["9223372036854775806", "1.5", "x"]);
    let events = [
        r#"{"event":"w","properties":{"n":9223372036854775806}}"#,
        r#"{"event":"w","properties":{"n":1.5}}"#,
        r#"{"event":"w","properties":{"n":"x"}}"#,
    ];
    // Flush after these event indexes: one window, three, and the two two-window splits.
    for flush_after in [vec![], vec![0, 1], vec![1], vec![0]] {
        let t = TestServer::start(|_| {}).await;
        for (i, e) in events.iter().enumerate() {
            send_all(&t, &[e]).await;
            if flush_after.contains(&i) {
                t.flush().await;
            }
        }
        t.flush().await;
        assert_eq!(
            Value::Array(column(&t, "w", "n").await),
            want,
            "flushes after {flush_after:?}"
        );
    }
}

#[tokio::test]
async fn compaction_keeps_integers_exact_for_a_later_string() {
    let t = TestServer::start(|c| c.compaction.enabled = false).await;
    // Three files: {int, float} (stored as text), {int}, {float}; merged, then widened to string.
    for pair in [
        &[
            r#"{"event":"c","properties":{"n":9007199254740993}}"#,
            r#"{"event":"c","properties":{"n":0.5}}"#,
        ][..],
        &[r#"{"event":"c","properties":{"n":-9223372036854775808}}"#],
        &[r#"{"event":"c","properties":{"n":2.5}}"#],
    ] {
        send_all(&t, pair).await;
        t.flush().await;
    }
    let mut cfg = t.srv().state.config.compaction.clone();
    cfg.min_files = 2;
    let compactor = stowage::warehouse::compaction::Compactor {
        catalog: t.srv().state.catalog.clone(),
        store: t.srv().state.store.clone(),
        prefix: String::new(),
        parquet: t.srv().state.config.parquet.clone(),
        cfg,
    };
    let stats = compactor.compact_once().await.unwrap();
    assert_eq!(
        stats.merged, 6,
        "three files each of c and tracks were merged"
    );
    assert_eq!(
        Value::Array(column(&t, "c", "n").await),
        json!([9007199254740992.0, 0.5, -9223372036854775808.0, 2.5]),
        "read as float64 meanwhile"
    );
    send_all(&t, &[r#"{"event":"c","properties":{"n":"s"}}"#]).await;
    t.flush().await;
    assert_eq!(
        Value::Array(column(&t, "c", "n").await),
        json!([
            "9007199254740993",
            "0.5",
            "-9223372036854775808",
            "2.5",
            "s"
        ])
    );
}

#[tokio::test]
async fn flattened_names_are_normalised_after_joining() {
    let t = TestServer::start(|_| {}).await;
    let long = "k".repeat(127);
    let body = json!({"event":"names","properties":{"x":{"1st":1}, long.clone(): {"b": 2}}});
    send_all(&t, &[&body.to_string()]).await;
    t.flush().await;
    let row = &t.rows(&t.element("names", None)).await[0];
    assert_eq!(row["x_1st"], json!(1));
    assert_eq!(
        row[long.as_str()],
        json!(2),
        "cut at 128 without a trailing _: {row}"
    );
}

#[tokio::test]
async fn column_limits_apply_to_tracks_and_ignore_null_only_properties() {
    let t = TestServer::start(|c| c.limits.columns_per_table = 12).await;
    // 5 standard columns; tracks gains context columns from events of different tables.
    let ctx = |names: &[&str]| {
        let m: serde_json::Map<String, Value> =
            names.iter().map(|n| (n.to_string(), json!(1))).collect();
        Value::Object(m)
    };
    send_all(
        &t,
        &[&json!({"event":"a","context": ctx(&["c1","c2","c3","c4"])}).to_string()],
    )
    .await;
    let (s, body) = t
        .send_raw(&json!({"event":"b","context": ctx(&["c5","c6","c7","c8"])}).to_string())
        .await;
    assert_eq!(s, 400, "tracks would have 13 columns: {body}");
    assert_eq!(body["error"]["code"], "too_many_columns");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("tracks"),
        "{body}"
    );
    // Nulls create no column, so they do not count.
    let nulls: serde_json::Map<String, Value> =
        (0..20).map(|i| (format!("p{i}"), Value::Null)).collect();
    send_all(&t, &[&json!({"event":"c","properties": nulls}).to_string()]).await;
}

#[tokio::test]
async fn float_filters_compare_as_sql() {
    let t = TestServer::start(|_| {}).await;
    send_all(
        &t,
        &[
            r#"{"event":"z","messageId":"neg","properties":{"v":-0.0}}"#,
            r#"{"event":"z","messageId":"pos","properties":{"v":0.0}}"#,
            r#"{"event":"z","messageId":"one","properties":{"v":1.5}}"#,
        ],
    )
    .await;
    t.flush().await;
    let el = t.element("z", None);
    for (op, value, want) in [
        ("eq", json!(0), vec!["neg", "pos"]),
        ("eq", json!(-0.0), vec!["neg", "pos"]),
        ("lt", json!(0), vec![]),
        ("lte", json!(0), vec!["neg", "pos"]),
        ("ne", json!(0), vec!["one"]),
        ("in", json!([0, 1.5]), vec!["neg", "pos", "one"]),
    ] {
        let (s, doc) = t
            .download(
                &el,
                json!({"filters": [{"column": "v", "op": op, "value": value}]}),
            )
            .await;
        assert_eq!(s, 200, "{doc}");
        assert_eq!(common::ids(&doc), want, "{op} {value}");
    }
}

#[tokio::test]
async fn collisions_keep_every_value_and_arrays_keep_their_text() {
    let t = TestServer::start(|_| {}).await;
    send_all(
        &t,
        &[
            r#"{"event":"k","properties":{"Q":null,"q":5}}"#,
            r#"{"event":"k","properties":{"timestamp":1,"property_timestamp":2}}"#,
            r#"{"event":"k","properties":{"arr":[{"z":1, "a":2}, 99999999999999999999]}}"#,
        ],
    )
    .await;
    t.flush().await;
    let rows = t.rows(&t.element("k", None)).await;
    assert_eq!(rows[0]["q"], json!(5));
    assert_eq!(rows[0]["_unmapped"], json!(r#"{"Q":null}"#));
    assert_eq!(rows[1]["property_timestamp"], json!(2));
    assert_eq!(rows[1]["_unmapped"], json!(r#"{"timestamp":1}"#));
    assert_eq!(
        rows[2]["arr"],
        json!(r#"[{"z":1, "a":2}, 99999999999999999999]"#)
    );
    assert_eq!(rows[2]["_unmapped"], Value::Null);
}

#[tokio::test]
async fn unrepresentable_numbers_are_refused_and_numeric_ids_kept_as_sent() {
    let t = TestServer::start(|_| {}).await;
    for (body, code) in [
        (r#"{"event":"e","userId":1e400}"#, "invalid_field"),
        (r#"{"event":"e","messageId":1e400}"#, "invalid_field"),
        (r#"{"event":"e","timestamp":1e400}"#, "invalid_timestamp"),
        (r#"{"event":"e","properties":{"v":1e400}}"#, "invalid_json"),
    ] {
        let (s, resp) = t.send_raw(body).await;
        assert_eq!(
            (s, resp["error"]["code"].as_str()),
            (400, Some(code)),
            "{body}: {resp}"
        );
    }
    send_all(
        &t,
        &[
            r#"{"event":"ids","messageId":12345678901234567890123,"userId":1e2}"#,
            r#"{"event":"ids","messageId":12345678901234567890124,"userId":-0}"#,
        ],
    )
    .await;
    t.flush().await;
    let rows = t.rows(&t.element("ids", None)).await;
    assert_eq!(rows.len(), 2, "neighbouring big ids are not duplicates");
    assert_eq!(rows[0]["id"], json!("12345678901234567890123"));
    assert_eq!(rows[0]["user_id"], json!("1e2"));
    assert_eq!(rows[1]["user_id"], json!("-0"));
}

#[tokio::test]
async fn duplicate_keys_empty_objects_and_negative_zero_keep_their_values() {
    let t = TestServer::start(|_| {}).await;
    send_all(
        &t,
        &[
            r#"{"event":"d","properties":{"x":1,"x":2,"e":{},"a":{"b":null},"a.b":null,"a_b":3}}"#,
            r#"{"event":"d","properties":{"z":-0.0}}"#,
            r#"{"event":"d","properties":{"z":"s"}}"#,
        ],
    )
    .await;
    t.flush().await;
    let rows = t.rows(&t.element("d", None)).await;
    assert_eq!(rows[0]["x"], json!(1));
    assert_eq!(rows[0]["e"], json!("{}"));
    assert_eq!(rows[0]["a_b"], json!(3));
    assert_eq!(
        rows[0]["_unmapped"],
        json!(r#"{"a":{"b":null},"a.b":null,"x":2}"#),
        "shaped like the input, so nested and dotted keys stay apart"
    );
    assert_eq!(
        rows[1]["z"],
        json!("-0"),
        "shortest round-trip text of -0.0"
    );
}

async fn import_csv(t: &TestServer, table: &str, csv: &'static str) {
    let resp = t
        .http
        .post(t.url(&format!("/v1/import?table={table}")))
        .header("X-Auth-Token", &t.seeded.token)
        .header("Content-Type", "text/csv")
        .body(csv)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
}

#[tokio::test]
async fn csv_import_keeps_integer_digits_and_non_finite_text() {
    let t = TestServer::start(|_| {}).await;
    let csv = "n,v\n9223372036854775806,1.5\n1.5,inf\n";
    import_csv(&t, "nums", csv).await;
    // A later string widens n: the integer's digits were kept, not its float64 rounding.
    let csv2 = "n,v\nx,2\n";
    import_csv(&t, "nums", csv2).await;
    let rows = t.rows(&t.element("nums", None)).await;
    let n: Vec<_> = rows.iter().map(|r| r["n"].clone()).collect();
    let v: Vec<_> = rows.iter().map(|r| r["v"].clone()).collect();
    assert_eq!(n, [json!("9223372036854775806"), json!("1.5"), json!("x")]);
    assert_eq!(
        v,
        [json!("1.5"), json!("inf"), json!("2")],
        "inf is text, never a float"
    );
}
