//! Requests nobody here wrote, built both ways ([`compare`](super::compare)): random mixes of
//! the six calls over keys that escape, normalise alike, take reserved names or pass the name
//! length; hand-picked shapes; the column limit at its boundary. An independent review's
//! campaign (fifteenth session), kept as tests.

use super::*;

struct Rng(u64);
impl Rng {
    fn next(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }
}

fn review_keys() -> Vec<String> {
    let mut k: Vec<String> = [
        "a",
        "A",
        "a_b",
        "aB",
        "a b",
        "k\\u0065y",
        "key",
        "\\u0041",
        "id",
        "property_id",
        "timestamp",
        "property_timestamp",
        "name",
        "category",
        "group_id",
        "groupId",
        "previous_id",
        "context_x",
        "Context X",
        "contextX",
        "1st",
        "_1st",
        "x!",
        "traits",
        "page",
        "path",
        "page_path",
        "\\u00e9x",
        "éx",
        "user_id",
        "userId",
        "event",
        "tracks",
        "b",
        "email",
        "property_name",
        "property_category",
        "_unmapped",
        "unmapped",
        "x\\\"y",
        "x_y",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    k.push("a".repeat(127));
    k.push("a".repeat(128));
    k.push("a".repeat(130));
    k.push(format!("{}_b", "a".repeat(127)));
    k.push(format!("{}B", "a".repeat(127)));
    k.push(format!("context_{}", "c".repeat(125)));
    k.push("t".repeat(125));
    k
}

fn review_value(r: &mut Rng, keys: &[String], depth: usize) -> String {
    const V: &[&str] = &[
        "1",
        "-0",
        "0",
        "1.0",
        "1e2",
        "-1.5e3",
        "9223372036854775807",
        "9223372036854775808",
        "12345678901234567890",
        "-9223372036854775808",
        "true",
        "false",
        "null",
        "\"s\"",
        "\"a\\\"b\"",
        "\"\\u0041\"",
        "\"\"",
        "\"2026-01-02T03:04:05Z\"",
        "\"1\"",
        "[1,2]",
        "[]",
        "{}",
        "{ }",
        "-0.0",
        "0.1",
        "1E400",
        "\"\\ud800\"",
    ];
    if depth < 6 && r.next(4) == 0 {
        review_object(r, keys, depth + 1)
    } else {
        V[r.next(V.len())].to_string()
    }
}

fn review_object(r: &mut Rng, keys: &[String], depth: usize) -> String {
    let n = r.next(4);
    let members: Vec<String> = (0..n)
        .map(|_| {
            format!(
                "\"{}\":{}",
                keys[r.next(keys.len())],
                review_value(r, keys, depth)
            )
        })
        .collect();
    format!("{{{}}}", members.join(","))
}

fn review_message(r: &mut Rng, keys: &[String], i: usize) -> String {
    let mut f = vec![
        format!("\"messageId\":\"m{i}\""),
        "\"userId\":\"u\"".to_string(),
    ];
    match r.next(7) {
        0 | 1 => {
            f.push("\"type\":\"track\"".into());
            let ev = [
                "e",
                "E",
                "Tracks",
                "page viewed",
                "Page Viewed",
                "Identifies",
            ][r.next(6)];
            f.push(format!("\"event\":\"{ev}\""));
        }
        2 => {
            f.push("\"type\":\"identify\"".into());
            if r.next(2) == 0 {
                f.push(format!("\"traits\":{}", review_object(r, keys, 1)));
            }
        }
        3 => {
            f.push("\"type\":\"page\"".into());
            if r.next(2) == 0 {
                f.push("\"name\":\"N\"".into());
            }
            if r.next(2) == 0 {
                f.push("\"category\":\"C\"".into());
            }
        }
        4 => {
            f.push("\"type\":\"screen\"".into());
            if r.next(2) == 0 {
                f.push("\"name\":\"N\"".into());
            }
        }
        5 => {
            f.push("\"type\":\"group\"".into());
            f.push("\"groupId\":\"g\"".into());
            f.push(format!("\"traits\":{}", review_object(r, keys, 1)));
        }
        _ => {
            f.push("\"type\":\"alias\"".into());
            f.push("\"previousId\":\"p\"".into());
        }
    }
    if r.next(2) == 0 {
        f.push(format!("\"properties\":{}", review_object(r, keys, 1)));
    }
    if r.next(2) == 0 {
        let ctx = review_object(r, keys, 1);
        let ctx = if r.next(3) == 0 {
            let inner = &ctx[1..ctx.len() - 1];
            let t = review_object(r, keys, 2);
            if inner.is_empty() {
                format!("{{\"traits\":{t}}}")
            } else {
                format!("{{{inner},\"traits\":{t}}}")
            }
        } else {
            ctx
        };
        f.push(format!("\"context\":{ctx}"));
    }
    if r.next(4) == 0 {
        f.push("\"timestamp\":\"2026-01-02T03:04:05Z\"".into());
    }
    if r.next(4) == 0 {
        f.push("\"sentAt\":\"2026-01-02T03:04:06Z\"".into());
    }
    format!("{{{}}}", f.join(","))
}

#[test]
fn review_random_requests() {
    let keys = review_keys();
    let mut r = Rng(0x9e37_79b9_7f4a_7c15);
    let mut tally = Tally::default();
    for _ in 0..8000 {
        let n = 1 + r.next(5);
        let msgs: Vec<String> = (0..n).map(|i| review_message(&mut r, &keys, i)).collect();
        if !tally.record(compare(&msgs), &msgs) {
            break;
        }
    }
    tally.assert_clean();
}

/// Requests taken, declined, and the divergences found (with their messages).
#[derive(Default)]
struct Tally {
    taken: usize,
    declined: usize,
    failures: Vec<String>,
}

impl Tally {
    /// Counts one comparison; `false` once enough divergences are found to stop.
    fn record(&mut self, result: Result<bool, String>, msgs: &[String]) -> bool {
        match result {
            Ok(true) => self.taken += 1,
            Ok(false) => self.declined += 1,
            Err(e) => self.failures.push(format!("{e}\n  {msgs:#?}")),
        }
        self.failures.len() <= 3
    }

    fn assert_clean(&self) {
        assert!(
            self.failures.is_empty(),
            "{} taken, {} declined\n{}",
            self.taken,
            self.declined,
            self.failures.join("\n\n")
        );
        eprintln!("{} taken, {} declined", self.taken, self.declined);
    }
}

/// [`compare`] with a batch's shared context and sentAt.
fn compare_shared(msgs: &[String], shared_ctx: &str, sent_at: &str) -> Result<bool, String> {
    let ctx: Box<serde_json::value::RawValue> = serde_json::from_str(shared_ctx).unwrap();
    let sent: Box<serde_json::value::RawValue> = serde_json::from_str(sent_at).unwrap();
    let shared = Shared {
        context: Some(&ctx),
        sent_at: Some(&sent),
    };
    compare_with(msgs, shared)
}

#[test]
fn review_random_requests_wider() {
    let keys = review_keys();
    let small: Vec<String> = [
        "a", "A", "b", "a_b", "aB", "traits", "name", "x", "id", "page",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let mut tally = Tally::default();
    for seed in 1..4u64 {
        let mut r = Rng(0x2545_f491_4f6c_dd1d ^ seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        for round in 0..5000 {
            let ks = if round % 2 == 0 { &small } else { &keys };
            let n = 1 + r.next(8);
            let mut msgs: Vec<String> = (0..n).map(|i| review_message(&mut r, ks, i)).collect();
            if r.next(3) == 0 {
                // Whitespace around members and values.
                for m in &mut msgs {
                    *m = m.replace(":", " : ").replace(",", " ,\n ");
                }
            }
            let res = if r.next(4) == 0 {
                let ctx = review_object(&mut r, ks, 1);
                compare_shared(&msgs, &ctx, "\"2026-01-02T03:04:09Z\"")
                    .map_err(|e| format!("{e}\n  shared context {ctx}"))
            } else {
                compare(&msgs)
            };
            if !tally.record(res, &msgs) {
                break;
            }
        }
    }
    tally.assert_clean();
}

/// Every request given is either declined by the direct way or built as the usual way builds
/// it; `must_take` are built directly.
fn check(requests: &[&[&str]], must_take: bool) {
    for req in requests {
        let msgs: Vec<String> = req.iter().map(|s| s.to_string()).collect();
        match compare(&msgs) {
            Ok(taken) => assert!(taken || !must_take, "declined: {msgs:#?}"),
            Err(e) => panic!("{e}\n{msgs:#?}"),
        }
    }
}

#[test]
fn review_targeted_shapes() {
    let long_a = "a".repeat(127);
    let long_b = "b".repeat(140);
    let long_c = format!("{}X", "c".repeat(127));
    let l1 = format!(
        r#"{{"type":"track","event":"e","userId":"u","messageId":"m1","properties":{{"{long_a}":{{"b":1}},"{long_b}":2,"{long_c}":3}}}}"#
    );
    let l2 = format!(
        r#"{{"type":"track","event":"e","userId":"u","messageId":"m2","properties":{{"{long_a}":"s","{}":"t"}}}}"#,
        "b".repeat(128)
    );
    let ctx_long = format!(
        r#"{{"type":"track","event":"e","userId":"u","messageId":"m3","properties":{{"context_{}":1}},"context":{{"{}":{{"y":2}}}}}}"#,
        "q".repeat(125),
        "z".repeat(125)
    );
    let taken: &[&[&str]] = &[
        // The same column by different paths in different messages.
        &[
            r#"{"type":"track","event":"e","userId":"u","messageId":"m1","properties":{"a_b":1}}"#,
            r#"{"type":"track","event":"e","userId":"u","messageId":"m2","properties":{"a":{"b":"x"}}}"#,
            r#"{"type":"track","event":"e","userId":"u","messageId":"m3","properties":{"aB":true,"A":{"c":null}}}"#,
        ],
        // Escaped keys across messages.
        &[
            r#"{"type":"track","event":"e","userId":"u","messageId":"m1","properties":{"k\u0065y":1,"\u0041":2}}"#,
            r#"{"type":"track","event":"e","userId":"u","messageId":"m2","properties":{"key":"s","a":3.5}}"#,
        ],
        // Widening sequences, null first.
        &[
            r#"{"type":"track","event":"e","userId":"u","messageId":"m1","properties":{"w":null,"v":true}}"#,
            r#"{"type":"track","event":"e","userId":"u","messageId":"m2","properties":{"w":1,"v":1}}"#,
            r#"{"type":"track","event":"e","userId":"u","messageId":"m3","properties":{"w":1.5,"v":"2026-01-02T03:04:05Z"}}"#,
            r#"{"type":"track","event":"e","userId":"u","messageId":"m4","properties":{"w":9223372036854775807,"v":-0}}"#,
            r#"{"type":"track","event":"e","userId":"u","messageId":"m5","properties":{"w":"x","v":1e2}}"#,
        ],
        &[
            r#"{"type":"track","event":"e","userId":"u","messageId":"m1","properties":{"f":0.5}}"#,
            r#"{"type":"track","event":"e","userId":"u","messageId":"m2","properties":{"f":9007199254740993}}"#,
            r#"{"type":"track","event":"e","userId":"u","messageId":"m3","properties":{"f":-0.0,"g":12345678901234567890}}"#,
        ],
        // Depth exactly 3 and 4, in properties and context.
        &[
            r#"{"type":"track","event":"e","userId":"u","messageId":"m1","properties":{"a":{"b":{"c":1}}},"context":{"a":{"b":{"c":{"d":1}}}}}"#,
            r#"{"type":"track","event":"e","userId":"u","messageId":"m2","properties":{"a":{"b":{"c":{"d":1}}}},"context":{"a":{"b":{"c":2}}}}"#,
            r#"{"type":"track","event":"e","userId":"u","messageId":"m3","properties":{"a":{"b":{"c":{ }}}},"context":{"a":{"b":{}}}}"#,
        ],
        // Page, screen, identify with context.traits, group.
        &[
            r#"{"type":"page","name":"Home","category":"docs","userId":"u","messageId":"m1","properties":{"Name":"x","Category":"y","property_nam":1},"context":{"name":"c"}}"#,
            r#"{"type":"screen","name":"S","userId":"u","messageId":"m2","properties":{"category":"y","Name":"n"}}"#,
            r#"{"type":"page","userId":"u","messageId":"m3","properties":{"category":1}}"#,
            r#"{"type":"identify","userId":"u","messageId":"m4","context":{"traits":{"email":"e","Plan":{"x":1}}}}"#,
            r#"{"type":"identify","userId":"u","messageId":"m5","traits":null,"context":{"traits":{"email":2}}}"#,
            r#"{"type":"group","groupId":"g","userId":"u","messageId":"m6","traits":{"groupId":"x","previous_id":1}}"#,
            r#"{"type":"alias","previousId":"p","userId":"u","messageId":"m7","properties":{"x":1},"context":{"x":1}}"#,
        ],
        // Escapes in context values, strings with escapes.
        &[
            r#"{"type":"track","event":"e","userId":"u","messageId":"m1","context":{"s":"a\"b\\c\u00e9\n","t":"\u0041"}}"#,
            r#"{"type":"track","event":"f","userId":"u","messageId":"m2","context":{"s":"plain","t":5}}"#,
        ],
        // Track events whose tables look like call tables.
        &[
            r#"{"type":"track","event":"Identifies","userId":"u","messageId":"m1","properties":{"x":1}}"#,
            r#"{"type":"identify","userId":"u","messageId":"m2","traits":{"x":"s"}}"#,
            r#"{"type":"track","event":"identifies_event","userId":"u","messageId":"m3","properties":{"x":2.5}}"#,
            r#"{"type":"track","event":"Tracks","anonymousId":"a","messageId":"m4"}"#,
        ],
        // Numeric ids, times.
        &[
            r#"{"type":"track","event":"e","userId":42,"messageId":"m1","timestamp":"2026-01-02T03:04:05Z","sentAt":"2026-01-02T03:04:06Z"}"#,
            r#"{"type":"track","event":"e","userId":1e2,"anonymousId":"x","messageId":"m2","originalTimestamp":"2026-01-02T03:04:05.1+01:00"}"#,
        ],
    ];
    check(taken, true);
    check(&[&[&l1, &l2, &ctx_long]], false);
    assert_same(&[l1.clone(), l2.clone()]);
}

#[test]
fn review_column_limit_boundary() {
    for extra_ctx in [0usize, 3] {
        for n in 985..=1000usize {
            let props: Vec<String> = (0..n).map(|i| format!("\"p{i}\":1")).collect();
            let nulls: Vec<String> = (0..5).map(|i| format!("\"n{i}\":null")).collect();
            let ctx: Vec<String> = (0..extra_ctx).map(|i| format!("\"c{i}\":1")).collect();
            let msg = format!(
                r#"{{"type":"track","event":"e","userId":"u","messageId":"m","properties":{{{},{}}},"context":{{{}}}}}"#,
                props.join(","),
                nulls.join(","),
                ctx.join(",")
            );
            let top = Top::parse(&msg).unwrap();
            let usual_ok =
                parse_message(&top, None, Shared::default(), now(), MAX_COLUMNS, None).is_ok();
            let direct_ok = direct(std::slice::from_ref(&msg), Shared::default()).is_ok();
            assert_eq!(direct_ok, usual_ok, "n={n} ctx={extra_ctx}");
            if direct_ok {
                assert_same(std::slice::from_ref(&msg));
            }
        }
    }
}

#[test]
fn review_random_wide_objects() {
    let mut keys: Vec<String> = (0..40).map(|i| format!("k{i}")).collect();
    keys.extend(
        ["Kx", "kX", "k_x", "ID", "Timestamp", "name"]
            .iter()
            .map(|s| s.to_string()),
    );
    let mut r = Rng(0x1234_5678_9abc_def1);
    let mut tally = Tally::default();
    for _ in 0..3000 {
        let n = 1 + r.next(6);
        let msgs: Vec<String> = (0..n)
            .map(|i| {
                let m: Vec<String> = (0..r.next(30))
                    .map(|_| format!("\"{}\":{}", keys[r.next(keys.len())], review_value(&mut r, &keys[..8], 1)))
                    .collect();
                let ev = ["e", "f"][r.next(2)];
                format!(
                    r#"{{"type":"track","event":"{ev}","userId":"u","messageId":"m{i}","properties":{{{}}},"context":{{"c":{{{}}}}}}}"#,
                    m.join(","),
                    m.join(",")
                )
            })
            .collect();
        if !tally.record(compare(&msgs), &msgs) {
            break;
        }
    }
    tally.assert_clean();
    assert!(tally.taken > 100);
}
