//! A table's buffered rows in Arrow builders, one per column. New columns start with nulls for
//! the rows before them; a value that disagrees with its column's type widens the column in place.
//! Widening never goes through a lossy step: a float64 column that received integers keeps them
//! as integers until it is written (as float64 when every one converts exactly, else as their
//! text — see [`crate::model::schema::TYPE_KEY`]), and a column widened to string takes each
//! value's text by [`crate::model::text`], the same conversion readers apply to older files.
//! Team actors buffer events in it; imports buffer their rows in it the same way.

use foldhash::HashMap;
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
use crate::model::value::{Cell, Value};

/// A value of a float64 column that has seen integers.
#[derive(Debug, Clone, Copy)]
enum Num {
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
enum ColumnBuilder {
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
    fn new(ty: ColumnType, nulls: usize, room: usize) -> Self {
        let rows = nulls + room;
        let mut b = match ty {
            ColumnType::Boolean => ColumnBuilder::Bool(BooleanBuilder::with_capacity(rows)),
            ColumnType::Int64 => ColumnBuilder::Int(Int64Builder::with_capacity(rows)),
            ColumnType::Float64 => ColumnBuilder::Float(Float64Builder::with_capacity(rows)),
            // A table never has date columns (only query results do); text if one did.
            ColumnType::String | ColumnType::Date => {
                ColumnBuilder::Str(StringBuilder::with_capacity(rows, rows * 8))
            }
            ColumnType::Timestamp => ColumnBuilder::Ts(
                TimestampMicrosecondBuilder::with_capacity(rows).with_timezone("UTC"),
            ),
        };
        b.append_nulls(nulls);
        b
    }

    fn ty(&self) -> ColumnType {
        match self {
            ColumnBuilder::Bool(_) => ColumnType::Boolean,
            ColumnBuilder::Int(_) => ColumnType::Int64,
            ColumnBuilder::Float(_) | ColumnBuilder::Mixed(_) => ColumnType::Float64,
            ColumnBuilder::Str(_) => ColumnType::String,
            ColumnBuilder::Ts(_) => ColumnType::Timestamp,
        }
    }

