//! Criterion benchmarks of the CPU stages of the pipeline: validate an event, append it to a
//! table buffer, encode a flushed batch as Parquet, encode a read batch as the JSON response.
//! Run: `cargo bench --bench pipeline`. Results and comparisons live in BENCHMARKS.md.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use stowage::config::ParquetConfig;
use stowage::download::encode::JsonEncoder;
use stowage::ingest::buffer::TableBuffer;
use stowage::ingest::event::{EventRows, parse_event};
use stowage::warehouse::schema::TableSchema;
use stowage::warehouse::writer;

const SAMPLE: &[u8] = include_bytes!("../data/sample-event.json");
const ROWS: usize = 10_000;

fn events() -> Vec<EventRows> {
    let now = chrono::Utc::now();
    (0..ROWS)
        .map(|i| {
            let body = format!(
                r#"{{"event":"Purchased an Item","messageId":"m{i}","userId":"u{}","properties":{{"revenue":{}.5,"shippingMethod":"Premium","qty":{i}}},"timestamp":"2012-12-02T00:30:08.276Z"}}"#,
                i % 100,
                i % 50
            );
            parse_event(body.as_bytes(), now, 1000).unwrap()
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let now = chrono::Utc::now();
    let mut g = c.benchmark_group("ingest");
    g.throughput(Throughput::Elements(1));
    g.bench_function("validate_sample_event", |b| {
        b.iter(|| parse_event(black_box(SAMPLE), now, 1000).unwrap())
    });
    let evs = events();
    g.throughput(Throughput::Elements(ROWS as u64));
    g.bench_function("buffer_append_10k", |b| {
        b.iter(|| {
            let mut buf = TableBuffer::default();
            for e in &evs {
                buf.append(e.standard.iter().chain(&e.properties)).unwrap();
            }
            buf.take_batch()
        })
    });
    let mut buf = TableBuffer::default();
    for e in &evs {
        buf.append(e.standard.iter().chain(&e.properties)).unwrap();
    }
    let batch = buf.take_batch();
    let cfg = ParquetConfig::default();
    g.bench_function("parquet_encode_10k", |b| {
        b.iter(|| writer::encode(black_box(&batch), &cfg).unwrap())
    });
    g.finish();

    let schema = TableSchema::from_arrow(&batch.schema());
    let mut g = c.benchmark_group("download");
    g.throughput(Throughput::Elements(ROWS as u64));
    g.bench_function("json_encode_10k", |b| {
        b.iter(|| {
            let mut enc = JsonEncoder::new(&schema);
            let mut out = Vec::with_capacity(4 << 20);
            enc.batch(black_box(&batch), &mut out);
            out
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
