//! Encodes a record batch as one Parquet file in memory: ZSTD, page statistics (so readers can
//! prune row groups by `timestamp`), rows in the order given, and strings, numbers and
//! timestamps dictionary-encoded only where their values repeat (chosen per column from a sample
//! of the batch, see [`repeats`]; SPEC §4.3; the writer itself falls back to plain pages once a
//! column chunk's dictionary passes 1 MiB); integers and timestamps that do not repeat are
//! delta-encoded instead.

use std::hash::BuildHasher;

use arrow::array::{Array, AsArray};
use arrow::datatypes::{
    ArrowPrimitiveType, DataType, Float64Type, Int64Type, TimeUnit, TimestampMicrosecondType,
    TimestampMillisecondType, TimestampNanosecondType, TimestampSecondType,
};
use arrow::record_batch::RecordBatch;
use bytes::Bytes;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, Encoding, ZstdLevel};
use parquet::errors::ParquetError;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::schema::types::ColumnPath;

use crate::config::ParquetConfig;

/// Values sampled per column to decide on dictionary encoding.
const SAMPLE: usize = 4096;

/// Bytes of values a data page holds before the writer closes it (the parquet crate's default is
/// 1 MiB). Each page's buffers are allocated afresh and the compressed one grown once; at 1 MiB
/// those are mimalloc's *huge* blocks (over 512 KiB), handed out as fresh pages that the kernel
/// faults in and zeroes, while at 64 KiB they come from pages the allocator keeps in use. Server
/// CPU an event under batch load, 64 KiB against 1 MiB in one A/B (`benches/ab_batch.sh`): string-
/// heavy events 0.972, narrow 0.961, wide 0.980, shop 1.000; page faults an event 1.86 → 0.95.
/// Files grow ~5 % on long text (ZSTD sees less at once); 16 KiB cost more CPU than 64 and
/// 128 KiB no less (BENCHMARKS.md, twenty-second session).
const DATA_PAGE_BYTES: usize = 64 << 10;

/// Writer settings for files holding batches like `batch`: dictionary encoding on for the
/// string and numeric columns whose values repeat in it, off for those that are (nearly) all
/// distinct. Of those, int64 and timestamp columns are written
/// `DELTA_BINARY_PACKED` (differences from the previous value, bit-packed per block of 32 at
/// the block's own width): an id or an arrival time in order becomes a few bits per row, and
/// values in a narrow range take only the bits of that range — so ZSTD has little left to do,
/// and ZSTD decompression was the third-largest cost of reading a numeric table (5M-row
/// `numeric` benchmark table: 81 → 72 MiB, server CPU of a JSON download −14 %; BENCHMARKS.md).
/// Float columns stay plain: their differences are no smaller than the values. Every reader the
/// warehouse is meant for (DuckDB, pyarrow, polars, Spark) reads the encoding.
pub fn properties(
    cfg: &ParquetConfig,
    batch: &RecordBatch,
) -> Result<WriterProperties, ParquetError> {
    properties_of(cfg, std::slice::from_ref(batch))
}

/// [`properties`] for a file of `batches` (one schema), each column's values sampled across
/// all of them.
fn properties_of(
    cfg: &ParquetConfig,
    batches: &[RecordBatch],
) -> Result<WriterProperties, ParquetError> {
    let mut b = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::try_new(cfg.zstd_level)?))
        .set_statistics_enabled(EnabledStatistics::Page)
        .set_dictionary_enabled(true)
        .set_max_row_group_row_count(Some(cfg.row_group_rows))
        .set_data_page_size_limit(DATA_PAGE_BYTES);
    let Some(first) = batches.first() else {
        return Ok(b.build());
    };
    for (i, field) in first.schema().fields().iter().enumerate() {
        let chunks: Vec<&dyn Array> = batches.iter().map(|b| b.column(i).as_ref()).collect();
        if repeats_across(&chunks) == Some(false) {
            let path = ColumnPath::from(field.name().as_str());
            b = b.set_column_dictionary_enabled(path.clone(), false);
            if matches!(
                field.data_type(),
                DataType::Int64 | DataType::Timestamp(_, _)
            ) {
                b = b.set_column_encoding(path, Encoding::DELTA_BINARY_PACKED);
            }
        }
    }
    Ok(b.build())
}

