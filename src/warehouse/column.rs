//! One buffered column: an Arrow builder of the column's type, and how it widens in place when a
//! value disagrees with that type (see [`super::buffer`]).

use std::sync::Arc;

use arrow::array::{
    ArrayRef, BooleanBuilder, Float64Array, Float64Builder, Int64Builder, StringArray,
    StringBuilder, TimestampMicrosecondBuilder,
};
use arrow::datatypes::{Field, Schema};
use arrow::error::ArrowError;
use arrow::record_batch::RecordBatch;

use crate::model::schema::{ColumnType, TableSchema};
use crate::model::text::{float_text, int_is_safe_in_float, to_text};
use crate::model::value::ValueRef;

/// A value of a float64 column that has seen integers.
#[derive(Debug, Clone, Copy)]
pub(super) enum Num {
    I(i64),
    F(f64),
}

impl Num {
    fn text(self) -> String {
        match self {
            Num::I(i) => i.to_string(),
            Num::F(f) => float_text(f),
        }
    }
}

/// One column's builder.
pub(super) enum ColumnBuilder {
    Bool(BooleanBuilder),
    Int(Int64Builder),
    Float(Float64Builder),
    /// float64 with integers among its values, kept exact until written.
    Mixed(Vec<Option<Num>>),
    Str(StringBuilder),
    Ts(TimestampMicrosecondBuilder),
}

impl ColumnBuilder {
    /// A builder of type `ty` holding `nulls` nulls, with room for `room` more.
    pub(super) fn new(ty: ColumnType, nulls: usize, room: usize) -> Self {
        let rows = nulls + room;
        let mut b = ColumnBuilder::with_room(ty, rows, rows * 8);
        b.append_nulls(nulls);
        b
    }

    /// An empty builder of type `ty` with room for `rows` values, and `text_bytes` of text if
    /// it is a text column.
    pub(super) fn with_room(ty: ColumnType, rows: usize, text_bytes: usize) -> Self {
        match ty {
            ColumnType::Boolean => ColumnBuilder::Bool(BooleanBuilder::with_capacity(rows)),
            ColumnType::Int64 => ColumnBuilder::Int(Int64Builder::with_capacity(rows)),
            ColumnType::Float64 => ColumnBuilder::Float(Float64Builder::with_capacity(rows)),
            // A table never has date columns (only query results do); text if one did.
            ColumnType::String | ColumnType::Date => {
                ColumnBuilder::Str(StringBuilder::with_capacity(rows, text_bytes))
            }
            ColumnType::Timestamp => ColumnBuilder::Ts(
                TimestampMicrosecondBuilder::with_capacity(rows).with_timezone("UTC"),
            ),
        }
    }

    pub(super) fn ty(&self) -> ColumnType {
        match self {
            ColumnBuilder::Bool(_) => ColumnType::Boolean,
            ColumnBuilder::Int(_) => ColumnType::Int64,
            ColumnBuilder::Float(_) | ColumnBuilder::Mixed(_) => ColumnType::Float64,
            ColumnBuilder::Str(_) => ColumnType::String,
            ColumnBuilder::Ts(_) => ColumnType::Timestamp,
        }
    }

    pub(super) fn append_nulls(&mut self, n: usize) {
        match self {
            ColumnBuilder::Bool(b) => b.append_nulls(n),
            ColumnBuilder::Int(b) => b.append_nulls(n),
            ColumnBuilder::Float(b) => b.append_nulls(n),
            ColumnBuilder::Mixed(v) => v.extend(std::iter::repeat_n(None, n)),
            ColumnBuilder::Str(b) => b.append_nulls(n),
            ColumnBuilder::Ts(b) => b.append_nulls(n),
        }
    }

    /// Appends a value whose type the column already holds (after any widening).
    pub(super) fn append(&mut self, v: ValueRef) {
        if let (ColumnBuilder::Float(_), ValueRef::Int(_)) = (&*self, v) {
            self.make_mixed();
        }
        match (self, v) {
            (b, ValueRef::Null) => b.append_nulls(1),
            (ColumnBuilder::Bool(b), ValueRef::Bool(x)) => b.append_value(x),
            (ColumnBuilder::Int(b), ValueRef::Int(x)) => b.append_value(x),
            (ColumnBuilder::Float(b), ValueRef::Float(x)) => b.append_value(x),
            (ColumnBuilder::Mixed(m), ValueRef::Float(x)) => m.push(Some(Num::F(x))),
            (ColumnBuilder::Mixed(m), ValueRef::Int(x)) => m.push(Some(Num::I(x))),
            (ColumnBuilder::Ts(b), ValueRef::Ts(x)) => b.append_value(x),
            (ColumnBuilder::Str(b), ValueRef::Str(x)) => b.append_value(x),
            (ColumnBuilder::Str(b), other) => b.append_value(scalar_text(other)),
            (b, other) => unreachable!("{:?} column given {other:?} without widening", b.ty()),
        }
    }

    /// Bytes its buffers hold (capacity, not length: what the allocator gave them), counting
    /// a validity bit per row whether or not the column has a null yet.
    pub(super) fn allocated_bytes(&self, rows: usize) -> usize {
        let validity = rows.div_ceil(8);
        validity
            + match self {
                ColumnBuilder::Bool(b) => b.capacity().div_ceil(8),
                ColumnBuilder::Int(b) => b.capacity() * 8,
                ColumnBuilder::Float(b) => b.capacity() * 8,
                ColumnBuilder::Ts(b) => b.capacity() * 8,
                ColumnBuilder::Mixed(m) => m.capacity() * std::mem::size_of::<Option<Num>>(),
                ColumnBuilder::Str(b) => b.values_capacity() + b.offsets_capacity() * 4,
            }
    }

