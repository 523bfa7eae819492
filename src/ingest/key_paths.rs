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
        });
        self.roots.push((names, at));
        at
    }

    /// The path of `key` under `parent`; `None` on a hash shared with another path (never
    /// seen: the request then goes the usual way).
    pub(super) fn child(&mut self, parent: u32, key: &str) -> Option<u32> {
        let mut h = self.hasher.build_hasher();
        h.write_u32(parent);
        h.write(key.as_bytes());
        let hash = h.finish();
        if let Some(&at) = self.by_hash.get(&hash) {
            let p = &self.paths[at as usize];
            return (p.parent == parent && *p.key == *key).then_some(at);
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
        });
        self.by_hash.insert(hash, at);
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
