//! One event body → validated warehouse rows (SPEC §2.1, §4.1–4.2): field rules, Segment common
//! fields, flattening, naming and value typing. Pure and CPU-only; runs on the request's task.

use std::borrow::Cow;

use chrono::{DateTime, Utc};
use serde_json::Value as Json;

use super::event_time::{EventTimes, TimeRule};
use super::fields::{FieldValue, bad, field_value, get, object_field, text_field};
use super::top_fields::Top;
use crate::model::Invalid;
use crate::model::flatten::{self, Names, UNMAPPED};
use crate::model::members::RawObject;
use crate::model::naming;
use crate::model::valid_json;
use crate::model::value::{Cell, CowCell, Value, ValueCow};

/// Longest accepted event name, in characters.
pub const MAX_EVENT_NAME: usize = 255;

/// A validated event, ready for the team's buffers.
#[derive(Debug, Clone)]
pub struct EventRows {
    /// `messageId`, or a generated UUIDv7.
    pub id: String,
    /// Whether `id` came from the client (and so takes part in dedup).
    pub client_id: bool,
    /// Whether the event also writes a `tracks` row (track calls).
    pub tracks: bool,
    /// The per-event table (of a track call), or the call's table (`identifies`, `pages`, …).
    pub table: String,
    /// Standard columns: the whole `tracks` row, and the start of the event table's row.
    pub standard: Vec<Cell>,
    /// How many of `standard`'s cells are the call's own (id, event or the call's own columns
    /// such as `name` or `group_id`, times, user), each of one type whatever the event; the
    /// context's cells follow them.
    pub fixed: usize,
    /// Cells of the `tracks` row only (its `_unmapped`, when context keys collided).
    pub tracks_only: Vec<Cell>,
    /// Property columns of the event table (with an `_unmapped` holding the collision losers of
    /// context and properties both).
    pub properties: Vec<Cell>,
}

impl EventRows {
    /// An event whose rows were built elsewhere (a batch's, by [`super::direct`]): its id
    /// alone, no cells.
    pub fn unbuilt(id: String, client_id: bool) -> EventRows {
        EventRows {
            id,
            client_id,
            tracks: false,
            table: String::new(),
            standard: Vec::new(),
            fixed: 0,
            tracks_only: Vec::new(),
            properties: Vec::new(),
        }
    }

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
            + self.tracks_only.iter().map(cell).sum::<usize>()
            + self.properties.iter().map(cell).sum::<usize>()) as u64
    }

    /// Cells of the `tracks` row.
    pub fn tracks_row(&self) -> RowCells<'_> {
        self.standard.iter().chain(&self.tracks_only)
    }

    /// Cells of the event table's row.
    pub fn event_row(&self) -> RowCells<'_> {
        self.standard.iter().chain(&self.properties)
    }

    /// Every row the event writes, with its table: `tracks` (track calls only), then its own.
    pub fn rows(&self) -> impl Iterator<Item = (&str, RowCells<'_>)> {
        let tracks = self.tracks.then(|| ("tracks", self.tracks_row()));
        tracks
            .into_iter()
            .chain(std::iter::once((self.table.as_str(), self.event_row())))
    }
}

/// The cells of one row of an event.
pub type RowCells<'a> = std::iter::Chain<std::slice::Iter<'a, Cell>, std::slice::Iter<'a, Cell>>;

/// Parses and validates one event body received at `received_at`.
pub fn parse_event(
    body: &[u8],
    received_at: DateTime<Utc>,
    max_columns: usize,
) -> Result<EventRows, Invalid> {
    parse_with(body, received_at, max_columns, None)
}

/// Rebuilds an event from its WAL record exactly as it was accepted: same receive time, same
/// id, no column limit (it was checked when the event was accepted).
pub fn replay_event(body: &[u8], received_at_us: i64, id: &str) -> Result<EventRows, Invalid> {
    let received_at = DateTime::from_timestamp_micros(received_at_us)
        .ok_or_else(|| Invalid::new("invalid_timestamp", "receive time out of range"))?;
    parse_with(body, received_at, usize::MAX, Some(id))
}

fn parse_with(
    body: &[u8],
    received_at: DateTime<Utc>,
    max_columns: usize,
    id: Option<&str>,
) -> Result<EventRows, Invalid> {
    let parsed = match valid_json::utf8(body) {
        Some(text) => Top::parse(text),
        None => serde_json::from_slice(body), // says where the bytes stop being UTF-8
    };
    let obj: Top = parsed.map_err(|e| {
        if e.is_data() {
            Invalid::new("invalid_body", "body must be a JSON object")
        } else {
            Invalid::new("invalid_json", format!("body is not valid JSON: {e}"))
        }
    })?;
    from_object(&obj, received_at, max_columns, id)
}

