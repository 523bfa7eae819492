//! A JSON object's members as sent ([`RawObject`]): found by one walk over JSON text a parser
//! has already accepted (a request body is validated whole when its top-level fields are read),
//! so an event's context and properties are not run through the parser again, level by level.
//! Also the object key that borrows from the text ([`Key`]).

use std::borrow::Cow;
use std::fmt;

use serde::de::{Deserialize, Deserializer, Visitor};
use serde_json::value::RawValue;

/// A JSON object's members with their values' text as sent: every member, duplicate keys
/// included, sorted by the bytes of the key (stably, so duplicates keep their order). Keys
/// without escapes are borrowed from the text.
#[derive(Debug, Default)]
pub struct RawObject<'a>(pub Vec<(Cow<'a, str>, &'a str)>);

impl<'a> RawObject<'a> {
    /// The members of `text`, the JSON text of an object that a JSON parser has accepted (a
    /// `RawValue`'s text starting with `{`). `Err` for a key with an escape that is not a
    /// character (a lone surrogate such as `\ud800`: a `RawValue` passes it, a key cannot be
    /// it). Text a parser would refuse reads as the members found before what could not be
    /// read; the walk never panics.
    pub fn of_valid(text: &'a str) -> Result<RawObject<'a>, serde_json::Error> {
        let mut out = Vec::with_capacity(8);
        let mut walk = Walk { text, at: 0 };
        walk.ws();
        if walk.byte() == Some(b'{') {
            walk.at += 1;
            while let Some(member) = walk.member()? {
                out.push(member);
            }
        }
        out.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
        Ok(RawObject(out))
    }

    /// The members of `text` if it is one JSON object; `Err` says why not, as the parser does
    /// (`is_data()` when it is JSON but not an object).
    pub fn parse(text: &'a str) -> Result<RawObject<'a>, serde_json::Error> {
        let raw: &RawValue = serde_json::from_str(text)?;
        if !raw.get().starts_with('{') {
            return Err(<serde_json::Error as serde::de::Error>::custom(
                "expected a JSON object",
            ));
        }
        RawObject::of_valid(raw.get())
    }
}

/// A cursor over valid JSON text; every index it stops at is an ASCII byte, so slicing there
/// is always on a character boundary.
struct Walk<'a> {
    text: &'a str,
    at: usize,
}

impl<'a> Walk<'a> {
    fn byte(&self) -> Option<u8> {
        self.text.as_bytes().get(self.at).copied()
    }

    fn ws(&mut self) {
        while matches!(self.byte(), Some(b' ' | b'\n' | b'\r' | b'\t')) {
            self.at += 1;
        }
    }

    /// The next member of the object the cursor is in, and the cursor past it (and its comma);
    /// `None` at the object's end; `Err` for a key that is not a string of characters.
    #[allow(clippy::type_complexity)]
    fn member(&mut self) -> Result<Option<(Cow<'a, str>, &'a str)>, serde_json::Error> {
        let Some((key, escaped)) = self.key() else {
            return Ok(None);
        };
        let key = if escaped {
            Cow::Owned(serde_json::from_str::<String>(key)?)
        } else {
            Cow::Borrowed(&key[1..key.len() - 1])
        };
        Ok(self.value().map(|value| (key, value)))
    }

    /// The next key as sent, quotes included, and whether it has escapes; `None` at the
    /// object's end.
    fn key(&mut self) -> Option<(&'a str, bool)> {
        self.ws();
        if self.byte() != Some(b'"') {
            return None; // `}` (or text a parser would not have accepted)
        }
        let start = self.at;
        let (end, escaped) = string_end(self.text.as_bytes(), start)?;
        let quoted = self.text.get(start..end)?;
        self.at = end;
        Some((quoted, escaped))
    }

    /// The value after a key, and the cursor past it (and its comma).
    fn value(&mut self) -> Option<&'a str> {
        self.ws();
        if self.byte() != Some(b':') {
            return None;
        }
        self.at += 1;
        self.ws();
        let value_start = self.at;
        let value_end = value_end(self.text.as_bytes(), value_start)?;
        let value = self.text.get(value_start..value_end)?;
        self.at = value_end;
        self.ws();
        if self.byte() == Some(b',') {
            self.at += 1;
        }
        Some(value)
    }
}

