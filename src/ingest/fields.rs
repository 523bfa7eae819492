//! A message's top-level fields read by their rules: any value as JSON, text borrowed from the
//! body when sent without escapes, ids (a string, or a number as sent), objects; and the
//! error a refused field gets.

use std::borrow::Cow;
use std::fmt;

use serde_json::Value as Json;

use super::top_fields::{Top, plain_str};
use crate::model::Invalid;
use crate::model::members::RawObject;

/// A refusal of `field`.
pub(super) fn bad(code: &'static str, field: &str, message: impl Into<String>) -> Invalid {
    Invalid::new(code, message).field(field)
}

/// A top-level field as a JSON value (`None` when absent); a value serde cannot represent (a
/// number beyond float64) is refused with `code`, never taken as absent.
pub(super) fn get(obj: &Top, field: &str, code: &'static str) -> Result<Option<Json>, Invalid> {
    obj.get(field)
        .map(|raw| json_value(raw.get()))
        .transpose()
        .map_err(|e| bad(code, field, format!("{field}: {e}")))
}

/// The value of a raw JSON value's text. A string without escapes (or control characters,
/// which the parser refuses) is its text between the quotes, and `null` is null; anything else
/// goes through the parser.
fn json_value(text: &str) -> Result<Json, serde_json::Error> {
    match plain_str(text) {
        Some(inner) => Ok(Json::String(inner.to_string())),
        None if text == "null" => Ok(Json::Null),
        None => serde_json::from_str(text),
    }
}

/// A top-level field's value (absent and null are `None`): a string's text, borrowed from the
/// body when sent without escapes, or any other value as JSON. What the rules reading strings
/// (`type`, `event`, the ids) take, so a plain string is never copied to be looked at.
pub(super) enum FieldValue<'a> {
    Text(Cow<'a, str>),
    Other(Json),
}

/// As JSON: a string in quotes (for error messages).
impl fmt::Display for FieldValue<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FieldValue::Text(t) => write!(f, "{}", Json::String(t.to_string())),
            FieldValue::Other(v) => write!(f, "{v}"),
        }
    }
}

/// [`get`] as a [`FieldValue`].
pub(super) fn field_value<'a>(
    obj: &Top<'a>,
    field: &str,
    code: &'static str,
) -> Result<Option<FieldValue<'a>>, Invalid> {
    let Some(raw) = obj.get(field) else {
        return Ok(None);
    };
    let text: &'a str = raw.get();
    if let Some(inner) = plain_str(text) {
        return Ok(Some(FieldValue::Text(Cow::Borrowed(inner))));
    }
    Ok(match serde_json::from_str(text) {
        Ok(Json::Null) => None,
        Ok(Json::String(s)) => Some(FieldValue::Text(Cow::Owned(s))),
        Ok(v) => Some(FieldValue::Other(v)),
        Err(e) => return Err(bad(code, field, format!("{field}: {e}"))),
    })
}

/// A top-level field that must be an object (or absent/null).
pub(super) fn object_field<'a>(
    obj: &Top<'a>,
    field: &str,
) -> Result<Option<RawObject<'a>>, Invalid> {
    let code = match field {
        "context" => "invalid_context",
        "properties" => "invalid_properties",
        "traits" => "invalid_traits",
        _ => "invalid_field",
    };
    match obj.get(field).map(|r| r.get()) {
        None | Some("null") => Ok(None),
        // Accepted by the parser with the rest of the body.
        Some(t) if t.starts_with('{') => obj
            .object(t)
            .unwrap_or_else(|| RawObject::of_valid(t))
            .map(Some)
            .map_err(|e| bad("invalid_json", field, e.to_string())),
        Some(_) => Err(bad(code, field, format!("{field} must be an object"))),
    }
}

/// Longest accepted `messageId`, `userId` or `anonymousId`, in bytes.
pub const MAX_ID_BYTES: usize = 1024;

/// A string field (borrowed from the body when sent without escapes), or a number given where
/// Segment allows one (`userId: 42`).
pub(super) fn text_field<'a>(obj: &Top<'a>, field: &str) -> Result<Option<Cow<'a, str>>, Invalid> {
    match field_value(obj, field, "invalid_field")? {
        None => Ok(None),
        Some(FieldValue::Text(s)) if s.len() > MAX_ID_BYTES => Err(bad(
            "invalid_field",
            field,
            format!("{field} must be at most {MAX_ID_BYTES} bytes"),
        )),
        Some(FieldValue::Text(s)) => Ok(Some(s)),
        // The number exactly as sent (`1e2`, `12345678901234567890123`), never re-spelled.
        Some(FieldValue::Other(Json::Number(_))) => {
            Ok(obj.get(field).map(|raw| Cow::Borrowed(raw.get())))
        }
        Some(FieldValue::Other(_)) => Err(bad(
            "invalid_field",
            field,
            format!("{field} must be a string"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plain_string_shortcut_reads_what_the_parser_reads() {
        for text in [
            r#""abc""#,
            r#""""#,
            r#""h\u00e9llo""#,
            r#""q\"""#,
            "\"é ☃\"",
            "\"a\u{1}b\"",
            "null",
            "12",
            r#"{"a":1}"#,
        ] {
            let ours = json_value(text).ok();
            let parser = serde_json::from_str::<Json>(text).ok();
            assert_eq!(ours, parser, "{text:?}");
        }
    }
}
