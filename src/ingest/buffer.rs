//! A table's buffered rows in Arrow builders, one per column. New columns start with nulls for
//! the rows before them; a value that disagrees with its column's type widens the column in place.

use std::collections::HashMap;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, BooleanBuilder, Float64Builder, Int64Builder, StringArray, StringBuilder,
    TimestampMicrosecondBuilder,
};
use arrow::compute::cast;
use arrow::datatypes::{Field, Schema};
use arrow::error::ArrowError;
use arrow::record_batch::RecordBatch;

use super::event::{Cell, Value};
use crate::warehouse::schema::ColumnType;

/// One column's builder.
enum ColumnBuilder {
    Bool(BooleanBuilder),
    Int(Int64Builder),
    Float(Float64Builder),
    Str(StringBuilder),
    Ts(TimestampMicrosecondBuilder),
}

impl ColumnBuilder {
    fn new(ty: ColumnType, nulls: usize) -> Self {
        let mut b = match ty {
            ColumnType::Boolean => ColumnBuilder::Bool(BooleanBuilder::new()),
            ColumnType::Int64 => ColumnBuilder::Int(Int64Builder::new()),
            ColumnType::Float64 => ColumnBuilder::Float(Float64Builder::new()),
            ColumnType::String => ColumnBuilder::Str(StringBuilder::new()),
            ColumnType::Timestamp => {
                ColumnBuilder::Ts(TimestampMicrosecondBuilder::new().with_timezone("UTC"))
            }
        };
        b.append_nulls(nulls);
        b
    }

    fn ty(&self) -> ColumnType {
        match self {
            ColumnBuilder::Bool(_) => ColumnType::Boolean,
            ColumnBuilder::Int(_) => ColumnType::Int64,
            ColumnBuilder::Float(_) => ColumnType::Float64,
            ColumnBuilder::Str(_) => ColumnType::String,
            ColumnBuilder::Ts(_) => ColumnType::Timestamp,
        }
    }

    fn append_nulls(&mut self, n: usize) {
        match self {
            ColumnBuilder::Bool(b) => b.append_nulls(n),
            ColumnBuilder::Int(b) => b.append_nulls(n),
            ColumnBuilder::Float(b) => b.append_nulls(n),
            ColumnBuilder::Str(b) => b.append_nulls(n),
            ColumnBuilder::Ts(b) => b.append_nulls(n),
        }
    }

    /// Appends a value whose type the column already holds (after any widening).
    fn append(&mut self, v: &Value) {
        match (self, v) {
            (b, Value::Null) => b.append_nulls(1),
            (ColumnBuilder::Bool(b), Value::Bool(x)) => b.append_value(*x),
            (ColumnBuilder::Int(b), Value::Int(x)) => b.append_value(*x),
            (ColumnBuilder::Float(b), Value::Float(x)) => b.append_value(*x),
            (ColumnBuilder::Float(b), Value::Int(x)) => b.append_value(*x as f64),
            (ColumnBuilder::Ts(b), Value::Ts(x)) => b.append_value(*x),
            (ColumnBuilder::Str(b), Value::Str(x)) => b.append_value(x),
            (ColumnBuilder::Str(b), other) => b.append_value(scalar_text(other)),
            (b, other) => unreachable!("{:?} column given {other:?} without widening", b.ty()),
        }
    }

    fn finish(&mut self) -> ArrayRef {
        match self {
            ColumnBuilder::Bool(b) => Arc::new(b.finish()),
            ColumnBuilder::Int(b) => Arc::new(b.finish()),
            ColumnBuilder::Float(b) => Arc::new(b.finish()),
            ColumnBuilder::Str(b) => Arc::new(b.finish()),
            ColumnBuilder::Ts(b) => Arc::new(b.finish()),
        }
    }

    /// Replaces the builder with one of type `to`, carrying its values over by Arrow's cast
    /// (the same conversion readers apply to older files, so both paths agree).
    fn widen(&mut self, to: ColumnType) -> Result<(), ArrowError> {
        let old = self.finish();
        let converted = cast(&old, &to.arrow())?;
        let mut fresh = ColumnBuilder::new(to, 0);
        match (&mut fresh, to) {
            (ColumnBuilder::Str(b), _) => {
                let a = converted
                    .as_any()
                    .downcast_ref::<StringArray>()
                    .expect("cast to Utf8");
                a.iter().for_each(|v| b.append_option(v));
            }
            (ColumnBuilder::Float(b), _) => {
                let a = converted
                    .as_any()
                    .downcast_ref::<arrow::array::Float64Array>()
                    .expect("cast to Float64");
                a.iter().for_each(|v| b.append_option(v));
            }
            _ => unreachable!("widening only produces float64 or string"),
        }
        *self = fresh;
        Ok(())
    }
}