/// The end (one past the closing quote) of the string whose opening quote is at `start`, and
/// whether it has escapes.
fn string_end(b: &[u8], start: usize) -> Option<(usize, bool)> {
    let mut at = start + 1;
    let mut escaped = false;
    loop {
        // Most strings are short: a plain scan beats setting up a vectorised search.
        at += b.get(at..)?.iter().position(|&c| c == b'"' || c == b'\\')?;
        if b[at] == b'"' {
            return Some((at + 1, escaped));
        }
        escaped = true;
        at += 2; // the backslash and the byte it escapes (`\uXXXX` continues as plain bytes)
    }
}

/// The end of the value starting at `start`.
fn value_end(b: &[u8], start: usize) -> Option<usize> {
    match *b.get(start)? {
        b'"' => string_end(b, start).map(|(end, _)| end),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut at = start;
            loop {
                match *b.get(at)? {
                    b'"' => {
                        at = string_end(b, at)?.0;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(at + 1);
                        }
                    }
                    _ => {}
                }
                at += 1;
            }
        }
        _ => {
            let len = b[start..]
                .iter()
                .position(|c| matches!(c, b',' | b'}' | b']' | b' ' | b'\n' | b'\r' | b'\t'))
                .unwrap_or(b.len() - start);
            Some(start + len)
        }
    }
}

/// An object key, borrowed from the JSON text when it has no escapes.
pub struct Key<'a>(pub Cow<'a, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v.to_string())))
            }
            fn visit_string<E>(self, v: String) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v)))
            }
        }
        d.deserialize_str(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The members serde_json finds, sorted the same way.
    fn by_parser(text: &str) -> Vec<(String, String)> {
        let map: Vec<(String, Box<RawValue>)> = {
            struct All(Vec<(String, Box<RawValue>)>);
            impl<'de> Deserialize<'de> for All {
                fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                    struct V;
                    impl<'de> Visitor<'de> for V {
                        type Value = All;
                        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                            f.write_str("an object")
                        }
                        fn visit_map<A: serde::de::MapAccess<'de>>(
                            self,
                            mut m: A,
                        ) -> Result<All, A::Error> {
                            let mut out = Vec::new();
                            while let Some(e) = m.next_entry()? {
                                out.push(e);
                            }
                            Ok(All(out))
                        }
                    }
                    d.deserialize_map(V)
                }
            }
            serde_json::from_str::<All>(text).unwrap().0
        };
        let mut out: Vec<(String, String)> = map
            .into_iter()
            .map(|(k, v)| (k, v.get().to_string()))
            .collect();
        out.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
        out
    }

    fn walked(text: &str) -> Vec<(String, String)> {
        RawObject::of_valid(text)
            .unwrap()
            .0
            .into_iter()
            .map(|(k, v)| (k.into_owned(), v.to_string()))
            .collect()
    }

    #[test]
    fn the_walk_finds_what_the_parser_finds() {
        for text in [
            r#"{}"#,
            r#" { } "#,
            r#"{"a":1}"#,
            "{\n \"b\" :\t\"x\" , \"a\" : [1, {\"z\":\"}\"}, \"]\\\"\"] ,\"c\":{\"d\":{}}}",
            r#"{"k\"ey":"va\\lue","k\u00e9":-1.5e3,"n":null,"t":true,"f":false}"#,
            r#"{"x":2,"x":1,"ü":"ö","":"","s":"\\","e":{ "a" : [ ] }}"#,
            r#"{"deep":{"a":{"b":{"c":[[["]"]]]}}},"z":"{"}"#,
        ] {
            assert_eq!(walked(text), by_parser(text), "{text}");
        }
    }

    #[test]
    fn text_a_parser_refuses_neither_panics_nor_loops() {
        for text in [
            "",
            "{",
            "{\"",
            "{\"a",
            "{\"a\"",
            "{\"a\":",
            "{\"a\":\"",
            "{\"a\":[",
            "{\"a\":1,",
            "[1]",
            "{\"a\\",
            "{\"a\":{\"b\":[}",
        ] {
            let _ = RawObject::of_valid(text);
        }
        // A lone surrogate passes as a value's text but cannot be a key: refused, not cut off.
        for text in [r#"{"a":1,"\ud800":2,"b":3}"#, r#"{"\udc00":1}"#] {
            let raw: &RawValue = serde_json::from_str(text).unwrap();
            assert!(RawObject::of_valid(raw.get()).is_err(), "{text}");
        }
        assert!(RawObject::parse("[1]").unwrap_err().is_data());
        assert!(!RawObject::parse("{").unwrap_err().is_data());
    }
}