    fn append_nulls(&mut self, n: usize) {
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
    fn append(&mut self, v: &Value) {
        if let (ColumnBuilder::Float(_), Value::Int(_)) = (&*self, v) {
            self.make_mixed();
        }
        match (self, v) {
            (b, Value::Null) => b.append_nulls(1),
            (ColumnBuilder::Bool(b), Value::Bool(x)) => b.append_value(*x),
            (ColumnBuilder::Int(b), Value::Int(x)) => b.append_value(*x),
            (ColumnBuilder::Float(b), Value::Float(x)) => b.append_value(*x),
            (ColumnBuilder::Mixed(m), Value::Float(x)) => m.push(Some(Num::F(*x))),
            (ColumnBuilder::Mixed(m), Value::Int(x)) => m.push(Some(Num::I(*x))),
            (ColumnBuilder::Ts(b), Value::Ts(x)) => b.append_value(*x),
            (ColumnBuilder::Str(b), Value::Str(x)) => b.append_value(x),
            (ColumnBuilder::Str(b), other) => b.append_value(scalar_text(other)),
            (b, other) => unreachable!("{:?} column given {other:?} without widening", b.ty()),
        }
    }

    /// Bytes its buffers hold (capacity, not length: what the allocator gave them), counting
    /// a validity bit per row whether or not the column has a null yet.
    fn allocated_bytes(&self, rows: usize) -> usize {
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
    fn finish(&mut self) -> (ArrayRef, bool) {
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
    fn widened(&self, to: ColumnType) -> Result<ColumnBuilder, ArrowError> {
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

/// Text of a non-string scalar placed in a string column (as [`to_text`] writes it).
fn scalar_text(v: &Value) -> String {
    match v {
        Value::Bool(x) => x.to_string(),
        Value::Int(x) => x.to_string(),
        Value::Float(x) => float_text(*x),
        Value::Str(s) => s.clone(),
        Value::Null => String::new(),
        Value::Ts(x) => {
            let a: ArrayRef = Arc::new(
                arrow::array::TimestampMicrosecondArray::from(vec![*x]).with_timezone("UTC"),
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

/// Rows a new column has room for (beyond the nulls it starts with) before its first doubling.
/// Arrow's own default is 1,024, ~8 KiB a column, which a quiet team's buffer holding a few
/// events keeps in every column until its flush; a busy one doubles its way to a chunk's
/// 8,192 rows, copying about as many bytes again as it holds.
const FIRST_ROWS: usize = 16;

/// The buffered rows of one table.
#[derive(Default)]
pub struct TableBuffer {
    names: Vec<String>,
    columns: Vec<ColumnBuilder>,
    /// Row index each column was last written at, to null-fill the rest.
    last_row: Vec<usize>,
    index: HashMap<String, usize>,
    rows: usize,
    /// Scratch of [`TableBuffer::append`]: each cell's column, `None` for a cell it skips.
    targets: Vec<Option<usize>>,
    /// The last row's `targets`: rows of a table mostly repeat its cells' order, so the column
    /// at a cell's position last time is tried first (taken when its name matches), before
    /// the name is hashed and looked up.
    hints: Vec<Option<usize>>,
    /// Rows the buffer is expected to hold ([`TableBuffer::for_rows`]); 0 when unknown.
    expected_rows: usize,
}

impl TableBuffer {
    /// A buffer for `rows` rows, known before they are appended (a request's, counted first):
    /// each column is made with room for all of them, so no builder grows on the way.
    pub fn for_rows(rows: usize) -> Self {
        TableBuffer {
            expected_rows: rows,
            ..TableBuffer::default()
        }
    }

    /// Finds (or creates) and widens the column of each cell of row `row`, into `targets`: a
    /// duplicate name in one row is skipped (the first wins), as is a null cell of an unknown
    /// column.
    /// Widened builders are put in `widened`, to replace their columns once every cell passed.
    fn prepare<'a>(
        &mut self,
        cells: impl IntoIterator<Item = &'a Cell>,
        row: usize,
        hints: &[Option<usize>],
        targets: &mut Vec<Option<usize>>,
        widened: &mut Vec<(usize, ColumnBuilder)>,
    ) -> Result<(), ArrowError> {
        for (position, (name, value)) in cells.into_iter().enumerate() {
            let hint = hints
                .get(position)
                .copied()
                .flatten()
                .filter(|&i| self.names.get(i).map(String::as_str) == Some(&**name));
            let idx = match hint.or_else(|| self.index.get(&**name).copied()) {
                Some(i) => i,
                None => {
                    let Some(ty) = value.column_type() else {
                        targets.push(None);
                        continue;
                    };
                    self.names.push(name.to_string());
                    let room = self.expected_rows.saturating_sub(row).max(FIRST_ROWS);
                    self.columns.push(ColumnBuilder::new(ty, row, room));
                    self.last_row.push(row);
                    self.index.insert(name.to_string(), self.columns.len() - 1);
                    self.columns.len() - 1
                }
            };
            if self.last_row[idx] > row {
                targets.push(None);
                continue;
            }
            let col = &self.columns[idx];
            if let Some(ty) = value.column_type() {
                let wide = col.ty().widen(ty);
                if wide != col.ty() {
                    widened.push((idx, col.widened(wide)?));
                }
            }
            // Claimed for this row (a later cell of the same name is skipped).
            self.last_row[idx] = row + 1;
            targets.push(Some(idx));
        }
        Ok(())
    }

    /// Rows buffered.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Bytes the column builders hold (their capacity), what the rows really cost in memory
    /// until they are taken.
    pub fn allocated_bytes(&self) -> usize {
        self.columns
            .iter()
            .map(|c| c.allocated_bytes(self.rows))
            .sum()
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
    /// All or nothing: the columns are found, created and widened for every cell first (the
    /// only step that can fail, and one that leaves every column as many rows long as before),
    /// then the values are appended.
    pub fn append<'a>(
        &mut self,
        cells: impl IntoIterator<Item = &'a Cell> + Clone,
    ) -> Result<(), ArrowError> {
        let row = self.rows;
        let mut targets = std::mem::take(&mut self.targets);
        let hints = std::mem::take(&mut self.hints);
        targets.clear();
        let known = self.columns.len();
        let mut widened = Vec::new();
        let prepared = self.prepare(cells.clone(), row, &hints, &mut targets, &mut widened);
        if let Err(e) = prepared {
            // Nothing of the row stays: not its new columns, not its widenings, not its marks.
            for name in self.names.drain(known..) {
                self.index.remove(&name);
            }
            self.columns.truncate(known);
            self.last_row.truncate(known);
            for idx in targets.iter().flatten().filter(|i| **i < known) {
                self.last_row[*idx] = row;
            }
            self.targets = targets;
            self.hints = hints;
            return Err(e);
        }
        for (idx, builder) in widened {
            self.columns[idx] = builder;
        }
        for ((_, value), target) in cells.into_iter().zip(&targets) {
            if let Some(idx) = *target {
                self.columns[idx].append(value);
            }
        }
        // This row's columns are the next row's hints; the old hints' room is the next scratch.
        self.hints = targets;
        self.targets = hints;
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
        let mut fields: Vec<Field> = Vec::with_capacity(self.columns.len());
        let mut arrays: Vec<ArrayRef> = Vec::with_capacity(self.columns.len());
        for (n, c) in self.names.iter().zip(&mut self.columns) {
            let ty = c.ty();
            let (a, as_text) = c.finish();
            fields.push(if as_text {
                TableSchema::float_as_text(n)
            } else {
                Field::new(n, ty.arrow(), true)
            });
            arrays.push(a);
        }
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
    use arrow::array::AsArray;

    fn cell(n: &str, v: Value) -> Cell {
        (n.to_string().into(), v)
    }

    /// A buffer of one row holds a few hundred bytes a column, not room for a thousand rows:
    /// quiet teams keep their buffers until a flush, and the budgets count what they hold.
    #[test]
    fn a_new_buffer_holds_little_room() {
        let mut b = TableBuffer::default();
        let row: Vec<Cell> = (0..10)
            .flat_map(|i| {
                [
                    cell(&format!("n{i}"), Value::Int(i)),
                    cell(&format!("s{i}"), Value::Str(format!("value {i}"))),
                ]
            })
            .collect();
        b.append(&row).unwrap();
        let held = b.allocated_bytes();
        assert!(held > 0 && held < 20 * 512, "one row holds {held} bytes");
        // Rows beyond the first room still land (the builders grow).
        for _ in 0..100 {
            b.append(&row).unwrap();
        }
        assert_eq!(b.take_batch().num_rows(), 101);
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

    /// A timestamp beyond what text can show (i64::MAX µs) cannot widen to string: the row that
    /// asks for it fails whole — the cells before it in the row are not appended, its new
    /// columns and other widenings do not stay, the column keeps its values — and the buffer
    /// stays whole.
    #[test]
    fn a_row_that_cannot_widen_leaves_the_buffer_whole() {
        let mut b = TableBuffer::default();
        b.append(&[cell("a", Value::Int(1)), cell("t", Value::Ts(i64::MAX))])
            .unwrap();
        let row = [
            cell("a", Value::Str("2".into())),
            cell("z", Value::Bool(true)),
            cell("t", Value::Str("x".into())),
        ];
        assert!(b.append(&row).is_err());
        assert!(
            !b.has_column("z"),
            "the failed row's new column does not stay"
        );
        b.append(&[cell("a", Value::Int(3)), cell("t", Value::Ts(0))])
            .unwrap();
        assert_eq!(b.rows(), 2);
        let batch = b.take_batch();
        assert_eq!(batch.num_rows(), 2);
        // Still int64: the failed row's widening of `a` to string did not stay.
        let a = batch
            .column(0)
            .as_primitive::<arrow::datatypes::Int64Type>();
        assert_eq!(a.values().to_vec(), [1, 3]);
        assert_eq!(batch.column(1).len(), 2);
    }

    /// The last row's columns are only hints: cells in another order, a new column in the
    /// middle, a repeated name, and a row that failed (its new columns gone) all land where
    /// their names say.
    #[test]
    fn rows_in_any_order_land_in_their_named_columns() {
        let mut b = TableBuffer::default();
        b.append(&[cell("a", Value::Int(1)), cell("s", Value::Str("x".into()))])
            .unwrap();
        b.append(&[cell("s", Value::Str("y".into())), cell("a", Value::Int(2))])
            .unwrap();
        let failing = [
            cell("n", Value::Bool(true)),
            cell("t", Value::Ts(i64::MAX)),
            cell("a", Value::Int(0)),
        ];
        b.append(&failing[1..2]).unwrap();
        let widen_t = [failing[0].clone(), cell("t", Value::Str("x".into()))];
        assert!(
            b.append(&widen_t).is_err(),
            "a timestamp too large for text"
        );
        b.append(&[
            cell("a", Value::Int(3)),
            cell("n", Value::Int(7)),
            cell("s", Value::Str("z".into())),
            cell("a", Value::Int(99)),
        ])
        .unwrap();
        let batch = b.take_batch();
        let col = |name: &str| batch.column_by_name(name).unwrap().clone();
        let a = col("a");
        let a = a.as_primitive::<arrow::datatypes::Int64Type>();
        assert_eq!(
            a.iter().collect::<Vec<_>>(),
            [Some(1), Some(2), None, Some(3)],
            "the first of two cells named a wins"
        );
        let s = col("s");
        assert_eq!(
            s.as_string::<i32>().iter().collect::<Vec<_>>(),
            [Some("x"), Some("y"), None, Some("z")]
        );
        let n = col("n");
        assert_eq!(
            n.as_primitive::<arrow::datatypes::Int64Type>()
                .iter()
                .collect::<Vec<_>>(),
            [None, None, None, Some(7)],
            "the failed row's boolean column did not stay"
        );
    }

    #[test]
    fn widening_to_string_keeps_exact_digits_whatever_the_order() {
        let big = 9223372036854775806;
        let mut b = TableBuffer::default();
        for v in [Value::Int(big), Value::Float(1.5), Value::Str("x".into())] {
            b.append(&[cell("n", v)]).unwrap();
        }
        let batch = b.take_batch();
        let n = batch.column(0).as_string::<i32>();
        assert_eq!(
            n.iter().collect::<Vec<_>>(),
            [Some("9223372036854775806"), Some("1.5"), Some("x")]
        );

        // int + float alone: stored as text, read as float64, so a later string keeps the digits.
        b.append(&[cell("n", Value::Int(big))]).unwrap();
        b.append(&[cell("n", Value::Float(1.5))]).unwrap();
        let batch = b.take_batch();
        let schema = TableSchema::from_arrow(&batch.schema());
        assert_eq!(schema.columns[0].ty, ColumnType::Float64);
        assert_eq!(
            batch.column(0).as_string::<i32>().value(0),
            "9223372036854775806"
        );

        // Exact integers stay float64.
        b.append(&[cell("n", Value::Float(0.5))]).unwrap();
        b.append(&[cell("n", Value::Int(5))]).unwrap();
        let batch = b.take_batch();
        let f = batch
            .column(0)
            .as_any()
            .downcast_ref::<Float64Array>()
            .unwrap();
        assert_eq!(f.values().to_vec(), [0.5, 5.0]);
    }
}
