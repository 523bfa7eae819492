//! CSV and NDJSON rows → warehouse chunks: each line (or record) becomes typed cells — NDJSON by
//! the events' flattening, CSV by inferring each column's type from the whole column — buffered
//! like a team actor buffers events, and emitted every [`CHUNK_ROWS`] rows.

use std::io::Read;

use super::sink::{CHUNK_ROWS, ImportError, Sink, emit};
use crate::config::ParquetConfig;
use crate::model::flatten::object_cells;
use crate::model::naming::normalize;
use crate::model::schema::ColumnType;
use crate::model::time::parse_time_text;
use crate::model::value::{Cell, Value};
use crate::warehouse::buffer::TableBuffer;

/// Buffers rows like a team actor does (same columns and widening) and writes chunk files.
pub fn decode_rows(
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

pub fn ndjson_rows(
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
pub fn csv_rows(
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
                    headers[j].clone().into(),
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
    } else if parse_time_text(field).is_some() {
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
        ColumnType::Timestamp => parse_time_text(field)
            .map(Value::Ts)
            .unwrap_or(Value::Str(field.into())),
        // Inferred types are never dates (see `infer`); text if one were.
        ColumnType::String | ColumnType::Date => Value::Str(field.into()),
    }
}
