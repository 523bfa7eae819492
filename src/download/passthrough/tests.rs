//! The copy writer against in-memory files written like the warehouse writes them: copied and
//! encoded row groups read back as the same rows as the Parquet encoder's output, with the
//! same schema and metadata.

use std::sync::Arc;

use arrow::array::{
    ArrayRef, BooleanArray, Float64Array, Int64Array, RecordBatchReader, StringArray,
};
use arrow::datatypes::{DataType, Field, Schema};
use arrow::record_batch::RecordBatch;
use bytes::Bytes;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::file::metadata::{PageIndexPolicy, ParquetMetaData, ParquetMetaDataReader};

use super::writer::{CopyWriter, Counts};
use crate::config::ParquetConfig;
use crate::download::encode::{self, EncodeOptions};
use crate::download::format::Format;
use crate::model::schema::{ColumnType, TableSchema};
use crate::warehouse::chunks::{Fetched, plan_fetches};
use crate::warehouse::reader::align;
use crate::warehouse::writer;

fn table() -> TableSchema {
    let mut t = TableSchema::default();
    for (name, ty) in [
        ("id", ColumnType::String),
        ("n", ColumnType::Int64),
        ("x", ColumnType::Float64),
        ("b", ColumnType::Boolean),
        ("ts", ColumnType::Timestamp),
    ] {
        t.columns.push(crate::model::schema::Column {
            name: name.into(),
            ty,
        });
    }
    t
}

/// `rows` rows from `first`, in `table()`'s schema (nulls every 7th row).
fn batch(first: i64, rows: i64) -> RecordBatch {
    let ids: Vec<i64> = (first..first + rows).collect();
    let cols: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from_iter(
            ids.iter().map(|i| (i % 7 != 0).then(|| format!("row {i}"))),
        )),
        Arc::new(Int64Array::from_iter(ids.iter().map(|i| Some(i * 3)))),
        Arc::new(Float64Array::from_iter(
            ids.iter().map(|i| (i % 7 != 1).then_some(*i as f64 / 8.0)),
        )),
        Arc::new(BooleanArray::from_iter(
            ids.iter().map(|i| Some(i % 2 == 0)),
        )),
        Arc::new(
            arrow::array::TimestampMicrosecondArray::from_iter(
                ids.iter().map(|i| Some(1_700_000_000_000_000 + i)),
            )
            .with_timezone("UTC"),
        ),
    ];
    RecordBatch::try_new(table().to_arrow(), cols).unwrap()
}

/// The same rows as an older file would hold them: `n` still int64 in a table where it is now
/// float64 would need a cast; here `x` is missing (added later).
fn old_batch(first: i64, rows: i64) -> RecordBatch {
    let full = batch(first, rows);
    let schema = Arc::new(Schema::new(vec![
        Field::new("id", DataType::Utf8, true),
        Field::new("n", DataType::Int64, true),
        Field::new("b", DataType::Boolean, true),
        Field::new("ts", full.schema().field(4).data_type().clone(), true),
    ]));
    RecordBatch::try_new(
        schema,
        vec![
            full.column(0).clone(),
            full.column(1).clone(),
            full.column(3).clone(),
            full.column(4).clone(),
        ],
    )
    .unwrap()
}

fn stored(batch: &RecordBatch, row_group_rows: usize) -> Bytes {
    let cfg = ParquetConfig {
        row_group_rows,
        ..ParquetConfig::default()
    };
    writer::encode(batch, &cfg).unwrap()
}

fn footer(file: &Bytes) -> ParquetMetaData {
    ParquetMetaDataReader::new()
        .with_page_index_policy(PageIndexPolicy::Optional)
        .parse_and_finish(file)
        .unwrap()
}

/// Copies (or decodes and encodes) each file in order, like the download does.
fn passthrough(files: &[Bytes], fetch_bytes: u64) -> (Bytes, Counts) {
    let mut w = CopyWriter::new(table().to_arrow()).unwrap();
    let sink = w.sink();
    let mut out = sink.take();
    for file in files {
        let meta = footer(file);
        if w.can_copy(&meta) {
            let mut fetches = plan_fetches(&meta, fetch_bytes).unwrap().into_iter();
            for g in 0..meta.num_row_groups() {
                let mut rg = w.copy_row_group(&meta, g).unwrap();
                let mut left = meta.row_group(g).num_columns();
                while left > 0 {
                    let f = fetches.next().unwrap();
                    assert_eq!(f.row_group, g);
                    let r = f.bytes.start as usize..f.bytes.end as usize;
                    let fetched = Fetched::new(f.bytes.start, file.slice(r), file.len() as u64);
                    for _ in f.columns.clone() {
                        rg.append(&fetched).unwrap();
                    }
                    left -= f.columns.len();
                    out.extend(sink.take());
                }
                rg.close().unwrap();
            }
            assert!(fetches.next().is_none());
        } else {
            for b in ParquetRecordBatchReaderBuilder::try_new(file.clone())
                .unwrap()
                .with_batch_size(1000)
                .build()
                .unwrap()
            {
                w.encode(&align(&b.unwrap(), &table().to_arrow()).unwrap())
                    .unwrap();
                out.extend(sink.take());
            }
        }
    }
    let counts = w.finish().unwrap();
    out.extend(sink.take());
    (Bytes::from(out), counts)
}

