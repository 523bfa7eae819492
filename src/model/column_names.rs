//! The column a value at a key path is stored in ([`column_name`]: the joined path normalised,
//! then finished as its object's [`Names`] say), and the same name kept for the process
//! ([`column`]): events of one source repeat a few dozen key paths, so a thread looks each up
//! once and lends the name from then on, where every value of every event otherwise normalised
//! and allocated its name, and the team buffer freed it (BENCHMARKS.md, thirtieth session).
//!
//! Kept names are never freed. The process keeps each distinct name once, shared by its
//! threads, at most [`KEPT_BYTES`] of them; a thread remembers at most [`THREAD_NAMES`] paths,
//! each at most [`KEPT_PATH`] bytes long. Past any bound a name is made as before, owned, so a
//! source that sends endless distinct keys costs what it did and holds no more.

use std::borrow::Cow;
use std::cell::RefCell;
use std::sync::{LazyLock, Mutex};

use foldhash::{HashMap, HashSet};

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

/// Bytes of names (their text) the process keeps, at most.
const KEPT_BYTES: usize = 4 << 20;

/// Key paths a thread remembers, at most.
const THREAD_NAMES: usize = 4096;

/// The longest joined key path a thread remembers: with [`THREAD_NAMES`], a thread's map holds
/// at most ~1 MiB of paths.
const KEPT_PATH: usize = 128;

/// The names the process keeps, each once, whichever thread kept it first.
#[derive(Default)]
struct Interned {
    names: HashSet<&'static str>,
    /// Their bytes.
    bytes: usize,
}

static INTERNED: LazyLock<Mutex<Interned>> = LazyLock::new(Mutex::default);

/// A key path's column, as kept.
#[derive(Clone, Copy)]
struct Kept {
    name: &'static str,
    /// Whether the joined path was its own normal form.
    normal: bool,
}

/// The columns of the joined paths one way of finishing names made.
struct Finished {
    names: Names,
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
    let hit = KNOWN.try_with(|known| {
        let known = known.borrow();
        let finished = known.by_finishing.iter().find(|f| f.names == names)?;
        finished.columns.get(joined).copied()
    });
    if let Ok(Some(kept)) = hit {
        return (Cow::Borrowed(kept.name), kept.normal);
    }
    let normal = naming::is_normal(joined);
    let name = column_name(joined, names);
    match keep(joined, name, normal, names) {
        Ok(kept) => (Cow::Borrowed(kept), normal),
        Err(name) => (Cow::Owned(name), normal),
    }
}

/// Keeps `name` as the column of `joined` on this thread; `Err` gives it back past a bound.
fn keep(joined: &str, name: String, normal: bool, names: Names) -> Result<&'static str, String> {
    let full = KNOWN
        .try_with(|known| known.borrow().len >= THREAD_NAMES)
        .unwrap_or(true);
    if full || name.is_empty() || joined.len() > KEPT_PATH {
        return Err(name);
    }
    let kept = intern(name, KEPT_BYTES)?;
    let _ = KNOWN.try_with(|known| {
        let mut known = known.borrow_mut();
        let at = match known.by_finishing.iter().position(|f| f.names == names) {
            Some(at) => at,
            None => {
                known.by_finishing.push(Finished {
                    names,
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

/// `name` as the process keeps it: the copy kept already, or a new one while the names kept
/// stay within `bound` bytes (`Err` gives it back).
fn intern(name: String, bound: usize) -> Result<&'static str, String> {
    let mut interned = INTERNED.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(&kept) = interned.names.get(name.as_str()) {
        return Ok(kept);
    }
    if interned.bytes + name.len() > bound {
        return Err(name);
    }
    interned.bytes += name.len();
    let kept: &'static str = Box::leak(name.into_boxed_str());
    interned.names.insert(kept);
    Ok(kept)
}

/// Bytes of names kept in the process so far.
#[cfg(test)]
fn kept_bytes() -> usize {
    INTERNED.lock().unwrap_or_else(|p| p.into_inner()).bytes
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

    /// Two reserving lists of one length are two ways of finishing: neither lends the other
    /// its names.
    #[test]
    fn reserving_lists_are_told_apart() {
        let name = Names::PropertyReserving(&["name"]);
        let group = Names::PropertyReserving(&["group_id"]);
        assert_eq!(column("name", name).0, "property_name");
        assert_eq!(column("name", group).0, "name");
        assert_eq!(column("group_id", group).0, "property_group_id");
        assert_eq!(column("group_id", name).0, "group_id");
    }

    /// Past the paths a thread keeps, names are made as before, owned, and stay right.
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
        })
        .join()
        .unwrap();
    }

    /// A path longer than a thread remembers is named as before, owned.
    #[test]
    fn a_long_path_is_not_kept() {
        let long = format!("longKey{}", "x".repeat(KEPT_PATH));
        let (name, normal) = column(&long, Names::Plain);
        assert_eq!(name, column_name(&long, Names::Plain));
        assert!(!normal);
        assert!(matches!(name, Cow::Owned(_)));
    }

    /// A name is kept once for the process: a thread that meets it after another lends the
    /// other's copy, so threads that come and go do not spend the bound again.
    #[test]
    fn a_name_is_kept_once_for_all_threads() {
        let kept_on = || {
            std::thread::spawn(|| match column("sharedAcrossThreads", Names::Plain).0 {
                Cow::Borrowed(name) => name.as_ptr() as usize,
                Cow::Owned(_) => panic!("not kept"),
            })
            .join()
            .unwrap()
        };
        assert_eq!(kept_on(), kept_on());
    }

    /// Past the process's bound a new name is given back, to be owned; one kept already is
    /// lent whatever the bound.
    #[test]
    fn past_the_process_s_bound_new_names_are_given_back() {
        let fresh = "a_name_no_other_test_keeps".to_string();
        // The bytes kept only grow, so no room stays no room.
        assert_eq!(intern(fresh.clone(), kept_bytes()), Err(fresh.clone()));
        let kept = intern(fresh.clone(), usize::MAX).unwrap();
        assert_eq!(intern(fresh, 0), Ok(kept));
    }
}
