//! Segment Tracking API messages (SPEC §2.2) → warehouse rows: the six calls and the rules
//! Segment validates, the batch's shared `context` and `sentAt`, clock-skew correction (by
//! [`super::event_time`]), and the per-call tables (`tracks` + `<event>`, `identifies`,
//! `pages`, `screens`, `groups`, `aliases`).
//! What the WAL keeps of a message, and replay from it, is [`super::logged`].

use std::borrow::Cow;

use chrono::{DateTime, Utc};
use serde_json::value::RawValue;

use super::event::{
    EventRows, Parts, STANDARD_ROOM, common_fields, event_name, finish, lead_cells,
};
use super::event_time::TimeRule;
use super::fields::{FieldValue, bad, field_value, object_field, text_field};
use super::top_fields::Top;
use crate::model::Invalid;
use crate::model::flatten::Names;
use crate::model::members::RawObject;
use crate::model::value::CowCell;

/// A Segment call type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    /// `track` (also `event`): `tracks` + the event's table.
    Track,
    /// `identify` → `identifies`.
    Identify,
    /// `page` → `pages`.
    Page,
    /// `screen` → `screens`.
    Screen,
    /// `group` → `groups`.
    Group,
    /// `alias` → `aliases`.
    Alias,
}

impl Call {
    /// The call of a `type` value (`event` is `track`).
    pub fn from_type(t: &str) -> Option<Call> {
        Some(match t {
            "track" | "event" => Call::Track,
            "identify" => Call::Identify,
            "page" => Call::Page,
            "screen" => Call::Screen,
            "group" => Call::Group,
            "alias" => Call::Alias,
            _ => return None,
        })
    }

    /// The canonical `type` name.
    pub fn name(self) -> &'static str {
        match self {
            Call::Track => "track",
            Call::Identify => "identify",
            Call::Page => "page",
            Call::Screen => "screen",
            Call::Group => "group",
            Call::Alias => "alias",
        }
    }

    /// Standard columns of the call's table beyond the common ones (properties and traits may
    /// not take these names).
    fn own_columns(self) -> &'static [&'static str] {
        match self {
            Call::Page => &["name", "category"],
            Call::Screen => &["name"],
            Call::Group => &["group_id"],
            Call::Alias => &["previous_id"],
            Call::Track | Call::Identify => &[],
        }
    }
}

/// What a batch shares with each of its messages.
#[derive(Debug, Default, Clone, Copy)]
pub struct Shared<'a> {
    /// The batch's `context`: fills keys missing from each message's context.
    pub context: Option<&'a RawValue>,
    /// The batch's `sentAt`: used when a message has none.
    pub sent_at: Option<&'a RawValue>,
}

/// Validates one message. `call` is the endpoint's call (`/v1/identify`), or `None` on
/// `/v1/batch`, where the message's `type` decides.
pub fn parse_message(
    msg: &Top,
    call: Option<Call>,
    shared: Shared,
    received_at: DateTime<Utc>,
    max_columns: usize,
    id_override: Option<&str>,
) -> Result<(Call, EventRows), Invalid> {
    let (call, parts) = message_parts(msg, call, shared, received_at, id_override)?;
    Ok((call, finish(parts, max_columns)?))
}

/// Validates one message's fields, up to its context and properties (or traits), which are
/// left to flatten.
pub(super) fn message_parts<'a>(
    msg: &Top<'a>,
    call: Option<Call>,
    shared: Shared<'a>,
    received_at: DateTime<Utc>,
    id_override: Option<&str>,
) -> Result<(Call, Parts<'a>), Invalid> {
    let call = message_call(msg, call)?;
    let rule = TimeRule::SkewCorrected {
        batch_sent_at: shared.sent_at,
    };
    let mut standard: Vec<CowCell<'a>> = Vec::with_capacity(STANDARD_ROOM);
    let common = common_fields(msg, received_at, id_override, rule, &mut standard)?;
    if !standard
        .iter()
        .any(|(c, _)| c == "user_id" || c == "anonymous_id")
    {
        return Err(bad(
            "missing_user",
            "userId",
            "every Segment call needs a userId or an anonymousId",
        ));
    }
    let (table, tracks, properties_field) = match call {
        Call::Track => {
            let (text, table) = event_name(msg)?;
            lead_cells(
                &mut standard,
                common.id.clone(),
                Some((table.clone(), text)),
            );
            (table, true, "properties")
        }
        Call::Identify => ("identifies".into(), false, "traits"),
        Call::Page => ("pages".into(), false, "properties"),
        Call::Screen => ("screens".into(), false, "properties"),
        Call::Group => ("groups".into(), false, "traits"),
        Call::Alias => ("aliases".into(), false, "properties"),
    };
    if !tracks {
        lead_cells(&mut standard, common.id.clone(), None);
    }
    match call {
        Call::Page | Call::Screen => {
            let fields: &[(&str, &str)] = if call == Call::Page {
                &[("name", "name"), ("category", "category")]
            } else {
                &[("name", "name")]
            };
            for &(field, column) in fields {
                if let Some(v) = text_field(msg, field)? {
                    standard.push((column.into(), v.into()));
                }
            }
        }
        Call::Group => {
            let id = required_id(msg, "groupId", "missing_group_id", "group needs a groupId")?;
            standard.push(("group_id".into(), id.into()));
        }
        Call::Alias => {
            required_id(msg, "userId", "missing_user", "alias needs a userId")?;
            let prev = required_id(
                msg,
                "previousId",
                "missing_previous_id",
                "alias needs a previousId",
            )?;
            standard.push(("previous_id".into(), prev.into()));
        }
        Call::Track | Call::Identify => {}
    }
    let context = merged_context(msg, shared.context)?;
    let properties = match call {
        Call::Alias => None,
        // RudderStack's SDKs send identify traits only as `context.traits`.
        Call::Identify => match object_field(msg, "traits")? {
            Some(t) => Some(t),
            None => context_traits(context.as_ref())?,
        },
        _ => object_field(msg, properties_field)?,
    };
    let parts = Parts {
        id: common.id,
        client_id: common.client_id,
        tracks,
        table,
        standard,
        context,
        properties,
        properties_field,
        reserved: Names::PropertyReserving(call.own_columns()),
    };
    Ok((call, parts))
}