/// Validates one event object (also the unit of future batch endpoints). `id_override` fixes
/// the event id (replay); otherwise it is `messageId` or a new UUIDv7.
pub fn from_object(
    obj: &Top,
    received_at: DateTime<Utc>,
    max_columns: usize,
    id_override: Option<&str>,
) -> Result<EventRows, Invalid> {
    match get(obj, "version", "unsupported_version")? {
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
    match field_value(obj, "type", "unsupported_type")? {
        None => {}
        Some(FieldValue::Text(t)) if t == "event" || t == "track" => {}
        Some(v) => {
            return Err(bad(
                "unsupported_type",
                "type",
                format!("type must be \"event\" (or \"track\"), got {v}"),
            ));
        }
    }
    let (event_text, table) = event_name(obj)?;
    let mut standard: Vec<CowCell> = Vec::with_capacity(STANDARD_ROOM);
    let common = common_fields(
        obj,
        received_at,
        id_override,
        TimeRule::AsSent,
        &mut standard,
    )?;
    lead_cells(
        &mut standard,
        common.id.clone(),
        Some((table.clone(), event_text)),
    );
    let (id, client_id) = (common.id, common.client_id);
    let context = object_field(obj, "context")?;
    let properties = object_field(obj, "properties")?;
    finish(
        Parts {
            id,
            client_id,
            tracks: true,
            table,
            standard,
            context,
            properties,
            properties_field: "properties",
            reserved: Names::Property,
        },
        max_columns,
    )
}

/// The `event` field: its text as sent and the table it names (SPEC §4.2), or why it is refused.
/// Both borrow the body when they can.
pub(super) fn event_name<'a>(obj: &Top<'a>) -> Result<(Cow<'a, str>, Cow<'a, str>), Invalid> {
    let event_text = match field_value(obj, "event", "invalid_event")? {
        None => return Err(bad("missing_event", "event", "event is required")),
        Some(FieldValue::Text(s)) => s,
        Some(FieldValue::Other(_)) => {
            return Err(bad("invalid_event", "event", "event must be a string"));
        }
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
    let table = match &event_text {
        Cow::Borrowed(text) => naming::event_table_of(text),
        Cow::Owned(text) => naming::event_table(text).map(Cow::Owned),
    }
    .ok_or_else(|| {
        bad(
            "invalid_event",
            "event",
            "event must contain at least one letter or digit to name a table",
        )
    })?;
    Ok((event_text, table))
}

/// Room for every standard cell of a message before its context: the id, the event's two or
/// a call's own two, and the six of [`common_fields`]; so the vector is allocated once.
pub(super) const STANDARD_ROOM: usize = 9;

/// Puts the `id` cell and, for a track call, its `event` (the table's name) and `event_text`
/// cells before the time and user cells [`common_fields`] pushed to `standard`.
pub(super) fn lead_cells<'a>(
    standard: &mut Vec<CowCell<'a>>,
    id: Cow<'a, str>,
    event: Option<(Cow<'a, str>, Cow<'a, str>)>,
) {
    let id = ("id".into(), ValueCow::from(id));
    let event = event.into_iter().flat_map(|(table, text)| {
        [
            ("event".into(), ValueCow::from(table)),
            ("event_text".into(), ValueCow::from(text)),
        ]
    });
    standard.splice(0..0, std::iter::once(id).chain(event));
}

/// An event's id.
pub(super) struct Common<'a> {
    /// `messageId` (borrowed from the body when sent without escapes), the replayed id, or a
    /// new UUIDv7.
    pub id: Cow<'a, str>,
    /// Whether the id came from the client.
    pub client_id: bool,
}

