//! Objects → named, typed cells (SPEC §4.2), from the JSON text as sent. Nested objects flatten
//! up to [`MAX_FLATTEN_DEPTH`] keys deep; the joined key path is normalised as a whole (so
//! `{"x":{"1st":1}}` → `x_1st`). Values keep what was sent: numbers are parsed exactly (an
//! integer in i64 stays an integer), arrays and too-deep objects are stored as their JSON text
//! unchanged; an empty object is stored as `{}`. When several keys land on one column (or one key
//! appears twice in an object), a null never wins: the first non-null key in byte order takes it,
//! and every other value is kept in the row's [`UNMAPPED`] column, as a JSON object shaped like
//! the input (`{"Q":null}`, `{"a":{"b":2}}`) — no value is dropped.

use foldhash::{HashMap, HashMapExt};
use std::borrow::Cow;

pub use super::column_names::{Names, column_name};

use super::column_names;
use super::invalid::Invalid;
use super::members::RawObject;
use super::unescape::string_value;
use super::value::{Cell, Name, Value};

/// Objects nest into `a_b_c` columns up to this many keys deep; deeper ones become JSON text.
pub const MAX_FLATTEN_DEPTH: usize = 3;
/// The column holding values that lost a name collision.
pub const UNMAPPED: &str = "_unmapped";

/// Up to this many values, collisions are found by a scan instead of a map.
const SCAN_LIMIT: usize = 16;

/// Collision losers: (original key path, JSON text as sent).
pub type Losers<'a> = Vec<(Vec<String>, &'a str)>;

/// One value on its way to a column.
struct Candidate<'a> {
    column: Name,
    /// The object it came from (an index into the `objects` of [`flatten`]).
    object: usize,
    key: Cow<'a, str>,
    value: Value,
    raw: &'a str,
}

/// A nested object that candidates came from: the object it is a member of and its key there.
/// Index 0 of `objects` is the object flattened, whose key path is the `path_prefix`.
struct Object<'a> {
    parent: usize,
    key: Cow<'a, str>,
}

/// The cells of `obj` (column order: first appearance) and the losers of collisions, as
/// `(original key path, JSON text)`. `raw_prefix` is joined before every key (`context`);
/// `path_prefix` starts every loser's key path; `field` names the object in error messages.
pub fn flatten<'a>(
    obj: &RawObject<'a>,
    raw_prefix: &str,
    path_prefix: &[&str],
    field: &str,
    names: Names,
) -> Result<(Vec<Cell>, Losers<'a>), Invalid> {
    if let Some(cells) = flat_cells(obj, raw_prefix, names) {
        return Ok((cells?, Vec::new()));
    }
    nested(obj, raw_prefix, path_prefix, field, names)
}

/// [`flatten`] of any object: nested objects, names to normalise, collisions.
fn nested<'a>(
    obj: &RawObject<'a>,
    raw_prefix: &str,
    path_prefix: &[&str],
    field: &str,
    names: Names,
) -> Result<(Vec<Cell>, Losers<'a>), Invalid> {
    let mut found = Vec::with_capacity(obj.0.len());
    let mut objects = vec![Object {
        parent: 0,
        key: Cow::Borrowed(""),
    }];
    collect(
        obj,
        raw_prefix,
        (&mut objects, 0),
        1,
        field,
        names,
        &mut found,
    )?;
    // Built only for losers: the key path from the flattened object down to the value.
    let path_of = |c: &Candidate| {
        let down = keys_to(&objects, c.object).into_iter();
        let path = path_prefix.iter().copied().chain(down).chain([&*c.key]);
        path.map(str::to_string).collect::<Vec<String>>()
    };
    // Which candidate takes each column (slots in order of first appearance) and which lose.
    // Few columns (most objects): a scan of the winners so far beats building a map.
    let mut slots: Option<HashMap<&str, usize>> =
        (found.len() > SCAN_LIMIT).then(|| HashMap::with_capacity(found.len()));
    let mut winners: Vec<usize> = Vec::with_capacity(found.len()); // index into `found`
    let mut lost: Vec<usize> = Vec::new();
    for (i, c) in found.iter().enumerate() {
        let slot = match &slots {
            Some(map) => map.get(&*c.column).copied(),
            None => winners.iter().position(|&w| found[w].column == c.column),
        };
        match slot {
            None => {
                if let Some(map) = &mut slots {
                    map.insert(&*c.column, winners.len());
                }
                winners.push(i);
            }
            Some(slot) => {
                if found[winners[slot]].value == Value::Null && c.value != Value::Null {
                    // A null never wins: the earlier null becomes the loser.
                    lost.push(winners[slot]);
                    winners[slot] = i;
                } else {
                    lost.push(i);
                }
            }
        }
    }
    drop(slots);
    lost.sort_unstable();
    let losers = lost
        .iter()
        .map(|&i| (path_of(&found[i]), found[i].raw))
        .collect();
    let cells = winners
        .iter()
        .map(|&i| {
            let c = &mut found[i];
            (
                std::mem::take(&mut c.column),
                std::mem::replace(&mut c.value, Value::Null),
            )
        })
        .collect();
    Ok((cells, losers))
}

