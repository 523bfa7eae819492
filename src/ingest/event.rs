//! One event body → validated warehouse rows (SPEC §2.1, §4.1–4.2): field rules, Segment common
//! fields, flattening, naming and value typing. Pure and CPU-only; runs on the request's task.

use std::collections::HashSet;

use chrono::{DateTime, Utc};
use serde_json::{Map, Value as Json};

use crate::error::ApiError;
use crate::warehouse::naming::{self, MAX_NAME_LEN};
use crate::warehouse::schema::ColumnType;

/// Longest accepted event name, in characters.
pub const MAX_EVENT_NAME: usize = 255;
/// Objects nest into `a_b_c` columns up to this many keys deep; deeper ones become JSON text.
pub const MAX_FLATTEN_DEPTH: usize = 3;

/// A typed cell.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// JSON null: no type information.
    Null,
    /// Boolean.
    Bool(bool),
    /// Integer within i64.
    Int(i64),
    /// Any other number.
    Float(f64),
    /// Text (also arrays and too-deep objects, as JSON).
    Str(String),
    /// Microseconds since the epoch, UTC.
    Ts(i64),
}

impl Value {
    /// The column type this value asks for; `None` for null.
    pub fn column_type(&self) -> Option<ColumnType> {
        Some(match self {
            Value::Null => return None,
            Value::Bool(_) => ColumnType::Boolean,
            Value::Int(_) => ColumnType::Int64,
            Value::Float(_) => ColumnType::Float64,
            Value::Str(_) => ColumnType::String,
            Value::Ts(_) => ColumnType::Timestamp,
        })
    }
}

/// A named cell of a row.
pub type Cell = (String, Value);

/// A validated event, ready for the team's buffers.
#[derive(Debug, Clone)]
pub struct EventRows {
    /// `messageId`, or a generated UUIDv7.
    pub id: String,
    /// Whether `id` came from the client (and so takes part in dedup).
    pub client_id: bool,
    /// The per-event table.
    pub table: String,
    /// Standard columns: the whole `tracks` row, and the start of the event table's row.
    pub standard: Vec<Cell>,
    /// Property columns of the event table.
    pub properties: Vec<Cell>,
}

impl EventRows {
    /// Approximate in-memory size, used for budgets and the byte flush trigger.
    pub fn approx_bytes(&self) -> u64 {
        let cell = |(n, v): &Cell| {
            n.len()
                + 16
                + match v {
                    Value::Str(s) => s.len(),
                    _ => 8,
                }
        };
        (self.standard.iter().map(cell).sum::<usize>() * 2
            + self.properties.iter().map(cell).sum::<usize>()) as u64
    }
}

fn bad(code: &'static str, field: &str, message: impl Into<String>) -> ApiError {
    ApiError::bad_request(code, message).field(field)
}

/// Parses and validates one event body received at `received_at`.
pub fn parse_event(
    body: &[u8],
    received_at: DateTime<Utc>,
    max_columns: usize,
) -> Result<EventRows, ApiError> {
    parse_with(body, received_at, max_columns, None)
}

/// Rebuilds an event from its WAL record exactly as it was accepted: same receive time, same
/// id, no column limit (it was checked when the event was accepted).
pub fn replay_event(body: &[u8], received_at_us: i64, id: &str) -> Result<EventRows, ApiError> {
    let received_at = DateTime::from_timestamp_micros(received_at_us)
        .ok_or_else(|| ApiError::bad_request("invalid_timestamp", "receive time out of range"))?;
    parse_with(body, received_at, usize::MAX, Some(id))
}

fn parse_with(
    body: &[u8],
    received_at: DateTime<Utc>,
    max_columns: usize,
    id: Option<&str>,
) -> Result<EventRows, ApiError> {
    let json: Json = serde_json::from_slice(body).map_err(|e| {
        ApiError::bad_request("invalid_json", format!("body is not valid JSON: {e}"))
    })?;
    let Json::Object(obj) = json else {
        return Err(ApiError::bad_request(
            "invalid_body",
            "body must be a JSON object",
        ));
    };
    from_object(&obj, received_at, max_columns, id)
}

