//! Event mixes besides the shop's tracking plan ([`Mix::Shop`], the generator's own): wide events,
//! narrow ones, the nested context-heavy calls Segment's SDKs send, and string-heavy events.
//! `stowage bench ingest --mix` sends them and `stowage bench gen --mix` writes them, so the
//! batch comparison (`benches/compare_batch.sh`) runs shapes nobody tuned the server for.

use serde_json::{Map, Value, json};

use super::rng::Rng;

/// Which events a run sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mix {
    /// An online shop's `track` calls: 4–9 typed properties, eight context fields (default).
    Shop,
    /// Few, wide events: 60 properties (strings, integers, floats, booleans) under 12 names.
    Wide,
    /// Many narrow events: an event name, an anonymous id and one or two numbers.
    Narrow,
    /// `identify`, `page` and `track` as analytics.js and the mobile SDKs send them: deep
    /// `context` (app, device, os, screen, network, campaign, page, library), traits.
    Sdk,
    /// Text-heavy events: long descriptions, messages with quotes, escapes and non-ASCII.
    Strings,
}

/// One message of `mix`; `id` is its `messageId`. `None` for [`Mix::Shop`], which the
/// generator makes itself.
pub(super) fn message(
    mix: Mix,
    r: &mut Rng,
    id: &str,
    timestamp: &str,
    anonymous: &str,
) -> Option<Value> {
    Some(match mix {
        Mix::Shop => return None,
        Mix::Wide => wide(r, id, timestamp, anonymous),
        Mix::Narrow => json!({
            "type": "track",
            "event": r.pick(&["tick", "heartbeat", "scroll"]),
            "messageId": id,
            "anonymousId": anonymous,
            "timestamp": timestamp,
            "properties": if r.chance(0.5) {
                json!({"n": r.below(1000)})
            } else {
                json!({"n": r.below(1000), "ms": r.below(100_000) as f64 / 7.0})
            },
        }),
        Mix::Sdk => sdk(r, id, timestamp, anonymous),
        Mix::Strings => strings(r, id, timestamp, anonymous),
    })
}

fn wide(r: &mut Rng, id: &str, timestamp: &str, anonymous: &str) -> Value {
    let event = format!("Report {}", r.below(12));
    let mut p = Map::new();
    for k in 0..60 {
        let v = match k % 6 {
            0 | 1 => json!(format!("v{}-{}", k, r.hex(6))),
            2 => json!(r.below(1_000_000)),
            3 => json!(r.below(10_000_000) as f64 / 1000.0),
            4 => json!(r.chance(0.5)),
            _ => json!(r.below(100) as i64 - 50),
        };
        p.insert(format!("metric_{k:02}"), v);
    }
    json!({
        "type": "track", "event": event, "messageId": id, "anonymousId": anonymous,
        "userId": format!("user_{}", r.below(10_000)), "timestamp": timestamp,
        "properties": p,
        "context": {"library": {"name": "analytics-python", "version": "2.3.3"}},
    })
}

fn sdk(r: &mut Rng, id: &str, timestamp: &str, anonymous: &str) -> Value {
    let mobile = r.chance(0.5);
    let mut context = json!({
        "library": if mobile { json!({"name": "analytics-ios", "version": "4.1.8"}) }
                   else { json!({"name": "analytics.js", "version": "next-1.70.0"}) },
        "ip": format!("198.51.100.{}", r.below(255)),
        "locale": r.pick(&["en-US", "de-DE", "ja-JP", "pt-BR"]),
        "timezone": r.pick(&["America/Chicago", "Europe/Paris", "Asia/Tokyo"]),
        "userAgent": "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0 Safari/537.36",
        "campaign": {"name": "winter_sale", "source": r.pick(&["google", "newsletter", "twitter"]),
                     "medium": "cpc", "term": "boots", "content": "banner_a"},
        "page": {"path": "/pricing", "referrer": "https://www.google.com/", "search": "?utm_source=google",
                 "title": "Pricing – Example", "url": "https://www.example.com/pricing?utm_source=google"},
    });
    if mobile {
        let extra = json!({
            "app": {"name": "Example", "version": "3.14.1", "build": "3141", "namespace": "com.example.app"},
            "device": {"id": r.hex(16), "manufacturer": "Apple", "model": "iPhone15,2", "type": "ios",
                       "adTrackingEnabled": r.chance(0.3)},
            "os": {"name": "iOS", "version": "18.1"},
            "screen": {"width": 393, "height": 852, "density": 3},
            "network": {"wifi": r.chance(0.7), "cellular": r.chance(0.4), "carrier": "T-Mobile"},
        });
        if let (Value::Object(c), Value::Object(e)) = (&mut context, extra) {
            c.extend(e);
        }
    }
    let user = format!("user_{}", r.below(20_000));
    let sent = timestamp;
    match r.below(10) {
        0..=2 => json!({
            "type": "identify", "messageId": id, "anonymousId": anonymous, "userId": user,
            "timestamp": timestamp, "sentAt": sent, "originalTimestamp": timestamp,
            "traits": {"email": format!("{user}@example.com"), "name": "Ada Lovelace",
                       "plan": r.pick(&["free", "pro", "enterprise"]), "logins": r.below(500),
                       "company": {"name": "Example Ltd", "employees": r.below(5000), "industry": "Software"},
                       "address": {"city": "London", "country": "GB", "postalCode": "N1 9GU"}},
            "context": context, "integrations": {"All": true},
        }),
        3..=5 => json!({
            "type": "page", "name": r.pick(&["Pricing", "Home", "Docs"]), "messageId": id,
            "anonymousId": anonymous, "timestamp": timestamp, "sentAt": sent,
            "properties": {"path": "/pricing", "referrer": "https://www.google.com/",
                           "title": "Pricing – Example", "url": "https://www.example.com/pricing"},
            "context": context,
        }),
        _ => json!({
            "type": "track", "event": r.pick(&["Signed Up", "Plan Upgraded", "Invite Sent"]),
            "messageId": id, "anonymousId": anonymous, "userId": user, "timestamp": timestamp,
            "sentAt": sent,
            "properties": {"plan": r.pick(&["pro", "enterprise"]), "seats": r.below(50),
                           "trial": r.chance(0.5), "mrr": r.below(100_000) as f64 / 100.0},
            "context": context,
        }),
    }
}

fn strings(r: &mut Rng, id: &str, timestamp: &str, anonymous: &str) -> Value {
    const WORDS: &[&str] = &[
        "déjà",
        "vu",
        "naïve",
        "café",
        "\"quoted\"",
        "back\\slash",
        "tab\there",
        "line\nbreak",
        "emoji 🚀",
        "日本語",
        "ümlaut",
        "ordinary",
        "words",
        "of",
        "text",
        "and",
        "more",
    ];
    let mut text = |n: u64| {
        let words = 8 + r.below(n);
        (0..words)
            .map(|_| WORDS[r.below(WORDS.len() as u64) as usize])
            .collect::<Vec<_>>()
            .join(" ")
    };
    let (title, body, comment, path) = (text(10), text(200), text(60), text(5));
    json!({
        "type": "track", "event": "Support Ticket Updated", "messageId": id,
        "anonymousId": anonymous, "timestamp": timestamp,
        "properties": {"title": title, "body": body, "comment": comment, "path": path,
                       "agent": format!("agent-{}", r.hex(8)), "tags": "billing,urgent,refund"},
    })
}
