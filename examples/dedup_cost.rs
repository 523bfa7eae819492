//! What a duplicate check costs an id: `Dedup::claim_many` and `settle` over requests of 500
//! new ids, as the batch path calls them, with the window at the default million ids.
//!
//! `cargo run --release --example dedup_cost -- [IDS_MILLIONS]`: prints ns an id for the first
//! million (the window filling) and for the rest (full: each new id also expires the oldest).

use std::time::{Duration, Instant};

use stowage::ingest::dedup::{Claim, Dedup};
use stowage::model::TeamId;

fn main() {
    let millions: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(3);
    let dedup = Dedup::new(Duration::from_secs(3600), 1_000_000);
    let team = TeamId::from("team");
    let total = millions * 1_000_000;
    let ids: Vec<String> = (0..total)
        .map(|i| format!("bench-f9d6beab9c96a885-{i:012}"))
        .collect();
    let (mut filling, mut full) = (Duration::ZERO, Duration::ZERO);
    for (n, chunk) in ids.chunks(500).enumerate() {
        let refs: Vec<&str> = chunk.iter().map(String::as_str).collect();
        let started = Instant::now();
        let tickets = dedup
            .claim_many(&team, &refs, 1_000_000)
            .into_iter()
            .flatten()
            .filter_map(|c| match c {
                Claim::New(t) => Some(t),
                Claim::Seen(_) => None,
            })
            .collect();
        dedup.settle(tickets, true);
        if n * 500 < 1_000_000 {
            filling += started.elapsed();
        } else {
            full += started.elapsed();
        }
    }
    let per = |d: Duration, n: usize| d.as_nanos() as f64 / n as f64;
    println!(
        "filling: {:.0} ns an id; full: {:.0} ns an id",
        per(filling, 1_000_000),
        per(full, total - 1_000_000)
    );
}