/// The cells of an object whose members are all values (no nested object) under keys that
/// are column names already (`n`, `order_id`): a column a member, in the members' order — what
/// [`flatten`] makes of it, without its bookkeeping of nested objects, candidates and winners
/// (most events' properties, SDKs' flat contexts). `None` when it is not such an object or two
/// members land on one column: [`flatten`] takes it then.
fn flat_cells(
    obj: &RawObject,
    raw_prefix: &str,
    names: Names,
) -> Option<Result<Vec<Cell>, Invalid>> {
    if obj.0.len() > SCAN_LIMIT || obj.0.iter().any(|(_, text)| text.starts_with('{')) {
        return None;
    }
    let mut cells: Vec<Cell> = Vec::with_capacity(obj.0.len());
    let mut joined = String::with_capacity(raw_prefix.len() + 32);
    for (key, text) in &obj.0 {
        join_path(&mut joined, raw_prefix, key);
        let (column, normal) = column_names::column(&joined, names);
        if !normal {
            return None;
        }
        if cells.iter().any(|(c, _)| *c == column) {
            return None;
        }
        match typed(text) {
            Ok(value) => cells.push((column, value)),
            Err(e) => return Some(Err(e)),
        }
    }
    Some(Ok(cells))
}

/// Where a value is, for an error message: `field`, the keys of the objects down to `object`,
/// and `key`.
fn field_path(field: &str, objects: &[Object], object: usize, key: &str) -> String {
    let mut path = vec![field];
    path.extend(keys_to(objects, object));
    path.push(key);
    path.join(".")
}

/// The keys from the flattened object down to `object`, the nested object at that index.
fn keys_to<'s>(objects: &'s [Object], object: usize) -> Vec<&'s str> {
    let mut keys = Vec::new();
    let mut at = object;
    while at != 0 {
        keys.push(&*objects[at].key);
        at = objects[at].parent;
    }
    keys.reverse();
    keys
}

