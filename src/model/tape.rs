//! Where a message's objects have their members ([`Tape`]), as the validating walk of
//! [`super::valid_json`] found them: an object's members are then read from the tape
//! ([`Tape::object`]) instead of by another walk over its text, which
//! [`RawObject::of_valid`] would make once for the object and once more for every object in it.

use std::borrow::Cow;

use super::members::RawObject;

/// One member of an object, as offsets into the text the tape was recorded from.
#[derive(Debug, Clone, Copy)]
pub struct Entry {
    /// The key's opening quote.
    pub key_start: u32,
    /// Past the key's closing quote.
    pub key_end: u32,
    /// Whether the key has escapes (it is then read by serde_json).
    pub escaped: bool,
    pub value_start: u32,
    pub value_end: u32,
    /// The index of the member after this one in its object; past the object's last member,
    /// the index after everything recorded within this member's value.
    pub next: u32,
}

/// The members of every object of a text outside arrays, in the order of the text: a member,
/// then the members recorded within its value, then the member after it.
#[derive(Debug, Default)]
pub struct Tape {
    entries: Vec<Entry>,
    /// Where the text the walk read whole starts and how long it is; `None` when it did not
    /// (nothing is recorded then, and nothing is found).
    recorded: Option<(usize, usize)>,
}

impl Tape {
    /// An empty tape with room for the members of a text of `len` bytes, as most messages are.
    pub fn for_text(len: usize) -> Tape {
        Tape {
            entries: Vec::with_capacity(len / 24 + 4),
            recorded: None,
        }
    }

    pub(super) fn clear(&mut self) {
        self.entries.clear();
        self.recorded = None;
    }

    pub(super) fn entries_mut(&mut self) -> &mut Vec<Entry> {
        &mut self.entries
    }

    pub(super) fn set_recorded(&mut self, text: &str) {
        self.recorded = Some((text.as_ptr() as usize, text.len()));
    }

    /// The members of `object`, the text of an object value within `text` (the text the tape
    /// was recorded from), as [`RawObject::of_valid`] would find them; `None` when the tape
    /// does not have them (not recorded, recorded from another text, not an object of `text`,
    /// or one inside an array), and
    /// `Err` as `of_valid` says it for a key that is not a string of characters.
    pub fn object<'a>(
        &self,
        text: &'a str,
        object: &'a str,
    ) -> Option<Result<RawObject<'a>, serde_json::Error>> {
        if self.recorded != Some((text.as_ptr() as usize, text.len())) || !object.starts_with('{') {
            return None;
        }
        let start = (object.as_ptr() as usize).checked_sub(text.as_ptr() as usize)?;
        let end = start.checked_add(object.len())?;
        if end > text.len() {
            return None;
        }
        let at = self
            .entries
            .partition_point(|e| (e.value_start as usize) < start);
        let e = self.entries.get(at)?;
        if e.value_start as usize != start || e.value_end as usize != end {
            return None;
        }
        Some(self.members(text, at + 1, e.next as usize))
    }

    /// The members of the object whose first member is entry `first` and whose members end
    /// before entry `end`, sorted as [`RawObject::of_valid`] sorts them.
    fn members<'a>(
        &self,
        text: &'a str,
        first: usize,
        end: usize,
    ) -> Result<RawObject<'a>, serde_json::Error> {
        // Every member of the object has its entry in `first..end`, so this is room enough.
        let mut out = Vec::with_capacity(end.saturating_sub(first));
        let mut at = first;
        while at < end {
            let e = self.entries[at];
            let quoted = &text[e.key_start as usize..e.key_end as usize];
            let key = if e.escaped {
                Cow::Owned(serde_json::from_str::<String>(quoted)?)
            } else {
                Cow::Borrowed(&quoted[1..quoted.len() - 1])
            };
            out.push((key, &text[e.value_start as usize..e.value_end as usize]));
            at = e.next as usize;
        }
        if !out.is_sorted_by(|a, b| a.0.as_bytes() <= b.0.as_bytes()) {
            out.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
        }
        Ok(RawObject(out))
    }
}

#[cfg(test)]
mod tests {
    use super::super::valid_json::object_members;
    use super::*;

