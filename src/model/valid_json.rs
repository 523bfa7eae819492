//! A validating walk over one JSON object's text, for the shape messages come in: the members of
//! a top-level object, each value's text as sent, found in one pass that also checks the whole
//! text is JSON (RFC 8259: strings without raw control characters, known escapes, the number
//! grammar, literals, brackets that match, nothing after the object). The same pass can record
//! where every object's members are ([`Tape`]), so nothing walks the text again to find them.
//!
//! It is the fast road, not the judge. It gives up (`false`) on anything it does not read
//! itself — an escape in a top-level key, nesting deeper than [`MAX_DEPTH`], any text that is not
//! valid — and the caller then asks serde_json, which decides and says why. So it accepts
//! only what serde_json accepts, with the same members (tested against it on generated and
//! mutated text), and never refuses anything on its own.

use super::tape::{Entry, Tape};

/// `bytes` as text, if they are UTF-8: checked with SIMD, which runs many times faster than
/// `std::str::from_utf8` on text that is not ASCII (and on which a request's whole body
/// waits). `None` says only that they are not; `std::str::from_utf8` says where.
pub fn utf8(bytes: &[u8]) -> Option<&str> {
    simdutf8::basic::from_utf8(bytes).ok()
}

/// Deepest nesting read here (serde_json puts no limit on a value it skips).
pub const MAX_DEPTH: usize = 64;

/// Walks `text`, which must be one JSON object, calling `member` with each key (without its
/// quotes; a top-level key has no escapes) and value text, in order, and records on `tape`
/// (cleared first) the members of every object in `text` outside arrays, the top level's
/// included. `false` when it gave up: `text` may still be valid JSON, `member` may have been
/// called for some members already, and `tape` records nothing.
pub fn object_members<'a>(
    text: &'a str,
    tape: &mut Tape,
    member: impl FnMut(&'a str, &'a str),
) -> bool {
    tape.clear();
    // Offsets are kept in 32 bits; a longer text is walked without a tape.
    let record = u32::try_from(text.len()).is_ok();
    let read = walk(text, record.then(|| tape.entries_mut()), member);
    if read && record {
        tape.set_recorded(text);
    } else {
        tape.clear();
    }
    read
}

fn walk<'a>(
    text: &'a str,
    tape: Option<&mut Vec<Entry>>,
    mut member: impl FnMut(&'a str, &'a str),
) -> bool {
    let mut s = Scan {
        b: text.as_bytes(),
        at: 0,
        tape,
        arrays: 0,
    };
    s.ws();
    if s.byte() != Some(b'{') {
        return false;
    }
    s.at += 1;
    s.ws();
    if s.byte() == Some(b'}') {
        s.at += 1;
    } else {
        loop {
            let key_start = s.at;
            if s.byte() != Some(b'"') || s.string(true).is_none() {
                return false;
            }
            let key = &text[key_start + 1..s.at - 1];
            let slot = s.open(key_start, false);
            s.ws();
            if s.byte() != Some(b':') {
                return false;
            }
            s.at += 1;
            s.ws();
            let value_start = s.at;
            if s.value(1).is_none() {
                return false;
            }
            s.close(slot, value_start);
            member(key, &text[value_start..s.at]);
            s.ws();
            match s.byte() {
                Some(b',') => {
                    s.at += 1;
                    s.ws();
                }
                Some(b'}') => {
                    s.at += 1;
                    break;
                }
                _ => return false,
            }
        }
    }
    s.ws();
    s.at == s.b.len()
}

/// A cursor; it only ever stops on ASCII bytes, so slicing the text there is on a character
/// boundary.
struct Scan<'a, 't> {
    b: &'a [u8],
    at: usize,
    /// Where members are recorded, if they are.
    tape: Option<&'t mut Vec<Entry>>,
    /// How many arrays the cursor is in: members inside an array are not recorded.
    arrays: u32,
}

impl Scan<'_, '_> {
    /// Records the member whose key (quotes included) starts at `key_start` and ends at the
    /// cursor, before its value is read; the entry's index, or `u32::MAX` when not recorded.
    fn open(&mut self, key_start: usize, escaped: bool) -> u32 {
        match &mut self.tape {
            Some(tape) if self.arrays == 0 => {
                tape.push(Entry {
                    key_start: key_start as u32,
                    key_end: self.at as u32,
                    escaped,
                    value_start: 0,
                    value_end: 0,
                    next: 0,
                });
                tape.len() as u32 - 1
            }
            _ => u32::MAX,
        }
    }

    /// Finishes entry `slot` once its value (from `value_start` to the cursor) was read.
    fn close(&mut self, slot: u32, value_start: usize) {
        if let Some(tape) = &mut self.tape
            && slot != u32::MAX
        {
            let next = tape.len() as u32;
            let e = &mut tape[slot as usize];
            e.value_start = value_start as u32;
            e.value_end = self.at as u32;
            e.next = next;
        }
    }

