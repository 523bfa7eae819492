//! Realistic Segment-style `track` messages, pre-serialised into request-body templates before
//! a run so that making a request costs a copy, not a JSON encode. Each message's `messageId`
//! is `bench-<run id>-<12 hex digits>`; a template records where those digits sit, and
//! [`Template::fill`] writes a fresh counter into each, so every message of a run, and of any two
//! runs, is distinct.

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use super::Mode;
use super::mixes::{self, Mix};
use super::rng::Rng;

/// Hex digits of the per-message counter in a `messageId`.
pub const ID_DIGITS: usize = 12;

/// Event names and their weights (out of 100): browsing dominates, purchases are rarer.
const EVENTS: [(&str, u64); 7] = [
    ("Product Viewed", 35),
    ("Products Searched", 15),
    ("Product Added", 15),
    ("Feature Used", 12),
    ("Checkout Started", 10),
    ("Order Completed", 8),
    ("Signed Up", 5),
];
const CATEGORIES: &[&str] = &["Shoes", "Outerwear", "Kitchen", "Books", "Garden", "Toys"];
const BRANDS: &[&str] = &["Acme", "Globex", "Initech", "Umbrella", "Hooli"];
const CURRENCIES: &[&str] = &["USD", "EUR", "GBP"];
const QUERIES: &[&str] = &[
    "running shoes",
    "rain jacket",
    "cast iron pan",
    "sci-fi",
    "hose",
];
const FEATURES: &[&str] = &[
    "export_csv",
    "share_link",
    "dark_mode",
    "bulk_edit",
    "api_keys",
];
const PLANS: &[&str] = &["free", "pro", "team", "enterprise"];
const LIBRARIES: &[(&str, &str)] = &[
    ("analytics.js", "4.1.0"),
    ("analytics-node", "2.1.2"),
    ("analytics-python", "2.3.3"),
    ("analytics-ios", "4.1.8"),
];
const AGENTS: &[&str] = &[
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0 Safari/537.36",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_6) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Safari/605.1.15",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148",
];
const LOCALES: &[&str] = &["en-US", "en-GB", "de-DE", "fr-FR"];
const TIMEZONES: &[&str] = &["America/New_York", "Europe/London", "Europe/Berlin"];
const PATHS: &[&str] = &["/", "/search", "/product", "/cart", "/checkout", "/pricing"];

/// Makes messages for one run; `messageId`s carry the run id and a placeholder counter.
pub struct Generator {
    /// Deterministic source of every generated value.
    rng: Rng,
    /// `bench-<run id>-`, the fixed part of every `messageId`.
    id_prefix: String,
    /// Timestamps are spread over the minute before this instant (milliseconds since the epoch).
    now_ms: i64,
    /// Which events.
    mix: Mix,
}

/// A request body with holes for the message counters.
#[derive(Clone, Debug)]
pub struct Template {
    /// The serialised body, with `#` in every hole.
    bytes: Vec<u8>,
    /// Offset of each message's [`ID_DIGITS`]-wide hole, in message order.
    holes: Vec<usize>,
}

impl Template {
    /// Messages in the body.
    pub fn messages(&self) -> usize {
        self.holes.len()
    }

    /// Bytes in the body.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Whether the body is empty (never, for a generated one).
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The body with counters `first, first + 1, …` written into the holes, as lowercase hex.
    pub fn fill(&self, first: u64) -> Vec<u8> {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut out = self.bytes.clone();
        for (k, &at) in self.holes.iter().enumerate() {
            let mut n = first + k as u64;
            for b in out[at..at + ID_DIGITS].iter_mut().rev() {
                *b = HEX[(n & 15) as usize];
                n >>= 4;
            }
        }
        out
    }
}

impl Generator {
    /// A generator for run `run_id` (part of every `messageId`), seeded for reproducible data.
    pub fn new(run_id: &str, seed: u64, now: DateTime<Utc>) -> Self {
        Generator {
            rng: Rng::new(seed),
            id_prefix: format!("bench-{run_id}-"),
            now_ms: now.timestamp_millis(),
            mix: Mix::Shop,
        }
    }

