//! The column a value at a key path is stored in ([`column_name`]: the joined path normalised,
//! then finished as its object's [`Names`] say), and the same name kept for the process
//! ([`column`]): events of one source repeat a few dozen key paths, so a thread looks each up
//! once and lends the name from then on, where every value of every event otherwise normalised
//! and allocated its name, and the team buffer freed it (BENCHMARKS.md, thirtieth session).
//!
//! Kept names are never freed: at most [`KEPT_BYTES`] of them in the process, and at most
//! [`THREAD_NAMES`] paths a thread. Past either bound a name is made as before, owned, so a
//! source that sends endless distinct keys costs what it did and holds no more.

use std::borrow::Cow;
use std::cell::RefCell;
use std::sync::atomic::{AtomicUsize, Ordering};

use foldhash::HashMap;

use super::naming;
use super::value::Name;

/// How flattened names are finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Names {
    /// Event properties: names of standard columns (and the `context_` space) get `property_`.
    Property,
    /// Like `Property`, and these extra standard columns of the table are reserved too.
    PropertyReserving(&'static [&'static str]),
    /// As they are (context columns, imports).
    Plain,
}

/// Bytes of names the process keeps, at most.
pub const KEPT_BYTES: usize = 4 << 20;

/// Key paths a thread remembers, at most (with their keys, ~100 bytes each).
pub const THREAD_NAMES: usize = 4096;

/// Bytes of names kept so far.
static KEPT: AtomicUsize = AtomicUsize::new(0);

/// A key path's column, as kept.
#[derive(Clone, Copy)]
struct Kept {
    name: &'static str,
    /// Whether the joined path was its own normal form.
    normal: bool,
}

/// A way of finishing names ([`Names`]), told apart from the others: a reserving list by its
/// address and length (they are statics; one list at two addresses only costs a second entry).
#[derive(Clone, Copy, PartialEq, Eq)]
struct Finishing {
    list: usize,
    len: usize,
}

/// The columns of the joined paths one way of finishing made.
struct Finished {
    finishing: Finishing,
    columns: HashMap<Box<str>, Kept>,
}

/// A thread's kept names.
#[derive(Default)]
struct Known {
    by_finishing: Vec<Finished>,
    /// Paths kept, over all ways of finishing.
    len: usize,
}

thread_local! {
    static KNOWN: RefCell<Known> = RefCell::new(Known::default());
}

fn finishing(names: Names) -> Finishing {
    let (list, len) = match names {
        Names::Property => (0, 1),
        Names::Plain => (0, 2),
        Names::PropertyReserving(extra) => (extra.as_ptr() as usize, extra.len()),
    };
    Finishing { list, len }
}

/// The column of a value at `joined`, its key path joined with `_` (`context_page_path`), as
/// `names` finishes it.
pub fn column_name(joined: &str, names: Names) -> String {
    let name = naming::normalize(joined);
    match names {
        Names::Property => naming::property_column(name),
        Names::PropertyReserving(extra) => naming::property_column_reserving(name, extra),
        Names::Plain => name,
    }
}

/// [`column_name`] of `joined`, borrowed from the names kept when it is one, and whether
/// `joined` was its own normal form ([`naming::is_normal`]).
pub fn column(joined: &str, names: Names) -> (Name, bool) {
    let key = finishing(names);
    let hit = KNOWN.try_with(|known| {
        let known = known.borrow();
        let finished = known.by_finishing.iter().find(|f| f.finishing == key)?;
        finished.columns.get(joined).copied()
    });
    if let Ok(Some(kept)) = hit {
        return (Cow::Borrowed(kept.name), kept.normal);
    }
    let normal = naming::is_normal(joined);
    let name = column_name(joined, names);
    match keep(joined, name, normal, key) {
        Ok(kept) => (Cow::Borrowed(kept), normal),
        Err(name) => (Cow::Owned(name), normal),
    }
}

/// Keeps `name` as the column of `joined` on this thread; `Err` gives it back past a bound.
fn keep(joined: &str, name: String, normal: bool, key: Finishing) -> Result<&'static str, String> {
    let full = KNOWN
        .try_with(|known| known.borrow().len >= THREAD_NAMES)
        .unwrap_or(true);
    if full || name.is_empty() {
        return Err(name);
    }
    let bytes = name.len();
    let room = KEPT.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |kept| {
        (kept + bytes <= KEPT_BYTES).then_some(kept + bytes)
    });
    if room.is_err() {
        return Err(name);
    }
    let kept: &'static str = Box::leak(name.into_boxed_str());
    let _ = KNOWN.try_with(|known| {
        let mut known = known.borrow_mut();
        let at = match known.by_finishing.iter().position(|f| f.finishing == key) {
            Some(at) => at,
            None => {
                known.by_finishing.push(Finished {
                    finishing: key,
                    columns: HashMap::default(),
                });
                known.by_finishing.len() - 1
            }
        };
        known.by_finishing[at]
            .columns
            .insert(joined.into(), Kept { name: kept, normal });
        known.len += 1;
    });
    Ok(kept)
}

/// Bytes of names kept in the process so far.
pub fn kept_bytes() -> usize {
    KEPT.load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A path's second lookup lends the name the first kept (the same text, not a copy), for
    /// each way of finishing apart, and the name is the one [`column_name`] makes.
    #[test]
    fn a_path_s_name_is_kept_and_lent() {
        for (joined, names, expect, normal) in [
            ("context_page_path", Names::Plain, "context_page_path", true),
            ("shippingMethod", Names::Property, "shipping_method", false),
            ("timestamp", Names::Property, "property_timestamp", true),
            ("timestamp", Names::Plain, "timestamp", true),
            (
                "name",
                Names::PropertyReserving(&["name"]),
                "property_name",
                true,
            ),
            ("name", Names::Property, "name", true),
        ] {
            let (first, first_normal) = column(joined, names);
            let (second, _) = column(joined, names);
            assert_eq!(first, expect, "{joined} {names:?}");
            assert_eq!(first, column_name(joined, names));
            assert_eq!(first_normal, normal, "{joined}");
            assert!(
                matches!(second, Cow::Borrowed(_)),
                "{joined} {names:?} was not kept"
            );
            assert_eq!(
                first.as_ptr(),
                second.as_ptr(),
                "{joined}: lent, not copied"
            );
        }
    }

    /// Past the paths a thread keeps, names are made as before, owned, and stay right; the
    /// process-wide bytes never pass their bound.
    #[test]
    fn past_a_thread_s_bound_names_are_owned() {
        std::thread::spawn(|| {
            for i in 0..THREAD_NAMES + 10 {
                let (name, _) = column(&format!("keyNumber{i}"), Names::Plain);
                assert_eq!(name, format!("key_number{i}"));
            }
            let (late, _) = column("lateKey", Names::Plain);
            assert_eq!(late, "late_key");
            assert!(
                matches!(late, Cow::Owned(_)),
                "a name past the bound is owned"
            );
            // A name kept before the bound is still lent.
            assert!(matches!(
                column("keyNumber0", Names::Plain).0,
                Cow::Borrowed(_)
            ));
            assert!(kept_bytes() <= KEPT_BYTES);
        })
        .join()
        .unwrap();
    }
}
