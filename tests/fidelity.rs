//! Every value exactly as sent (SPEC §4.2), checked by a property test against an independent
//! model. proptest generates events — event names and property keys that collide after
//! normalisation, nesting to depth 4, arrays written with odd spacing and big integers, nulls,
//! integers near the i64 limits, floats across the whole range, strings with quotes, newlines
//! and unicode, a context object — sends them to a real server over HTTP with flushes at random
//! points, and compares every cell of every table in all five download formats with what the
//! model in this file says the warehouse must hold. The model is written from the SPEC, not
//! from the implementation: its own name normaliser, flattening, collision rule, widening and
//! float-to-text conversion.

use crate::common;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};

use arrow::array::{Array, AsArray};
use arrow::datatypes::{DataType, Float64Type, Int64Type};
use arrow::record_batch::RecordBatch;
use common::{Seeded, TestServer, seed};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};
use serde_json::{Value as Json, json};
use stowage::catalog::NewElement;

// ---------- generated input ----------

#[derive(Debug, Clone)]
enum G {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    /// An array, as the exact text sent.
    Arr(String),
    /// A number in a particular spelling, and what it means.
    Num(&'static str, M),
    Obj(Vec<(String, G)>),
}

fn write(g: &G, out: &mut String) {
    match g {
        G::Null => out.push_str("null"),
        G::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        G::Int(i) => out.push_str(&i.to_string()),
        G::Float(f) => out.push_str(&format!("{f:?}")),
        G::Str(s) => out.push_str(&serde_json::to_string(s).unwrap()),
        G::Arr(raw) => out.push_str(raw),
        G::Num(raw, _) => out.push_str(raw),
        G::Obj(kv) => {
            out.push('{');
            for (i, (k, v)) in kv.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&serde_json::to_string(k).unwrap());
                out.push(':');
                write(v, out);
            }
            out.push('}');
        }
    }
}

fn text_of(g: &G) -> String {
    let mut s = String::new();
    write(g, &mut s);
    s
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        12 => prop::sample::select(vec![
            "a", "A", "b", "aB", "a_b", "A B", "x", "1st", "Q", "q", "n", "N", "timestamp",
            "property_timestamp", "id", "context_ip", "userName", "user_name", "user", "été",
            "_x_",
        ])
        .prop_map(str::to_string),
        1 => "[a-zA-Z][a-zA-Z0-9 _.-]{0,5}",
        1 => (1usize..3).prop_map(|n| format!("{}{}", "k".repeat(60 * n), "_Z")),
    ]
}

fn float() -> impl Strategy<Value = f64> {
    prop_oneof![
        prop::sample::select(vec![
            0.0,
            -0.0,
            1.5,
            -2.25,
            91343.24026397243,
            1e20,
            1e21,
            1e-7,
            5e-324,
            1.7976931348623157e308,
            -1.7976931348623157e308,
            0.1,
            9007199254740993.0,
            3.0,
        ]),
        any::<u64>()
            .prop_map(f64::from_bits)
            .prop_filter("finite", |f| f.is_finite()),
        -1e6f64..1e6,
    ]
}

fn int() -> impl Strategy<Value = i64> {
    prop_oneof![
        prop::sample::select(vec![
            0,
            -1,
            5,
            i64::MAX,
            i64::MIN,
            i64::MAX - 1,
            (1 << 53) + 1,
            -(1 << 53) - 1,
            1 << 53,
        ]),
        any::<i64>(),
        -1000i64..1000,
    ]
}

fn string() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "",
            "x",
            "a \"quoted\" word",
            "line\nbreak\r\n",
            "tab\there",
            "ünïcødé ✓ 日本",
            "comma, and ; semi",
            "\\back\\slash",
            "null",
            "5",
            "1.5",
            "true"
        ])
        .prop_map(str::to_string),
        "\\PC{0,12}",
    ]
}

fn array() -> impl Strategy<Value = String> {
    (
        prop::collection::vec((int(), float(), string()), 0..3),
        0usize..3,
    )
        .prop_map(|(items, pad)| {
            let sp = " ".repeat(pad);
            let parts: Vec<String> = items
                .iter()
                .map(|(i, f, s)| {
                    format!(
                        "{i},{sp}{f:?},{}, {{\"z\":1,{sp}\"a\":{}}},99999999999999999999",
                        serde_json::to_string(s).unwrap(),
                        i
                    )
                })
                .collect();
            format!("[{sp}{}]", parts.join(&format!(",{sp}")))
        })
}