/// The Parquet encoder's output for the same rows.
fn encoded(batches: &[RecordBatch]) -> Bytes {
    let mut e = encode::encoder(Format::Parquet, &table(), EncodeOptions::default()).unwrap();
    let mut out = Vec::new();
    e.header(&mut out).unwrap();
    for b in batches {
        e.batch(&align(b, &table().to_arrow()).unwrap(), &mut out)
            .unwrap();
    }
    e.footer(&mut out).unwrap();
    Bytes::from(out)
}

fn read_all(file: &Bytes) -> (Arc<Schema>, RecordBatch) {
    let reader = ParquetRecordBatchReaderBuilder::try_new(file.clone())
        .unwrap()
        .build()
        .unwrap();
    let schema = reader.schema();
    let batches: Vec<RecordBatch> = reader.map(|b| b.unwrap()).collect();
    (
        schema.clone(),
        arrow::compute::concat_batches(&schema, &batches).unwrap(),
    )
}

#[test]
fn copied_and_encoded_row_groups_read_like_the_encoder_output() {
    let parts = [
        batch(0, 2500),
        old_batch(2500, 700),
        old_batch(3200, 300),
        batch(3500, 1000),
        batch(4500, 1),
    ];
    let files: Vec<Bytes> = parts.iter().map(|b| stored(b, 1000)).collect();
    // 2 KiB ranges: several reads per row group.
    let (out, counts) = passthrough(&files, 2048);
    assert_eq!(
        counts,
        Counts {
            copied: 3 + 1 + 1,
            encoded: 1, // the two old files share one row group
            rows: 4501,
        }
    );
    let reference = encoded(&parts);
    let (schema, rows) = read_all(&out);
    let (ref_schema, ref_rows) = read_all(&reference);
    assert_eq!(schema, ref_schema);
    assert_eq!(schema, table().to_arrow());
    assert_eq!(rows, ref_rows);
    // Same Parquet schema and key-value metadata (ARROW:schema) as the encoder writes.
    let (meta, ref_meta) = (footer(&out), footer(&reference));
    assert_eq!(
        meta.file_metadata().schema_descr().root_schema(),
        ref_meta.file_metadata().schema_descr().root_schema()
    );
    assert_eq!(
        meta.file_metadata().key_value_metadata(),
        ref_meta.file_metadata().key_value_metadata()
    );
    let sizes: Vec<i64> = meta.row_groups().iter().map(|g| g.num_rows()).collect();
    assert_eq!(sizes, [1000, 1000, 500, 1000, 1000, 1]);
    // Copied chunks keep their statistics and page index.
    assert!(meta.column_index().is_some_and(|i| i[0].get(1).is_some()));
    assert!(meta.offset_index().is_some_and(|i| i[0].get(1).is_some()));
    assert!(meta.row_group(0).column(1).statistics().is_some());
}

#[test]
fn fetches_cover_every_chunk_once_within_the_target() {
    let file = stored(&batch(0, 3000), 1000);
    let meta = footer(&file);
    for target in [1, 300, 2048, 1 << 30] {
        let fetches = plan_fetches(&meta, target).unwrap();
        let mut seen = Vec::new();
        for f in &fetches {
            assert!(f.bytes.end - f.bytes.start <= target || f.columns.len() == 1);
            for c in f.columns.clone() {
                let (start, len) = meta.row_group(f.row_group).column(c).byte_range();
                assert!(f.bytes.start <= start && start + len <= f.bytes.end);
                seen.push((f.row_group, c));
            }
        }
        let all: Vec<(usize, usize)> = (0..3).flat_map(|g| (0..5).map(move |c| (g, c))).collect();
        assert_eq!(seen, all, "target {target}");
    }
    assert_eq!(plan_fetches(&meta, 1 << 30).unwrap().len(), 3);
}

#[test]
fn a_file_with_another_schema_is_not_copied() {
    let w = CopyWriter::new(table().to_arrow()).unwrap();
    assert!(w.can_copy(&footer(&stored(&batch(0, 10), 1000))));
    assert!(!w.can_copy(&footer(&stored(&old_batch(0, 10), 1000))));
    // A float64 column stored as text is a string column to Parquet.
    let full = batch(0, 10);
    let mut fields: Vec<Field> = full
        .schema()
        .fields()
        .iter()
        .map(|f| f.as_ref().clone())
        .collect();
    fields[2] = TableSchema::float_as_text("x");
    let text: ArrayRef = Arc::new(StringArray::from_iter_values(
        (0..10).map(|i| i.to_string()),
    ));
    let mut cols = full.columns().to_vec();
    cols[2] = text;
    let as_text = RecordBatch::try_new(Arc::new(Schema::new(fields)), cols).unwrap();
    assert!(!w.can_copy(&footer(&stored(&as_text, 1000))));
}