/// Reads the time fields by `rule` ([`EventTimes`]), then `messageId`, `userId` and
/// `anonymousId`; pushes to `cells` `timestamp`, `received_at`, then when present
/// `original_timestamp`, `sent_at`, `user_id`, `anonymous_id`.
pub(super) fn common_fields<'a>(
    obj: &Top<'a>,
    received_at: DateTime<Utc>,
    id_override: Option<&str>,
    rule: TimeRule,
    cells: &mut Vec<CowCell<'a>>,
) -> Result<Common<'a>, Invalid> {
    let times = EventTimes::read(obj, rule, received_at)?;
    let message_id = text_field(obj, "messageId")?.filter(|id| !id.is_empty());
    let client_id = message_id.is_some();
    let id = match (id_override, message_id) {
        (Some(id), _) => Cow::Owned(id.to_string()),
        (None, Some(id)) => id,
        (None, None) => Cow::Owned(uuid::Uuid::now_v7().to_string()),
    };
    let ts = |us| ValueCow::Owned(Value::Ts(us));
    cells.extend([
        ("timestamp".into(), ts(times.timestamp)),
        ("received_at".into(), ts(times.received_at)),
    ]);
    if let Some(original) = times.original_timestamp {
        cells.push(("original_timestamp".into(), ts(original)));
    }
    if let Some(sent_at) = times.sent_at {
        cells.push(("sent_at".into(), ts(sent_at)));
    }
    for (field, column) in [("userId", "user_id"), ("anonymousId", "anonymous_id")] {
        if let Some(v) = text_field(obj, field)? {
            cells.push((column.into(), v.into()));
        }
    }
    Ok(Common { id, client_id })
}

/// An event's pieces before flattening: the standard cells so far, and its context and
/// properties (or traits) objects.
pub(super) struct Parts<'a> {
    pub id: Cow<'a, str>,
    pub client_id: bool,
    pub tracks: bool,
    pub table: Cow<'a, str>,
    /// Borrowing the body's text where they can; owned once finished ([`finish`]).
    pub standard: Vec<CowCell<'a>>,
    pub context: Option<RawObject<'a>>,
    pub properties: Option<RawObject<'a>>,
    /// Field name of `properties` in error messages (`traits` for identify and group).
    pub properties_field: &'static str,
    /// How property names are finished (which standard names they must not take).
    pub reserved: Names,
}

/// Flattens context (into the standard cells) and properties, routes collision losers to
/// `_unmapped`, and checks the column limit of every table the event writes.
pub(super) fn finish(p: Parts, max_columns: usize) -> Result<EventRows, Invalid> {
    let Parts {
        id,
        client_id,
        tracks,
        table,
        standard,
        context,
        properties: props,
        properties_field,
        reserved,
    } = p;
    let (id, table) = (id.into_owned(), table.into_owned());
    let mut standard: Vec<Cell> = standard
        .into_iter()
        .map(|(name, value)| (name, value.into_owned()))
        .collect();
    let fixed = standard.len();
    let mut losers = Vec::new();
    if let Some(ctx) = context {
        let (cells, lost) =
            flatten::flatten(&ctx, "context", &["context"], "context", Names::Plain)?;
        standard.extend(cells);
        losers.extend(lost);
    }
    let mut tracks_only = Vec::new();
    if tracks && !losers.is_empty() {
        tracks_only.push((UNMAPPED.into(), Value::Str(flatten::unmapped_text(&losers))));
    }
    let mut properties = Vec::new();
    if let Some(props) = props {
        let (cells, lost) = flatten::flatten(&props, "", &[], properties_field, reserved)?;
        properties = cells;
        losers.extend(lost);
    }
    if !losers.is_empty() {
        properties.push((UNMAPPED.into(), Value::Str(flatten::unmapped_text(&losers))));
    }
    // Null-only cells create no column, so they do not count.
    let columns =
        |cells: &mut dyn Iterator<Item = &Cell>| cells.filter(|(_, v)| *v != Value::Null).count();
    let rows = EventRows {
        id,
        client_id,
        tracks,
        table,
        standard,
        fixed,
        tracks_only,
        properties,
    };
    for (table, mut cells) in rows.rows() {
        let n = columns(&mut cells);
        if n > max_columns {
            return Err(bad(
                "too_many_columns",
                properties_field,
                format!(
                    "this event needs {n} columns in {table}; a table may have at most {max_columns}"
                ),
            ));
        }
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(body: &str) -> Result<EventRows, Invalid> {
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
        let props: Vec<_> = ev.properties.iter().map(|(n, _)| &**n).collect();
        // "A" and "a" both normalise to "a"… but "a" is an object that flattens to a_b_c, so no clash.
        assert_eq!(props, vec!["a", "a_b_c", "list", "n", "property_timestamp"]);
        assert_eq!(ev.properties[1].1, Value::Str(r#"{"d":1}"#.into()));
        assert_eq!(ev.properties[2].1, Value::Str("[1,2]".into()));
        let std: Vec<_> = ev.standard.iter().map(|(n, _)| &**n).collect();
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
        // A lone surrogate in a key, which a raw value lets through, at any depth.
        for props in [r#"{"a":1,"\ud800":2,"b":3}"#, r#"{"o":{"\udc00":1}}"#] {
            let body = format!(r#"{{"event":"e","properties":{props}}}"#);
            assert_eq!(code(&body), "invalid_json", "{body}");
        }
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
}