    /// Every object value in `text` (found by walking `of_valid`'s members), with the members
    /// the tape gives for it; `None` where the tape has none.
    #[allow(clippy::type_complexity)]
    fn objects<'a>(
        text: &'a str,
        tape: &Tape,
        obj: &RawObject<'a>,
        out: &mut Vec<(&'a str, Option<Vec<(String, String)>>)>,
        in_array: bool,
    ) {
        for (_, value) in &obj.0 {
            let v = value.trim_start();
            if v.starts_with('{') {
                let taped = tape.object(text, value).map(|r| owned(&r.unwrap()));
                assert!(
                    taped.is_some() != in_array,
                    "{value}: on the tape iff not in an array"
                );
                out.push((value, taped));
                objects(
                    text,
                    tape,
                    &RawObject::of_valid(value).unwrap(),
                    out,
                    in_array,
                );
            } else if v.starts_with('[') {
                // An array's objects: walk them through a wrapper object of their own.
                let inner: Vec<&serde_json::value::RawValue> = serde_json::from_str(value).unwrap();
                for item in inner {
                    if item.get().starts_with('{') {
                        assert!(tape.object(text, item.get()).is_none());
                    }
                }
            }
        }
    }

    fn owned(obj: &RawObject) -> Vec<(String, String)> {
        obj.0
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn the_tape_gives_every_object_the_members_the_walk_finds() {
        let texts = [
            r#"{}"#,
            r#"{"a":1}"#,
            r#" { "p" : { "b":1 , "a" : {"y":[1,{"in":"array"}],"x":{}} } , "q":"{" } "#,
            r#"{"context":{"library":{"name":"js","version":"1"},"ip":"1.2.3.4"},"properties":{"z":1,"a":{"b":{"c":{"d":null}}},"a":2}}"#,
            r#"{"p":{"k\"ey":"va\\lue","k\u00e9":-1.5e3,"":{"\n":true},"x":2,"x":1}}"#,
            r#"{"list":[{"a":{"b":1}},[{"c":2}]],"o":{"l":[{"d":3}],"m":{"n":[]}}}"#,
        ];
        let mut seen = 0;
        for text in texts {
            let mut tape = Tape::default();
            assert!(object_members(text, &mut tape, |_, _| {}), "{text}");
            let whole = RawObject::of_valid(text).unwrap();
            let mut found = Vec::new();
            objects(text, &tape, &whole, &mut found, false);
            for (value, taped) in found {
                seen += 1;
                let Some(taped) = taped else { continue };
                match RawObject::of_valid(value) {
                    Ok(walked) => assert_eq!(taped, owned(&walked), "{value}"),
                    Err(_) => unreachable!("an Err from the tape unwraps above"),
                }
            }
        }
        assert!(seen > 12, "{seen} objects looked at");
    }

    #[test]
    fn a_key_that_is_not_characters_is_an_error_as_of_valid_says() {
        let text = r#"{"p":{"bad\ud800":1}}"#;
        let mut tape = Tape::default();
        assert!(object_members(text, &mut tape, |_, _| {}));
        let value = &text[5..text.len() - 1];
        assert!(RawObject::of_valid(value).is_err());
        assert!(tape.object(text, value).unwrap().is_err());
    }

    #[test]
    fn nothing_is_found_off_the_tape() {
        let text = r#"{"p":{"a":1},"q":{"a":1}}"#;
        let other = text.to_string();
        let mut tape = Tape::default();
        assert!(object_members(text, &mut tape, |_, _| {}));
        assert!(tape.object(text, &text[5..12]).is_some());
        // Another text's object (also asked as if of the text it is in), a part of a value, a
        // value that is not an object.
        assert!(tape.object(text, &other[5..12]).is_none());
        assert!(tape.object(&other, &other[5..12]).is_none());
        assert!(tape.object(text, &text[5..11]).is_none());
        assert!(tape.object(text, &text[10..11]).is_none());
        // A walk that gave up records nothing.
        assert!(!object_members("{\"a\":{\"b\":1}", &mut tape, |_, _| {}));
        assert!(
            tape.object("{\"a\":{\"b\":1}", &"{\"a\":{\"b\":1}"[5..])
                .is_none()
        );
    }
}
