//! Parquet import (SPEC §3.2): files as pandas, pyarrow, polars, DuckDB or Spark write them —
//! any codec, any layout — with every column mapped to a warehouse type without silent loss:
//! integers (and uint8–32) → int64; uint64 → int64 when the file's statistics show every value
//! fits, else its digits as string; floats → float64; decimals → float64 up to precision 15, else
//! their exact digits as string; dates → timestamp at 00:00 UTC; timestamps of any unit, naive
//! (read as UTC) or with any time zone → µs UTC (ns floored to µs); every string encoding and
//! dictionary of strings → string; booleans → boolean; an all-null column → string. Lists, maps,
//! structs and binary are refused, naming the column.

use std::sync::Arc;

use arrow::array::{ArrayRef, AsArray, PrimitiveArray};
use arrow::compute::{CastOptions, cast_with_options};
use arrow::datatypes::{
    ArrowPrimitiveType, DataType, Date32Type, Date64Type, TimeUnit, TimestampMicrosecondType,
    TimestampMillisecondType, TimestampNanosecondType, TimestampSecondType,
};
use arrow::error::ArrowError;
use arrow::record_batch::RecordBatch;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::file::reader::ChunkReader;
use parquet::file::statistics::Statistics;

use super::sink::{CHUNK_ROWS, ImportError, Sink, emit};
use crate::config::ParquetConfig;
use crate::model::naming::normalize;
use crate::model::schema::{Column, ColumnType, TableSchema};

/// How one column is converted.
#[derive(Debug, Clone, Copy)]
enum Conv {
    /// Arrow's cast, failing (never nulling) on a value that does not fit.
    Cast,
    /// Days since the epoch.
    Date32,
    /// Milliseconds since the epoch.
    Date64,
    /// A timestamp of this unit, whatever its time zone (the values are UTC already).
    Ts(TimeUnit),
}

/// Reads `input` (bytes in memory, or a file read in place) as Parquet and emits
/// warehouse-typed chunks.
pub fn decode_parquet<T: ChunkReader + 'static>(
    input: T,
    cfg: &ParquetConfig,
    tx: &Sink,
) -> Result<(), ImportError> {
    let builder = ParquetRecordBatchReaderBuilder::try_new(input)
        .map_err(|e| ImportError::Input(format!("not a valid Parquet file: {e}")))?;
    let mut target = TableSchema::default();
    let mut convs = Vec::new();
    for f in builder.schema().fields() {
        let (ty, conv) = plan(f.name(), f.data_type(), &builder)?;
        let name = normalize(f.name());
        if name.is_empty() || target.get(&name).is_some() {
            return Err(ImportError::Input(format!(
                "column {:?}: {}",
                f.name(),
                if name.is_empty() {
                    "its name has no letter or digit"
                } else {
                    "its name is the same as another column's once normalised"
                }
            )));
        }
        target.columns.push(Column { name, ty });
        convs.push(conv);
    }
    let arrow_target = target.to_arrow();
    let names: Vec<String> = builder
        .schema()
        .fields()
        .iter()
        .map(|f| f.name().clone())
        .collect();
    let reader = builder
        .with_batch_size(CHUNK_ROWS)
        .build()
        .map_err(|e| ImportError::Input(e.to_string()))?;
    for batch in reader {
        let batch = batch.map_err(|e| ImportError::Input(format!("reading Parquet: {e}")))?;
        let mut columns = Vec::with_capacity(convs.len());
        for (i, (col, f)) in batch
            .columns()
            .iter()
            .zip(arrow_target.fields())
            .enumerate()
        {
            let c = convert(col, convs[i], f.data_type())
                .map_err(|e| ImportError::Input(format!("column {:?}: {e}", names[i])))?;
            columns.push(c);
        }
        let out = RecordBatch::try_new(arrow_target.clone(), columns)
            .map_err(|e| ImportError::Internal(e.to_string()))?;
        emit(out, cfg, tx)?;
    }
    Ok(())
}