    fn byte(&self) -> Option<u8> {
        self.b.get(self.at).copied()
    }

    fn ws(&mut self) {
        while matches!(self.byte(), Some(b' ' | b'\n' | b'\r' | b'\t')) {
            self.at += 1;
        }
    }

    /// A string whose opening quote is at the cursor; the cursor ends past the closing quote;
    /// whether it had escapes. `key`: a top-level key, which serde_json reads into text (so
    /// its escapes are left to it); any other string is skipped as serde_json skips it,
    /// escapes checked for form.
    fn string(&mut self, key: bool) -> Option<bool> {
        self.at += 1;
        let mut escaped = false;
        loop {
            self.skip_plain();
            // The stop byte is within the next eight (or the text ends first).
            loop {
                match self.byte()? {
                    b'"' => {
                        self.at += 1;
                        return Some(escaped);
                    }
                    b'\\' => break,
                    0..=0x1f => return None,
                    _ => self.at += 1,
                }
            }
            if key {
                return None;
            }
            escaped = true;
            match self.b.get(self.at + 1)? {
                b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => self.at += 2,
                // Four hex digits, whatever code point they make (a lone surrogate too), as
                // serde_json skips a value's escapes.
                b'u' => {
                    let hex = self.b.get(self.at + 2..self.at + 6)?;
                    if !hex.iter().all(u8::is_ascii_hexdigit) {
                        return None;
                    }
                    self.at += 6;
                }
                _ => return None,
            }
        }
    }

    /// Past the bytes of a string that need no look (not `"`, `\\`, or a control character):
    /// long texts are most of some messages. Sixteen at a time with SSE2 (every x86-64 has
    /// it), then eight at a time, as serde_json skips them.
    fn skip_plain(&mut self) {
        #[cfg(target_arch = "x86_64")]
        if self.skip_plain_sse2() {
            return;
        }
        const ONES: u64 = 0x0101_0101_0101_0101;
        const HIGHS: u64 = 0x8080_8080_8080_8080;
        // Whether any byte of `v` is below `n` (n <= 128), exactly.
        let below = |v: u64, n: u8| v.wrapping_sub(ONES * u64::from(n)) & !v & HIGHS != 0;
        while let Some(chunk) = self.b.get(self.at..self.at + 8) {
            let word = u64::from_le_bytes(chunk.try_into().expect("eight bytes"));
            let stop = below(word ^ (ONES * u64::from(b'"')), 1)
                || below(word ^ (ONES * u64::from(b'\\')), 1)
                || below(word, 0x20);
            if stop {
                return;
            }
            self.at += 8;
        }
    }

