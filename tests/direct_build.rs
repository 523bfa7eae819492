//! A batch built straight into its tables (`ingest.direct_build`, the default) stores what the
//! value-by-value way stores: the same requests to two `stowage serve` processes, one of each
//! way, and the Parquet files their shutdowns write compared table by table. Duplicates within
//! a batch and of an earlier batch are stored once; a batch the direct build gives up on
//! (two keys on one column) is stored the usual way, with `_unmapped`.

use crate::common;

use std::collections::BTreeMap;
use std::path::Path;

use arrow::array::RecordBatch;
use arrow::compute::concat_batches;
use common::parquet_files;
use common::process::{self, Proc};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use serde_json::{Value, json};

/// The requests: two batches of mixed calls with duplicates, then one with a collision.
fn batches() -> Vec<String> {
    let ts = |i: usize| format!("2026-11-27T10:{:02}:{:02}.123Z", i / 60, i % 60);
    let message = |i: usize, id: String| -> Value {
        let user = if i.is_multiple_of(3) {
            json!({"anonymousId": format!("anon-{i}")})
        } else {
            json!({"userId": format!("user-{i}")})
        };
        let mut m = match i % 4 {
            0 => json!({"type": "track", "event": "Order Completed",
                        "properties": {"revenue": i as f64 * 1.5, "coupon": "WIN\"TER", "items": [i, 1]},
                        "context": {"page": {"path": "/checkout", "title": "Pay"}, "ip": "10.0.0.1"}}),
            1 => json!({"type": "track", "event": "Product Viewed",
                        "properties": {"productId": format!("p{i}"), "price": i, "in_stock": i.is_multiple_of(2)}}),
            2 => {
                json!({"type": "identify", "traits": {"email": format!("u{i}@example.com"), "plan": "pro"}})
            }
            _ => {
                json!({"type": "page", "name": "Home", "properties": {"path": "/", "referrer": null}})
            }
        };
        let o = m.as_object_mut().unwrap();
        o.extend(user.as_object().unwrap().clone());
        o.insert("messageId".into(), json!(id));
        o.insert("timestamp".into(), json!(ts(i)));
        m
    };
    let ndjson = |msgs: Vec<Value>| {
        msgs.iter()
            .map(Value::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    };
    // 40 messages; the last two repeat ids of the first two.
    let mut first: Vec<Value> = (0..38).map(|i| message(i, format!("m-{i}"))).collect();
    first.push(message(38, "m-0".into()));
    first.push(message(39, "m-1".into()));
    // 30 more, five of them ids the first batch stored.
    let second: Vec<Value> = (40..70)
        .map(|i| {
            let id = if i < 45 {
                format!("m-{}", i - 40)
            } else {
                format!("m-{i}")
            };
            message(i, id)
        })
        .collect();
    // Two keys on one column (`productId`, `product_id`): kept in `_unmapped`.
    let clash: Vec<Value> = (70..90)
        .map(|i| {
            json!({"type": "track", "event": "Product Viewed", "userId": "u", "messageId": format!("m-{i}"),
                   "timestamp": ts(i), "properties": {"productId": "a", "product_id": "b"}})
        })
        .collect();
    vec![ndjson(first), ndjson(second), ndjson(clash)]
}

/// Every table's rows in the files under `dir`, without `received_at` (each server's own
/// clock), columns in name order.
fn tables(dir: &Path) -> BTreeMap<String, RecordBatch> {
    let mut by_table: BTreeMap<String, Vec<RecordBatch>> = BTreeMap::new();
    for file in parquet_files(dir) {
        let path = file.to_string_lossy().to_string();
        let table = path
            .split("/tables/")
            .nth(1)
            .and_then(|rest| rest.split('/').next())
            .unwrap()
            .to_string();
        let reader = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(&file).unwrap())
            .unwrap()
            .build()
            .unwrap();
        for batch in reader {
            let batch = batch.unwrap();
            let schema = batch.schema();
            let mut names: Vec<&String> = schema
                .fields()
                .iter()
                .map(|f| f.name())
                .filter(|n| *n != "received_at")
                .collect();
            names.sort();
            let order: Vec<usize> = names.iter().map(|n| schema.index_of(n).unwrap()).collect();
            by_table
                .entry(table.clone())
                .or_default()
                .push(batch.project(&order).unwrap());
        }
    }
    by_table
        .into_iter()
        .map(|(t, batches)| {
            let batch = concat_batches(&batches[0].schema(), &batches).unwrap();
            (t, batch)
        })
        .collect()
}

async fn post(proc: &Proc, body: &str) -> Value {
    let resp = reqwest::Client::new()
        .post(proc.url("/v1/batch"))
        .header("X-Auth-Token", proc.demo["events_token"].as_str().unwrap())
        .header("Content-Type", "application/x-ndjson")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let (status, answer) = common::status_json(resp).await;
    assert_eq!(status, 200, "{answer}");
    answer
}

/// The value of a counter in a server's /metrics (0 when absent).
async fn counter(proc: &Proc, name: &str) -> u64 {
    let text = common::get_text(&reqwest::Client::new(), &proc.metrics_url()).await;
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.trim().parse::<f64>().ok())
        .map_or(0, |v| v as u64)
}

#[tokio::test]
async fn a_batch_built_directly_is_stored_as_the_usual_way_stores_it() {
    let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let direct = process::start(da.path(), &[]).await;
    let usual = process::start(db.path(), &[("STOWAGE_INGEST__DIRECT_BUILD", "false")]).await;
    let built = "stowage_batches_built_directly_total";
    for body in batches() {
        let (a, b) = (post(&direct, &body).await, post(&usual, &body).await);
        assert_eq!(a, b, "the same answer, ids in order");
    }
    // The first two batches were built directly, the one with a collision was not; the
    // server told to build value by value built none.
    assert_eq!(counter(&direct, built).await, 2);
    assert_eq!(counter(&usual, built).await, 0);
    assert_eq!(direct.sigterm(), 0);
    assert_eq!(usual.sigterm(), 0);
    let (a, b) = (tables(da.path()), tables(db.path()));
    assert_eq!(
        a.keys().collect::<Vec<_>>(),
        [
            "identifies",
            "order_completed",
            "pages",
            "product_viewed",
            "tracks"
        ]
    );
    assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>());
    for (table, batch) in &a {
        assert_eq!(batch, &b[table], "{table}");
    }
    // Each id once: 38 + 25 new ids in the first two batches, 20 in the third.
    let stored: usize = ["identifies", "pages", "tracks"]
        .iter()
        .map(|t| a[*t].num_rows())
        .sum();
    assert_eq!(stored, 38 + 25 + 20);
    assert!(
        a["product_viewed"].schema().index_of("_unmapped").is_ok(),
        "the collision's loser is kept"
    );
}