/// Whether the int64, float64, timestamp or string column `col`'s values repeat enough for a
/// dictionary to pay: of up to [`SAMPLE`] non-null values spread evenly over the column, at
/// most 90 % distinct. A column of unique values (ids, measurements, full-precision floats)
/// written with a dictionary stores every value in the dictionary page plus a bit-packed index
/// per row, and a reader decodes both and gathers; plain pages are quicker to decode and smaller
/// after ZSTD (the 5M-row `numeric` benchmark table: 118 → 81 MiB, JSON download −15 %;
/// BENCHMARKS.md). For strings (message ids, anonymous ids, free text) the writer would also
/// hash and intern every value until the dictionary passes 1 MiB, only to fall back: 6 % of a
/// narrow batch load's server samples (BENCHMARKS.md, twenty-first session). 20,000 distinct
/// values in 100,000 rows show ~88 % distinct in the sample and keep their dictionary.
/// A sample can be fooled (values that cycle in step with it look distinct); a wrong guess costs
/// size and speed, never values. `None` for other types (the writer's default: a dictionary).
pub fn repeats(col: &dyn Array) -> Option<bool> {
    repeats_across(&[col])
}

/// [`repeats`] of one column held in `chunks` (one type), sampled evenly across them all.
fn repeats_across(chunks: &[&dyn Array]) -> Option<bool> {
    if !matches!(
        chunks.first()?.data_type(),
        DataType::Int64 | DataType::Float64 | DataType::Timestamp(_, _) | DataType::Utf8
    ) {
        return None;
    }
    let text = &foldhash::fast::FixedState::with_seed(0);
    let total: usize = chunks.iter().map(|c| c.len()).sum();
    let step = total.div_ceil(SAMPLE).max(1);
    let mut seen = foldhash::HashSet::with_capacity_and_hasher(SAMPLE, Default::default());
    let mut sampled = 0usize;
    // Global index of the next sample, and of each chunk's first row.
    let (mut next, mut start) = (0usize, 0usize);
    for col in chunks {
        let key: Box<dyn Fn(usize) -> u64 + '_> = match col.data_type() {
            DataType::Int64 => int_key::<Int64Type>(*col),
            DataType::Float64 => {
                let a = col.as_primitive::<Float64Type>();
                Box::new(move |i| a.value(i).to_bits())
            }
            // A table's timestamps are µs; a file of another unit is sampled all the same.
            DataType::Timestamp(TimeUnit::Second, _) => int_key::<TimestampSecondType>(*col),
            DataType::Timestamp(TimeUnit::Millisecond, _) => {
                int_key::<TimestampMillisecondType>(*col)
            }
            DataType::Timestamp(TimeUnit::Microsecond, _) => {
                int_key::<TimestampMicrosecondType>(*col)
            }
            DataType::Timestamp(TimeUnit::Nanosecond, _) => {
                int_key::<TimestampNanosecondType>(*col)
            }
            DataType::Utf8 => {
                let a = col.as_string::<i32>();
                Box::new(move |i| text.hash_one(a.value(i)))
            }
            _ => return None,
        };
        while next < start + col.len() {
            let i = next - start;
            if col.is_valid(i) {
                sampled += 1;
                seen.insert(key(i));
            }
            next += step;
        }
        start += col.len();
    }
    Some(seen.len() * 10 <= sampled * 9)
}

/// The sample key of row `i` of `col`, a column of 64-bit integers of type `T`.
fn int_key<T: ArrowPrimitiveType<Native = i64>>(col: &dyn Array) -> Box<dyn Fn(usize) -> u64 + '_> {
    let a = col.as_primitive::<T>();
    Box::new(move |i| a.value(i) as u64)
}

/// Encodes `batch` as a complete Parquet file. CPU-bound: call it off the async loop.
pub fn encode(batch: &RecordBatch, cfg: &ParquetConfig) -> Result<Bytes, ParquetError> {
    encode_batches(std::slice::from_ref(batch), cfg, &mut |_| {})
}

/// Encodes `batches` (one schema, the first's) as one Parquet file, rows in the order given,
/// without joining them into one batch first; after each batch, `held` is told the bytes the
/// encoder and the file so far hold. CPU-bound: call it off the async loop.
pub fn encode_batches(
    batches: &[RecordBatch],
    cfg: &ParquetConfig,
    held: &mut dyn FnMut(usize),
) -> Result<Bytes, ParquetError> {
    let Some(first) = batches.first() else {
        return Err(ParquetError::General("no batch to encode".into()));
    };
    // ZSTD makes event data 10-50x smaller; the buffer grows if a file needs more.
    let input: usize = batches.iter().map(RecordBatch::get_array_memory_size).sum();
    let mut buf = Vec::with_capacity(input / 8 + 1024);
    let props = properties_of(cfg, batches)?;
    let mut writer = ArrowWriter::try_new(&mut buf, first.schema(), Some(props))?;
    for b in batches {
        writer.write(b)?;
        held(writer.memory_size() + writer.inner().capacity());
    }
    writer.close()?;
    Ok(Bytes::from(buf))
}