/// Validates one event object (also the unit of future batch endpoints). `id_override` fixes
/// the event id (replay); otherwise it is `messageId` or a new UUIDv7.
pub fn from_object(
    obj: &Map<String, Json>,
    received_at: DateTime<Utc>,
    max_columns: usize,
    id_override: Option<&str>,
) -> Result<EventRows, ApiError> {
    match obj.get("version") {
        None | Some(Json::Null) => {}
        Some(v) if v.as_i64() == Some(1) => {}
        Some(v) => {
            return Err(bad(
                "unsupported_version",
                "version",
                format!("version must be 1, got {v}"),
            ));
        }
    }
    match obj.get("type") {
        None | Some(Json::Null) => {}
        Some(Json::String(t)) if t == "event" || t == "track" => {}
        Some(v) => {
            return Err(bad(
                "unsupported_type",
                "type",
                format!("type must be \"event\" (or \"track\"), got {v}"),
            ));
        }
    }
    let event_text = match obj.get("event") {
        None | Some(Json::Null) => return Err(bad("missing_event", "event", "event is required")),
        Some(Json::String(s)) => s,
        Some(_) => return Err(bad("invalid_event", "event", "event must be a string")),
    };
    if event_text.trim().is_empty() {
        return Err(bad("invalid_event", "event", "event must not be empty"));
    }
    if event_text.chars().count() > MAX_EVENT_NAME {
        return Err(bad(
            "invalid_event",
            "event",
            format!("event must be at most {MAX_EVENT_NAME} characters"),
        ));
    }
    let table = naming::event_table(event_text).ok_or_else(|| {
        bad(
            "invalid_event",
            "event",
            "event must contain at least one letter or digit to name a table",
        )
    })?;
    let timestamp = match obj.get("timestamp") {
        None | Some(Json::Null) => received_at.timestamp_micros(),
        Some(v) => parse_time(v).ok_or_else(|| {
            bad("invalid_timestamp", "timestamp", "timestamp must be an ISO 8601 date-time with an offset or Z, e.g. 2012-12-02T00:30:08.276Z")
        })?,
    };
    let sent_at = match obj.get("sentAt") {
        None | Some(Json::Null) => None,
        Some(v) => Some(parse_time(v).ok_or_else(|| {
            bad(
                "invalid_timestamp",
                "sentAt",
                "sentAt must be an ISO 8601 date-time with an offset or Z",
            )
        })?),
    };
    let message_id = text_field(obj, "messageId")?.filter(|id| !id.is_empty());
    let client_id = message_id.is_some();
    let id = match (id_override, message_id) {
        (Some(id), _) => id.to_string(),
        (None, Some(id)) => id,
        (None, None) => uuid::Uuid::now_v7().to_string(),
    };

    let mut standard: Vec<Cell> = vec![
        ("id".into(), Value::Str(id.clone())),
        ("event".into(), Value::Str(table.clone())),
        ("event_text".into(), Value::Str(event_text.clone())),
        ("timestamp".into(), Value::Ts(timestamp)),
        (
            "received_at".into(),
            Value::Ts(received_at.timestamp_micros()),
        ),
    ];
    if let Some(s) = sent_at {
        standard.push(("sent_at".into(), Value::Ts(s)));
    }
    for (field, column) in [("userId", "user_id"), ("anonymousId", "anonymous_id")] {
        if let Some(v) = text_field(obj, field)? {
            standard.push((column.into(), Value::Str(v)));
        }
    }
    let mut seen: HashSet<String> = standard.iter().map(|(n, _)| n.clone()).collect();
    match obj.get("context") {
        None | Some(Json::Null) => {}
        Some(Json::Object(ctx)) => flatten(
            "context",
            ctx,
            1,
            "context",
            &mut standard,
            &mut seen,
            false,
        )?,
        Some(_) => {
            return Err(bad(
                "invalid_context",
                "context",
                "context must be an object",
            ));
        }
    }
    let mut properties = Vec::new();
    match obj.get("properties") {
        None | Some(Json::Null) => {}
        Some(Json::Object(props)) => {
            flatten("", props, 1, "properties", &mut properties, &mut seen, true)?
        }
        Some(_) => {
            return Err(bad(
                "invalid_properties",
                "properties",
                "properties must be an object",
            ));
        }
    }
    if standard.len() + properties.len() > max_columns {
        return Err(bad(
            "too_many_columns",
            "properties",
            format!(
                "this event needs {} columns; a table may have at most {max_columns}",
                standard.len() + properties.len()
            ),
        ));
    }
    Ok(EventRows {
        id,
        client_id,
        table,
        standard,
        properties,
    })
}

