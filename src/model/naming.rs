//! Warehouse names (SPEC §4.2): snake_case, `[a-z0-9_]`, ≤ 128 chars, reserved-name rules.

use std::borrow::Cow;

/// Longest table or column name.
pub const MAX_NAME_LEN: usize = 128;

/// Standard columns every event row carries (when present), in table order.
pub const STANDARD_COLUMNS: &[&str] = &[
    "id",
    "event",
    "event_text",
    "timestamp",
    "received_at",
    "original_timestamp",
    "sent_at",
    "user_id",
    "anonymous_id",
];

/// Names already in normal form pass through; others are normalised once per thread and
/// remembered (event keys repeat endlessly), up to this many.
const CACHE_LIMIT: usize = 8192;

thread_local! {
    static NORMALIZED: std::cell::RefCell<foldhash::HashMap<String, String>> =
        std::cell::RefCell::new(foldhash::HashMap::default());
}

/// Whether `s` is its own normal form: `[a-z0-9_]`, no leading digit or `_`, no trailing `_`,
/// no `__`, at most [`MAX_NAME_LEN`] bytes, not empty (so normalising it copies it).
pub fn is_normal(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= MAX_NAME_LEN
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'_')
        && !b[0].is_ascii_digit()
        && b[0] != b'_'
        && b[b.len() - 1] != b'_'
        && !b.windows(2).any(|w| w == b"__")
}

/// Normalises a name: camelCase → snake_case, lowercase, other characters → `_`, runs of `_`
/// collapsed, trimmed, a leading digit prefixed with `_`, cut to 128 chars. May return "".
pub fn normalize(raw: &str) -> String {
    if is_normal(raw) {
        return raw.to_string();
    }
    if let Some(hit) = NORMALIZED.with(|c| c.borrow().get(raw).cloned()) {
        return hit;
    }
    let name = normalize_slow(raw);
    NORMALIZED.with(|c| {
        let mut c = c.borrow_mut();
        if c.len() >= CACHE_LIMIT {
            c.clear();
        }
        c.insert(raw.to_string(), name.clone());
    });
    name
}

fn normalize_slow(raw: &str) -> String {
    let chars: Vec<char> = raw.chars().collect();
    let mut out = String::with_capacity(raw.len() + 4);
    for (i, &c) in chars.iter().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            let prev = chars[i - 1];
            let next_lower = chars.get(i + 1).is_some_and(|n| n.is_ascii_lowercase());
            if prev.is_ascii_lowercase()
                || prev.is_ascii_digit()
                || (prev.is_ascii_uppercase() && next_lower)
            {
                out.push('_');
            }
        }
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('_') {
            out.push('_');
        }
    }
    let mut s: String = out.trim_matches('_').to_string();
    while s.contains("__") {
        s = s.replace("__", "_");
    }
    if s.starts_with(|c: char| c.is_ascii_digit()) {
        s.insert(0, '_');
    }
    if s.len() > MAX_NAME_LEN {
        s.truncate(MAX_NAME_LEN);
        // A cut can leave a trailing `_`; names never end in one.
        while s.ends_with('_') {
            s.pop();
        }
    }
    s
}

/// Tables of the Segment calls (SPEC §2.2): an event that normalises to one of these names is
/// stored as `<name>_event`.
pub const CALL_TABLES: &[&str] = &[
    "tracks",
    "identifies",
    "pages",
    "screens",
    "groups",
    "aliases",
];

/// The table an event lands in: `normalize(event)`, with the call tables (`tracks`,
/// `identifies`, …) renamed to `<name>_event`. `None` when the name normalises to nothing.
pub fn event_table(event: &str) -> Option<String> {
    event_table_of(event).map(Cow::into_owned)
}

/// [`event_table`], borrowing `event` when it is its own table's name (the usual case).
pub fn event_table_of(event: &str) -> Option<Cow<'_, str>> {
    if is_normal(event) && !CALL_TABLES.contains(&event) {
        return Some(Cow::Borrowed(event));
    }
    let name = normalize(event);
    match name.as_str() {
        "" => None,
        n if CALL_TABLES.contains(&n) => Some(Cow::Owned(format!("{n}_event"))),
        _ => Some(Cow::Owned(name)),
    }
}

/// The column a property is stored in: names that collide with a standard column (or the
/// `context_` namespace) get a `property_` prefix.
pub fn property_column(normalized: String) -> String {
    property_column_reserving(normalized, &[])
}

/// [`property_column`] for a table whose standard columns include `extra` too (`name` of
/// `pages`, `group_id` of `groups`, …).
pub fn property_column_reserving(normalized: String, extra: &[&str]) -> String {
    if STANDARD_COLUMNS.contains(&normalized.as_str())
        || extra.contains(&normalized.as_str())
        || normalized.starts_with("context_")
    {
        // Normalising again only cuts at the limit without leaving a trailing `_`.
        normalize(&format!("property_{normalized}"))
    } else {
        normalized
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snake_case_examples() {
        assert_eq!(normalize("shippingMethod"), "shipping_method");
        assert_eq!(normalize("Purchased an Item"), "purchased_an_item");
        assert_eq!(normalize("HTTPRequest"), "http_request");
        assert_eq!(normalize("userID"), "user_id");
        assert_eq!(normalize("  weird--Name!! "), "weird_name");
        assert_eq!(normalize("1st place"), "_1st_place");
        assert_eq!(normalize("été"), "t");
        assert_eq!(normalize("!!!"), "");
        assert_eq!(normalize(&"a".repeat(300)).len(), MAX_NAME_LEN);
    }

    #[test]
    fn reserved_names() {
        assert_eq!(event_table("Tracks").as_deref(), Some("tracks_event"));
        assert_eq!(event_table("???"), None);
        // A name that is its own table's is borrowed; every other goes the long way, to the
        // same table as normalising and renaming the call tables.
        assert!(matches!(
            event_table_of("scroll"),
            Some(Cow::Borrowed("scroll"))
        ));
        for event in [
            "scroll",
            "tracks",
            "Tracks",
            "pages",
            "page",
            "a_b",
            "a__b",
            "_a",
            "a_",
            "1st",
            "Add to Cart",
            "été",
            "",
            "x",
            "identifies",
            "aliases_event",
            &"b".repeat(200),
        ] {
            let long_way = match normalize(event).as_str() {
                "" => None,
                n if CALL_TABLES.contains(&n) => Some(format!("{n}_event")),
                n => Some(n.to_string()),
            };
            assert_eq!(
                event_table_of(event).map(Cow::into_owned),
                long_way,
                "{event:?}"
            );
        }
        assert_eq!(property_column("timestamp".into()), "property_timestamp");
        assert_eq!(property_column("context_ip".into()), "property_context_ip");
        assert_eq!(property_column("revenue".into()), "revenue");
        let long = format!("context_{}_b", "a".repeat(110));
        assert!(!property_column(long.clone()).ends_with('_'));
        assert!(property_column(long.clone()).len() <= MAX_NAME_LEN);
    }
}