    /// [`Scan::skip_plain`] sixteen bytes at a time: `true` when the cursor stopped on a byte
    /// that needs a look, `false` when fewer than sixteen are left.
    #[cfg(target_arch = "x86_64")]
    fn skip_plain_sse2(&mut self) -> bool {
        use std::arch::x86_64::{
            __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_min_epu8, _mm_movemask_epi8,
            _mm_or_si128, _mm_set1_epi8,
        };
        while let Some(chunk) = self.b.get(self.at..self.at + 16) {
            // SAFETY: SSE2 is part of x86-64, and the load reads the sixteen bytes of `chunk`
            // (unaligned loads are allowed).
            let stops = unsafe {
                let v = _mm_loadu_si128(chunk.as_ptr().cast::<__m128i>());
                let quote = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'"' as i8));
                let backslash = _mm_cmpeq_epi8(v, _mm_set1_epi8(b'\\' as i8));
                // A byte at most 0x1f, unsigned: its minimum with 0x1f is itself.
                let control = _mm_cmpeq_epi8(_mm_min_epu8(v, _mm_set1_epi8(0x1f)), v);
                _mm_movemask_epi8(_mm_or_si128(_mm_or_si128(quote, backslash), control))
            };
            if stops != 0 {
                self.at += stops.trailing_zeros() as usize;
                return true;
            }
            self.at += 16;
        }
        false
    }

    /// Any value at the cursor, `depth` containers deep; the cursor ends past it.
    fn value(&mut self, depth: usize) -> Option<()> {
        match self.byte()? {
            b'"' => self.string(false).map(drop),
            b'{' => self.container(depth + 1, b'}', true),
            b'[' => {
                self.arrays += 1;
                let read = self.container(depth + 1, b']', false);
                self.arrays -= 1;
                read
            }
            b't' => self.word(b"true"),
            b'f' => self.word(b"false"),
            b'n' => self.word(b"null"),
            b'-' | b'0'..=b'9' => self.number(),
            _ => None,
        }
    }

    /// An object (`members`) or an array opening at the cursor, closed by `close`.
    fn container(&mut self, depth: usize, close: u8, members: bool) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.at += 1;
        self.ws();
        if self.byte()? == close {
            self.at += 1;
            return Some(());
        }
        loop {
            let mut slot = u32::MAX;
            let mut value_start = self.at;
            if members {
                if self.byte()? != b'"' {
                    return None;
                }
                let key_start = self.at;
                let escaped = self.string(false)?;
                slot = self.open(key_start, escaped);
                self.ws();
                if self.byte()? != b':' {
                    return None;
                }
                self.at += 1;
                self.ws();
                value_start = self.at;
            }
            self.value(depth)?;
            self.close(slot, value_start);
            self.ws();
            match self.byte()? {
                b',' => {
                    self.at += 1;
                    self.ws();
                }
                c if c == close => {
                    self.at += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    fn word(&mut self, word: &[u8]) -> Option<()> {
        let end = self.at + word.len();
        (self.b.get(self.at..end)? == word).then(|| self.at = end)
    }

    /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`
    fn number(&mut self) -> Option<()> {
        if self.byte() == Some(b'-') {
            self.at += 1;
        }
        match self.byte()? {
            b'0' => self.at += 1,
            b'1'..=b'9' => self.digits(),
            _ => return None,
        }
        if self.byte() == Some(b'.') {
            self.at += 1;
            self.some_digits()?;
        }
        if matches!(self.byte(), Some(b'e' | b'E')) {
            self.at += 1;
            if matches!(self.byte(), Some(b'+' | b'-')) {
                self.at += 1;
            }
            self.some_digits()?;
        }
        Some(())
    }

    fn digits(&mut self) {
        while matches!(self.byte(), Some(b'0'..=b'9')) {
            self.at += 1;
        }
    }

    fn some_digits(&mut self) -> Option<()> {
        let start = self.at;
        self.digits();
        (self.at > start).then_some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::members::RawObject;
    use serde_json::value::RawValue;

    fn walked(text: &str) -> Option<Vec<(String, String)>> {
        let mut out = Vec::new();
        object_members(text, &mut Tape::default(), |k, v| {
            out.push((k.to_string(), v.to_string()))
        })
        .then_some(out)
    }

    /// serde_json's reading: the members of a top-level object, values as sent.
    fn by_parser(text: &str) -> Option<Vec<(String, String)>> {
        struct All(Vec<(String, String)>);
        impl<'de> serde::Deserialize<'de> for All {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V;
                impl<'de> serde::de::Visitor<'de> for V {
                    type Value = All;
                    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                        f.write_str("an object")
                    }
                    fn visit_map<A: serde::de::MapAccess<'de>>(
                        self,
                        mut map: A,
                    ) -> Result<All, A::Error> {
                        let mut out = Vec::new();
                        while let Some((k, v)) = map.next_entry::<String, &RawValue>()? {
                            out.push((k, v.get().to_string()));
                        }
                        Ok(All(out))
                    }
                }
                d.deserialize_map(V)
            }
        }
        serde_json::from_str::<All>(text).ok().map(|a| a.0)
    }

    /// Whether the walk reads `text`; if it does, with serde_json's members, and with a tape
    /// that gives each object value the members `RawObject::of_valid` finds in it.
    fn check(text: &str) -> bool {
        let ours = walked(text);
        if let Some(members) = &ours {
            assert_eq!(Some(members), by_parser(text).as_ref(), "{text:?}");
            let mut tape = Tape::default();
            let mut values = Vec::new();
            assert!(object_members(text, &mut tape, |_, v| values.push(v)));
            for v in values.into_iter().filter(|v| v.starts_with('{')) {
                let taped = tape
                    .object(text, v)
                    .expect("an object value is on the tape");
                match (taped, RawObject::of_valid(v)) {
                    (Ok(t), Ok(w)) => assert_eq!(t.0, w.0, "{text:?}"),
                    (t, w) => assert_eq!(t.is_ok(), w.is_ok(), "{text:?}"),
                }
            }
        }
        ours.is_some()
    }

    #[test]
    fn what_it_reads_serde_json_reads_the_same() {
        let read = [
            r#"{}"#,
            r#" { "a" : 1 , "b":[ 1 , {"c":null} ],"d":{"e":{"f":[]}} } "#,
            r#"{"n":-0,"f":-1.5e+10,"g":0.0,"h":1E-2,"i":123456789012345678901234567890}"#,
            r#"{"s":"\" \\ \/ \b \f \n \r \t","t":"héllo ☃ 🎉","":true,"x":false}"#,
            "{\"a\":\"\u{7f}\"}",
            r#"{"a":1,"a":2}"#,
            r#"{"t":"caf\u00e9 \ud83c\udf89 \ud800","o":{"k\u00e9y\n":"\uFFFF"}}"#,
        ];
        for text in read {
            assert!(check(text), "{text}");
        }
        let refused_or_left_to_serde = [
            "",
            "[]",
            "1",
            "\"a\"",
            "{",
            "}",
            "{\"a\"}",
            "{\"a\":}",
            "{\"a\":1,}",
            "{,}",
            "{\"a\":1}x",
            "{\"a\":1} {}",
            "{\"a\":01}",
            "{\"a\":1.}",
            "{\"a\":.5}",
            "{\"a\":+1}",
            "{\"a\":1e}",
            "{\"a\":-}",
            "{\"a\":tru}",
            "{\"a\":nul}",
            "{\"a\":[1,]}",
            "{\"a\":[1 2]}",
            "{\"a\":{\"b\"}}",
            "{\"a\":\"\u{1}\"}",
            "{\"a\":\"\\x\"}",
            "{\"a\":\"\\u004\"}",
            "{\"a\":\"\\u00g1\"}",
            "{\"\\u0041\":1}",
            "{\"a\\n\":1}",
            "{\"a\":{\"b\":\"\\u12\"}}",
            "{'a':1}",
            "{a:1}",
            "{\"a\":1]",
            "{\"a\":[1}",
            "{\"a\":\"b}",
            "{\"a\":NaN}",
            "{\"a\":Infinity}",
            "{\"a\":[]]}",
        ];
        for text in refused_or_left_to_serde {
            assert!(!check(text), "{text:?} is not for the walk");
        }
        // Long texts are skipped sixteen and eight bytes at a time: a stop byte anywhere in
        // them is seen, and DEL or bytes above 0x7f are not stops.
        for at in 0..40 {
            assert!(!check(&format!(
                "{{\"t\":\"{}\u{0}{}\"}}",
                "é".repeat(at),
                "z".repeat(at)
            )));
            assert!(check(&format!(
                "{{\"t\":\"{}\u{7f}{}\"}}",
                "a".repeat(at),
                "é".repeat(at)
            )));
            let (head, tail) = ("é".repeat(at / 2) + &"a".repeat(at % 2), "z".repeat(at));
            assert!(check(&format!("{{\"t\":\"{head}{tail}\"}}")));
            assert!(check(&format!("{{\"t\":\"{head}\\\"{tail}\"}}")));
            assert!(!check(&format!("{{\"t\":\"{head}\u{1f}{tail}\"}}")));
            assert!(!check(&format!("{{\"t\":\"{head}\"{tail}\"}}")));
            assert!(!check(&format!("{{\"t\":\"{head}\\q{tail}\"}}")));
        }
        let deep = format!(
            "{{\"a\":{}{}}}",
            "[".repeat(MAX_DEPTH),
            "]".repeat(MAX_DEPTH)
        );
        assert!(
            !check(&deep),
            "deeper than the walk goes: serde_json decides"
        );
        let fits = format!(
            "{{\"a\":{}{}}}",
            "[".repeat(MAX_DEPTH - 1),
            "]".repeat(MAX_DEPTH - 1)
        );
        assert!(check(&fits));
    }

    /// Every valid message, cut short or with one byte changed anywhere: whatever the walk
    /// accepts, serde_json accepts with the same members.
    #[test]
    fn mutated_messages_are_never_read_where_serde_json_refuses_them() {
        let base = r#"{"anonymousId":"2f6f","event":"tick","messageId":"m-1","properties":{"ms":10.5e-1,"n":-862,"list":[true,false,null,"x\"y"],"o":{},"caf\u00e9":"\u00e9"},"timestamp":"2026-11-27T07:45:31.232Z","type":"track"}"#;
        let swaps = [
            b'"', b'\\', b'{', b'}', b'[', b']', b':', b',', b' ', b'0', b'1', b'-', b'+', b'.',
            b'e', b'E', b'a', b't', b'n', b'u', b'/', b'\n', 0x01, 0x7f,
        ];
        let (mut read, mut total) = (0, 0);
        for cut in 0..=base.len() {
            total += 1;
            read += usize::from(check(&base[..cut]));
        }
        for i in 0..base.len() {
            for &c in &swaps {
                let mut bytes = base.as_bytes().to_vec();
                bytes[i] = c;
                let text = String::from_utf8(bytes).expect("ASCII");
                total += 1;
                read += usize::from(check(&text));
                let mut bytes = base.as_bytes().to_vec();
                bytes.insert(i, c);
                let text = String::from_utf8(bytes).expect("ASCII");
                total += 1;
                read += usize::from(check(&text));
            }
        }
        assert!(read > 100 && read < total, "{read} of {total} read");
    }
}
