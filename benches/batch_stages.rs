//! Criterion benchmarks of the per-event CPU stages of a `/v1/batch` request, one batch of 500
//! messages of two `stowage bench` mixes (`narrow`, `shop`): validate (Segment rules, flatten),
//! claim and settle the ids in a full dedup window, and append both rows of every event to the
//! team's table buffers, build a request's rows into a batch per table on its task, and encode
//! 40 such requests' rows as the flush does. Stage costs per event, repeatable where the
//! end-to-end comparison (`benches/compare_batch.sh`) is noisy; figures in BENCHMARKS.md. Also,
//! for every generator mix, a message's top-level fields read by the validating walk against
//! serde_json alone, and a request's messages built straight into its tables (`direct_*`), the
//! server's path for a batch (and what its per-table batches cost), and gathered submissions of
//! single events built so (`gathered_*`).
//! Run: `cargo bench --bench batch_stages`.

use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use foldhash::HashMap;
use stowage::bench::generator::Generator;
use stowage::bench::mixes::Mix;
use stowage::config::ParquetConfig;
use stowage::ingest::buffered::BufferedTable;
use stowage::ingest::bulk;
use stowage::ingest::dedup::{Claim, Dedup};
use stowage::ingest::direct::{DirectBuild, DirectRows, DirectTable};
use stowage::ingest::event::EventRows;
use stowage::ingest::segment::{Shared, parse_message};
use stowage::ingest::top_fields::Top;
use stowage::model::TeamId;
use stowage::model::tape::Tape;
use stowage::warehouse::buffer::TableBuffer;
use stowage::warehouse::writer;

const BATCH: usize = 500;

// The server's allocator: allocation is a large share of these stages.
#[global_allocator]
static GLOBAL: stowage::allocator::placement::Placed = stowage::allocator::placement::Placed;

