//! A message's top-level fields as sent ([`Top`]): keys and raw values in body order, keys
//! borrowed from the body where they have no escapes, each value parsed only when a rule of
//! [`super::event`] or [`super::segment`] asks for it.

use std::borrow::Cow;
use std::fmt;

use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

use crate::model::flatten::Key;

/// An event's top-level fields, values as sent, in body order; a key sent twice means its last
/// value (as JSON parsers commonly read it). Keys without escapes are borrowed from the body.
#[derive(Debug, Default)]
pub struct Top<'a>(Vec<(Cow<'a, str>, &'a RawValue)>);

impl<'a> Top<'a> {
    /// The value of `key` (its last occurrence).
    pub fn get(&self, key: &str) -> Option<&&'a RawValue> {
        self.0.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v)
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
                let mut out = Vec::with_capacity(map.size_hint().unwrap_or(12));
                while let Some((Key(k), v)) = map.next_entry::<Key<'de>, &'de RawValue>()? {
                    out.push((k, v));
                }
                Ok(Top(out))
            }
        }
        d.deserialize_map(Fields)
    }
}
