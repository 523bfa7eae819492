//! A message's top-level fields as sent ([`Top`]): keys and raw values in body order, keys
//! borrowed from the body where they have no escapes, each value parsed only when a rule of
//! [`super::event`] or [`super::segment`] asks for it. The fields those rules read are found
//! in one pass, as the message is parsed, so a rule's lookup does not scan the keys again.

use std::borrow::Cow;
use std::fmt;

use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

use crate::model::members::{Key, RawObject};
use crate::model::tape::Tape;
use crate::model::valid_json;

/// How many top-level fields the event and Segment rules read (the slots of [`known`]).
const KNOWN: usize = 16;

/// The slot of a field the event and Segment rules read; `None` for any other key.
fn known(key: &str) -> Option<usize> {
    Some(match key {
        "anonymousId" => 0,
        "category" => 1,
        "context" => 2,
        "event" => 3,
        "groupId" => 4,
        "messageId" => 5,
        "name" => 6,
        "originalTimestamp" => 7,
        "previousId" => 8,
        "properties" => 9,
        "sentAt" => 10,
        "timestamp" => 11,
        "traits" => 12,
        "type" => 13,
        "userId" => 14,
        "version" => 15,
        _ => return None,
    })
}

/// An event's top-level fields, values as sent, in body order; a key sent twice means its last
/// value (as JSON parsers commonly read it). Keys without escapes are borrowed from the body.
#[derive(Debug, Default)]
pub struct Top<'a> {
    fields: Vec<(Cow<'a, str>, Raw<'a>)>,
    /// The last value of each field [`known`] gives a slot.
    known: [Option<Raw<'a>>; KNOWN],
    /// The message's text, when the validating walk read it and recorded its objects' members
    /// on `tape`.
    text: &'a str,
    tape: Tape,
}

/// A value's JSON text as sent, accepted with the rest of its message.
#[derive(Debug, Clone, Copy)]
pub struct Raw<'a>(&'a str);

impl<'a> Raw<'a> {
    /// The text.
    pub fn get(self) -> &'a str {
        self.0
    }
}

impl<'a> Top<'a> {
    /// The top-level fields of `text`, which must be one JSON object: read by the validating
    /// walk of [`valid_json`] where it can, else by serde_json, which also says why a text is
    /// refused (`is_data()` when it is JSON but not an object).
    pub fn parse(text: &'a str) -> Result<Top<'a>, serde_json::Error> {
        Top::parse_on(text, Tape::for_text(text.len()))
    }

    /// [`Top::parse`], recording on `tape`: an earlier message's ([`Top::into_tape`]), so the
    /// messages of a batch share one.
    pub fn parse_on(text: &'a str, mut tape: Tape) -> Result<Top<'a>, serde_json::Error> {
        let mut top = Top::default();
        if valid_json::object_members(text, &mut tape, |k, v| top.push(Cow::Borrowed(k), Raw(v))) {
            top.text = text;
            top.tape = tape;
            return Ok(top);
        }
        serde_json::from_str(text)
    }

    /// The tape, for the next message ([`Top::parse_on`]).
    pub fn into_tape(self) -> Tape {
        self.tape
    }

    /// The members of `value`, an object's text within this message (a field's value or a
    /// value within one), from what the validating walk recorded; `None` when it has not
    /// recorded them (the caller then walks the text: [`RawObject::of_valid`]).
    pub fn object(&self, value: &'a str) -> Option<Result<RawObject<'a>, serde_json::Error>> {
        self.tape.object(self.text, value)
    }

    fn push(&mut self, key: Cow<'a, str>, value: Raw<'a>) {
        match known(&key) {
            Some(slot) => self.known[slot] = Some(value),
            None => self.fields.push((key, value)),
        }
    }

    /// The value of `key` (its last occurrence).
    pub fn get(&self, key: &str) -> Option<Raw<'a>> {
        match known(key) {
            Some(slot) => self.known[slot],
            None => self
                .fields
                .iter()
                .rev()
                .find(|(k, _)| k == key)
                .map(|(_, v)| *v),
        }
    }
}

impl<'de> Deserialize<'de> for Top<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Fields;
        impl<'de> Visitor<'de> for Fields {
            type Value = Top<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Top<'de>, A::Error> {
                let mut out = Top::default();
                while let Some((Key(k), v)) = map.next_entry::<Key<'de>, &'de RawValue>()? {
                    out.push(k, Raw(v.get()));
                }
                Ok(out)
            }
        }
        d.deserialize_map(Fields)
    }
}

/// A string value's text when it was sent without escapes: the text between the quotes, as
/// it is (the parser refused raw control characters in it).
pub fn plain_str(text: &str) -> Option<&str> {
    match text.as_bytes() {
        [b'"', inner @ .., b'"'] if !inner.iter().any(|&b| b == b'\\' || b < 0x20) => {
            Some(&text[1..text.len() - 1])
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_and_other_fields_take_their_last_value() {
        let top: Top = serde_json::from_str(
            r#"{"event":"a","x":1,"event":"b","x":2,"even\u0074":"c","messageId":null}"#,
        )
        .unwrap();
        assert_eq!(top.get("event").map(|v| v.get()), Some(r#""c""#));
        assert_eq!(top.get("x").map(|v| v.get()), Some("2"));
        assert_eq!(top.get("messageId").map(|v| v.get()), Some("null"));
        assert!(top.get("userId").is_none());
        assert!(top.get("y").is_none());
    }

    /// Values are checked as the message is parsed: a rule may then read a plain string's
    /// text as its value (`fields::get`).
    #[test]
    fn a_raw_control_character_in_a_value_is_refused_at_parse() {
        for text in ["{\"event\":\"a\u{1}b\"}", "{\"event\":\"a\nb\"}"] {
            assert!(serde_json::from_str::<Top>(text).is_err(), "{text:?}");
        }
    }
}
