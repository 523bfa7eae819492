//! What a columnar path from NDJSON to Parquet costs in this build's own crates, on one thread:
//! arrow-json's tape decoder straight into Arrow arrays (no cells, no per-event rows), then the
//! Parquet writer with stowage's settings (ZSTD 3, dictionaries, page statistics). A floor for
//! the parse, build and encode stages of `POST /v1/batch` (BENCHMARKS.md, thirteenth session):
//! no HTTP, no WAL, no dedup, nested objects kept as structs instead of flattened, one table.
//!
//! Usage: `cargo run --release --example columnar_floor -- events.ndjson [rounds]`, with the
//! file from `stowage bench gen --mix narrow --events 1000000 --out events.ndjson`.

use std::io::Cursor;
use std::sync::Arc;
use std::time::Instant;

use arrow::json::ReaderBuilder;
use arrow::json::reader::infer_json_schema_from_seekable;
use arrow::record_batch::RecordBatch;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::{EnabledStatistics, WriterProperties};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let path = args
        .next()
        .ok_or("usage: columnar_floor FILE.ndjson [rounds]")?;
    let rounds: usize = args.next().map_or(Ok(3), |r| r.parse())?;
    let text = std::fs::read(&path)?;
    let events = text
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .count();
    let (schema, _) = infer_json_schema_from_seekable(Cursor::new(&text), Some(10_000))?;
    let schema = Arc::new(schema);
    for round in 1..=rounds {
        let start = Instant::now();
        let reader = ReaderBuilder::new(schema.clone())
            .with_batch_size(8192)
            .build(Cursor::new(&text))?;
        let batches: Vec<RecordBatch> = reader.collect::<Result<_, _>>()?;
        let decoded = start.elapsed();
        let props = WriterProperties::builder()
            .set_compression(Compression::ZSTD(ZstdLevel::try_new(3)?))
            .set_statistics_enabled(EnabledStatistics::Page)
            .set_dictionary_enabled(true)
            .build();
        let mut out = Vec::with_capacity(text.len() / 4);
        let mut writer = ArrowWriter::try_new(&mut out, schema.clone(), Some(props))?;
        for batch in &batches {
            writer.write(batch)?;
        }
        writer.close()?;
        let total = start.elapsed();
        let per = |d: std::time::Duration| d.as_secs_f64() * 1e6 / events as f64;
        println!(
            "round {round}: {events} events: decode {:.2} µs/event, encode {:.2} µs/event, \
             total {:.2} µs/event ({:.0} events/s on one thread), {} KiB of Parquet",
            per(decoded),
            per(total - decoded),
            per(total),
            events as f64 / total.as_secs_f64(),
            out.len() / 1024
        );
    }
    Ok(())
}