    /// The same generator making messages of `mix`.
    pub fn with_mix(mut self, mix: Mix) -> Self {
        self.mix = mix;
        self
    }

    /// The `messageId` prefix of this run.
    pub fn id_prefix(&self) -> &str {
        &self.id_prefix
    }

    /// One message (a `track` call of the shop's plan unless another [`Mix`] was chosen); its
    /// `messageId` ends in [`ID_DIGITS`] `#`s.
    pub fn message(&mut self) -> Value {
        if self.mix != Mix::Shop {
            let ts = self.now_ms - self.rng.below(60_000) as i64;
            let timestamp = DateTime::<Utc>::from_timestamp_millis(ts)
                .unwrap_or_default()
                .format("%Y-%m-%dT%H:%M:%S%.3fZ")
                .to_string();
            let anonymous = self.rng.hex(16);
            let id = format!("{}{}", self.id_prefix, "#".repeat(ID_DIGITS));
            let made = mixes::message(self.mix, &mut self.rng, &id, &timestamp, &anonymous);
            if let Some(m) = made {
                return m;
            }
        }
        let r = &mut self.rng;
        let mut roll = r.below(100);
        let event = EVENTS
            .iter()
            .find(|(_, w)| {
                let hit = roll < *w;
                roll = roll.saturating_sub(*w);
                hit
            })
            .map_or(EVENTS[0].0, |(e, _)| e);
        let properties = properties(r, event);
        let (lib, version) = LIBRARIES[r.below(LIBRARIES.len() as u64) as usize];
        let context = json!({
            "library": {"name": lib, "version": version},
            "ip": format!("203.0.113.{}", r.below(255)),
            "userAgent": r.pick(AGENTS),
            "locale": r.pick(LOCALES),
            "timezone": r.pick(TIMEZONES),
            "page": {"path": r.pick(PATHS), "referrer": "https://www.example.com/"},
        });
        let ts = self.now_ms - r.below(60_000) as i64;
        let timestamp = DateTime::<Utc>::from_timestamp_millis(ts)
            .unwrap_or_default()
            .format("%Y-%m-%dT%H:%M:%S%.3fZ")
            .to_string();
        let anonymous = format!(
            "{}-{}-4{}-a{}-{}",
            r.hex(8),
            r.hex(4),
            r.hex(3),
            r.hex(3),
            r.hex(12)
        );
        let mut m = json!({
            "type": "track",
            "event": event,
            "messageId": format!("{}{}", self.id_prefix, "#".repeat(ID_DIGITS)),
            "anonymousId": anonymous,
            "timestamp": timestamp,
            "properties": properties,
            "context": context,
        });
        // Most messages come from signed-in users; the rest only have an anonymous id.
        if self.rng.chance(0.7) {
            m["userId"] = json!(format!("user_{}", self.rng.below(50_000)));
        }
        m
    }