fn collect<'a>(
    obj: &RawObject<'a>,
    raw_prefix: &str,
    (objects, object): (&mut Vec<Object<'a>>, usize),
    depth: usize,
    field: &str,
    names: Names,
    out: &mut Vec<Candidate<'a>>,
) -> Result<(), Invalid> {
    // The joined name of each member, in one buffer for all of them.
    let mut joined = String::with_capacity(raw_prefix.len() + 32);
    for (key, text) in &obj.0 {
        // A name normalises to nothing exactly when it has no ASCII letter or digit.
        if !key.bytes().any(|b| b.is_ascii_alphanumeric()) {
            return Err(Invalid::new(
                "invalid_property_name",
                format!("{key:?} has no letter or digit to make a column name from"),
            )
            .field(field_path(field, objects, object, key)));
        }
        join_path(&mut joined, raw_prefix, key);
        if text.starts_with('{') && depth < MAX_FLATTEN_DEPTH {
            // The text was accepted by the parser with the rest of the body.
            let inner = RawObject::of_valid(text).map_err(|e| {
                let f = field_path(field, objects, object, key);
                Invalid::new("invalid_json", format!("{f}: {e}")).field(f)
            })?;
            // An empty object has no keys to flatten: it is kept as `{}` under its own name.
            if !inner.0.is_empty() {
                objects.push(Object {
                    parent: object,
                    key: key.clone(),
                });
                let id = objects.len() - 1;
                collect(
                    &inner,
                    &joined,
                    (&mut *objects, id),
                    depth + 1,
                    field,
                    names,
                    out,
                )?;
                continue;
            }
        }
        let (column, _) = column_names::column(&joined, names);
        out.push(Candidate {
            column,
            object,
            key: key.clone(),
            value: typed(text)?,
            raw: text,
        });
    }
    Ok(())
}

/// `key` joined under `prefix` with `_` (`context_page`), into `joined`.
fn join_path(joined: &mut String, prefix: &str, key: &str) {
    joined.clear();
    if !prefix.is_empty() {
        joined.push_str(prefix);
        joined.push('_');
    }
    joined.push_str(key);
}

/// The typed value of one JSON value's text.
pub fn typed(text: &str) -> Result<Value, Invalid> {
    let bad = |e: serde_json::Error| Invalid::new("invalid_json", e.to_string());
    Ok(match text.as_bytes().first() {
        // Most strings have no escapes: their text is their value.
        Some(b'"') if text.len() >= 2 && !text.as_bytes().contains(&b'\\') => {
            Value::Str(text[1..text.len() - 1].to_string())
        }
        Some(b'"') => Value::Str(match string_value(text) {
            Some(s) => s,
            None => serde_json::from_str(text).map_err(bad)?,
        }),
        Some(b't') => Value::Bool(true),
        Some(b'f') => Value::Bool(false),
        Some(b'n') => Value::Null,
        Some(b'[' | b'{') => Value::Str(text.to_string()),
        // An integer literal; serde_json reads `-0` as the float -0.0.
        _ if text == "-0" => Value::Int(0),
        // A short plain integer (at most 18 digits always fits an i64).
        _ if text.len() <= 18
            && text
                .strip_prefix('-')
                .unwrap_or(text)
                .bytes()
                .all(|b| b.is_ascii_digit())
            && text.bytes().last().is_some_and(|b| b.is_ascii_digit()) =>
        {
            Value::Int(
                text.parse().map_err(|_| {
                    Invalid::new("invalid_json", format!("{text:?} is not a number"))
                })?,
            )
        }
        _ => {
            let n: serde_json::Number = serde_json::from_str(text).map_err(bad)?;
            match n.as_i64() {
                Some(i) => Value::Int(i),
                None => Value::Float(n.as_f64().unwrap_or(f64::NAN)),
            }
        }
    })
}

/// The `_unmapped` JSON text of collision losers: an object shaped like the input, each value
/// as sent. Two losers at the same path (a key sent twice) appear as two members.
pub fn unmapped_text(losers: &[(Vec<String>, &str)]) -> String {
    enum Node<'a> {
        Leaf(&'a str),
        Obj(Vec<(&'a str, Node<'a>)>),
    }
    fn insert<'a>(members: &mut Vec<(&'a str, Node<'a>)>, path: &'a [String], raw: &'a str) {
        let (key, rest) = path.split_first().expect("a path has a key");
        if rest.is_empty() {
            members.push((key, Node::Leaf(raw)));
            return;
        }
        let idx = match members
            .iter()
            .position(|(k, n)| k == key && matches!(n, Node::Obj(_)))
        {
            Some(i) => i,
            None => {
                members.push((key, Node::Obj(Vec::new())));
                members.len() - 1
            }
        };
        if let Node::Obj(inner) = &mut members[idx].1 {
            insert(inner, rest, raw);
        }
    }
    fn write(members: &[(&str, Node)], out: &mut String) {
        out.push('{');
        for (i, (k, n)) in members.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(&serde_json::Value::String(k.to_string()).to_string());
            out.push(':');
            match n {
                Node::Leaf(raw) => out.push_str(raw),
                Node::Obj(inner) => write(inner, out),
            }
        }
        out.push('}');
    }
    let mut root = Vec::new();
    for (path, raw) in losers {
        insert(&mut root, path, raw);
    }
    let mut out = String::new();
    write(&root, &mut out);
    out
}

