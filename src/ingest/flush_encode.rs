//! A flush's tables encoded as Parquet files (one per table and `received_at` day), on blocking
//! threads, several tables at once. Under load a flush is always running and competes for the
//! cores with the requests that fill the next one; encoded on one thread it got a third of two
//! cores, and the rows it held (counted against the team's budget until the commit) turned
//! requests away to wait for room. On as many threads as there are cores (those no other flush
//! is encoding on), the tables shared out largest first, it gets as much CPU as the requests do
//! and ends sooner (BENCHMARKS.md, twenty-third session).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};

use arrow::array::{Array, AsArray, BooleanArray};
use arrow::compute::filter_record_batch;
use arrow::datatypes::TimestampMicrosecondType;
use arrow::record_batch::RecordBatch;
use bytes::Bytes;

use super::admission::EncodingGauge;
use crate::catalog::NewDataFile;
use crate::config::ParquetConfig;
use crate::model::TeamId;
use crate::model::schema::TableSchema;
use crate::warehouse::layout::{self, DataFilePath};
use crate::warehouse::unify::align_widened;
use crate::warehouse::writer;

const MICROS_PER_DAY: i64 = 86_400_000_000;

/// An encoded file and its catalog entry.
pub struct EncodedFile {
    pub meta: NewDataFile,
    pub data: Bytes,
}

/// Where the files go and how they are encoded.
pub struct EncodeTarget<'a> {
    pub parquet: &'a ParquetConfig,
    /// Object path prefix.
    pub prefix: &'a str,
    pub team: &'a TeamId,
}

/// A table's buffered rows taken for a flush: in ingestion order, in batches whose schemas may
/// differ (older ones narrower).
#[derive(Clone)]
pub struct TableRows {
    pub table: String,
    pub batches: Vec<RecordBatch>,
}

/// A table of the flush, numbered by its place in the job (files come back in that order).
struct JobTable {
    at: usize,
    rows: TableRows,
}

/// The bytes each thread's encoder holds, reported to the flush's gauge as their sum.
struct Lanes {
    gauge: EncodingGauge,
    held: Mutex<Vec<u64>>,
}

impl Lanes {
    fn set(&self, lane: usize, bytes: u64) {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        held[lane] = bytes;
        self.gauge.set(held.iter().sum());
    }
}

/// Encoding threads the running flushes use between them.
static ENCODING: AtomicUsize = AtomicUsize::new(0);