fn scalar() -> impl Strategy<Value = G> {
    prop_oneof![
        1 => Just(G::Null),
        1 => any::<bool>().prop_map(G::Bool),
        3 => int().prop_map(G::Int),
        3 => float().prop_map(G::Float),
        2 => string().prop_map(G::Str),
        1 => array().prop_map(G::Arr),
        1 => prop::sample::select(vec![
            ("1E2", M::Float(100.0)),
            ("1.0", M::Float(1.0)),
            ("-0", M::Int(0)),
            ("-0.0", M::Float(-0.0)),
            ("1e-2", M::Float(0.01)),
            ("0.1e1", M::Float(1.0)),
            ("2.5E+3", M::Float(2500.0)),
            ("10000000000000000000000", M::Float(1e22)),
            ("-9223372036854775809", M::Float(-9223372036854775809.0)),
            ("18446744073709551615", M::Float(18446744073709551615.0)),
        ])
        .prop_map(|(raw, m)| G::Num(raw, m)),
    ]
}

fn value(depth: u32) -> BoxedStrategy<G> {
    scalar()
        .prop_recursive(depth, 24, 4, |inner| {
            prop::collection::vec((key(), inner), 0..4).prop_map(G::Obj)
        })
        .boxed()
}

/// An object whose values nest `depth` objects deep at most.
fn object(depth: u32) -> impl Strategy<Value = Vec<(String, G)>> {
    // Keys repeat (the pool is small): duplicate keys are part of what clients send.
    prop::collection::vec((key(), value(depth)), 0..8)
}

#[derive(Debug, Clone)]
struct Event {
    name: String,
    props: Vec<(String, G)>,
    context: Option<Vec<(String, G)>>,
    flush_after: bool,
}

fn event() -> impl Strategy<Value = Event> {
    (
        prop::sample::select(vec![
            "Sign Up",
            "signUp",
            "sign_up",
            "Order Done",
            "order-done",
            "Tracks",
            "Pages",
            "identifies",
        ]),
        object(4),
        prop::option::weighted(0.3, object(2)),
        prop::bool::weighted(0.3),
    )
        .prop_map(|(name, props, context, flush_after)| Event {
            name: name.to_string(),
            props,
            context,
            flush_after,
        })
}

// ---------- the model (SPEC §4.2) ----------

const STANDARD: &[&str] = &[
    "id",
    "event",
    "event_text",
    "timestamp",
    "received_at",
    "original_timestamp",
    "sent_at",
    "user_id",
    "anonymous_id",
];

/// camelCase → snake_case, lowercase, `[a-z0-9_]`, runs of `_` collapsed, trimmed, leading digit
/// prefixed with `_`, at most 128 characters and never ending in `_`.
fn model_name(raw: &str) -> String {
    let c: Vec<char> = raw.chars().collect();
    let mut s = String::new();
    for i in 0..c.len() {
        let up = c[i].is_ascii_uppercase();
        if up && i > 0 {
            let p = c[i - 1];
            let next_lower = c.get(i + 1).is_some_and(|n| n.is_ascii_lowercase());
            if p.is_ascii_lowercase()
                || p.is_ascii_digit()
                || (p.is_ascii_uppercase() && next_lower)
            {
                s.push('_');
            }
        }
        s.push(if c[i].is_ascii_alphanumeric() {
            c[i].to_ascii_lowercase()
        } else {
            '_'
        });
    }
    let parts: Vec<&str> = s.split('_').filter(|p| !p.is_empty()).collect();
    let mut out = parts.join("_");
    if out.starts_with(|ch: char| ch.is_ascii_digit()) {
        out.insert(0, '_');
    }
    out.truncate(128);
    while out.ends_with('_') {
        out.pop();
    }
    out
}

#[derive(Debug, Clone, PartialEq)]
enum M {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
}

