//! Import of CSV, NDJSON or Parquet into a named warehouse table, with the naming and typing
//! rules of events (snake_case names, int64 → float64 → string widening, nested JSON flattened).
//! Files are written as the input is read (bounded memory) and committed in one catalog
//! transaction at the end: on any error nothing is committed and the written objects are
//! removed, so an import is all or nothing.

use std::io::Read;
use std::sync::Arc;

use arrow::record_batch::RecordBatch;
use object_store::{ObjectStore, ObjectStoreExt};

use super::buffer::TableBuffer;
use super::layout::DataFilePath;
use super::writer;
use crate::catalog::{Catalog, NewDataFile};
use crate::config::ParquetConfig;
use crate::model::TeamId;
use crate::model::flatten::object_cells;
use crate::model::naming::normalize;
use crate::model::schema::{ColumnType, TableSchema};
use crate::model::time::parse_time;
use crate::model::value::{Cell, Value};

/// Input formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImportFormat {
    /// Header row, then values, separated by this byte (`,` by default).
    Csv(u8),
    /// One JSON object per line.
    Ndjson,
    /// A Parquet file.
    Parquet,
}

impl ImportFormat {
    /// From a name (`csv`, `ndjson`/`jsonl`, `parquet`) or a file extension.
    pub fn parse(s: &str) -> Option<ImportFormat> {
        Some(match s.to_ascii_lowercase().as_str() {
            "csv" => ImportFormat::Csv(b','),
            "ndjson" | "jsonl" | "json" => ImportFormat::Ndjson,
            "parquet" | "pq" => ImportFormat::Parquet,
            _ => return None,
        })
    }

    /// CSV with another delimiter: one ASCII character other than a quote or a line break, or
    /// `tab`. `None` for other formats or an unusable delimiter.
    pub fn with_delimiter(self, d: &str) -> Option<ImportFormat> {
        let byte = match d {
            "tab" | "\t" | "\t\t" => b'\t',
            d if d.len() == 1 && d.is_ascii() && !matches!(d, "\"" | "\n" | "\r") => {
                d.as_bytes()[0]
            }
            _ => return None,
        };
        matches!(self, ImportFormat::Csv(_)).then_some(ImportFormat::Csv(byte))
    }
}

/// Why an import was refused; nothing was committed.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// The input is malformed or has a value that cannot be stored.
    #[error("{0}")]
    Input(String),
    /// Storage or catalog failure.
    #[error("import failed: {0}")]
    Internal(String),
}

/// What an import did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ImportStats {
    /// Warehouse table name.
    pub table: String,
    /// Rows imported.
    pub rows: u64,
    /// Files committed.
    pub files: usize,
}

/// Rows per written file.
pub(super) const CHUNK_ROWS: usize = 100_000;

/// Where imports go.
pub struct Importer<'a> {
    /// The catalog.
    pub catalog: &'a Arc<Catalog>,
    /// The warehouse.
    pub store: &'a Arc<dyn ObjectStore>,
    /// Encoding.
    pub parquet: &'a ParquetConfig,
    /// Object path prefix.
    pub prefix: &'a str,
}

/// What an import reads.
pub enum Source {
    /// Bytes already in memory (an HTTP body, bounded by `ingest.max_import_body`).
    Bytes(bytes::Bytes),
    /// A file (the CLI's). Parquet is read in place — the footer, then one row group's pages at
    /// a time — so a file of any size imports in the memory of a few chunks; CSV and NDJSON are
    /// read through a buffer.
    File(std::fs::File),
}

impl Source {
    /// The source as a byte stream.
    pub(super) fn into_read(self) -> Box<dyn Read + Send> {
        match self {
            Source::Bytes(b) => Box::new(std::io::Cursor::new(b)),
            Source::File(f) => Box::new(std::io::BufReader::new(f)),
        }
    }
}

