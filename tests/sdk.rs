//! Unmodified Segment-style SDKs against a real server (SPEC §2.2): `segment-analytics-python`,
//! `rudder-sdk-python`, `@segment/analytics-node` and `@rudderstack/rudder-sdk-node` (with its
//! defaults: it gzips the batch and its HTTP client labels it form-urlencoded; it sends
//! `originalTimestamp` and a `sentAt` per message) send track, identify, page, screen, group and
//! alias calls; after a flush, every table holds exactly what was sent, with the right types and
//! skew-corrected timestamps — for the Node SDKs checked against the time fields each message
//! carried on the wire.

use crate::common;

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

use common::{TestServer, micros, python};
use serde_json::{Value, json};

/// The SDKs driven, as `<name>_<language>`: the name is the first argument of the language's
/// `sdk_send` script; the Node script also reports what it sent.
const SDKS: [&str; 4] = ["segment_py", "rudder_py", "segment_node", "rudder_node"];

/// The calls every SDK sends, ids prefixed per SDK.
fn spec(sdk: &str) -> Vec<Value> {
    let user = format!("{sdk}-user");
    let ctx = json!({"ip": "203.0.113.9", "locale": "de-DE"});
    vec![
        json!({"type": "track", "userId": user, "event": "Order Completed", "messageId": format!("{sdk}-track"),
               "timestamp": "2026-03-01T10:00:00.123Z", "context": ctx,
               "properties": {"revenue": 39.95, "quantity": 3, "coupon": "SAVE10", "gift": true,
                              "address": {"city": "Berlin", "zip": "10115"}}}),
        json!({"type": "identify", "userId": user, "messageId": format!("{sdk}-identify"),
               "timestamp": "2026-03-01T10:00:01.000Z", "context": ctx,
               "traits": {"email": "ada@example.com", "age": 36, "premium": false}}),
        json!({"type": "page", "anonymousId": format!("{sdk}-anon"), "messageId": format!("{sdk}-page"),
               "timestamp": "2026-03-01T10:00:02.500Z", "context": ctx, "name": "Pricing", "category": "Docs",
               "properties": {"url": "https://example.com/pricing", "title": "Pricing", "scroll": 0.5}}),
        json!({"type": "screen", "userId": user, "messageId": format!("{sdk}-screen"),
               "timestamp": "2026-03-01T10:00:03.000Z", "context": ctx, "name": "Checkout",
               "properties": {"step": 2}}),
        json!({"type": "group", "userId": user, "messageId": format!("{sdk}-group"), "groupId": format!("{sdk}-acme"),
               "timestamp": "2026-03-01T10:00:04.000Z", "context": ctx,
               "traits": {"plan": "enterprise", "employees": 120}}),
        json!({"type": "alias", "userId": user, "previousId": format!("{sdk}-anon"), "messageId": format!("{sdk}-alias"),
               "timestamp": "2026-03-01T10:00:05.000Z", "context": ctx}),
    ]
}

fn run(cmd: &mut Command) {
    let out = cmd.output().expect("run the SDK script");
    assert!(
        out.status.success(),
        "SDK script failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn node_modules() -> std::path::PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/js");
    for package in ["@segment/analytics-node", "@rudderstack/rudder-sdk-node"] {
        assert!(
            dir.join("node_modules").join(package).exists(),
            "{package} is missing: run `npm ci --prefix tests/js` (scripts/test does) before this test"
        );
    }
    dir
}

/// The time fields one message carried on the wire, as the server must read them (SPEC §2.2
/// "Clock skew").
struct WireTimes {
    /// `timestamp`, else `originalTimestamp`.
    client_time: i64,
    /// The message's `sentAt`, else its batch's.
    sent_at: i64,
    /// Whether the message was RudderStack-shaped: `originalTimestamp` and its own `sentAt`, no
    /// `timestamp`.
    rudderstack_shape: bool,
}