    /// A body of `batch` messages (1 for [`Mode::Single`]) shaped for `mode`.
    pub fn template(&mut self, mode: Mode, batch: usize) -> Template {
        let n = if mode == Mode::Single {
            1
        } else {
            batch.max(1)
        };
        let needle = format!("{}{}", self.id_prefix, "#".repeat(ID_DIGITS));
        let mut bytes = Vec::new();
        let mut holes = Vec::with_capacity(n);
        if mode == Mode::Batch {
            bytes.extend_from_slice(br#"{"batch":["#);
        }
        for i in 0..n {
            if i > 0 && mode == Mode::Batch {
                bytes.push(b',');
            }
            let text = self.message().to_string();
            // The run id makes the needle unique in the message: it can only be the messageId.
            let at = text.find(&needle).unwrap_or_default() + self.id_prefix.len();
            holes.push(bytes.len() + at);
            bytes.extend_from_slice(text.as_bytes());
            if mode == Mode::Ndjson {
                bytes.push(b'\n');
            }
        }
        if mode == Mode::Batch {
            bytes.extend_from_slice(b"]}");
        }
        Template { bytes, holes }
    }
}

/// Properties of one event, typed as a real tracking plan would: the same key always has the
/// same type for a given event.
fn properties(r: &mut Rng, event: &str) -> Value {
    let sku = format!("SKU-{:05}", r.below(20_000));
    let currency = r.pick(CURRENCIES);
    match event {
        "Product Viewed" => json!({
            "product_id": format!("prod_{}", r.below(20_000)),
            "sku": sku,
            "category": r.pick(CATEGORIES),
            "brand": r.pick(BRANDS),
            "price": r.money(5, 400),
            "currency": currency,
            "position": r.below(48) + 1,
            "in_stock": r.chance(0.9),
            "rating": (10 + r.below(41)) as f64 / 10.0,
        }),
        "Products Searched" => json!({
            "query": r.pick(QUERIES),
            "results": r.below(500),
            "page": r.below(5) + 1,
            "filters": {
                "category": r.pick(CATEGORIES),
                "price_max": r.money(20, 500),
                "in_stock_only": r.chance(0.5),
            },
        }),
        "Product Added" => json!({
            "cart_id": format!("cart_{}", r.hex(10)),
            "product_id": format!("prod_{}", r.below(20_000)),
            "sku": sku,
            "price": r.money(5, 400),
            "quantity": r.below(3) + 1,
            "currency": currency,
        }),
        "Feature Used" => json!({
            "feature": r.pick(FEATURES),
            "duration_ms": r.below(30_000),
            "success": r.chance(0.95),
            "plan": r.pick(PLANS),
        }),
        "Checkout Started" => json!({
            "order_id": format!("ord_{}", r.hex(10)),
            "value": r.money(10, 900),
            "currency": currency,
            "item_count": r.below(6) + 1,
        }),
        "Order Completed" => {
            let mut p = json!({
                "order_id": format!("ord_{}", r.hex(10)),
                "revenue": r.money(10, 900),
                "tax": r.money(1, 80),
                "shipping": r.money(0, 20),
                "currency": currency,
                "coupon": if r.chance(0.3) { json!("WINTER10") } else { Value::Null },
                "payment": {"method": r.pick(&["card", "paypal", "apple_pay"]), "installments": r.below(3) + 1},
            });
            // Segment's ecommerce spec sends the products array; stored as JSON text.
            if r.chance(0.5) {
                let products: Vec<Value> = (0..r.below(3) + 1)
                    .map(|_| json!({"product_id": format!("prod_{}", r.below(20_000)), "price": r.money(5, 400), "quantity": r.below(3) + 1}))
                    .collect();
                p["products"] = Value::Array(products);
            }
            p
        }
        _ => json!({
            "method": r.pick(&["email", "google", "github"]),
            "plan": r.pick(PLANS),
            "trial": r.chance(0.6),
            "seats": r.below(20) + 1,
            "referrer": r.pick(&["ads", "blog", "friend", "search"]),
        }),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    fn generator() -> Generator {
        Generator::new("0123456789abcdef", 7, Utc::now())
    }

    fn ids_of(body: &[u8], mode: Mode) -> Vec<String> {
        let messages: Vec<Value> = match mode {
            Mode::Single => vec![serde_json::from_slice(body).unwrap()],
            Mode::Batch => {
                let v: Value = serde_json::from_slice(body).unwrap();
                assert_eq!(v.as_object().unwrap().len(), 1, "only the batch key");
                v["batch"].as_array().unwrap().clone()
            }
            Mode::Ndjson => {
                let text = std::str::from_utf8(body).unwrap();
                assert!(text.ends_with('\n'));
                text.lines()
                    .map(|l| serde_json::from_str(l).unwrap())
                    .collect()
            }
        };
        for m in &messages {
            assert_eq!(m["type"], "track");
            assert!(m["event"].as_str().is_some_and(|e| !e.is_empty()));
            assert!(m["anonymousId"].is_string());
            assert!(m["properties"].is_object() && m["context"]["library"]["name"].is_string());
            let ts = m["timestamp"].as_str().unwrap();
            assert!(
                DateTime::parse_from_rfc3339(ts).is_ok() && ts.len() == 24,
                "{ts}"
            );
        }
        messages
            .iter()
            .map(|m| m["messageId"].as_str().unwrap().to_string())
            .collect()
    }

    #[test]
    fn every_body_shape_is_valid_json_with_unique_ids() {
        let mut g = generator();
        for (mode, batch) in [(Mode::Single, 500), (Mode::Batch, 50), (Mode::Ndjson, 50)] {
            let t = g.template(mode, batch);
            let expect = if mode == Mode::Single { 1 } else { batch };
            assert_eq!(t.messages(), expect);
            let mut seen = HashSet::new();
            for first in (0..10).map(|i| i * expect as u64) {
                for id in ids_of(&t.fill(first), mode) {
                    assert!(id.starts_with("bench-0123456789abcdef-"), "{id}");
                    assert_eq!(id.len(), "bench-0123456789abcdef-".len() + ID_DIGITS);
                    assert!(seen.insert(id.clone()), "duplicate {id} in {mode:?}");
                }
            }
            assert_eq!(seen.len(), 10 * expect);
        }
    }

    #[test]
    fn fill_writes_the_counter_in_hex() {
        let mut g = generator();
        let t = g.template(Mode::Ndjson, 2);
        let ids = ids_of(&t.fill(0xabc), Mode::Ndjson);
        assert_eq!(ids[0], "bench-0123456789abcdef-000000000abc");
        assert_eq!(ids[1], "bench-0123456789abcdef-000000000abd");
        assert_eq!(t.len(), t.fill(1).len());
    }

    #[test]
    fn messages_vary_and_keep_types_per_event() {
        let mut g = generator();
        let mut names = HashSet::new();
        let mut types: std::collections::HashMap<(String, String), &str> = Default::default();
        let (mut arrays, mut users) = (0, 0);
        for _ in 0..2_000 {
            let m = g.message();
            let event = m["event"].as_str().unwrap().to_string();
            names.insert(event.clone());
            users += m.get("userId").is_some() as usize;
            for (k, v) in m["properties"].as_object().unwrap() {
                let t = match v {
                    Value::String(_) => "string",
                    Value::Number(n) if n.is_f64() => "float",
                    Value::Number(_) => "int",
                    Value::Bool(_) => "bool",
                    Value::Object(_) => "object",
                    Value::Array(_) => {
                        arrays += 1;
                        "array"
                    }
                    Value::Null => continue,
                };
                let prev = types.entry((event.clone(), k.clone())).or_insert(t);
                assert_eq!(*prev, t, "{event}.{k}");
            }
        }
        assert_eq!(names.len(), EVENTS.len());
        let kinds: HashSet<&str> = types.values().copied().collect();
        assert_eq!(kinds.len(), 6, "{kinds:?}");
        assert!(arrays > 0 && arrays < 200, "an occasional array: {arrays}");
        assert!((1_000..1_800).contains(&users), "{users}");
    }

    #[test]
    fn a_full_batch_fits_the_batch_body_limit() {
        let t = generator().template(Mode::Batch, 500);
        assert!(t.len() < 512 * 1024, "{} bytes", t.len());
        assert!(t.len() > 500 * 300, "realistic sizes: {} bytes", t.len());
    }

    #[test]
    fn run_ids_keep_runs_apart() {
        let a = Generator::new("aaaa", 1, Utc::now()).template(Mode::Single, 1);
        let b = Generator::new("bbbb", 1, Utc::now()).template(Mode::Single, 1);
        assert_ne!(
            ids_of(&a.fill(0), Mode::Single),
            ids_of(&b.fill(0), Mode::Single)
        );
    }
}