/// Imports `input` into `table` of `team`.
pub async fn import(
    to: &Importer<'_>,
    team: &TeamId,
    table: &str,
    format: ImportFormat,
    input: Source,
) -> Result<ImportStats, ImportError> {
    let Importer {
        catalog,
        store,
        parquet,
        prefix,
    } = *to;
    let name = normalize(table);
    if name.is_empty() {
        return Err(ImportError::Input(format!(
            "{table:?} has no letter or digit to make a table name from"
        )));
    }
    // Decode and encode on a blocking thread; objects are put from here as they come.
    let (tx, mut rx) = tokio::sync::mpsc::channel::<(RecordBatch, bytes::Bytes)>(2);
    let cfg = parquet.clone();
    let decoder = tokio::task::spawn_blocking(move || decode(format, input, &cfg, &tx));
    let mut written: Vec<NewDataFile> = Vec::new();
    let date = chrono::Utc::now().date_naive();
    let mut failure = None;
    while let Some((batch, data)) = rx.recv().await {
        let path = DataFilePath::new(
            prefix,
            team.as_str(),
            &name,
            date,
            &super::layout::new_file_id(),
        );
        let meta = NewDataFile {
            table: name.clone(),
            path: path.as_str().to_string(),
            partition: format!("date={}", date.format("%Y-%m-%d")),
            rows: batch.num_rows() as u64,
            bytes: data.len() as u64,
            min_ts: None,
            max_ts: None,
            schema: TableSchema::from_arrow(&batch.schema()),
        };
        // Reserved before it exists, so no orphan collector deletes it before the commit.
        let (cat, reserved) = (catalog.clone(), vec![meta.path.clone()]);
        let reserved = tokio::task::spawn_blocking(move || cat.reserve_objects(&reserved))
            .await
            .map_err(|e| ImportError::Internal(e.to_string()))
            .and_then(|r| r.map_err(|e| ImportError::Internal(e.to_string())));
        if let Err(e) = reserved {
            failure = Some(e);
            break;
        }
        written.push(meta);
        if let Err(e) = crate::store::create(store.as_ref(), &path.0, data).await {
            failure = Some(ImportError::Internal(e.to_string()));
            break;
        }
    }
    drop(rx);
    let decoded = decoder
        .await
        .map_err(|e| ImportError::Internal(e.to_string()))?;
    let result = match (failure, decoded) {
        (Some(e), _) | (None, Err(e)) => Err(e),
        (None, Ok(())) => {
            let (cat, t, files) = (catalog.clone(), team.clone(), written.clone());
            tokio::task::spawn_blocking(move || cat.commit_files(&t, &files, 0))
                .await
                .map_err(|e| ImportError::Internal(e.to_string()))?
                .map_err(|e| ImportError::Internal(e.to_string()))
        }
    };
    if let Err(e) = result {
        for f in &written {
            let _ = store
                .delete(&object_store::path::Path::from(f.path.as_str()))
                .await;
        }
        let (cat, paths) = (
            catalog.clone(),
            written.iter().map(|f| f.path.clone()).collect::<Vec<_>>(),
        );
        let _ = tokio::task::spawn_blocking(move || cat.release_objects(&paths)).await;
        return Err(e);
    }
    Ok(ImportStats {
        table: name,
        rows: written.iter().map(|f| f.rows).sum(),
        files: written.len(),
    })
}

pub(super) type Sink = tokio::sync::mpsc::Sender<(RecordBatch, bytes::Bytes)>;

pub(super) fn emit(batch: RecordBatch, cfg: &ParquetConfig, tx: &Sink) -> Result<(), ImportError> {
    let data = writer::encode(&batch, cfg).map_err(|e| ImportError::Internal(e.to_string()))?;
    tx.blocking_send((batch, data))
        .map_err(|_| ImportError::Internal("upload stopped".into()))
}

fn decode(
    format: ImportFormat,
    input: Source,
    cfg: &ParquetConfig,
    tx: &Sink,
) -> Result<(), ImportError> {
    use super::import_parquet::decode_parquet;
    match (format, input) {
        (ImportFormat::Parquet, Source::Bytes(b)) => decode_parquet(b, cfg, tx),
        (ImportFormat::Parquet, Source::File(f)) => decode_parquet(f, cfg, tx),
        (ImportFormat::Csv(delimiter), input) => {
            decode_rows(csv_rows(input.into_read(), delimiter)?, cfg, tx)
        }
        (ImportFormat::Ndjson, input) => decode_rows(ndjson_rows(input.into_read()), cfg, tx),
    }
}

/// Buffers rows like a team actor does (same columns and widening) and writes chunk files.
fn decode_rows(
    rows: impl Iterator<Item = Result<Vec<Cell>, ImportError>>,
    cfg: &ParquetConfig,
    tx: &Sink,
) -> Result<(), ImportError> {
    let mut buf = TableBuffer::default();
    for row in rows {
        buf.append(&row?)
            .map_err(|e| ImportError::Internal(e.to_string()))?;
        if buf.rows() >= CHUNK_ROWS {
            emit(buf.take_batch(), cfg, tx)?;
        }
    }
    if buf.rows() > 0 {
        emit(buf.take_batch(), cfg, tx)?;
    }
    Ok(())
}