/// The time fields of every message in the batch bodies a Node SDK reported sending, by
/// `messageId` (a retried batch's last attempt wins: it is the one stored).
fn wire_times(sent: &Path) -> HashMap<String, WireTimes> {
    let bodies: Vec<Value> = serde_json::from_slice(&std::fs::read(sent).unwrap()).unwrap();
    let mut out = HashMap::new();
    for body in &bodies {
        for m in body["batch"].as_array().unwrap() {
            let time = |v: &Value| (!v.is_null()).then(|| micros(v));
            let client_time = time(&m["timestamp"]).or(time(&m["originalTimestamp"]));
            let sent_at = time(&m["sentAt"]).or(time(&body["sentAt"]));
            let times = WireTimes {
                client_time: client_time.unwrap_or_else(|| panic!("no client time: {m}")),
                sent_at: sent_at.unwrap_or_else(|| panic!("no sentAt: {body}")),
                rudderstack_shape: m["timestamp"].is_null()
                    && !m["originalTimestamp"].is_null()
                    && !m["sentAt"].is_null(),
            };
            out.insert(m["messageId"].as_str().unwrap().to_string(), times);
        }
    }
    out
}

/// Column types of a download's `meta`.
fn types(doc: &Value) -> HashMap<String, String> {
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

/// The one row with `id`, and the table's column types.
async fn row(t: &TestServer, element: &str, id: &str) -> (Value, HashMap<String, String>) {
    let (status, doc) = t
        .download(
            element,
            json!({"filters": [{"column": "id", "op": "eq", "value": id}]}),
        )
        .await;
    assert_eq!(status, 200, "{doc}");
    let rows = doc["data"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "exactly one row {id}: {doc}");
    (rows[0].clone(), types(&doc))
}

/// The standard columns; `wire` is what the SDK sent for the message, when it reports that.
fn check_common(row: &Value, call: &Value, wire: Option<&WireTimes>) {
    assert_eq!(row["id"], call["messageId"]);
    for (col, field) in [("user_id", "userId"), ("anonymous_id", "anonymousId")] {
        if !call[field].is_null() {
            assert_eq!(row[col], call[field], "{col} of {row}");
        }
    }
    assert_eq!(row["context_ip"], json!("203.0.113.9"), "{row}");
    // Clock skew: the client's time is kept; the stored one is received_at − (sentAt − client
    // time).
    let time = |column: &str| {
        assert!(!row[column].is_null(), "{column} is null: {row}");
        micros(&row[column])
    };
    let original = time("original_timestamp");
    let sent_at = time("sent_at");
    match wire {
        Some(wire) => {
            assert_eq!(original, wire.client_time, "{row}");
            assert_eq!(sent_at, wire.sent_at, "{row}");
        }
        None => assert_eq!(original, micros(&call["timestamp"]), "{row}"),
    }
    let expected = time("received_at") - (sent_at - original);
    assert_eq!(time("timestamp"), expected, "{row}");
}

async fn check(
    t: &TestServer,
    sdk: &str,
    elements: &HashMap<&str, String>,
    wire: Option<&HashMap<String, WireTimes>>,
) {
    let calls = spec(sdk);
    let check_common = |row: &Value, call: &Value| {
        let id = call["messageId"].as_str().unwrap();
        check_common(row, call, wire.map(|w| &w[id]));
    };
    let (track, ty) = row(t, &elements["order_completed"], &format!("{sdk}-track")).await;
    check_common(&track, &calls[0]);
    assert_eq!(track["event"], json!("order_completed"));
    assert_eq!(track["event_text"], json!("Order Completed"));
    for (col, v, ty_name) in [
        ("revenue", json!(39.95), "float64"),
        ("quantity", json!(3), "int64"),
        ("coupon", json!("SAVE10"), "string"),
        ("gift", json!(true), "boolean"),
        ("address_city", json!("Berlin"), "string"),
        ("address_zip", json!("10115"), "string"),
    ] {
        assert_eq!(track[col], v, "{sdk} {col}: {track}");
        assert_eq!(ty[col], ty_name, "{sdk} {col}");
    }
    let (tr, _) = row(t, &elements["tracks"], &format!("{sdk}-track")).await;
    assert_eq!(tr["event"], json!("order_completed"));

    let (ident, ty) = row(t, &elements["identifies"], &format!("{sdk}-identify")).await;
    check_common(&ident, &calls[1]);
    for (col, v, ty_name) in [
        ("email", json!("ada@example.com"), "string"),
        ("age", json!(36), "int64"),
        ("premium", json!(false), "boolean"),
    ] {
        assert_eq!(ident[col], v, "{sdk} {col}: {ident}");
        assert_eq!(ty[col], ty_name);
    }
    let (page, ty) = row(t, &elements["pages"], &format!("{sdk}-page")).await;
    check_common(&page, &calls[2]);
    assert_eq!(page["name"], json!("Pricing"), "{sdk}: {page}");
    assert_eq!(page["url"], json!("https://example.com/pricing"));
    assert_eq!(page["title"], json!("Pricing"));
    assert_eq!(page["scroll"], json!(0.5));
    assert_eq!(ty["scroll"], "float64");
    let (screen, ty) = row(t, &elements["screens"], &format!("{sdk}-screen")).await;
    check_common(&screen, &calls[3]);
    assert_eq!(screen["name"], json!("Checkout"));
    assert_eq!(screen["step"], json!(2));
    assert_eq!(ty["step"], "int64");
    let (group, ty) = row(t, &elements["groups"], &format!("{sdk}-group")).await;
    check_common(&group, &calls[4]);
    assert_eq!(group["group_id"], json!(format!("{sdk}-acme")));
    assert_eq!(group["plan"], json!("enterprise"), "{sdk}: {group}");
    assert_eq!(group["employees"], json!(120));
    assert_eq!(ty["employees"], "int64");
    let (alias, _) = row(t, &elements["aliases"], &format!("{sdk}-alias")).await;
    check_common(&alias, &calls[5]);
    assert_eq!(alias["previous_id"], json!(format!("{sdk}-anon")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unmodified_sdks_land_every_call_in_its_table() {
    let t = TestServer::start(|_| {}).await;
    let url = t.url("");
    let token = t.seeded.token.clone();
    let dir = tempfile::tempdir().unwrap();
    let js = node_modules();
    // What each Node SDK reported sending, to check the stored times against.
    let mut wire: HashMap<&str, HashMap<String, WireTimes>> = HashMap::new();
    for sdk in SDKS {
        let path = dir.path().join(format!("{sdk}.json"));
        std::fs::write(&path, serde_json::to_vec(&spec(sdk)).unwrap()).unwrap();
        let sent = dir.path().join(format!("{sdk}.sent.json"));
        let mut cmd = match sdk.split_once('_') {
            Some((name, "node")) => {
                let mut c = Command::new("node");
                c.arg(js.join("sdk_send.mjs")).arg(name).current_dir(&js);
                c.args([&url, &token]).arg(&path).arg(&sent);
                c
            }
            Some((name, "py")) => {
                let mut c = Command::new(python());
                c.arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/py/sdk_send.py"))
                    .arg(name);
                c.args([&url, &token]).arg(&path);
                c
            }
            _ => unreachable!("{sdk}"),
        };
        // The SDKs block; run them off the runtime the server uses.
        tokio::task::spawn_blocking(move || run(&mut cmd))
            .await
            .unwrap();
        if sdk.ends_with("_node") {
            wire.insert(sdk, wire_times(&sent));
        }
    }
    // RudderStack's SDK was driven as its users drive it: no app timestamp, so the server had to
    // read its originalTimestamp and per-message sentAt.
    let rudder = &wire["rudder_node"];
    assert_eq!(rudder.len(), spec("rudder_node").len());
    assert!(rudder.values().all(|w| w.rudderstack_shape));
    t.flush().await;
    let elements: HashMap<&str, String> = [
        "tracks",
        "order_completed",
        "identifies",
        "pages",
        "screens",
        "groups",
        "aliases",
    ]
    .into_iter()
    .map(|table| (table, t.element(table, None)))
    .collect();
    for sdk in SDKS {
        check(&t, sdk, &elements, wire.get(sdk)).await;
    }
}

/// Error handling: the Segment SDK reads `code` and `message` from the top level of an error
/// body; an unknown token reaches its error callback as `invalid_token`, and nothing is stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_reports_the_servers_error_code() {
    let t = TestServer::start(|_| {}).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("spec.json");
    std::fs::write(&path, serde_json::to_vec(&spec("bad")[..1]).unwrap()).unwrap();
    let url = t.url("");
    tokio::task::spawn_blocking(move || {
        run(Command::new(python())
            .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/py/sdk_send.py"))
            .args(["segment", &url, "stw_evt_not_a_token"])
            .arg(&path)
            .arg("invalid_token"))
    })
    .await
    .unwrap();
    t.flush().await;
    let element = t.element("tracks", None);
    let (status, doc) = t.download(&element, json!({})).await;
    assert!(status == 404 || doc["rows"] == json!(0), "{doc}");
}