/// Text of a non-string scalar placed in a string column, matching Arrow's cast to Utf8.
fn scalar_text(v: &Value) -> String {
    let arr: ArrayRef = match v {
        Value::Bool(x) => Arc::new(arrow::array::BooleanArray::from(vec![*x])),
        Value::Int(x) => return x.to_string(),
        Value::Float(x) => Arc::new(arrow::array::Float64Array::from(vec![*x])),
        Value::Ts(x) => {
            Arc::new(arrow::array::TimestampMicrosecondArray::from(vec![*x]).with_timezone("UTC"))
        }
        Value::Str(s) => return s.clone(),
        Value::Null => return String::new(),
    };
    cast(&arr, &arrow::datatypes::DataType::Utf8)
        .ok()
        .and_then(|a| {
            a.as_any()
                .downcast_ref::<StringArray>()
                .map(|s| s.value(0).to_string())
        })
        .unwrap_or_default()
}

/// The buffered rows of one table.
#[derive(Default)]
pub struct TableBuffer {
    names: Vec<String>,
    columns: Vec<ColumnBuilder>,
    /// Row index each column was last written at, to null-fill the rest.
    last_row: Vec<usize>,
    index: HashMap<String, usize>,
    rows: usize,
}

impl TableBuffer {
    /// Rows buffered.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Whether `name` is a buffered column.
    pub fn has_column(&self, name: &str) -> bool {
        self.index.contains_key(name)
    }

    /// Column names, in order.
    pub fn column_names(&self) -> impl Iterator<Item = &str> {
        self.names.iter().map(String::as_str)
    }

    /// Appends one row made of the given cell lists. Null cells of unknown columns add nothing.
    pub fn append<'a>(
        &mut self,
        cells: impl IntoIterator<Item = &'a Cell>,
    ) -> Result<(), ArrowError> {
        let row = self.rows;
        for (name, value) in cells {
            let idx = match self.index.get(name) {
                Some(&i) => i,
                None => {
                    let Some(ty) = value.column_type() else {
                        continue;
                    };
                    self.names.push(name.clone());
                    self.columns.push(ColumnBuilder::new(ty, row));
                    self.last_row.push(row);
                    self.index.insert(name.clone(), self.columns.len() - 1);
                    self.columns.len() - 1
                }
            };
            if self.last_row[idx] > row {
                continue; // a duplicate name in one row: the first wins
            }
            let col = &mut self.columns[idx];
            if let Some(ty) = value.column_type() {
                let wide = col.ty().widen(ty);
                if wide != col.ty() {
                    col.widen(wide)?;
                }
            }
            col.append(value);
            self.last_row[idx] = row + 1;
        }
        for (idx, col) in self.columns.iter_mut().enumerate() {
            if self.last_row[idx] <= row {
                col.append_nulls(1);
                self.last_row[idx] = row + 1;
            }
        }
        self.rows += 1;
        Ok(())
    }

    /// Takes everything buffered as one batch and leaves the buffer empty.
    pub fn take_batch(&mut self) -> RecordBatch {
        let fields: Vec<Field> = self
            .names
            .iter()
            .zip(&self.columns)
            .map(|(n, c)| Field::new(n, c.ty().arrow(), true))
            .collect();
        let arrays: Vec<ArrayRef> = self.columns.iter_mut().map(ColumnBuilder::finish).collect();
        debug_assert!(arrays.iter().all(|a| a.len() == self.rows));
        let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays)
            .expect("every column has one value per row");
        *self = TableBuffer::default();
        batch
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{AsArray, Float64Array};

    fn cell(n: &str, v: Value) -> Cell {
        (n.to_string(), v)
    }

    #[test]
    fn new_columns_backfill_nulls_and_types_widen() {
        let mut b = TableBuffer::default();
        b.append(&[cell("a", Value::Int(1))]).unwrap();
        b.append(&[cell("a", Value::Float(2.5)), cell("b", Value::Bool(true))])
            .unwrap();
        b.append(&[cell("b", Value::Int(3)), cell("c", Value::Null)])
            .unwrap();
        let batch = b.take_batch();
        assert_eq!(batch.num_rows(), 3);
        assert_eq!(batch.num_columns(), 2, "a null-only column is not created");
        let a = batch
            .column(0)
            .as_any()
            .downcast_ref::<Float64Array>()
            .unwrap();
        assert_eq!(
            a.iter().collect::<Vec<_>>(),
            vec![Some(1.0), Some(2.5), None]
        );
        let bcol = batch.column(1).as_string::<i32>();
        assert_eq!(
            bcol.iter().collect::<Vec<_>>(),
            vec![None, Some("true"), Some("3")]
        );
        assert_eq!(b.rows(), 0);
    }

    #[test]
    fn buffer_text_matches_read_side_cast() {
        for v in [
            Value::Float(1.0),
            Value::Float(0.1),
            Value::Float(1e21),
            Value::Bool(false),
        ] {
            let arr: ArrayRef = match &v {
                Value::Float(x) => Arc::new(Float64Array::from(vec![*x])),
                Value::Bool(x) => Arc::new(arrow::array::BooleanArray::from(vec![*x])),
                _ => unreachable!(),
            };
            let cast = cast(&arr, &arrow::datatypes::DataType::Utf8).unwrap();
            assert_eq!(scalar_text(&v), cast.as_string::<i32>().value(0));
        }
    }
}
