//! Criterion benchmarks of the CPU stages of the pipeline: validate an event, append it to a
//! table buffer, encode a flushed batch as Parquet, encode a read batch as the JSON response
//! (and a numeric batch and a text-heavy one as JSON and CSV), and what every column chunk
//! costs before its values: the ZSTD contexts the parquet crate makes for it.
//! Run: `cargo bench --bench pipeline`. Results and comparisons live in BENCHMARKS.md.

use std::hint::black_box;
use std::sync::Arc;

use arrow::array::{ArrayRef, Float64Array, Int64Array, StringViewArray};
use arrow::record_batch::RecordBatch;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use stowage::config::ParquetConfig;
use stowage::download::encode::{self, JsonEncoder};
use stowage::download::format::Format;
use stowage::ingest::event::{EventRows, parse_event};
use stowage::model::schema::TableSchema;
use stowage::warehouse::buffer::TableBuffer;
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
    // The download benchmark's `numeric` shape: a row number, a small signed integer, a
    // full-precision double and a price-like one (cents).
    let numeric = numeric_batch(ROWS);
    // The `strings` shape: text with a byte to escape or quote every ~20 bytes.
    let strings = strings_batch(ROWS);
    for (batch, format, name) in [
        (&numeric, Format::Json, "json_encode_numeric_10k"),
        (&numeric, Format::Csv, "csv_encode_numeric_10k"),
        (&strings, Format::Json, "json_encode_strings_10k"),
        (&strings, Format::Csv, "csv_encode_strings_10k"),
    ] {
        let schema = TableSchema::from_arrow(&batch.schema());
        g.bench_function(name, |b| {
            b.iter(|| {
                let mut enc = encode::encoder(format, &schema, Default::default()).unwrap();
                let mut out = Vec::with_capacity(16 << 20);
                enc.batch(black_box(batch), &mut out).unwrap();
                out
            })
        });
    }
    g.finish();
}

/// The download benchmark's text fragments (`benches/download_shapes.py`): quotes, backslashes,
/// line breaks, a tab, a control byte, accents, CJK, emoji.
const FRAGMENTS: &[&str] = &[
    "He said \"hello\"",
    "it's",
    "a \"quoted\" word",
    "C:\\Users\\né\\file.txt",
    "line one\nline two",
    "col1\tcol2",
    "café",
    "naïve résumé",
    "日本語のテキスト",
    "東京",
    "🎉🚀",
    "emoji 👍🏽 ok",
    "plain words here",
    "lorem ipsum dolor sit amet",
    "comma, separated, values",
    "semi;colon",
    "back\\slash \\n not a newline",
    "CRLF\r\nline",
    "{\"json\": \"inside\"}",
    "<html>&amp;</html>",
    "Ünïcödé",
    "Привет мир",
    "مرحبا",
    "bell\x07char",
    "x",
    "trailing space ",
    "\"\"",
    "'single'",
];

/// `rows` rows of (title: 3 fragments, body: 8 fragments and a number, note: 2 fragments or
/// null one time in four) as string views, as the reader yields them, from a fixed xorshift
/// sequence.
fn strings_batch(rows: usize) -> RecordBatch {
    let mut s = 0x2545_f491_4f6c_dd1du64;
    let mut text = move |parts: usize| {
        let picked: Vec<&str> = (0..parts)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                FRAGMENTS[(s % FRAGMENTS.len() as u64) as usize]
            })
            .collect();
        (picked.join(" "), s)
    };
    let (mut title, mut body, mut note) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rows {
        title.push(text(3).0);
        let (b, n) = text(8);
        body.push(format!("{b} #{}", n % 100_000));
        let (t, n) = text(2);
        note.push((n % 4 != 0).then_some(t));
    }
    let columns: Vec<(&str, ArrayRef)> = vec![
        ("title", Arc::new(StringViewArray::from_iter_values(title))),
        ("body", Arc::new(StringViewArray::from_iter_values(body))),
        ("note", Arc::new(StringViewArray::from(note))),
    ];
    RecordBatch::try_from_iter(columns).unwrap()
}

/// `rows` rows of (id int64, a int64, x float64 in [0, 1) with full precision, y float64 with
/// two decimals), from a fixed xorshift sequence.
fn numeric_batch(rows: usize) -> RecordBatch {
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let (mut a, mut x, mut y) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..rows {
        a.push((next() % 2_000_000) as i64 - 1_000_000);
        x.push((next() >> 11) as f64 / (1u64 << 53) as f64);
        y.push((next() % 100_000_000) as f64 / 100.0);
    }
    let columns: Vec<(&str, ArrayRef)> = vec![
        ("id", Arc::new(Int64Array::from_iter_values(0..rows as i64))),
        ("a", Arc::new(Int64Array::from(a))),
        ("x", Arc::new(Float64Array::from(x))),
        ("y", Arc::new(Float64Array::from(y))),
    ];
    RecordBatch::try_from_iter(columns).unwrap()
}

/// What the parquet crate pays per column chunk before any value: a ZSTD compression and
/// decompression context (`ZSTDCodec::new`, for every chunk written or read), and a file of 64
/// columns and 100 rows, a flush's table of a wide tracking plan in a quiet minute. zstd asks
/// the CPU for its features on every context; on a virtual machine each ask traps to the
/// hypervisor, which `third_party/zstd-sys` answers once (BENCHMARKS.md, thirty-fifth session).
fn column_chunks(c: &mut Criterion) {
    let mut g = c.benchmark_group("column_chunk");
    g.bench_function("zstd_contexts", |b| {
        b.iter(|| {
            let compress = zstd::bulk::Compressor::new(3).unwrap();
            let decompress = zstd::bulk::Decompressor::new().unwrap();
            black_box((compress, decompress))
        })
    });
    let columns: Vec<(String, ArrayRef)> = (0..64)
        .map(|c| {
            let values = (0..100).map(|r| (r * 64 + c) as f64 / 7.0);
            let array: ArrayRef = Arc::new(Float64Array::from_iter_values(values));
            (format!("p{c}"), array)
        })
        .collect();
    let wide = RecordBatch::try_from_iter(columns).unwrap();
    let cfg = ParquetConfig::default();
    g.throughput(Throughput::Elements(64));
    g.bench_function("parquet_encode_64_columns_100_rows", |b| {
        b.iter(|| writer::encode(black_box(&wide), &cfg).unwrap())
    });
    g.finish();
}

criterion_group!(benches, bench, column_chunks);
criterion_main!(benches);
