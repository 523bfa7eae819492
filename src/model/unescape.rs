//! A JSON string's value from its text as sent ([`string_value`]), for text a parser has
//! accepted: plain runs copied whole, escapes read in place, into a string allocated once for
//! the text's length. serde_json reads a string into a buffer that grows as it goes, which is
//! most of the cost of a text-heavy message.

/// The value of `text`, a JSON string as sent (quotes included) that a JSON parser accepted
/// (raw control characters, which a parser refuses, are not looked for); `None` when it is
/// left to the parser: a `\u` escape of a surrogate that is not half of a pair, or text that
/// is not one string.
pub fn string_value(text: &str) -> Option<String> {
    let inner = text.strip_prefix('"')?.strip_suffix('"')?;
    let mut out = String::with_capacity(inner.len());
    let mut rest = inner;
    while let Some(at) = memchr::memchr2(b'\\', b'"', rest.as_bytes()) {
        if rest.as_bytes()[at] == b'"' {
            return None; // a quote inside, not escaped: not one string
        }
        out.push_str(&rest[..at]);
        let escape = &rest[at + 1..];
        let (c, len) = match escape.as_bytes().first()? {
            b'"' => ('"', 1),
            b'\\' => ('\\', 1),
            b'/' => ('/', 1),
            b'b' => ('\u{8}', 1),
            b'f' => ('\u{c}', 1),
            b'n' => ('\n', 1),
            b'r' => ('\r', 1),
            b't' => ('\t', 1),
            b'u' => unicode(escape)?,
            _ => return None,
        };
        out.push(c);
        rest = &escape[len..];
    }
    out.push_str(rest);
    Some(out)
}

/// The character of the `\u` escape `escape` starts with (after its backslash), a surrogate
/// pair's two escapes taken together, and the escape's length.
fn unicode(escape: &str) -> Option<(char, usize)> {
    let high = hex4(escape.get(1..5)?)?;
    if !(0xD800..0xE000).contains(&high) {
        return Some((char::from_u32(high)?, 5));
    }
    if high >= 0xDC00 {
        return None; // a low surrogate first
    }
    let low = hex4(escape.get(5..11)?.strip_prefix("\\u")?)?;
    if !(0xDC00..0xE000).contains(&low) {
        return None;
    }
    let c = 0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00);
    Some((char::from_u32(c)?, 11))
}

/// Four hex digits' value.
fn hex4(digits: &str) -> Option<u32> {
    if digits.len() != 4 || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u32::from_str_radix(digits, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every string here, and every one of them cut or with a byte changed: where this reads
    /// a value, serde_json reads the same value.
    #[test]
    fn values_are_serde_jsons() {
        let texts = [
            r#""""#,
            r#""plain""#,
            r#""\" \\ \/ \b \f \n \r \t""#,
            r#""caf\u00e9 \u00E9 \u0000 \u001f \uffff \u20AC""#,
            r#""\ud83d\ude80 pair, \uD83D\uDE80 upper""#,
            r#""lone \ud800 high""#,
            r#""lone \udc00 low""#,
            r#""high then other \ud800\u0041""#,
            r#""high at end \ud83d""#,
            "\"raw ünïcödé 日本語 🚀 with \\\"quotes\\\" and back\\\\slash\"",
            r#""\x bad escape""#,
            r#""\u12 short""#,
            r#""\u+123 sign""#,
        ];
        let mut read = 0;
        let mut check = |t: &str| {
            let ours = string_value(t);
            let theirs = serde_json::from_str::<String>(t).ok();
            if let Some(v) = &ours {
                assert_eq!(Some(v), theirs.as_ref(), "{t:?}");
                read += 1;
            } else if theirs.is_some() {
                // Left to the parser: only surrogates it reads on its own.
                assert!(
                    t.to_ascii_lowercase().contains("\\ud"),
                    "{t:?} left to serde_json"
                );
            }
        };
        for t in texts {
            check(t);
            for cut in 0..t.len() {
                if t.is_char_boundary(cut) {
                    check(&t[..cut]);
                }
            }
            for i in 0..t.len() {
                for c in [b'"', b'\\', b'u', b'0', b'd', b'8', b'n', b'x'] {
                    let mut b = t.as_bytes().to_vec();
                    b[i] = c;
                    if let Ok(s) = String::from_utf8(b) {
                        check(&s);
                    }
                }
            }
        }
        assert!(read > 500, "{read} read");
    }
}