/// Longest accepted `messageId`, `userId` or `anonymousId`, in bytes.
pub const MAX_ID_BYTES: usize = 1024;

/// A string field, or a number given where Segment allows one (`userId: 42`).
fn text_field(obj: &Map<String, Json>, field: &str) -> Result<Option<String>, ApiError> {
    match obj.get(field) {
        None | Some(Json::Null) => Ok(None),
        Some(Json::String(s)) if s.len() > MAX_ID_BYTES => Err(bad(
            "invalid_field",
            field,
            format!("{field} must be at most {MAX_ID_BYTES} bytes"),
        )),
        Some(Json::String(s)) => Ok(Some(s.clone())),
        Some(Json::Number(n)) => Ok(Some(n.to_string())),
        Some(_) => Err(bad(
            "invalid_field",
            field,
            format!("{field} must be a string"),
        )),
    }
}

/// RFC 3339 / ISO 8601 with an offset or `Z`, any number of fraction digits → µs since epoch.
pub fn parse_time(v: &Json) -> Option<i64> {
    let s = v.as_str()?.trim();
    let dt = DateTime::parse_from_rfc3339(s)
        .or_else(|_| DateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S%.f%z"))
        .ok()?;
    Some(dt.with_timezone(&Utc).timestamp_micros())
}

/// One free-form JSON object as cells (imports): flattened and typed like event properties,
/// without the reserved-name prefixing (imported tables have no standard columns).
pub fn object_cells(obj: &Map<String, Json>, path: &str) -> Result<Vec<Cell>, ApiError> {
    let mut out = Vec::new();
    flatten("", obj, 1, path, &mut out, &mut HashSet::new(), false)?;
    Ok(out)
}

/// Flattens `obj` into `out` as `prefix_key…` columns, first name wins on collisions.
fn flatten(
    prefix: &str,
    obj: &Map<String, Json>,
    depth: usize,
    path: &str,
    out: &mut Vec<Cell>,
    seen: &mut HashSet<String>,
    is_property: bool,
) -> Result<(), ApiError> {
    for (key, value) in obj {
        let field = format!("{path}.{key}");
        let part = naming::normalize(key);
        if part.is_empty() {
            return Err(bad(
                "invalid_property_name",
                &field,
                format!("{key:?} has no letter or digit to make a column name from"),
            ));
        }
        let mut name = if prefix.is_empty() {
            part
        } else {
            format!("{prefix}_{part}")
        };
        name.truncate(MAX_NAME_LEN);
        if let Json::Object(inner) = value
            && depth < MAX_FLATTEN_DEPTH
        {
            flatten(&name, inner, depth + 1, &field, out, seen, is_property)?;
            continue;
        }
        let column = if is_property {
            naming::property_column(&name)
        } else {
            name
        };
        if seen.insert(column.clone()) {
            out.push((column, typed(value)));
        }
    }
    Ok(())
}

fn typed(v: &Json) -> Value {
    match v {
        Json::Null => Value::Null,
        Json::Bool(b) => Value::Bool(*b),
        Json::Number(n) => match n.as_i64() {
            Some(i) => Value::Int(i),
            None => Value::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Json::String(s) => Value::Str(s.clone()),
        Json::Array(_) | Json::Object(_) => Value::Str(v.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(body: &str) -> Result<EventRows, ApiError> {
        parse_event(body.as_bytes(), Utc::now(), 1000)
    }

    fn code(body: &str) -> &'static str {
        parse(body).unwrap_err().code
    }

    #[test]
    fn seed_sample_event() {
        let ev = parse(r#"{"version":1,"type":"event","event":"Purchased an Item","properties":{"revenue":"39.95","shippingMethod":"Premium"},"timestamp":"2012-12-02T00:30:08.276Z"}"#).unwrap();
        assert_eq!(ev.table, "purchased_an_item");
        assert_eq!(
            ev.standard[3],
            ("timestamp".into(), Value::Ts(1_354_408_208_276_000))
        );
        assert_eq!(
            ev.properties,
            vec![
                ("revenue".into(), Value::Str("39.95".into())),
                ("shipping_method".into(), Value::Str("Premium".into()))
            ]
        );
    }

    #[test]
    fn flattening_and_collisions() {
        let ev = parse(r#"{"event":"e","properties":{"a":{"b":{"c":{"d":1}}},"list":[1,2],"timestamp":5,"n":1.5,"A":true},
                        "context":{"ip":"1.2.3.4","library":{"name":"x"}},"userId":7}"#).unwrap();
        let props: Vec<_> = ev.properties.iter().map(|(n, _)| n.as_str()).collect();
        // "A" and "a" both normalise to "a"… but "a" is an object that flattens to a_b_c, so no clash.
        assert_eq!(props, vec!["a", "a_b_c", "list", "n", "property_timestamp"]);
        assert_eq!(ev.properties[1].1, Value::Str(r#"{"d":1}"#.into()));
        assert_eq!(ev.properties[2].1, Value::Str("[1,2]".into()));
        let std: Vec<_> = ev.standard.iter().map(|(n, _)| n.as_str()).collect();
        assert!(
            std.contains(&"context_ip")
                && std.contains(&"context_library_name")
                && std.contains(&"user_id")
        );
    }

    #[test]
    fn bad_inputs_have_codes() {
        assert_eq!(code("{"), "invalid_json");
        assert_eq!(code("[1]"), "invalid_body");
        assert_eq!(code(r#"{"properties":{}}"#), "missing_event");
        assert_eq!(code(r#"{"event":""}"#), "invalid_event");
        assert_eq!(code(r#"{"event":"!!"}"#), "invalid_event");
        assert_eq!(code(r#"{"event":5}"#), "invalid_event");
        assert_eq!(
            code(&format!(r#"{{"event":"{}"}}"#, "x".repeat(256))),
            "invalid_event"
        );
        assert_eq!(code(r#"{"event":"e","version":2}"#), "unsupported_version");
        assert_eq!(
            code(r#"{"event":"e","type":"identify"}"#),
            "unsupported_type"
        );
        assert_eq!(
            code(r#"{"event":"e","timestamp":"yesterday"}"#),
            "invalid_timestamp"
        );
        assert_eq!(
            code(r#"{"event":"e","timestamp":"2012-12-02T00:30:08"}"#),
            "invalid_timestamp"
        );
        assert_eq!(
            code(r#"{"event":"e","properties":[1]}"#),
            "invalid_properties"
        );
        assert_eq!(
            code(r#"{"event":"e","properties":{"!!":1}}"#),
            "invalid_property_name"
        );
        assert_eq!(code(r#"{"event":"e","userId":{}}"#), "invalid_field");
        assert_eq!(
            code(&format!(
                r#"{{"event":"e","messageId":"{}"}}"#,
                "m".repeat(1025)
            )),
            "invalid_field"
        );
        let many: Vec<String> = (0..1000).map(|i| format!("\"p{i}\":1")).collect();
        assert_eq!(
            code(&format!(
                r#"{{"event":"e","properties":{{{}}}}}"#,
                many.join(",")
            )),
            "too_many_columns"
        );
    }

    #[test]
    fn timestamps_accept_offsets_and_any_fraction() {
        let t = |s: &str| parse_time(&Json::String(s.into()));
        assert_eq!(t("2012-12-02T00:30:08.276Z"), Some(1_354_408_208_276_000));
        assert_eq!(
            t("2012-12-02T01:30:08.276123456+01:00"),
            Some(1_354_408_208_276_123)
        );
        assert_eq!(t("2012-12-02T00:30:08Z"), Some(1_354_408_208_000_000));
        assert_eq!(t("2012-12-02T00:30:08+0000"), Some(1_354_408_208_000_000));
        assert_eq!(t("2012-12-02"), None);
    }
}