fn ndjson_rows(
    input: Box<dyn Read + Send>,
) -> impl Iterator<Item = Result<Vec<Cell>, ImportError>> {
    use std::io::BufRead;
    std::io::BufReader::new(input)
        .lines()
        .enumerate()
        .filter_map(|(i, line)| {
            let line_no = i + 1;
            let line = match line {
                Ok(l) => l,
                Err(e) => return Some(Err(ImportError::Input(format!("line {line_no}: {e}")))),
            };
            if line.trim().is_empty() {
                return None;
            }
            Some(match object_cells(&line, &format!("line {line_no}")) {
                Ok(cells) => Ok(cells),
                Err(e) if e.code == "invalid_body" => Err(ImportError::Input(format!(
                    "line {line_no}: each line must be a JSON object"
                ))),
                Err(e) => Err(ImportError::Input(format!("line {line_no}: {}", e.message))),
            })
        })
}

/// CSV: every field is text, so column types are inferred from the whole column first
/// (int64, float64, boolean, timestamp, else string; empty fields are null). The input is read
/// into memory once for that.
fn csv_rows(
    mut input: Box<dyn Read + Send>,
    delimiter: u8,
) -> Result<impl Iterator<Item = Result<Vec<Cell>, ImportError>>, ImportError> {
    let mut text = Vec::new();
    input
        .read_to_end(&mut text)
        .map_err(|e| ImportError::Input(e.to_string()))?;
    // A UTF-8 byte-order mark (spreadsheets write one) is not part of the first header.
    let body = text.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(&text);
    let mut reader = csv::ReaderBuilder::new()
        .flexible(false)
        .delimiter(delimiter)
        .from_reader(body);
    let headers: Vec<String> = reader
        .headers()
        .map_err(|e| ImportError::Input(format!("header row: {e}")))?
        .iter()
        .map(normalize)
        .collect();
    if let Some(bad) = headers.iter().position(String::is_empty) {
        return Err(ImportError::Input(format!(
            "column {} of the header has no letter or digit to make a name from",
            bad + 1
        )));
    }
    let mut records = Vec::new();
    let mut types: Vec<Option<ColumnType>> = vec![None; headers.len()];
    for (i, rec) in reader.records().enumerate() {
        let rec = rec.map_err(|e| ImportError::Input(format!("line {}: {e}", i + 2)))?;
        for (j, field) in rec.iter().enumerate() {
            if let Some(t) = infer(field) {
                types[j] = Some(types[j].map_or(t, |old| old.widen(t)));
            }
        }
        records.push(rec);
    }
    Ok(records.into_iter().map(move |rec| {
        Ok(rec
            .iter()
            .enumerate()
            .map(|(j, f)| {
                (
                    headers[j].clone(),
                    typed(f, types[j].unwrap_or(ColumnType::String)),
                )
            })
            .collect())
    }))
}

fn infer(field: &str) -> Option<ColumnType> {
    if field.is_empty() {
        None
    } else if field.parse::<i64>().is_ok() {
        Some(ColumnType::Int64)
    } else if field.parse::<f64>().is_ok_and(f64::is_finite) {
        // Finite only: `inf`, `NaN`, `1e400` stay text (JSON has no such numbers).
        Some(ColumnType::Float64)
    } else if field == "true" || field == "false" {
        Some(ColumnType::Boolean)
    } else if parse_time(&serde_json::Value::String(field.into())).is_some() {
        Some(ColumnType::Timestamp)
    } else {
        Some(ColumnType::String)
    }
}

fn typed(field: &str, ty: ColumnType) -> Value {
    if field.is_empty() {
        return Value::Null;
    }
    match ty {
        ColumnType::Int64 => field
            .parse()
            .map(Value::Int)
            .unwrap_or(Value::Str(field.into())),
        // Integers stay integers (exact, as in events); the buffer stores them losslessly.
        ColumnType::Float64 => match field.parse::<i64>() {
            Ok(i) => Value::Int(i),
            Err(_) => field
                .parse()
                .ok()
                .filter(|f: &f64| f.is_finite())
                .map_or(Value::Str(field.into()), Value::Float),
        },
        ColumnType::Boolean => Value::Bool(field == "true"),
        ColumnType::Timestamp => parse_time(&serde_json::Value::String(field.into()))
            .map(Value::Ts)
            .unwrap_or(Value::Str(field.into())),
        ColumnType::String => Value::Str(field.into()),
    }
}