/// 500 messages shaped like `stowage bench gen --mix narrow` and `--mix shop`, the `round`th
/// request's: every round's message ids are its own, as a tracker's are.
fn messages(mix: &str, round: usize) -> Vec<String> {
    (0..BATCH)
        .map(|i| (i, round * BATCH + i))
        .map(|(i, seq)| match mix {
            "narrow" => {
                let ms = if i % 2 == 0 {
                    format!(r#""ms":{},"#, (i * 7919 % 100_000) as f64 / 7.0)
                } else {
                    String::new()
                };
                format!(
                    r#"{{"anonymousId":"a{:015x}","event":"{}","messageId":"bench-c763cc0fb34b6c56-{seq:012}","properties":{{{ms}"n":{}}},"timestamp":"2026-11-26T14:07:05.478Z","type":"track"}}"#,
                    i * 2_654_435_761 % 1_000_003,
                    ["tick", "heartbeat", "scroll"][i % 3],
                    i % 1000
                )
            }
            _ => format!(
                r#"{{"anonymousId":"45b7c443-a617-49e5-acef-{i:012}","context":{{"ip":"203.0.113.137","library":{{"name":"analytics.js","version":"4.1.0"}},"locale":"fr-FR","page":{{"path":"/product","referrer":"https://www.example.com/"}},"timezone":"Europe/Berlin","userAgent":"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0 Safari/537.36"}},"event":"{}","messageId":"bench-423dcc45bc6f6d26-{seq:012}","properties":{{"coupon":"WINTER10","currency":"USD","order_id":"ord_{seq}","payment":{{"installments":3,"method":"paypal"}},"products":[{{"price":375.86,"product_id":"prod_8868","quantity":1}}],"revenue":{}.08,"shipping":8.35,"tax":11.48}},"timestamp":"2026-11-26T14:06:45.475Z","type":"track","userId":"user_{}"}}"#,
                ["Order Completed", "Product Viewed", "Cart Viewed"][i % 3],
                i % 400,
                i % 1000
            ),
        })
        .collect()
}

fn parse_all(msgs: &[String], now: chrono::DateTime<chrono::Utc>) -> Vec<EventRows> {
    msgs.iter()
        .map(|m| {
            let top = Top::parse(m).unwrap();
            parse_message(&top, None, Shared::default(), now, 1000, None)
                .unwrap()
                .1
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let now = chrono::Utc::now();
    let team = TeamId(Arc::from("bench-team"));
    for mix in ["narrow", "shop"] {
        let msgs = messages(mix, 0);
        let events = parse_all(&msgs, now);
        let mut g = c.benchmark_group(format!("batch_{mix}"));
        g.throughput(Throughput::Elements(BATCH as u64));
        g.bench_function("validate", |b| b.iter(|| parse_all(black_box(&msgs), now)));
        // A window at its capacity: every claim also expires the oldest id.
        let dedup = Arc::new(Dedup::new(std::time::Duration::from_secs(86_400), 1 << 20));
        let mut n = 0u64;
        let now_us = now.timestamp_micros();
        g.bench_function("dedup_claim_settle", |b| {
            b.iter(|| {
                let ids: Vec<String> = (0..BATCH)
                    .map(|_| {
                        n += 1;
                        format!("bench-{n:020}")
                    })
                    .collect();
                let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
                let tickets = dedup
                    .claim_many(&team, &ids, now_us)
                    .into_iter()
                    .map(|c| match c {
                        Some(Claim::New(t)) => t,
                        _ => unreachable!("every id is new"),
                    })
                    .collect();
                dedup.settle(tickets, true);
            })
        });
        let mut tables: HashMap<String, TableBuffer> = HashMap::default();
        let mut appended = 0;
        g.bench_function("buffer_append", |b| {
            b.iter(|| {
                for ev in black_box(&events) {
                    for (table, cells) in ev.rows() {
                        match tables.get_mut(table) {
                            Some(t) => t.append(cells).unwrap(),
                            None => tables
                                .entry(table.to_string())
                                .or_default()
                                .append(cells)
                                .unwrap(),
                        }
                    }
                }
                appended += BATCH;
                if appended >= 50_000 {
                    appended = 0;
                    tables.values_mut().for_each(|t| drop(t.take_batch()));
                }
            })
        });
        // What a request's task builds of it: a batch per table with enough rows.
        let refs: Vec<&EventRows> = events.iter().collect();
        g.bench_function("bulk_build", |b| {
            b.iter(|| black_box(bulk::build(black_box(&refs))).map(|p| p.finish(Vec::new())))
        });
        // The flush: 40 requests' rows (20,000 events, each with its own id), as the team
        // buffers hold them, encoded as one Parquet file per table.
        let mut flushed: HashMap<String, TableBuffer> = HashMap::default();
        for round in 0..40 {
            for ev in &parse_all(&messages(mix, round), now) {
                for (table, cells) in ev.rows() {
                    flushed
                        .entry(table.to_string())
                        .or_default()
                        .append(cells)
                        .unwrap();
                }
            }
        }
        let batches: Vec<_> = flushed.values_mut().map(|t| t.take_batch()).collect();
        let cfg = ParquetConfig::default();
        g.throughput(Throughput::Elements(40 * BATCH as u64));
        g.bench_function("flush_encode", |b| {
            b.iter(|| {
                for batch in black_box(&batches) {
                    black_box(writer::encode(batch, &cfg).unwrap());
                }
            })
        });
        g.finish();
    }
}

/// A request's 500 messages of generator mix `mix`.
fn generated(mix: Mix, now: chrono::DateTime<chrono::Utc>) -> Vec<String> {
    let mut generator = Generator::new("c763cc0fb34b6c56", 7, now).with_mix(mix);
    (0..BATCH)
        .map(|_| generator.message().to_string())
        .collect()
}

/// A message's top-level fields read by the validating walk ([`Top::parse`]) and by
/// serde_json alone (`serde_json::from_str::<Top>`, the walk's fallback and the way before it),
/// over 500 messages of each `stowage bench gen` mix.
fn top_fields(c: &mut Criterion) {
    let now = chrono::Utc::now();
    for mix in [Mix::Shop, Mix::Wide, Mix::Narrow, Mix::Sdk, Mix::Strings] {
        let msgs = generated(mix, now);
        let mut g = c.benchmark_group(format!("top_fields_{mix:?}").to_lowercase());
        g.throughput(Throughput::Elements(BATCH as u64));
        g.bench_function("walk", |b| {
            b.iter(|| {
                for m in black_box(&msgs) {
                    black_box(Top::parse(m).unwrap());
                }
            })
        });
        g.bench_function("serde", |b| {
            b.iter(|| {
                for m in black_box(&msgs) {
                    black_box(serde_json::from_str::<Top>(m).unwrap());
                }
            })
        });
        g.finish();
    }
}

/// What a batch request's task does to its 500 messages on the server's path: each message's
/// top-level fields read, checked and built straight into a batch per table
/// ([`DirectBuild`]), for every generator mix (`build`). Beside it, what the batches
/// themselves cost: `logged` stops before they are made (the messages' values in their tables'
/// logs, no arrays), and `build_push` also hands them to the team's buffers as the actor does,
/// which join them into chunks, taken every 50,000 events as a flush takes them
/// (BENCHMARKS.md, thirty-fourth session).
fn direct_build(c: &mut Criterion) {
    let now = chrono::Utc::now();
    for mix in [Mix::Shop, Mix::Wide, Mix::Narrow, Mix::Sdk, Mix::Strings] {
        let msgs = generated(mix, now);
        let mut g = c.benchmark_group(format!("direct_{mix:?}").to_lowercase());
        g.throughput(Throughput::Elements(BATCH as u64));
        g.bench_function("build", |b| {
            b.iter(|| black_box(built(black_box(&msgs), now)))
        });
        g.bench_function("logged", |b| {
            b.iter(|| black_box(logged(black_box(&msgs), now)))
        });
        let mut tables: HashMap<String, BufferedTable> = HashMap::default();
        let mut appended = 0;
        g.bench_function("build_push", |b| {
            b.iter(|| {
                push_all(&mut tables, built(black_box(&msgs), now));
                appended += BATCH;
                if appended >= 50_000 {
                    appended = 0;
                    tables.values_mut().for_each(|t| drop(t.take()));
                }
            })
        });
        g.finish();
    }
}

/// `msgs` read and logged into their tables ([`DirectBuild`]), not yet finished.
fn logged(msgs: &[String], now: chrono::DateTime<chrono::Utc>) -> DirectBuild<'_> {
    let mut build = DirectBuild::default();
    let mut tape = Tape::default();
    for m in msgs {
        let top = Top::parse_on(m, tape).unwrap();
        black_box(build.message(&top, Shared::default(), now, 1000).unwrap());
        tape = top.into_tape();
    }
    build
}

/// `msgs` built straight into their tables, as a request's task builds them.
fn built(msgs: &[String], now: chrono::DateTime<chrono::Utc>) -> Vec<DirectTable> {
    logged(msgs, now).finish().unwrap()
}

/// A request's tables handed to the team's buffers, as the team actor hands them.
fn push_all(tables: &mut HashMap<String, BufferedTable>, built: Vec<DirectTable>) {
    for t in built {
        let table = tables.entry(t.name).or_default();
        match t.rows {
            DirectRows::Batch(batch) => table.push(batch),
            DirectRows::Logged(rows) => table.push_logged(&rows),
        }
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30).measurement_time(std::time::Duration::from_secs(4));
    targets = bench, top_fields, direct_build, gathered
}
criterion_main!(benches);

/// What a gathered submission of single events ([`stowage::ingest`]'s `gather`) would cost built
/// straight into a batch per table and pushed whole to the team's buffer (`direct_16`, `_32`,
/// `_64`: submissions of that many), against each event parsed into cells and appended by the
/// buffer (`usual`), 500 events either way, the buffers taken every 50,000 as a flush does. A
/// batch per table costs its builders, its arrays and a join, which a few rows do not pay back:
/// why gathered submissions are appended, not built (BENCHMARKS.md, thirty-second session).
fn gathered(c: &mut Criterion) {
    let now = chrono::Utc::now();
    for mix in [Mix::Shop, Mix::Narrow] {
        let msgs = generated(mix, now);
        let mut g = c.benchmark_group(format!("gathered_{mix:?}").to_lowercase());
        g.throughput(Throughput::Elements(BATCH as u64));
        let mut tables: HashMap<String, BufferedTable> = HashMap::default();
        let mut appended = 0;
        g.bench_function("usual", |b| {
            b.iter(|| {
                for m in black_box(&msgs) {
                    let top = Top::parse(m).unwrap();
                    let ev = parse_message(&top, None, Shared::default(), now, 1000, None)
                        .unwrap()
                        .1;
                    for (table, cells) in ev.rows() {
                        tables
                            .entry(table.to_string())
                            .or_default()
                            .append(cells)
                            .unwrap();
                    }
                }
                appended += BATCH;
                if appended >= 50_000 {
                    appended = 0;
                    tables.values_mut().for_each(|t| drop(t.take()));
                }
            })
        });
        for n in [16usize, 32, 64] {
            let mut tables: HashMap<String, BufferedTable> = HashMap::default();
            let mut appended = 0;
            g.bench_function(format!("direct_{n}"), |b| {
                b.iter(|| {
                    for chunk in black_box(&msgs).chunks(n) {
                        push_all(&mut tables, built(chunk, now));
                    }
                    appended += BATCH;
                    if appended >= 50_000 {
                        appended = 0;
                        tables.values_mut().for_each(|t| drop(t.take()));
                    }
                })
            });
        }
        g.finish();
    }
}
