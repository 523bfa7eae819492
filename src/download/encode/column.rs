//! A batch's columns typed once, for the text encoders (JSON, NDJSON, CSV): each column's
//! concrete array is looked up per batch, so writing a cell is one match, not a type dispatch
//! and a downcast.

use arrow::array::{
    Array, AsArray, BooleanArray, Date32Array, Float64Array, Int64Array, StringArray,
    StringViewArray, TimestampMicrosecondArray,
};
use arrow::datatypes::{DataType, Date32Type, Float64Type, Int64Type, TimestampMicrosecondType};

use super::EncodeError;
use super::float::mostly_short;

/// One column of a batch.
pub enum Column<'a> {
    /// Text.
    Str(&'a StringArray),
    /// Text as views (inline up to 12 bytes, else in a data buffer).
    View(&'a StringViewArray),
    /// int64.
    Int(&'a Int64Array),
    /// float64, and whether its values look like short decimals
    /// ([`super::float::mostly_short`]).
    Float(&'a Float64Array, bool),
    /// boolean.
    Bool(&'a BooleanArray),
    /// timestamp µs UTC.
    Ts(&'a TimestampMicrosecondArray),
    /// date (an SQL element's result only).
    Date(&'a Date32Array),
}

/// A text value inside its array's value buffer (so short values can be copied as a fixed
/// block that runs past their end: see [`super::append::push_window`]).
#[derive(Clone, Copy)]
pub struct Text<'a> {
    /// The whole value buffer.
    pub data: &'a [u8],
    /// Where the value starts.
    pub start: usize,
    /// Its length in bytes.
    pub len: usize,
}

impl<'a> Text<'a> {
    /// The value's bytes (UTF-8).
    #[inline]
    pub fn bytes(&self) -> &'a [u8] {
        &self.data[self.start..self.start + self.len]
    }
}

/// One cell's value.
pub enum Cell<'a> {
    /// Null.
    Null,
    /// Text.
    Str(Text<'a>),
    /// int64.
    Int(i64),
    /// float64 (possibly NaN or infinite), and whether to try the short-decimal path first.
    Float(f64, bool),
    /// boolean.
    Bool(bool),
    /// µs since the epoch, UTC.
    Ts(i64),
    /// Days since 1970-01-01.
    Date(i32),
}

impl<'a> Column<'a> {
    /// The typed view of `col` (one of the warehouse's Arrow types).
    pub fn of(col: &'a dyn Array) -> Result<Column<'a>, EncodeError> {
        Ok(match col.data_type() {
            DataType::Utf8 => Column::Str(col.as_string::<i32>()),
            DataType::Utf8View => Column::View(col.as_string_view()),
            DataType::Int64 => Column::Int(col.as_primitive::<Int64Type>()),
            DataType::Float64 => {
                let a = col.as_primitive::<Float64Type>();
                Column::Float(a, mostly_short(a.values()))
            }
            DataType::Boolean => Column::Bool(col.as_boolean()),
            DataType::Timestamp(_, _) => Column::Ts(col.as_primitive::<TimestampMicrosecondType>()),
            DataType::Date32 => Column::Date(col.as_primitive::<Date32Type>()),
            other => return Err(EncodeError(format!("cannot write {other} as text"))),
        })
    }

    /// Every column of a batch.
    pub fn all(
        batch: &'a arrow::record_batch::RecordBatch,
    ) -> Result<Vec<Column<'a>>, EncodeError> {
        batch
            .columns()
            .iter()
            .map(|c| Column::of(c.as_ref()))
            .collect()
    }

    /// The value at `row`.
    #[inline(always)]
    pub fn cell(&self, row: usize) -> Cell<'a> {
        match self {
            Column::Str(a) if a.is_valid(row) => {
                let offsets = a.value_offsets();
                let (start, end) = (offsets[row] as usize, offsets[row + 1] as usize);
                Cell::Str(Text {
                    data: a.value_data(),
                    start,
                    len: end - start,
                })
            }
            Column::View(a) if a.is_valid(row) => {
                let view = a.views()[row];
                let len = view as u32 as usize;
                Cell::Str(if len <= 12 {
                    // Inline: the bytes after the length, inside the view itself.
                    Text {
                        data: a.views().inner().as_slice(),
                        start: row * 16 + 4,
                        len,
                    }
                } else {
                    // Buffer index in bits 64..96, offset in bits 96..128.
                    Text {
                        data: a.data_buffers()[(view >> 64) as u32 as usize].as_slice(),
                        start: (view >> 96) as u32 as usize,
                        len,
                    }
                })
            }
            Column::Int(a) if a.is_valid(row) => Cell::Int(a.value(row)),
            Column::Float(a, short) if a.is_valid(row) => Cell::Float(a.value(row), *short),
            Column::Bool(a) if a.is_valid(row) => Cell::Bool(a.value(row)),
            Column::Ts(a) if a.is_valid(row) => Cell::Ts(a.value(row)),
            Column::Date(a) if a.is_valid(row) => Cell::Date(a.value(row)),
            _ => Cell::Null,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{ArrayRef, StringArray};
    use arrow::compute::cast;
    use arrow::datatypes::DataType;

    use super::{Cell, Column};

    #[test]
    fn views_give_the_same_text_as_offsets_inline_or_not() {
        let values = [
            Some(""),
            Some("twelve bytes"),
            None,
            Some("thirteen byte"),
            Some("é\"\n✓ a longer one"),
        ];
        let plain: ArrayRef = Arc::new(StringArray::from(values.to_vec()));
        let views = cast(&plain, &DataType::Utf8View).unwrap();
        let (a, b) = (
            Column::of(plain.as_ref()).unwrap(),
            Column::of(views.as_ref()).unwrap(),
        );
        assert!(matches!(b, Column::View(_)));
        for (row, want) in values.iter().enumerate() {
            let text = |c: Cell| match c {
                Cell::Str(t) => Some(t.bytes().to_vec()),
                Cell::Null => None,
                _ => panic!("not text"),
            };
            let want = want.map(|s| s.as_bytes().to_vec());
            assert_eq!(text(a.cell(row)), want, "row {row}");
            assert_eq!(text(b.cell(row)), want, "row {row}");
        }
    }
}
