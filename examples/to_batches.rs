//! A request's messages to a batch per table, the usual way against the direct one
//! (`stowage::ingest::direct`), taking turns on one thread so the machine's swings hit both:
//! every mix's 500-message requests, `rounds` turns of `reps` requests each, the fastest turn
//! of each way reported (µs an event) and their ratio. Criterion's figures for the same stage,
//! one way after the other, moved ±30 % from run to run on this shared machine.
//!
//! The usual way: [`parse_message`] into cells, then every table built from them whole (what
//! `bulk::build` does for tables of 64 rows or more, and the team actor for the rest).
//!
//! Usage: `cargo run --release --example to_batches -- [rounds] [reps]`.

use std::hint::black_box;
use std::time::Instant;

use stowage::bench::generator::Generator;
use stowage::bench::mixes::Mix;
use stowage::ingest::direct::DirectBuild;
use stowage::ingest::segment::{Shared, parse_message};
use stowage::ingest::top_fields::Top;
use stowage::warehouse::buffer::TableBuffer;

#[global_allocator]
static GLOBAL: stowage::allocator::placement::Placed = stowage::allocator::placement::Placed;

const BATCH: usize = 500;

fn usual(msgs: &[String], now: chrono::DateTime<chrono::Utc>) {
    let mut tables: Vec<(String, TableBuffer)> = Vec::new();
    for m in msgs {
        let top = Top::parse(m).expect("a generated message");
        let (_, rows) =
            parse_message(&top, None, Shared::default(), now, 1000, None).expect("a valid message");
        for (table, cells) in rows.rows() {
            let at = match tables.iter().position(|(n, _)| n == table) {
                Some(at) => at,
                None => {
                    tables.push((table.to_string(), TableBuffer::default()));
                    tables.len() - 1
                }
            };
            tables[at].1.append(cells).expect("a row that fits");
        }
    }
    for (_, t) in &mut tables {
        black_box(t.take_batch());
    }
}

fn direct(msgs: &[String], now: chrono::DateTime<chrono::Utc>) {
    let mut build = DirectBuild::default();
    for m in msgs {
        let top = Top::parse(m).expect("a generated message");
        build
            .message(&top, Shared::default(), now, 1000)
            .expect("built directly");
    }
    black_box(build.finish().expect("built directly"));
}

fn main() {
    let mut args = std::env::args().skip(1);
    let rounds: usize = args.next().map_or(15, |r| r.parse().expect("rounds"));
    let reps: usize = args.next().map_or(20, |r| r.parse().expect("reps"));
    let now = chrono::Utc::now();
    println!("mix       usual µs/ev  direct µs/ev  direct/usual");
    for mix in [Mix::Shop, Mix::Wide, Mix::Narrow, Mix::Sdk, Mix::Strings] {
        let mut generator = Generator::new("c763cc0fb34b6c56", 7, now).with_mix(mix);
        let requests: Vec<Vec<String>> = (0..reps)
            .map(|_| {
                (0..BATCH)
                    .map(|_| generator.message().to_string())
                    .collect()
            })
            .collect();
        let mut best = [f64::MAX; 2];
        for round in 0..rounds {
            for turn in 0..2 {
                // Who goes first alternates, so neither always follows the other.
                let way = (turn + round) % 2;
                let start = Instant::now();
                for msgs in &requests {
                    if way == 0 {
                        usual(msgs, now);
                    } else {
                        direct(msgs, now);
                    }
                }
                let us = start.elapsed().as_secs_f64() * 1e6 / (reps * BATCH) as f64;
                best[way] = best[way].min(us);
            }
        }
        println!(
            "{:<9} {:>11.2}  {:>12.2}  {:>12.3}",
            format!("{mix:?}").to_lowercase(),
            best[0],
            best[1],
            best[1] / best[0]
        );
    }
}