/// The warehouse type of a column and how to convert it.
fn plan<T>(
    name: &str,
    dt: &DataType,
    builder: &parquet::arrow::arrow_reader::ArrowReaderBuilder<T>,
) -> Result<(ColumnType, Conv), ImportError> {
    use DataType::*;
    Ok(match dt {
        Int8 | Int16 | Int32 | Int64 | UInt8 | UInt16 | UInt32 => (ColumnType::Int64, Conv::Cast),
        UInt64 if uint64_fits(name, builder) => (ColumnType::Int64, Conv::Cast),
        UInt64 => (ColumnType::String, Conv::Cast),
        Float16 | Float32 | Float64 => (ColumnType::Float64, Conv::Cast),
        Decimal32(p, _) | Decimal64(p, _) | Decimal128(p, _) | Decimal256(p, _) if *p <= 15 => {
            (ColumnType::Float64, Conv::Cast)
        }
        Decimal32(..) | Decimal64(..) | Decimal128(..) | Decimal256(..) => {
            (ColumnType::String, Conv::Cast)
        }
        Date32 => (ColumnType::Timestamp, Conv::Date32),
        Date64 => (ColumnType::Timestamp, Conv::Date64),
        Timestamp(unit, _) => (ColumnType::Timestamp, Conv::Ts(*unit)),
        Utf8 | LargeUtf8 | Utf8View | Null => (ColumnType::String, Conv::Cast),
        Dictionary(_, v) if matches!(**v, Utf8 | LargeUtf8 | Utf8View) => {
            (ColumnType::String, Conv::Cast)
        }
        Boolean => (ColumnType::Boolean, Conv::Cast),
        other => {
            return Err(ImportError::Input(format!(
                "column {name:?} has type {other}, which has no warehouse type \
                 (lists, maps, structs and binary cannot be imported)"
            )));
        }
    })
}

/// Whether every row group's statistics show the uint64 column's values fit in int64.
fn uint64_fits<T>(
    name: &str,
    builder: &parquet::arrow::arrow_reader::ArrowReaderBuilder<T>,
) -> bool {
    let Some(idx) = builder
        .parquet_schema()
        .columns()
        .iter()
        .position(|c| c.name() == name)
    else {
        return false;
    };
    builder.metadata().row_groups().iter().all(|rg| {
        match rg.column(idx).statistics() {
            // Parquet stores uint64 as int64 bits; the logical maximum fits when it is ≥ 0.
            Some(Statistics::Int64(s)) => match s.max_opt() {
                Some(m) => *m >= 0,
                None => s.null_count_opt() == Some(rg.num_rows() as u64), // all null
            },
            _ => rg.num_rows() == 0,
        }
    })
}

fn convert(col: &ArrayRef, conv: Conv, to: &DataType) -> Result<ArrayRef, ArrowError> {
    let strict = CastOptions {
        safe: false,
        ..Default::default()
    };
    Ok(match conv {
        Conv::Cast => cast_with_options(col, to, &strict)?,
        Conv::Date32 => micros::<Date32Type>(col, |d| (d as i64).checked_mul(86_400_000_000))?,
        Conv::Date64 => micros::<Date64Type>(col, |ms| ms.checked_mul(1000))?,
        Conv::Ts(TimeUnit::Second) => {
            micros::<TimestampSecondType>(col, |s| s.checked_mul(1_000_000))?
        }
        Conv::Ts(TimeUnit::Millisecond) => {
            micros::<TimestampMillisecondType>(col, |ms| ms.checked_mul(1000))?
        }
        Conv::Ts(TimeUnit::Microsecond) => micros::<TimestampMicrosecondType>(col, Some)?,
        Conv::Ts(TimeUnit::Nanosecond) => {
            micros::<TimestampNanosecondType>(col, |ns| Some(ns.div_euclid(1000)))?
        }
    })
}

/// A UTC µs timestamp array from another primitive array, value by value.
fn micros<T: ArrowPrimitiveType>(
    col: &ArrayRef,
    f: impl Fn(T::Native) -> Option<i64>,
) -> Result<ArrayRef, ArrowError> {
    let a = col.as_primitive::<T>();
    let out: PrimitiveArray<TimestampMicrosecondType> = a.try_unary(|v| {
        f(v).ok_or_else(|| ArrowError::ComputeError("a date or time is out of range".into()))
    })?;
    Ok(Arc::new(out.with_timezone("UTC")))
}