    /// A float64 column about to take an integer keeps every value as it came.
    fn make_mixed(&mut self) {
        if let ColumnBuilder::Float(b) = self {
            let old = b.finish();
            *self = ColumnBuilder::Mixed(old.iter().map(|v| v.map(Num::F)).collect());
        }
    }

    /// The finished array, and whether it is a float64 column stored as text.
    pub(super) fn finish(&mut self) -> (ArrayRef, bool) {
        let a: ArrayRef = match self {
            ColumnBuilder::Bool(b) => Arc::new(b.finish()),
            ColumnBuilder::Int(b) => Arc::new(b.finish()),
            ColumnBuilder::Float(b) => Arc::new(b.finish()),
            ColumnBuilder::Mixed(m) => {
                let values = std::mem::take(m);
                let exact = values.iter().all(|v| match v {
                    Some(Num::I(i)) => int_is_safe_in_float(*i),
                    _ => true,
                });
                if !exact {
                    let text: StringArray = values.iter().map(|v| v.map(Num::text)).collect();
                    return (Arc::new(text), true);
                }
                let floats: Float64Array = values
                    .iter()
                    .map(|v| {
                        v.map(|n| match n {
                            Num::I(i) => i as f64,
                            Num::F(f) => f,
                        })
                    })
                    .collect();
                Arc::new(floats)
            }
            ColumnBuilder::Str(b) => Arc::new(b.finish()),
            ColumnBuilder::Ts(b) => Arc::new(b.finish()),
        };
        (a, false)
    }

    /// The values appended so far, leaving the builder as it is (the types that widen to text
    /// by [`to_text`]: boolean, int64, float64, timestamp).
    fn values_so_far(&self) -> ArrayRef {
        match self {
            ColumnBuilder::Bool(b) => Arc::new(b.finish_cloned()),
            ColumnBuilder::Int(b) => Arc::new(b.finish_cloned()),
            ColumnBuilder::Float(b) => Arc::new(b.finish_cloned()),
            ColumnBuilder::Ts(b) => Arc::new(b.finish_cloned()),
            ColumnBuilder::Str(b) => Arc::new(b.finish_cloned()),
            ColumnBuilder::Mixed(m) => {
                let text: StringArray = m.iter().map(|v| v.map(Num::text)).collect();
                Arc::new(text)
            }
        }
    }

    /// A builder of type `to` (float64 or string) holding every value of this one, carried over
    /// exactly: integers into a float64 column stay integers; text as [`to_text`] gives it. This
    /// builder is left as it is (the row asking for the widening may still fail).
    pub(super) fn widened(&self, to: ColumnType) -> Result<ColumnBuilder, ArrowError> {
        Ok(match (to, self) {
            (ColumnType::Float64, ColumnBuilder::Int(b)) => {
                ColumnBuilder::Mixed(b.finish_cloned().iter().map(|v| v.map(Num::I)).collect())
            }
            (ColumnType::String, ColumnBuilder::Mixed(m)) => {
                let mut b = StringBuilder::new();
                m.iter().for_each(|v| b.append_option(v.map(Num::text)));
                ColumnBuilder::Str(b)
            }
            (ColumnType::String, other) => {
                let text = to_text(&other.values_so_far())?;
                let text = text
                    .as_any()
                    .downcast_ref::<StringArray>()
                    .expect("to_text gives Utf8");
                let mut b = StringBuilder::new();
                text.iter().for_each(|v| b.append_option(v));
                ColumnBuilder::Str(b)
            }
            (to, b) => unreachable!("widening {:?} to {to:?}", b.ty()),
        })
    }
}

/// The batch of `rows` rows whose columns are `columns`' builders, finished, under their names
/// (a float64 column that must keep integers exactly as text is named so: see
/// [`TableSchema::float_as_text`]).
pub(super) fn finished_batch<'b>(
    columns: impl Iterator<Item = (&'b str, &'b mut ColumnBuilder)>,
    rows: usize,
) -> RecordBatch {
    let mut fields: Vec<Field> = Vec::new();
    let mut arrays: Vec<ArrayRef> = Vec::new();
    for (name, c) in columns {
        let ty = c.ty();
        let (a, as_text) = c.finish();
        fields.push(if as_text {
            TableSchema::float_as_text(name)
        } else {
            Field::new(name, ty.arrow(), true)
        });
        arrays.push(a);
    }
    debug_assert!(arrays.iter().all(|a| a.len() == rows));
    RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays)
        .expect("every column has one value per row")
}

/// Text of a non-string scalar placed in a string column (as [`to_text`] writes it).
fn scalar_text(v: ValueRef) -> String {
    match v {
        ValueRef::Bool(x) => x.to_string(),
        ValueRef::Int(x) => x.to_string(),
        ValueRef::Float(x) => float_text(x),
        ValueRef::Str(s) => s.to_string(),
        ValueRef::Null => String::new(),
        ValueRef::Ts(x) => {
            let a: ArrayRef = Arc::new(
                arrow::array::TimestampMicrosecondArray::from(vec![x]).with_timezone("UTC"),
            );
            to_text(&a)
                .ok()
                .and_then(|t| {
                    t.as_any()
                        .downcast_ref::<StringArray>()
                        .map(|s| s.value(0).to_string())
                })
                .unwrap_or_default()
        }
    }
}
