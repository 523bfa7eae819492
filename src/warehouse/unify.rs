//! A table's batches of differing schemas brought under one: their merged (widened) schema,
//! each batch aligned to it ([`align_widened`], for a flush that writes them one after another),
//! or all of them joined into one batch ([`join`], for a team buffer gathering a chunk of the
//! small batches that batch requests build).
//!
//! A join is made for many small batches (a request's rows of one table, ~30 of them each in
//! the wide mix): columns are found by name once a run of batches with one schema (not by a
//! scan of every schema for every column), the values of integer columns are read only where
//! the merged column is float64 (to keep it as text where float64 cannot hold them), and each
//! column's pieces are copied straight into one typed builder, the rows of a batch without the
//! column as nulls, instead of making a column of nulls for each such batch and copying that
//! too.

use std::collections::HashSet;

use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, BooleanBuilder, PrimitiveBuilder, StringBuilder, new_null_array,
};
use arrow::compute::cast;
use arrow::datatypes::{
    ArrowPrimitiveType, DataType, Float64Type, Int64Type, SchemaRef, TimeUnit,
    TimestampMicrosecondType,
};
use arrow::error::ArrowError;
use arrow::record_batch::{RecordBatch, RecordBatchOptions};
use foldhash::HashMap;

use super::reader::{align, conform};
use crate::model::schema::{Column, ColumnType, TableSchema};
use crate::model::text;

/// The schema `batches` merge into: every column of a known type, in order of first
/// appearance, at the widest of its types. A float64 column is kept as text where any batch
/// stores it as text or holds integers float64 cannot hold exactly, as the buffer itself and
/// compaction keep it.
pub fn merged_schema(batches: &[RecordBatch]) -> SchemaRef {
    merge(batches).schema
}

/// `batches` under their [`merged_schema`], each aligned to it (columns it lacks are null; the
/// others are shared, not copied, unless widened).
pub fn align_widened(batches: &[RecordBatch]) -> Result<Vec<RecordBatch>, ArrowError> {
    if let [one] = batches {
        return Ok(vec![one.clone()]);
    }
    let target = merged_schema(batches);
    batches.iter().map(|b| align(b, &target)).collect()
}

/// `batches` as one batch under their [`merged_schema`], rows in the order given: what
/// [`align_widened`] and a concatenation give, each value copied once.
pub fn join(batches: &[RecordBatch]) -> Result<RecordBatch, ArrowError> {
    let merged = merge(batches);
    if merged.unknown {
        // Never built by a buffer; aligned and concatenated as the flush would, errors and all.
        let aligned: Vec<RecordBatch> = batches
            .iter()
            .map(|b| align(b, &merged.schema))
            .collect::<Result<_, _>>()?;
        return arrow::compute::concat_batches(&merged.schema, &aligned);
    }
    let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
    let mut columns = Vec::with_capacity(merged.schema.fields().len());
    for (c, field) in merged.schema.fields().iter().enumerate() {
        let to = field.data_type();
        // Each batch's piece of the column, of the column's type, or its rows as nulls.
        let pieces = batches
            .iter()
            .zip(&merged.layout_of)
            .map(|(b, &layout)| {
                let Some(i) = merged.layouts[layout][c] else {
                    return Ok(Piece::Nulls(b.num_rows()));
                };
                let piece = conform(b.column(i), to)?;
                Ok(Piece::Values(if piece.data_type() == to {
                    piece
                } else {
                    cast(&piece, to)? // a string view where strings are asked
                }))
            })
            .collect::<Result<Vec<Piece>, ArrowError>>()?;
        columns.push(concatenated(&pieces, to, rows)?);
    }
    RecordBatch::try_new_with_options(
        merged.schema,
        columns,
        &RecordBatchOptions::new().with_row_count(Some(rows)),
    )
}

/// The merged schema of some batches, and where each batch holds each of its columns.
struct Merged {
    schema: SchemaRef,
    /// Per distinct layout of the batches' columns, per merged column, the batch's column (the
    /// first of that name).
    layouts: Vec<Vec<Option<usize>>>,
    /// Per batch, its layout.
    layout_of: Vec<usize>,
    /// Whether a batch has a column of a type no table column has (such a column is left out,
    /// or fails to align where it shares a name with one of a known type).
    unknown: bool,
}

