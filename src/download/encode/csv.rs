//! CSV (RFC 4180): a header row of column names, then one line per row. Fields with a comma,
//! quote or line break are quoted (quotes doubled); nulls, NaN and infinities are empty fields;
//! timestamps are RFC 3339 UTC.

use arrow::array::{Array, AsArray};
use arrow::datatypes::{DataType, Float64Type, Int64Type, TimestampMicrosecondType};
use arrow::record_batch::RecordBatch;

use super::{EncodeError, Encoder, write_rfc3339};
use crate::warehouse::schema::TableSchema;

/// CSV encoder.
pub struct CsvEncoder {
    names: Vec<String>,
}

impl CsvEncoder {
    /// An encoder for `schema`'s columns.
    pub fn new(schema: &TableSchema) -> Self {
        Self {
            names: schema.columns.iter().map(|c| c.name.clone()).collect(),
        }
    }
}

fn field(s: &str, out: &mut Vec<u8>) {
    if s.bytes().any(|b| matches!(b, b',' | b'"' | b'\n' | b'\r')) {
        out.push(b'"');
        for b in s.bytes() {
            if b == b'"' {
                out.push(b'"');
            }
            out.push(b);
        }
        out.push(b'"');
    } else {
        out.extend_from_slice(s.as_bytes());
    }
}

impl Encoder for CsvEncoder {
    fn header(&mut self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        for (i, n) in self.names.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            field(n, out);
        }
        out.extend_from_slice(b"\r\n");
        Ok(())
    }

    fn batch(&mut self, batch: &RecordBatch, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        for row in 0..batch.num_rows() {
            for (i, col) in batch.columns().iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                if col.is_null(row) {
                    continue;
                }
                match col.data_type() {
                    DataType::Utf8 => field(col.as_string::<i32>().value(row), out),
                    DataType::Int64 => out.extend_from_slice(
                        itoa::Buffer::new()
                            .format(col.as_primitive::<Int64Type>().value(row))
                            .as_bytes(),
                    ),
                    DataType::Float64 => {
                        let v = col.as_primitive::<Float64Type>().value(row);
                        if v.is_finite() {
                            out.extend_from_slice(ryu::Buffer::new().format_finite(v).as_bytes());
                        }
                    }
                    DataType::Boolean => out.extend_from_slice(if col.as_boolean().value(row) {
                        b"true"
                    } else {
                        b"false"
                    }),
                    DataType::Timestamp(_, _) => write_rfc3339(
                        col.as_primitive::<TimestampMicrosecondType>().value(row),
                        out,
                    ),
                    other => return Err(EncodeError(format!("cannot write {other} as CSV"))),
                }
            }
            out.extend_from_slice(b"\r\n");
        }
        Ok(())
    }

    fn footer(&mut self, _out: &mut Vec<u8>) -> Result<(), EncodeError> {
        Ok(())
    }
}
