//! The key paths of a request's objects (members of the context and properties, and of the
//! objects nested in them), each numbered with the column its values land on, for
//! [`super::direct`]: a path is joined and its column named once a request, not once a value.

use std::hash::{BuildHasher, Hasher};

use foldhash::HashMap;

use super::bulk::same_name;
use crate::model::flatten::{self, Names};
use crate::model::value::Name;

/// A key path seen in the request: a member of the context or properties, or of an object
/// nested in them.
pub(super) struct KeyPath {
    parent: u32,
    key: Box<str>,
    /// The path joined with `_` as [`flatten`](crate::model::flatten) joins it.
    joined: String,
    /// How names under this path are finished.
    names: Names,
    /// The number of the column of a value at this path ([`KeyPaths::column`]), once one was
    /// seen.
    column: Option<u32>,
    /// The path of the member that came first in this path's object last time ([`NONE`]:
    /// none yet).
    first: u32,
    /// The path of the member that came after this one in its object last time.
    next: u32,
}

/// No path.
pub(super) const NONE: u32 = u32::MAX;

/// Whether two keys are equal, compared inline: keys are short, and a call to `memcmp` for
/// each costs more than the comparison (BENCHMARKS.md, thirty-sixth session).
fn same_key(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let n = a.len();
    if n != b.len() {
        return false;
    }
    let word = |s: &[u8], at: usize| u64::from_le_bytes(s[at..at + 8].try_into().expect("8 bytes"));
    let half = |s: &[u8], at: usize| u32::from_le_bytes(s[at..at + 4].try_into().expect("4 bytes"));
    match n {
        // Two overlapping words cover 8 to 16 bytes.
        8..=16 => word(a, 0) == word(b, 0) && word(a, n - 8) == word(b, n - 8),
        4..=7 => half(a, 0) == half(b, 0) && half(a, n - 4) == half(b, n - 4),
        _ => a == b,
    }
}

/// The key paths of a request's objects, each with the column its values land on.
#[derive(Default)]
pub(super) struct KeyPaths {
    paths: Vec<KeyPath>,
    by_hash: HashMap<u64, u32>,
    /// Roots: the context, and properties by how their names are finished.
    roots: Vec<(Option<Names>, u32)>,
    /// Distinct column names, numbered: the request's columns, whatever their table.
    columns: HashMap<String, u32>,
    /// The names by number.
    pub(super) names: Vec<String>,
    /// The standard cells of the last message, with their numbers: messages of a request
    /// mostly repeat them, so a standard cell's name is compared with the one at its place
    /// last time before it is looked up.
    standard: Vec<(Name, u32)>,
    hasher: foldhash::fast::FixedState,
}

impl KeyPaths {
    /// The root of the context (`names` `None`) or of properties finished by `names`.
    pub(super) fn root(&mut self, names: Option<Names>) -> u32 {
        if let Some((_, at)) = self.roots.iter().find(|(n, _)| *n == names) {
            return *at;
        }
        let at = self.paths.len() as u32;
        self.paths.push(KeyPath {
            parent: u32::MAX,
            key: "".into(),
            joined: if names.is_none() { "context" } else { "" }.to_string(),
            names: names.unwrap_or(Names::Plain),
            column: None,
            first: NONE,
            next: NONE,
        });
        self.roots.push((names, at));
        at
    }

    /// The path of `key` under `parent`; `None` on a hash shared with another path (never
    /// seen: the request then goes the usual way).
    fn child(&mut self, parent: u32, key: &str) -> Option<u32> {
        let mut h = self.hasher.build_hasher();
        h.write_u32(parent);
        h.write(key.as_bytes());
        let hash = h.finish();
        if let Some(&at) = self.by_hash.get(&hash) {
            let p = &self.paths[at as usize];
            return (p.parent == parent && same_key(&p.key, key)).then_some(at);
        }
        let up = &self.paths[parent as usize];
        let joined = if up.joined.is_empty() {
            key.to_string()
        } else {
            format!("{}_{key}", up.joined)
        };
        let names = up.names;
        let at = self.paths.len() as u32;
        self.paths.push(KeyPath {
            parent,
            key: key.into(),
            joined,
            names,
            column: None,
            first: NONE,
            next: NONE,
        });
        self.by_hash.insert(hash, at);
        Some(at)
    }