/// A Parquet file's rows read back as one batch (tests).
#[cfg(test)]
pub(crate) fn read_back(file: Bytes) -> RecordBatch {
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    let batches: Vec<RecordBatch> = ParquetRecordBatchReaderBuilder::try_new(file)
        .unwrap()
        .build()
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    arrow::compute::concat_batches(&batches[0].schema(), &batches).unwrap()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{ArrayRef, BooleanArray, Float64Array, Int64Array, StringArray};
    use parquet::file::reader::{FileReader, SerializedFileReader};

    use super::*;

    fn batch(cols: Vec<(&str, ArrayRef)>) -> RecordBatch {
        RecordBatch::try_from_iter(cols).unwrap()
    }

    /// Timestamps of every unit are sampled (a column of another unit than µs once made the
    /// sample's cast panic), and a file of them is written.
    #[test]
    fn timestamps_of_any_unit_are_sampled() {
        use arrow::array::{
            TimestampMillisecondArray, TimestampNanosecondArray, TimestampSecondArray,
        };
        let n = 10_000i64;
        let unique: Vec<ArrayRef> = vec![
            Arc::new(TimestampSecondArray::from_iter_values(0..n)),
            Arc::new(TimestampMillisecondArray::from_iter_values(0..n)),
            Arc::new(TimestampNanosecondArray::from_iter_values(0..n).with_timezone("UTC")),
        ];
        for a in unique {
            assert_eq!(repeats(a.as_ref()), Some(false), "{}", a.data_type());
            let file = encode(&batch(vec![("t", a.clone())]), &ParquetConfig::default()).unwrap();
            assert_eq!(read_back(file).num_rows() as i64, n);
        }
        let same: ArrayRef = Arc::new(TimestampNanosecondArray::from_iter_values(
            (0..n).map(|_| 7),
        ));
        assert_eq!(repeats(same.as_ref()), Some(true));
    }

    #[test]
    fn unique_values_are_written_plain_and_repeated_ones_with_a_dictionary() {
        let n = 50_000i64;
        let b = batch(vec![
            (
                "id",
                Arc::new(Int64Array::from_iter_values(0..n)) as ArrayRef,
            ),
            (
                "x",
                Arc::new(Float64Array::from_iter_values(
                    (0..n).map(|i| i as f64 / 7.0),
                )),
            ),
            (
                "plan",
                Arc::new(StringArray::from_iter_values(
                    (0..n).map(|i| ["free", "pro", "team"][i as usize % 3]),
                )),
            ),
            // ~5,000 distinct in 50,000 rows, in no order: they repeat, though most of a
            // sample is distinct.
            (
                "user",
                Arc::new(Int64Array::from_iter_values((0..n).map(|i| {
                    let h = (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
                    ((h >> 32) % 5000) as i64
                }))),
            ),
            (
                "mobile",
                Arc::new(BooleanArray::from_iter((0..n).map(|i| Some(i % 2 == 0)))),
            ),
            // One value in the first 8,192 rows, distinct after: ~84 % distinct over the whole
            // column (a dictionary), all distinct in the tail alone.
            (
                "skew",
                Arc::new(Int64Array::from_iter_values((0..n).map(|i| i.max(8191)))),
            ),
            (
                "message_id",
                Arc::new(StringArray::from_iter_values(
                    (0..n).map(|i| format!("msg-{i:012}")),
                )),
            ),
            // One in ten rows null, the rest 1,800 distinct strings.
            (
                "city",
                Arc::new(StringArray::from_iter((0..n).map(|i| {
                    (i % 10 != 0).then(|| format!("city-{}", (i * 7919) % 2000))
                }))),
            ),
        ]);
        assert_eq!(repeats(b.column(0).as_ref()), Some(false));
        assert_eq!(repeats(b.column(1).as_ref()), Some(false));
        assert_eq!(repeats(b.column(2).as_ref()), Some(true));
        assert_eq!(repeats(b.column(3).as_ref()), Some(true));
        assert_eq!(repeats(b.column(4).as_ref()), None);
        assert_eq!(repeats(b.column(5).as_ref()), Some(true));
        assert_eq!(
            repeats(&b.column(5).slice(8192, n as usize - 8192)),
            Some(false)
        );
        assert_eq!(repeats(b.column(6).as_ref()), Some(false));
        assert_eq!(repeats(b.column(7).as_ref()), Some(true));
        // Sampled across a column held in chunks, the same answers.
        for (i, col) in b.columns().iter().enumerate() {
            let (head, tail) = (col.slice(0, 8192), col.slice(8192, col.len() - 8192));
            assert_eq!(
                repeats_across(&[head.as_ref(), tail.as_ref()]),
                repeats(col.as_ref()),
                "column {i}"
            );
        }

        let file = encode(&b, &ParquetConfig::default()).unwrap();
        let reader = SerializedFileReader::new(file).unwrap();
        let rg = reader.metadata().row_group(0);
        let dict: Vec<bool> = (0..3)
            .map(|i| rg.column(i).dictionary_page_offset().is_some())
            .collect();
        assert_eq!(dict, [false, false, true]);
        assert!(
            rg.column(6).dictionary_page_offset().is_none(),
            "unique strings"
        );
        assert!(
            rg.column(7).dictionary_page_offset().is_some(),
            "repeated strings"
        );
        let encodings: Vec<_> = (0..4).map(|i| rg.column(i).encodings().collect()).collect();
        let delta = |e: &Vec<Encoding>| e.contains(&Encoding::DELTA_BINARY_PACKED);
        assert!(delta(&encodings[0]), "unique ints: {:?}", encodings[0]);
        assert!(
            !delta(&encodings[1]),
            "floats stay plain: {:?}",
            encodings[1]
        );
        assert!(encodings[1].contains(&Encoding::PLAIN));
        assert!(!delta(&encodings[3]), "repeating ints: {:?}", encodings[3]);
    }

    /// Long text is cut into pages of about [`DATA_PAGE_BYTES`], not the crate's 1 MiB.
    #[test]
    fn text_columns_are_written_in_small_pages() {
        let text = |i: usize| format!("{i:08} {}", "words of text ".repeat(40));
        let n = 2_000;
        let b = batch(vec![(
            "body",
            Arc::new(StringArray::from_iter_values((0..n).map(text))) as ArrayRef,
        )]);
        let file = encode(&b, &ParquetConfig::default()).unwrap();
        let reader = SerializedFileReader::new(file.clone()).unwrap();
        let mut pages = reader
            .get_row_group(0)
            .unwrap()
            .get_column_page_reader(0)
            .unwrap();
        let mut sizes = Vec::new();
        while let Some(page) = pages.get_next_page().unwrap() {
            sizes.push(page.num_values());
        }
        let row_bytes = text(0).len() + 4;
        assert!(sizes.len() >= n * row_bytes / DATA_PAGE_BYTES, "{sizes:?}");
        assert!(
            sizes
                .iter()
                .all(|&v| v as usize * row_bytes <= 2 * DATA_PAGE_BYTES),
            "{sizes:?}"
        );
        assert_eq!(read_back(file), b);
    }

    #[test]
    fn delta_encoded_columns_read_back_exactly() {
        use arrow::array::TimestampMicrosecondArray;
        // Distinct values with extreme and wrapping differences, nulls and runs of one width.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut ints: Vec<Option<i64>> = (0..20_000)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                match i % 7 {
                    0 => None,
                    1 => Some(x as i64),
                    2 => Some(i64::MIN + i),
                    3 => Some(i64::MAX - i),
                    _ => Some(i * 1_000 - 7),
                }
            })
            .collect();
        ints.extend([Some(i64::MIN), Some(i64::MAX), Some(0), Some(-1), None]);
        let times = TimestampMicrosecondArray::from(ints.clone()).with_timezone("UTC");
        let b = batch(vec![
            ("n", Arc::new(Int64Array::from(ints)) as ArrayRef),
            ("t", Arc::new(times) as ArrayRef),
        ]);
        assert_eq!(repeats(b.column(0).as_ref()), Some(false));
        let file = encode(&b, &ParquetConfig::default()).unwrap();
        let meta = SerializedFileReader::new(file.clone()).unwrap();
        for c in 0..2 {
            let enc: Vec<_> = meta.metadata().row_group(0).column(c).encodings().collect();
            assert!(enc.contains(&Encoding::DELTA_BINARY_PACKED), "{enc:?}");
        }
        assert_eq!(read_back(file), b);
    }

    #[test]
    fn empty_and_all_null_columns_keep_the_default() {
        let empty = batch(vec![(
            "id",
            Arc::new(Int64Array::from(Vec::<i64>::new())) as ArrayRef,
        )]);
        assert_eq!(repeats(empty.column(0).as_ref()), Some(true));
        let nulls = Int64Array::from(vec![None::<i64>; 100]);
        assert_eq!(repeats(&nulls), Some(true));
        encode(&empty, &ParquetConfig::default()).unwrap();
    }
}