fn message_call(msg: &Top, endpoint: Option<Call>) -> Result<Call, Invalid> {
    let given = match field_value(msg, "type", "invalid_type")? {
        None => None,
        Some(FieldValue::Text(t)) => Some(Call::from_type(&t).ok_or_else(|| {
            bad(
                "unsupported_type",
                "type",
                format!(
                    "type must be one of track, identify, page, screen, group, alias; got {t:?}"
                ),
            )
        })?),
        Some(v @ FieldValue::Other(_)) => {
            return Err(bad(
                "unsupported_type",
                "type",
                format!("type must be a string, got {v}"),
            ));
        }
    };
    match (endpoint, given) {
        (Some(e), Some(g)) if e != g => Err(bad(
            "unsupported_type",
            "type",
            format!(
                "this endpoint takes {} calls; the message says {}",
                e.name(),
                g.name()
            ),
        )),
        (Some(e), _) => Ok(e),
        (None, Some(g)) => Ok(g),
        (None, None) => Err(bad("missing_type", "type", "every message needs a type")),
    }
}

fn required_id<'a>(
    msg: &Top<'a>,
    field: &str,
    code: &'static str,
    message: &str,
) -> Result<Cow<'a, str>, Invalid> {
    text_field(msg, field)?
        .filter(|v| !v.is_empty())
        .ok_or_else(|| bad(code, field, message))
}

/// `context.traits`, when it is an object.
fn context_traits<'a>(context: Option<&RawObject<'a>>) -> Result<Option<RawObject<'a>>, Invalid> {
    let Some((_, raw)) = context.and_then(|c| c.0.iter().find(|(k, _)| k == "traits")) else {
        return Ok(None);
    };
    // Accepted by the parser with the rest of the body.
    if !raw.starts_with('{') {
        return Ok(None);
    }
    RawObject::of_valid(raw)
        .map(Some)
        .map_err(|e| bad("invalid_json", "context.traits", e.to_string()))
}

/// The message's context with the batch's keys it lacks (top-level keys only).
fn merged_context<'a>(
    msg: &Top<'a>,
    batch: Option<&'a RawValue>,
) -> Result<Option<RawObject<'a>>, Invalid> {
    let own = object_field(msg, "context")?;
    let shared: Option<RawObject<'a>> = match batch.map(RawValue::get) {
        None | Some("null") => None,
        Some(t) if t.starts_with('{') => Some(
            RawObject::of_valid(t).map_err(|e| bad("invalid_json", "context", e.to_string()))?,
        ),
        Some(_) => {
            return Err(bad(
                "invalid_context",
                "context",
                "the batch's context must be an object",
            ));
        }
    };
    Ok(match (own, shared) {
        (own, None) => own,
        (None, Some(s)) => Some(s),
        (Some(mut own), Some(s)) => {
            for (k, v) in s.0 {
                if !own.0.iter().any(|(o, _)| *o == k) {
                    own.0.push((k, v));
                }
            }
            own.0.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            Some(own)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::value::Value;

    #[test]
    fn skew_correction_and_call_tables() {
        let received = DateTime::from_timestamp_micros(1_000_000_000).unwrap();
        let msg: Top = serde_json::from_str(
            r#"{"type":"track","event":"Aliases","userId":"u","timestamp":"1970-01-01T00:00:10Z","sentAt":"1970-01-01T00:00:30Z"}"#,
        )
        .unwrap();
        let (_, rows) = parse_message(&msg, None, Shared::default(), received, 1000, None).unwrap();
        assert_eq!(rows.table, "aliases_event");
        let cell = |name: &str| {
            rows.standard
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.clone())
        };
        // received 1000 s − (sent 30 s − client 10 s) = 980 s.
        assert_eq!(cell("timestamp"), Some(Value::Ts(980_000_000)));
        assert_eq!(cell("original_timestamp"), Some(Value::Ts(10_000_000)));
        assert_eq!(cell("sent_at"), Some(Value::Ts(30_000_000)));
    }
}