fn m_of(g: &G) -> M {
    match g {
        G::Null => M::Null,
        G::Bool(b) => M::Bool(*b),
        G::Int(i) => M::Int(*i),
        G::Float(f) => M::Float(*f),
        G::Str(s) => M::Str(s.clone()),
        G::Num(_, m) => m.clone(),
        G::Arr(_) | G::Obj(_) => M::Str(text_of(g)),
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Ty {
    Bool,
    Int,
    Float,
    Str,
}

fn ty(m: &M) -> Option<Ty> {
    Some(match m {
        M::Null => return None,
        M::Bool(_) => Ty::Bool,
        M::Int(_) => Ty::Int,
        M::Float(_) => Ty::Float,
        M::Str(_) => Ty::Str,
    })
}

fn widen(a: Ty, b: Ty) -> Ty {
    match (a, b) {
        _ if a == b => a,
        (Ty::Int, Ty::Float) | (Ty::Float, Ty::Int) => Ty::Float,
        _ => Ty::Str,
    }
}

/// Shortest round-trip decimal, written without an exponent (from `{:e}`'s digits).
fn model_float_text(f: f64) -> String {
    if f == 0.0 {
        return if f.is_sign_negative() { "-0" } else { "0" }.into();
    }
    let e = format!("{:e}", f.abs());
    let (mant, exp) = e.split_once('e').unwrap();
    let exp: i64 = exp.parse().unwrap();
    let digits: String = mant.chars().filter(|c| *c != '.').collect();
    let point = exp + 1;
    let body = if point <= 0 {
        format!("0.{}{digits}", "0".repeat((-point) as usize))
    } else if point as usize >= digits.len() {
        format!("{digits}{}", "0".repeat(point as usize - digits.len()))
    } else {
        format!(
            "{}.{}",
            &digits[..point as usize],
            &digits[point as usize..]
        )
    };
    if f < 0.0 { format!("-{body}") } else { body }
}

/// Candidates (column, key path, value, text as sent) in byte order of keys.
fn candidates(
    obj: &[(String, G)],
    raw_prefix: &str,
    path_prefix: &[String],
    depth: usize,
    property: bool,
    out: &mut Vec<Candidate>,
) {
    let mut sorted = obj.to_vec();
    sorted.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    for (k, v) in sorted {
        let joined = if raw_prefix.is_empty() {
            k.clone()
        } else {
            format!("{raw_prefix}_{k}")
        };
        let mut path = path_prefix.to_vec();
        path.push(k.clone());
        // An empty object has nothing to flatten: it is a value, `{}`.
        if let G::Obj(inner) = &v
            && depth < 3
            && !inner.is_empty()
        {
            candidates(inner, &joined, &path, depth + 1, property, out);
            continue;
        }
        let mut col = model_name(&joined);
        if property && (STANDARD.contains(&col.as_str()) || col.starts_with("context_")) {
            col = model_name(&format!("property_{col}"));
        }
        out.push((col, path, m_of(&v), text_of(&v)));
    }
}

/// A candidate: (column, key path, value, text as sent).
type Candidate = (String, Vec<String>, M, String);
/// Collision losers: (key path, text as sent).
type Lost = Vec<(Vec<String>, String)>;
/// A row's cells.
type Row = Vec<(String, M)>;

/// Cells (first non-null key per column wins) and the losers' `{"path": text}` pairs.
fn resolve(c: Vec<Candidate>) -> (Row, Lost) {
    let mut cols: Vec<String> = Vec::new();
    let mut by: HashMap<String, Vec<usize>> = HashMap::new();
    for (i, (col, ..)) in c.iter().enumerate() {
        if !by.contains_key(col) {
            cols.push(col.clone());
        }
        by.entry(col.clone()).or_default().push(i);
    }
    let mut cells = Vec::new();
    let mut lost: Vec<usize> = Vec::new();
    for col in cols {
        let idx = &by[&col];
        let win = idx
            .iter()
            .copied()
            .find(|i| c[*i].2 != M::Null)
            .unwrap_or(idx[0]);
        cells.push((col, c[win].2.clone()));
        lost.extend(idx.iter().copied().filter(|i| *i != win));
    }
    lost.sort();
    (
        cells,
        lost.into_iter()
            .map(|i| (c[i].1.clone(), c[i].3.clone()))
            .collect(),
    )
}

/// `_unmapped`: an object shaped like the input — a loser at `a.b` is `{"a":{"b":…}}` — with
/// members in the losers' order and repeated keys kept.
fn unmapped(losers: &Lost) -> M {
    fn render(items: &[(&[String], &str)]) -> String {
        let mut members = Vec::new();
        let mut taken = vec![false; items.len()];
        for i in 0..items.len() {
            if taken[i] {
                continue;
            }
            let (path, raw) = items[i];
            let key = serde_json::to_string(&path[0]).unwrap();
            if path.len() == 1 {
                taken[i] = true;
                members.push(format!("{key}:{raw}"));
                continue;
            }
            let mut group = Vec::new();
            for j in i..items.len() {
                if !taken[j] && items[j].0.len() > 1 && items[j].0[0] == path[0] {
                    taken[j] = true;
                    group.push((&items[j].0[1..], items[j].1));
                }
            }
            members.push(format!("{key}:{}", render(&group)));
        }
        format!("{{{}}}", members.join(","))
    }
    let items: Vec<(&[String], &str)> = losers.iter().map(|(p, r)| (&p[..], r.as_str())).collect();
    M::Str(render(&items))
}

/// Expected rows per table: (id, cells).
type Tables = BTreeMap<String, Vec<(String, Vec<(String, M)>)>>;

fn model(events: &[Event], ids: &[String]) -> Tables {
    let mut tables: Tables = BTreeMap::new();
    for (ev, id) in events.iter().zip(ids) {
        let mut table = model_name(&ev.name);
        // The tables of the Segment calls are taken: an event named like one gets `_event`.
        if [
            "tracks",
            "identifies",
            "pages",
            "screens",
            "groups",
            "aliases",
        ]
        .contains(&table.as_str())
        {
            table = format!("{table}_event");
        }
        let mut ctx_cells = Vec::new();
        let mut losers = Vec::new();
        if let Some(ctx) = &ev.context {
            let mut c = Vec::new();
            candidates(ctx, "context", &["context".to_string()], 1, false, &mut c);
            let (cells, lost) = resolve(c);
            ctx_cells = cells;
            losers = lost;
        }
        let mut tracks_row = ctx_cells.clone();
        if !losers.is_empty() {
            tracks_row.push(("_unmapped".into(), unmapped(&losers)));
        }
        let mut c = Vec::new();
        candidates(&ev.props, "", &[], 1, true, &mut c);
        let (props, lost) = resolve(c);
        losers.extend(lost);
        let mut row = ctx_cells;
        row.extend(props);
        if !losers.is_empty() {
            row.push(("_unmapped".into(), unmapped(&losers)));
        }
        tables
            .entry("tracks".into())
            .or_default()
            .push((id.clone(), tracks_row));
        tables.entry(table).or_default().push((id.clone(), row));
    }
    tables
}

/// The column types a table must end up with (null-only columns do not exist).
fn types(rows: &[(String, Vec<(String, M)>)]) -> HashMap<String, Ty> {
    let mut out: HashMap<String, Ty> = HashMap::new();
    for (_, cells) in rows {
        for (c, v) in cells {
            if let Some(t) = ty(v) {
                let w = out.get(c).map_or(t, |o| widen(*o, t));
                out.insert(c.clone(), w);
            }
        }
    }
    out
}

/// A value as downloaded, normalised across formats.
#[derive(Debug, Clone, PartialEq)]
enum Out {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
}

fn expected(v: &M, t: Ty) -> Out {
    match (v, t) {
        (M::Null, _) => Out::Null,
        (v, Ty::Str) => Out::Str(match v {
            M::Int(i) => i.to_string(),
            M::Float(f) => model_float_text(*f),
            M::Bool(b) => b.to_string(),
            M::Str(s) => s.clone(),
            M::Null => unreachable!(),
        }),
        (M::Int(i), Ty::Float) => Out::Float(*i as f64),
        (M::Float(f), Ty::Float) => Out::Float(*f),
        (M::Int(i), Ty::Int) => Out::Int(*i),
        (M::Bool(b), Ty::Bool) => Out::Bool(*b),
        (v, t) => panic!("model: {v:?} in a {t:?} column"),
    }
}

fn same(a: &Out, b: &Out) -> bool {
    match (a, b) {
        (Out::Float(x), Out::Float(y)) => x.to_bits() == y.to_bits(), // the sign of 0 too
        _ => a == b,
    }
}

// ---------- downloads ----------

async fn fetch(t: &TestServer, team: &Seeded, element: &str, format: &str) -> bytes::Bytes {
    let body = json!({"canvasId": team.canvas, "elementId": element, "format": format});
    let resp = t
        .http
        .post(t.url("/data/table"))
        .header("x-api-key", &team.key)
        .header("Content-Type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200, "{format}");
    resp.bytes().await.unwrap()
}

fn typed_json(v: &Json, ty: &str) -> Out {
    match (v, ty) {
        (Json::Null, _) => Out::Null,
        (Json::String(s), "string") => Out::Str(s.clone()),
        (v, "int64") => Out::Int(v.as_i64().expect("int64")),
        (v, "float64") => Out::Float(v.as_f64().expect("float64")),
        (Json::Bool(b), "boolean") => Out::Bool(*b),
        (v, t) => Out::Str(format!("unexpected {t} value {v}")),
    }
}

fn from_batches(batches: &[RecordBatch]) -> Vec<BTreeMap<String, Out>> {
    let mut rows = Vec::new();
    for b in batches {
        for r in 0..b.num_rows() {
            let mut row = BTreeMap::new();
            for (f, col) in b.schema().fields().iter().zip(b.columns()) {
                let v = if col.is_null(r) {
                    Out::Null
                } else {
                    match f.data_type() {
                        DataType::Utf8 => Out::Str(col.as_string::<i32>().value(r).to_string()),
                        DataType::Int64 => Out::Int(col.as_primitive::<Int64Type>().value(r)),
                        DataType::Float64 => Out::Float(col.as_primitive::<Float64Type>().value(r)),
                        DataType::Boolean => Out::Bool(col.as_boolean().value(r)),
                        _ => continue, // timestamps: not part of this model
                    }
                };
                row.insert(f.name().clone(), v);
            }
            rows.push(row);
        }
    }
    rows
}

/// Every format's rows, as (format, rows); column types from the JSON `meta`.
async fn downloads(
    t: &TestServer,
    team: &Seeded,
    element: &str,
) -> (
    HashMap<String, String>,
    Vec<(&'static str, Vec<BTreeMap<String, Out>>)>,
) {
    let doc: Json = serde_json::from_slice(&fetch(t, team, element, "json").await).unwrap();
    let meta: HashMap<String, String> = doc["meta"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["name"].as_str().unwrap().into(),
                m["type"].as_str().unwrap().into(),
            )
        })
        .collect();
    let from_json = |obj: &Json| -> BTreeMap<String, Out> {
        obj.as_object()
            .unwrap()
            .iter()
            .filter(|(k, _)| meta[k.as_str()] != "timestamp")
            .map(|(k, v)| (k.clone(), typed_json(v, &meta[k.as_str()])))
            .collect()
    };
    let mut out = vec![(
        "json",
        doc["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(from_json)
            .collect(),
    )];
    let nd = fetch(t, team, element, "ndjson").await;
    let nd_rows = std::str::from_utf8(&nd)
        .unwrap()
        .lines()
        .map(|l| from_json(&serde_json::from_str(l).unwrap()))
        .collect();
    out.push(("ndjson", nd_rows));
    let csv_bytes = fetch(t, team, element, "csv").await;
    let mut rdr = csv::Reader::from_reader(&csv_bytes[..]);
    let headers: Vec<String> = rdr.headers().unwrap().iter().map(str::to_string).collect();
    let mut csv_rows = Vec::new();
    for rec in rdr.records() {
        let rec = rec.unwrap();
        let mut row = BTreeMap::new();
        for (h, cell) in headers.iter().zip(rec.iter()) {
            let v = match meta[h.as_str()].as_str() {
                "timestamp" => continue,
                _ if cell.is_empty() => Out::Null,
                "string" => Out::Str(cell.to_string()),
                "int64" => Out::Int(cell.parse().unwrap()),
                "float64" => Out::Float(cell.parse().unwrap()),
                "boolean" => Out::Bool(cell == "true"),
                t => panic!("{t}"),
            };
            row.insert(h.clone(), v);
        }
        csv_rows.push(row);
    }
    out.push(("csv", csv_rows));
    let ipc = fetch(t, team, element, "arrow").await;
    let reader =
        arrow::ipc::reader::StreamReader::try_new(std::io::Cursor::new(ipc.to_vec()), None)
            .unwrap();
    let batches: Vec<RecordBatch> = reader.map(|b| b.unwrap()).collect();
    out.push(("arrow", from_batches(&batches)));
    let pq = fetch(t, team, element, "parquet").await;
    let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(pq)
        .unwrap()
        .build()
        .unwrap();
    let batches: Vec<RecordBatch> = reader.map(|b| b.unwrap()).collect();
    out.push(("parquet", from_batches(&batches)));
    (meta, out)
}

// ---------- the property ----------

static CELLS: AtomicUsize = AtomicUsize::new(0);
static EVENTS: AtomicUsize = AtomicUsize::new(0);
static WIDENED: AtomicUsize = AtomicUsize::new(0);

async fn check_case(t: &TestServer, n: usize, events: &[Event]) -> Result<(), TestCaseError> {
    let team = seed(t.catalog(), &format!("fidelity-{n}"));
    let mut ids = Vec::new();
    for (i, ev) in events.iter().enumerate() {
        let id = format!("c{n}-e{i}");
        let mut body = json!({"event": ev.name, "messageId": id}).to_string();
        body.pop();
        body.push_str(",\"properties\":");
        body.push_str(&text_of(&G::Obj(ev.props.clone())));
        if let Some(ctx) = &ev.context {
            body.push_str(",\"context\":");
            body.push_str(&text_of(&G::Obj(ctx.clone())));
        }
        body.push('}');
        let (status, resp) = t.send_as(&team.token, &body, &[]).await;
        prop_assert_eq!(status, 200, "{} → {}", body, resp);
        ids.push(id);
        if ev.flush_after {
            t.flush().await;
        }
    }
    t.flush().await;
    EVENTS.fetch_add(events.len(), Ordering::Relaxed);
    for (table, rows) in model(events, &ids) {
        let tys = types(&rows);
        let element = t
            .catalog()
            .create_element(&NewElement {
                canvas: team.canvas.clone(),
                table: table.clone(),
                ..Default::default()
            })
            .unwrap();
        let (meta, formats) = downloads(t, &team, &element).await;
        for (col, ty) in &tys {
            let want = match ty {
                Ty::Bool => "boolean",
                Ty::Int => "int64",
                Ty::Float => "float64",
                Ty::Str => "string",
            };
            prop_assert_eq!(
                meta.get(col).map(String::as_str),
                Some(want),
                "{}.{} type",
                table,
                col
            );
        }
        for (format, got) in formats {
            prop_assert_eq!(got.len(), rows.len(), "{} {} rows", format, table);
            for ((id, cells), row) in rows.iter().zip(&got) {
                prop_assert_eq!(
                    &row["id"],
                    &Out::Str(id.clone()),
                    "{} {} order",
                    format,
                    table
                );
                // Nothing the model does not expect: every other cell is null.
                for (col, v) in row {
                    let known = ["id", "event", "event_text"].contains(&col.as_str())
                        || cells.iter().any(|(c, _)| c == col);
                    prop_assert!(
                        known || *v == Out::Null,
                        "{} {}.{} row {}: unexpected {:?}",
                        format,
                        table,
                        col,
                        id,
                        v
                    );
                }
                for (col, v) in cells {
                    let Some(t) = tys.get(col) else { continue };
                    let want = expected(v, *t);
                    let mut have = row.get(col).cloned().unwrap_or(Out::Null);
                    if format == "csv" && have == Out::Null && want == Out::Str(String::new()) {
                        have = want.clone(); // CSV writes "" and null alike
                    }
                    prop_assert!(
                        same(&want, &have),
                        "{} {}.{} row {}: want {:?}, got {:?}",
                        format,
                        table,
                        col,
                        id,
                        want,
                        have
                    );
                    CELLS.fetch_add(1, Ordering::Relaxed);
                    if matches!(v, M::Float(_)) && *t == Ty::Str {
                        WIDENED.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }
    }
    Ok(())
}

#[test]
fn every_value_is_stored_exactly_as_sent_in_every_format() {
    let cases: u32 = std::env::var("STOWAGE_FIDELITY_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(250);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let t = rt.block_on(TestServer::start(|c| c.limits.tables_per_team = 100));
    let config = Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    };
    let seed = [7u8; 32];
    let mut runner =
        TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &seed));
    let n = AtomicUsize::new(0);
    let result = runner.run(&prop::collection::vec(event(), 1..10), |events| {
        let i = n.fetch_add(1, Ordering::Relaxed);
        rt.block_on(check_case(&t, i, &events))
    });
    eprintln!(
        "fidelity: {} cases, {} events, {} cells compared across 5 formats ({} floats widened to text)",
        n.load(Ordering::Relaxed),
        EVENTS.load(Ordering::Relaxed),
        CELLS.load(Ordering::Relaxed),
        WIDENED.load(Ordering::Relaxed)
    );
    if let Err(e) = result {
        panic!("{e}");
    }
}