/// Merges the schemas of `batches`. Consecutive batches of one request stream mostly share a
/// schema: each distinct run of columns is looked up by name once.
fn merge(batches: &[RecordBatch]) -> Merged {
    let mut columns: Vec<Column> = Vec::new();
    let mut at: HashMap<&str, usize> = HashMap::default();
    // Per layout, per batch column, its merged column.
    let mut placed: Vec<Vec<Option<usize>>> = Vec::new();
    let mut layout_of = Vec::with_capacity(batches.len());
    let mut last: Option<&SchemaRef> = None;
    let mut unknown = false;
    for b in batches {
        let schema = b.schema_ref();
        if let Some(last) = last
            && (Arc::ptr_eq(last, schema) || last.fields() == schema.fields())
        {
            layout_of.push(placed.len() - 1);
            continue;
        }
        let mut place = Vec::with_capacity(schema.fields().len());
        for field in schema.fields() {
            let Some(ty) = ColumnType::of_field(field) else {
                place.push(None);
                unknown = true;
                continue;
            };
            let i = match at.get(field.name().as_str()) {
                Some(&i) => {
                    columns[i].ty = columns[i].ty.widen(ty);
                    i
                }
                None => {
                    at.insert(field.name(), columns.len());
                    columns.push(Column {
                        name: field.name().clone(),
                        ty,
                    });
                    columns.len() - 1
                }
            };
            place.push(Some(i));
        }
        placed.push(place);
        layout_of.push(placed.len() - 1);
        last = Some(schema);
    }
    let mut as_text = HashSet::new();
    if columns.iter().any(|c| c.ty == ColumnType::Float64) {
        for (b, &layout) in batches.iter().zip(&layout_of) {
            for (j, i) in placed[layout].iter().enumerate() {
                let Some(i) = *i else { continue };
                if columns[i].ty != ColumnType::Float64 || as_text.contains(&columns[i].name) {
                    continue;
                }
                let inexact = match b.schema_ref().field(j).data_type() {
                    DataType::Utf8 => true,
                    DataType::Int64 => b
                        .column(j)
                        .as_primitive::<Int64Type>()
                        .iter()
                        .any(|v| v.is_some_and(|v| !text::int_is_safe_in_float(v))),
                    _ => false,
                };
                if inexact {
                    as_text.insert(columns[i].name.clone());
                }
            }
        }
    }
    // Per layout, per merged column, the batch column that holds it.
    let layouts = placed
        .iter()
        .map(|place| {
            let mut of = vec![None; columns.len()];
            for (j, i) in place.iter().enumerate() {
                // The first of two columns of one name is the one a lookup by name finds.
                if let Some(i) = *i
                    && of[i].is_none()
                {
                    of[i] = Some(j);
                }
            }
            of
        })
        .collect();
    Merged {
        schema: TableSchema { columns }.to_arrow_keeping_text(&as_text),
        layouts,
        layout_of,
        unknown,
    }
}

/// A batch's part of a joined column.
enum Piece {
    /// Its values, of the column's type.
    Values(ArrayRef),
    /// As many nulls (the batch has no such column).
    Nulls(usize),
}

/// One column of `rows` rows of type `to` from `pieces`, in order.
fn concatenated(pieces: &[Piece], to: &DataType, rows: usize) -> Result<ArrayRef, ArrowError> {
    Ok(match to {
        DataType::Int64 => primitive::<Int64Type>(pieces, to, rows),
        DataType::Float64 => primitive::<Float64Type>(pieces, to, rows),
        DataType::Timestamp(TimeUnit::Microsecond, _) => {
            primitive::<TimestampMicrosecondType>(pieces, to, rows)
        }
        DataType::Boolean => {
            let mut b = BooleanBuilder::with_capacity(rows);
            for piece in pieces {
                match piece {
                    Piece::Values(a) => b.append_array(a.as_boolean()),
                    Piece::Nulls(n) => b.append_nulls(*n),
                }
            }
            Arc::new(b.finish())
        }
        DataType::Utf8 => {
            let bytes = pieces
                .iter()
                .map(|p| match p {
                    Piece::Values(a) => {
                        let offsets = a.as_string::<i32>().offsets();
                        (offsets[offsets.len() - 1] - offsets[0]) as usize
                    }
                    Piece::Nulls(_) => 0,
                })
                .sum();
            let mut b = StringBuilder::with_capacity(rows, bytes);
            for piece in pieces {
                match piece {
                    Piece::Values(a) => b.append_array(a.as_string::<i32>())?,
                    Piece::Nulls(n) => b.append_nulls(*n),
                }
            }
            Arc::new(b.finish())
        }
        _ => {
            // No table column has another type; joined the general way if one did.
            let nulls: Vec<ArrayRef> = pieces
                .iter()
                .map(|p| match p {
                    Piece::Values(a) => a.clone(),
                    Piece::Nulls(n) => new_null_array(to, *n),
                })
                .collect();
            let refs: Vec<&dyn Array> = nulls.iter().map(|a| a.as_ref()).collect();
            arrow::compute::concat(&refs)?
        }
    })
}

/// A primitive column of `rows` rows of type `to` (its time zone, for timestamps) from `pieces`.
fn primitive<T: ArrowPrimitiveType>(pieces: &[Piece], to: &DataType, rows: usize) -> ArrayRef {
    let mut b = PrimitiveBuilder::<T>::with_capacity(rows).with_data_type(to.clone());
    for piece in pieces {
        match piece {
            Piece::Values(a) => b.append_array(a.as_primitive::<T>()),
            Piece::Nulls(n) => b.append_nulls(*n),
        }
    }
    Arc::new(b.finish())
}

#[cfg(test)]
#[path = "unify_tests.rs"]
mod tests;
