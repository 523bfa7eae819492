//! `--store DIR` (feature `store`): the stored floor. Beside the durable floor's fsync'd log,
//! each NDJSON batch is decoded into Arrow columns in one pass from its text (arrow-json's
//! decoder) under one schema, inferred from the first batch, and a writer thread writes what
//! was acknowledged as Parquet to `DIR` each time 100,000 rows are waiting (stowage's
//! `flush.max_rows`): one table, ZSTD level 3, dictionaries and statistics on, as stowage's
//! files are. Nothing else: no ids, no dedup, no column names of SPEC §4, no second table, no
//! catalog, no budgets. What it reaches against DuckDB is what storing the events at all leaves
//! any design with fsync'd acks on the machine (BENCHMARKS.md, twenty-seventh session).

use std::io;
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex, OnceLock};

use arrow_array::RecordBatch;
use arrow_json::ReaderBuilder;
use arrow_schema::{DataType, Field, Fields, Schema, SchemaRef};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;
use tokio::sync::Notify;

/// Rows that make a file (stowage's `flush.max_rows`).
const FILE_ROWS: usize = 100_000;

/// Most rows waiting while a file is written: a request that finds this many waits for the
/// writer before its answer, so the rate measured is one the writer keeps up with (stowage's
/// budget does the same), not one that piles rows up in memory.
const MOST_WAITING: usize = FILE_ROWS;

/// Batches decoded and acknowledged, not yet written.
#[derive(Default)]
struct Waiting {
    batches: Vec<RecordBatch>,
    rows: usize,
}

/// The table being kept.
pub struct Store {
    schema: OnceLock<SchemaRef>,
    waiting: Mutex<Waiting>,
    ready: Condvar,
    /// Told when the writer takes the rows waiting.
    room: Notify,
}

impl Store {
    /// Creates `dir` and starts the writer thread.
    pub fn open(dir: &Path) -> io::Result<Arc<Self>> {
        std::fs::create_dir_all(dir)?;
        let store = Arc::new(Store {
            schema: OnceLock::new(),
            waiting: Mutex::new(Waiting::default()),
            ready: Condvar::new(),
            room: Notify::new(),
        });
        let writer = Arc::clone(&store);
        let dir = dir.to_path_buf();
        std::thread::Builder::new()
            .name("bare-store".into())
            .spawn(move || writer.write_files(&dir))?;
        Ok(store)
    }

    /// The rows of an NDJSON `body`, or why it does not decode under the table's schema (the
    /// first body's, inferred from all its lines; a later field not in it is left out).
    pub fn decode(&self, body: &[u8]) -> Result<RecordBatch, String> {
        let schema = match self.schema.get() {
            Some(s) => s.clone(),
            None => {
                let (schema, _) =
                    arrow_json::reader::infer_json_schema(body, None).map_err(|e| e.to_string())?;
                let fields = writable(schema.fields());
                self.schema
                    .get_or_init(|| Arc::new(Schema::new(fields)))
                    .clone()
            }
        };
        let lines = body.iter().filter(|b| **b == b'\n').count() + 1;
        let mut decoder = ReaderBuilder::new(schema)
            .with_batch_size(lines)
            .build_decoder()
            .map_err(|e| e.to_string())?;
        let read = decoder.decode(body).map_err(|e| e.to_string())?;
        if read != body.len() {
            return Err(format!("decoded {read} of {} bytes", body.len()));
        }
        match decoder.flush().map_err(|e| e.to_string())? {
            Some(batch) => Ok(batch),
            None => Err("no rows".into()),
        }
    }

    /// Queues logged rows for the writer, once fewer than [`MOST_WAITING`] wait.
    pub async fn keep(&self, batch: RecordBatch) {
        loop {
            let room = self.room.notified();
            tokio::pin!(room);
            room.as_mut().enable();
            {
                let mut w = self.waiting.lock().expect("store lock");
                if w.rows < MOST_WAITING {
                    w.rows += batch.num_rows();
                    w.batches.push(batch);
                    if w.rows >= FILE_ROWS {
                        self.ready.notify_one();
                    }
                    return;
                }
            }
            room.await;
        }
    }

    /// The writer thread: a file each time `FILE_ROWS` rows wait.
    fn write_files(&self, dir: &Path) {
        for n in 0u64.. {
            let batches = {
                let mut w = self.waiting.lock().expect("store lock");
                while w.rows < FILE_ROWS {
                    w = self.ready.wait(w).expect("store lock");
                }
                w.rows = 0;
                std::mem::take(&mut w.batches)
            };
            self.room.notify_waiters();
            // Written under another name and renamed when whole: a file being written when
            // the server is stopped is not taken for one.
            let part = dir.join(format!("{n:08}.part"));
            let path = dir.join(format!("{n:08}.parquet"));
            if let Err(e) = write_file(&part, &batches)
                .and_then(|()| std::fs::rename(&part, &path).map_err(|e| e.to_string()))
            {
                eprintln!("bare_axum: {}: {e}", path.display());
            }
        }
    }
}

/// `fields` without the objects that were always empty (Parquet has no empty groups); the
/// decoder leaves out what the schema does not name.
fn writable(fields: &Fields) -> Vec<Field> {
    fields
        .iter()
        .filter_map(|f| match f.data_type() {
            DataType::Struct(inner) => {
                let inner = writable(inner);
                (!inner.is_empty()).then(|| {
                    f.as_ref()
                        .clone()
                        .with_data_type(DataType::Struct(inner.into()))
                })
            }
            _ => Some(f.as_ref().clone()),
        })
        .collect()
}

/// Writes `batches` (one schema) to `path` as one Parquet file.
fn write_file(path: &Path, batches: &[RecordBatch]) -> Result<(), String> {
    let Some(first) = batches.first() else {
        return Ok(());
    };
    let props = WriterProperties::builder()
        .set_compression(Compression::ZSTD(
            ZstdLevel::try_new(3).map_err(|e| e.to_string())?,
        ))
        .set_max_row_group_row_count(Some(FILE_ROWS))
        .build();
    let file = std::fs::File::create(path).map_err(|e| e.to_string())?;
    let mut writer =
        ArrowWriter::try_new(file, first.schema(), Some(props)).map_err(|e| e.to_string())?;
    for b in batches {
        writer.write(b).map_err(|e| e.to_string())?;
    }
    writer.close().map_err(|e| e.to_string())?;
    Ok(())
}