/// One free-form JSON object as cells (imports): flattened and typed like event properties,
/// without the reserved-name prefixing (imported tables have no standard columns); collision
/// losers go to `_unmapped`.
pub fn object_cells(line: &str, path: &str) -> Result<Vec<Cell>, Invalid> {
    let obj = RawObject::parse(line).map_err(|e| {
        if e.is_data() {
            Invalid::new("invalid_body", "not a JSON object")
        } else {
            Invalid::new("invalid_json", format!("not valid JSON: {e}"))
        }
    })?;
    let (mut cells, losers) = flatten(&obj, "", &[], path, Names::Plain)?;
    if !losers.is_empty() {
        cells.push((UNMAPPED.into(), Value::Str(unmapped_text(&losers))));
    }
    Ok(cells)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::value::Name;

    fn cells(json: &str) -> (Vec<Cell>, String) {
        let obj = RawObject::parse(json).unwrap();
        let (cells, losers) = flatten(&obj, "", &[], "properties", Names::Property).unwrap();
        (cells, unmapped_text(&losers))
    }

    /// Flat objects read by `flat_cells` give what the general walk gives them: the same
    /// cells in the same order, the same error, and no loser; objects it cannot read (a
    /// collision, a name to normalise, a nested object) go to the general walk.
    #[test]
    fn flat_objects_read_directly_as_the_general_walk_reads_them() {
        let keys = [
            "n",
            "ms",
            "id",
            "event",
            "order_id",
            "Order",
            "orderId",
            "x",
            "x_",
            "_x",
            "1st",
            "a__b",
            "property_id",
            "context_x",
            "name",
            "timestamp",
            "p",
        ];
        let values = [
            "1",
            "-0",
            "2.5",
            "1e400",
            "\"s\"",
            "\"a\\\"b\"",
            "null",
            "true",
            "[1,{}]",
            "{}",
            "{\"q\":1}",
            "12345678901234567890",
        ];
        let modes = [
            Names::Property,
            Names::PropertyReserving(&["name"]),
            Names::Plain,
        ];
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        let (mut direct, mut general) = (0, 0);
        for round in 0..4000 {
            let members: Vec<String> = (0..next(5))
                .map(|_| {
                    format!(
                        "\"{}\":{}",
                        keys[next(keys.len())],
                        values[next(values.len())]
                    )
                })
                .collect();
            let text = format!("{{{}}}", members.join(","));
            let obj = RawObject::parse(&text).unwrap();
            let prefix = ["", "context"][round % 2];
            let names = modes[next(modes.len())];
            let walked = nested(&obj, prefix, &[], "properties", names);
            match flat_cells(&obj, prefix, names) {
                Some(cells) => {
                    direct += 1;
                    match (cells, walked) {
                        (Ok(c), Ok((w, losers))) => {
                            assert!(losers.is_empty(), "{text}");
                            assert_eq!(c, w, "{text} {prefix:?} {names:?}");
                        }
                        (Err(a), Err(b)) => assert_eq!(a.message, b.message, "{text}"),
                        (a, b) => panic!("{text}: {a:?} against {b:?}"),
                    }
                }
                None => general += 1,
            }
            let (all, _) = flatten(&obj, prefix, &[], "properties", names)
                .map_err(|e| e.message)
                .unwrap_or_default();
            let (w, _) = nested(&obj, prefix, &[], "properties", names)
                .map_err(|e| e.message)
                .unwrap_or_default();
            assert_eq!(all, w, "{text}");
        }
        assert!(
            direct > 1000 && general > 1000,
            "{direct} read directly, {general} not"
        );
    }

    #[test]
    fn names_are_normalised_after_joining() {
        let (c, _) = cells(r#"{"x":{"1st":1},"aB":{"cD":{"eF":2}}}"#);
        let names: Vec<_> = c.iter().map(|(n, _)| &**n).collect();
        assert_eq!(names, ["a_b_c_d_e_f", "x_1st"]);
        let long = format!(r#"{{"{}":{{"b":1}}}}"#, "a".repeat(127));
        let (c, _) = cells(&long);
        assert_eq!(c[0].0, "a".repeat(127), "a cut never leaves a trailing _");
    }

    #[test]
    fn collisions_keep_every_value() {
        let (c, u) = cells(r#"{"Q":null,"q":5}"#);
        assert_eq!(c, vec![(Name::from("q"), Value::Int(5))]);
        assert_eq!(u, r#"{"Q":null}"#);
        let (c, u) = cells(r#"{"timestamp":1,"property_timestamp":2}"#);
        assert_eq!(c, vec![(Name::from("property_timestamp"), Value::Int(2))]);
        assert_eq!(u, r#"{"timestamp":1}"#);
        let (c, u) = cells(r#"{"a":{"b":[1, {"z":1,"a":2}]},"a_b":99999999999999999999}"#);
        assert_eq!(
            c,
            vec![(
                Name::from("a_b"),
                Value::Str(r#"[1, {"z":1,"a":2}]"#.into())
            )]
        );
        assert_eq!(u, r#"{"a_b":99999999999999999999}"#);
        let (c, u) = cells(r#"{"a":{"b":null},"a.b":null,"a_b":1,"x":1,"x":2}"#);
        assert_eq!(c[0], (Name::from("a_b"), Value::Int(1)));
        assert_eq!(c[1], (Name::from("x"), Value::Int(1)));
        assert_eq!(
            u, r#"{"a":{"b":null},"a.b":null,"x":2}"#,
            "unambiguous, duplicates kept"
        );
        let (c, _) = cells(r#"{"e":{},"z":-0}"#);
        assert_eq!(
            c,
            vec![
                (Name::from("e"), Value::Str("{}".into())),
                (Name::from("z"), Value::Int(0))
            ]
        );
    }

    #[test]
    fn a_bad_name_is_reported_at_its_path() {
        let obj = RawObject::parse(r#"{"a":{"ok":1,"b":{"c":{"!!":1},"?":2}}}"#).unwrap();
        let e = flatten(&obj, "", &[], "properties", Names::Property).unwrap_err();
        assert_eq!(e.code, "invalid_property_name");
        assert_eq!(e.field.as_deref(), Some("properties.a.b.?"));
        let obj = RawObject::parse(r#"{"page":{"%":1}}"#).unwrap();
        let e = flatten(&obj, "context", &["context"], "context", Names::Plain).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("context.page.%"));
    }

    #[test]
    fn values_are_exact() {
        assert_eq!(
            typed("91343.24026397243").unwrap(),
            Value::Float(91343.24026397243)
        );
        assert_eq!(typed("9223372036854775807").unwrap(), Value::Int(i64::MAX));
        assert_eq!(
            typed("9223372036854775808").unwrap(),
            Value::Float(9223372036854775808.0)
        );
        assert_eq!(typed("-0.0").unwrap(), Value::Float(-0.0));
        assert_eq!(typed(r#""a\"b""#).unwrap(), Value::Str("a\"b".into()));
        let (c, _) = cells(r#"{"deep":{"b":{"c":{"d":1, "e":[ 1e2 ]}}}}"#);
        assert_eq!(
            c[0],
            (
                Name::from("deep_b_c"),
                Value::Str(r#"{"d":1, "e":[ 1e2 ]}"#.into())
            )
        );
    }
}