    /// [`KeyPaths::child`] of the member after `before` in its object ([`NONE`] for its first
    /// member). Messages of a request mostly repeat their objects' keys in the same order, so
    /// the path that followed `before` last time is tried first: a hit costs one comparison
    /// of the key, no hash.
    pub(super) fn member(&mut self, parent: u32, before: u32, key: &str) -> Option<u32> {
        let guess = match before {
            NONE => self.paths[parent as usize].first,
            b => self.paths[b as usize].next,
        };
        // A guess is set only to a member of the same parent by the walk as it calls this;
        // the parent is compared all the same, so a `before` from another object misses.
        if let Some(p) = self.paths.get(guess as usize)
            && p.parent == parent
            && same_key(&p.key, key)
        {
            return Some(guess);
        }
        let at = self.child(parent, key)?;
        match before {
            NONE => self.paths[parent as usize].first = at,
            b => self.paths[b as usize].next = at,
        }
        Some(at)
    }

    /// The number of the column of a value at `path`.
    pub(super) fn column(&mut self, path: u32) -> u32 {
        let p = &self.paths[path as usize];
        if let Some(number) = p.column {
            return number;
        }
        let name = flatten::column_name(&p.joined, p.names);
        let number = self.number(name);
        self.paths[path as usize].column = Some(number);
        number
    }

    /// The number of column `name`, given when new.
    fn number(&mut self, name: String) -> u32 {
        if let Some(&n) = self.columns.get(&name) {
            return n;
        }
        let n = self.names.len() as u32;
        self.names.push(name.clone());
        self.columns.insert(name, n);
        n
    }

    /// The number of the standard cell `name`, the `place`th of its message.
    pub(super) fn standard(&mut self, place: usize, name: &Name) -> u32 {
        if let Some((last, n)) = self.standard.get(place)
            && same_name(last, name)
        {
            return *n;
        }
        let n = self.number(name.to_string());
        // Places are asked in order, so `place` is at most the length.
        if place < self.standard.len() {
            self.standard[place] = (name.clone(), n);
        } else {
            self.standard.push((name.clone(), n));
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every pair of keys up to 40 bytes that differ in one byte, or in length only, or not
    /// at all: the inline comparison agrees with `==`.
    #[test]
    fn same_key_is_equality() {
        for n in 0..40usize {
            let a: String = (0..n).map(|i| (b'a' + (i % 26) as u8) as char).collect();
            assert!(same_key(&a, &a.clone()));
            assert!(!same_key(&a, &format!("{a}x")));
            assert!(!same_key(&format!("{a}x"), &a));
            for at in 0..n {
                let mut b = a.clone().into_bytes();
                b[at] = b'Z';
                let b = String::from_utf8(b).unwrap();
                assert!(!same_key(&a, &b), "{a} against {b}");
            }
        }
    }

    /// A member's path is the same whether its key came where it came last time (the guess)
    /// or elsewhere (the hash), and a key in a new place or a new key gets its own path.
    #[test]
    fn members_found_in_any_order() {
        let mut paths = KeyPaths::default();
        let root = paths.root(None);
        let walk = |paths: &mut KeyPaths, keys: &[&str]| -> Vec<u32> {
            let mut before = NONE;
            keys.iter()
                .map(|k| {
                    let at = paths.member(root, before, k).unwrap();
                    before = at;
                    at
                })
                .collect()
        };
        let first = walk(&mut paths, &["a", "bb", "ccccc", "dddddddddd"]);
        assert_eq!(walk(&mut paths, &["a", "bb", "ccccc", "dddddddddd"]), first);
        let shuffled = walk(&mut paths, &["dddddddddd", "a", "ccccc", "bb"]);
        assert_eq!(shuffled, vec![first[3], first[0], first[2], first[1]]);
        let again = walk(&mut paths, &["a", "bb", "e", "ccccc"]);
        assert_eq!(&again[..2], &first[..2]);
        assert!(!first.contains(&again[2]));
        assert_eq!(again[3], first[2]);
        // The same key under another parent is another path, also when the `before` given
        // is a member of another object whose next member has that key.
        let nested = paths.member(first[0], first[0], "bb").unwrap();
        assert_ne!(nested, first[1]);
        assert_eq!(paths.paths[nested as usize].joined, "context_a_bb");
        assert_eq!(paths.member(first[0], NONE, "bb"), Some(nested));
    }
}