/// The cores, read once.
fn cores() -> usize {
    static CORES: OnceLock<usize> = OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// A flush's threads counted in [`ENCODING`] while it encodes.
struct Encoding(usize);

impl Encoding {
    /// Up to `wanted` threads: one always, more only from cores no other flush holds. Read and
    /// taken in one step, so two flushes starting together do not both count the same cores.
    fn claim(wanted: usize) -> Self {
        let mut threads = 1;
        let _ = ENCODING.fetch_update(Ordering::AcqRel, Ordering::Acquire, |in_use| {
            threads = wanted.min(cores().saturating_sub(in_use)).max(1);
            Some(in_use + threads)
        });
        Encoding(threads)
    }
}

impl Drop for Encoding {
    fn drop(&mut self) {
        ENCODING.fetch_sub(self.0, Ordering::AcqRel);
    }
}

/// Encodes every table of a flush, on up to as many blocking threads as there are cores not
/// taken by other flushes (one at least); the files come back in the order of `tables`. Every
/// thread is waited for, also when one fails, before this returns (if this future is dropped
/// instead — only at shutdown — the threads run on and may still report to `gauge`).
pub async fn encode_tables(
    target: EncodeTarget<'_>,
    tables: Vec<TableRows>,
    gauge: &EncodingGauge,
) -> Result<Vec<EncodedFile>, String> {
    // Teams flushing together keep a thread each, as before, and take no more than the cores
    // between them beyond that.
    let encoding = Encoding::claim(tables.len());
    let groups = share_out(tables, encoding.0);
    let lanes = std::sync::Arc::new(Lanes {
        gauge: gauge.clone(),
        held: Mutex::new(vec![0; groups.len()]),
    });
    let tasks: Vec<_> = groups
        .into_iter()
        .enumerate()
        .map(|(lane, group)| {
            let (parquet, prefix) = (target.parquet.clone(), target.prefix.to_string());
            let (team, lanes) = (target.team.clone(), lanes.clone());
            tokio::task::spawn_blocking(move || {
                let target = EncodeTarget {
                    parquet: &parquet,
                    prefix: &prefix,
                    team: &team,
                };
                encode_group(&target, &group, &mut |bytes| lanes.set(lane, bytes))
            })
        })
        .collect();
    let mut results = Vec::with_capacity(tasks.len());
    for task in tasks {
        results.push(task.await);
    }
    let mut files = Vec::new();
    for r in results {
        files.extend(r.map_err(|e| format!("parquet encoding panicked: {e}"))??);
    }
    // Stable: a table's days stay in the order they were encoded.
    files.sort_by_key(|(at, _)| *at);
    Ok(files.into_iter().map(|(_, f)| f).collect())
}

/// `tables` in at most `lanes` groups of about equal bytes: largest first, each to the group
/// holding the fewest so far.
fn share_out(tables: Vec<TableRows>, lanes: usize) -> Vec<Vec<JobTable>> {
    let lanes = lanes.clamp(1, tables.len().max(1));
    let mut tables: Vec<(usize, JobTable)> = tables
        .into_iter()
        .enumerate()
        .map(|(at, rows)| {
            let bytes = rows
                .batches
                .iter()
                .map(RecordBatch::get_array_memory_size)
                .sum();
            (bytes, JobTable { at, rows })
        })
        .collect();
    tables.sort_by_key(|(bytes, _)| std::cmp::Reverse(*bytes));
    let mut groups: Vec<(usize, Vec<JobTable>)> = (0..lanes).map(|_| (0, Vec::new())).collect();
    for (bytes, table) in tables {
        let least = groups
            .iter_mut()
            .min_by_key(|(held, _)| *held)
            .expect("at least one group");
        least.0 += bytes;
        least.1.push(table);
    }
    groups
        .into_iter()
        .map(|(_, g)| g)
        .filter(|g| !g.is_empty())
        .collect()
}

/// Encodes one group's tables, one file per `received_at` day; `held` is told the bytes this
/// thread's encoder and files hold. A table's batches (the buffer's chunks) are aligned to
/// their merged schema and written one after another, never joined into one batch: a flush
/// holds its rows once, not twice.
fn encode_group(
    target: &EncodeTarget,
    tables: &[JobTable],
    held: &mut dyn FnMut(u64),
) -> Result<Vec<(usize, EncodedFile)>, String> {
    let mut out: Vec<(usize, EncodedFile)> = Vec::new();
    for JobTable {
        at,
        rows: TableRows {
            table: name,
            batches,
        },
    } in tables
    {
        let aligned = align_widened(batches)
            .map_err(|e| format!("aligning the buffered batches of {name} failed: {e}"))?;
        let mut days: Vec<(i64, Vec<RecordBatch>)> = Vec::new();
        for batch in &aligned {
            for (day, part) in split_by_day(batch) {
                match days.iter_mut().find(|(d, _)| *d == day) {
                    Some((_, parts)) => parts.push(part),
                    None => days.push((day, vec![part])),
                }
            }
        }
        drop(aligned);
        for (day, parts) in days {
            let rows: usize = parts.iter().map(RecordBatch::num_rows).sum();
            let date = chrono::DateTime::from_timestamp_micros(day * MICROS_PER_DAY)
                .expect("day is in range")
                .date_naive();
            let file_id = layout::new_file_id();
            let path = DataFilePath::new(target.prefix, target.team.as_str(), name, date, &file_id);
            // Files already encoded stay in memory until the puts.
            let done: u64 = out.iter().map(|(_, f)| f.meta.bytes).sum();
            let data = writer::encode_batches(&parts, target.parquet, &mut |bytes| {
                held(done + bytes as u64)
            })
            .map_err(|e| format!("parquet encoding of {name} ({rows} rows) failed: {e}"))?;
            let (min_ts, max_ts) = ts_range(&parts);
            let meta = NewDataFile {
                table: name.clone(),
                path: path.as_str().to_string(),
                partition: format!("date={}", date.format("%Y-%m-%d")),
                rows: rows as u64,
                bytes: data.len() as u64,
                min_ts,
                max_ts,
                schema: TableSchema::from_arrow(&parts[0].schema()),
            };
            out.push((*at, EncodedFile { meta, data }));
        }
    }
    Ok(out)
}

/// Splits rows by the UTC day of `received_at`, keeping row order within each day.
fn split_by_day(batch: &RecordBatch) -> Vec<(i64, RecordBatch)> {
    let Some(col) = batch.column_by_name("received_at") else {
        return vec![(0, batch.clone())];
    };
    let ts = col.as_primitive::<TimestampMicrosecondType>();
    let days: Vec<i64> = ts
        .iter()
        .map(|v| v.unwrap_or(0).div_euclid(MICROS_PER_DAY))
        .collect();
    let first = days.first().copied().unwrap_or(0);
    if days.iter().all(|d| *d == first) {
        return vec![(first, batch.clone())];
    }
    let mut distinct: Vec<i64> = Vec::new();
    for d in &days {
        if !distinct.contains(d) {
            distinct.push(*d);
        }
    }
    distinct
        .into_iter()
        .map(|day| {
            let mask = BooleanArray::from(days.iter().map(|d| *d == day).collect::<Vec<_>>());
            (
                day,
                filter_record_batch(batch, &mask).expect("mask matches batch length"),
            )
        })
        .collect()
}

/// The least and greatest `timestamp` over `batches`.
fn ts_range(batches: &[RecordBatch]) -> (Option<i64>, Option<i64>) {
    let (mut lo, mut hi) = (None::<i64>, None::<i64>);
    for batch in batches {
        if let Some(col) = batch.column_by_name("timestamp")
            && col.null_count() < col.len()
        {
            let ts = col.as_primitive::<TimestampMicrosecondType>();
            lo = lo.into_iter().chain(arrow::compute::min(ts)).min();
            hi = hi.into_iter().chain(arrow::compute::max(ts)).max();
        }
    }
    (lo, hi)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::model::value::{Cell, Value};
    use crate::warehouse::buffer::TableBuffer;

    fn rows() -> Vec<Vec<Cell>> {
        let c = |n: &str, v: Value| (crate::model::value::Name::from(n.to_string()), v);
        vec![
            vec![c("n", Value::Int(1)), c("k", Value::Int(7))],
            vec![c("n", Value::Int(9_007_199_254_740_993))],
            vec![c("n", Value::Float(1.5)), c("s", Value::Str("x".into()))],
            vec![c("n", Value::Str("n/a".into())), c("k", Value::Int(8))],
        ]
    }

    /// Chunks frozen at different widths and types are written one after another under their
    /// merged schema, and read back as the buffer holding all the rows at once would write them.
    #[test]
    fn chunks_of_different_schemas_encode_as_one_buffer_would() {
        let cfg = ParquetConfig::default();
        let chunks: Vec<RecordBatch> = rows()
            .iter()
            .map(|r| {
                let mut b = TableBuffer::default();
                b.append(r).unwrap();
                b.take_batch()
            })
            .collect();
        let mut whole = TableBuffer::default();
        for r in rows() {
            whole.append(&r).unwrap();
        }
        let whole = whole.take_batch();

        let aligned = align_widened(&chunks).unwrap();
        assert!(aligned.iter().all(|b| b.schema() == aligned[0].schema()));
        let mut most = 0;
        let file = writer::encode_batches(&aligned, &cfg, &mut |b| most = most.max(b)).unwrap();
        assert!(
            most >= file.len(),
            "the encoder's bytes are reported: {most} < the file's {}",
            file.len()
        );
        let back = writer::read_back(file);
        assert_eq!(back.num_rows(), 4);
        for field in whole.schema().fields() {
            let name = field.name();
            let got = back.column_by_name(name).unwrap();
            let want = whole.column_by_name(name).unwrap();
            assert_eq!(got.data_type(), want.data_type(), "{name}");
            assert_eq!(got.as_ref(), want.as_ref(), "{name}");
        }
        assert!(writer::encode_batches(&[], &cfg, &mut |_| {}).is_err());
    }

    /// A table of `rows` rows whose `n` counts from `from`.
    fn table(name: &str, from: i64, rows: i64) -> TableRows {
        let n: arrow::array::ArrayRef = Arc::new(arrow::array::Int64Array::from_iter_values(
            from..from + rows,
        ));
        let batch = RecordBatch::try_from_iter([("n", n)]).unwrap();
        TableRows {
            table: name.to_string(),
            batches: vec![batch],
        }
    }

    /// Tables shared out over several threads come back as files in the order of the job,
    /// each holding its own table's rows, and the threads' encoders were counted.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn tables_encoded_at_once_come_back_in_order() {
        let sizes = [10, 5_000, 20, 3_000, 1];
        let tables: Vec<_> = sizes
            .iter()
            .enumerate()
            .map(|(i, &rows)| table(&format!("t{i}"), i as i64 * 10_000, rows))
            .collect();
        assert!(
            share_out(tables.clone(), 2).len() == 2,
            "two lanes for five tables"
        );
        let admission = super::super::admission::Admission::new(1 << 30, 1 << 30);
        let team = TeamId::from("t");
        let gauge = admission.encoding_gauge(&team);
        let cfg = ParquetConfig::default();
        let target = EncodeTarget {
            parquet: &cfg,
            prefix: "p",
            team: &team,
        };
        let files = encode_tables(target, tables, &gauge).await.unwrap();
        let names: Vec<&str> = files.iter().map(|f| f.meta.table.as_str()).collect();
        assert_eq!(names, ["t0", "t1", "t2", "t3", "t4"]);
        for (i, f) in files.iter().enumerate() {
            let back = writer::read_back(f.data.clone());
            assert_eq!(back.num_rows() as i64, sizes[i], "{}", f.meta.table);
            let n = back.column(0).as_primitive::<arrow::datatypes::Int64Type>();
            assert_eq!(n.value(0), i as i64 * 10_000, "{}'s own rows", f.meta.table);
            assert_eq!(f.meta.rows as i64, sizes[i]);
        }
        assert!(
            admission.team_measured_bytes(&team) > 0,
            "the encoders' bytes were reported"
        );
    }

    #[test]
    fn the_largest_tables_go_to_different_lanes() {
        let groups = share_out(
            vec![table("a", 0, 1), table("b", 0, 4_000), table("c", 0, 4_000)],
            2,
        );
        let names: Vec<Vec<&str>> = groups
            .iter()
            .map(|g| g.iter().map(|t| t.rows.table.as_str()).collect())
            .collect();
        assert_eq!(names, [vec!["b", "a"], vec!["c"]]);
        assert_eq!(
            share_out(vec![table("a", 0, 1)], 8).len(),
            1,
            "a lane a table at most"
        );
        assert!(share_out(Vec::new(), 2).is_empty());
    }

    #[test]
    fn time_range_spans_every_chunk() {
        use arrow::array::TimestampMicrosecondArray;
        let batch = |v: Vec<Option<i64>>| {
            RecordBatch::try_from_iter([(
                "timestamp",
                Arc::new(TimestampMicrosecondArray::from(v)) as arrow::array::ArrayRef,
            )])
            .unwrap()
        };
        let parts = [
            batch(vec![Some(5), None]),
            batch(vec![None]),
            batch(vec![Some(2), Some(9)]),
        ];
        assert_eq!(ts_range(&parts), (Some(2), Some(9)));
        assert_eq!(ts_range(&parts[1..2]), (None, None));
    }
}
