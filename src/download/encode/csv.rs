//! CSV (RFC 4180): a header row of column names, then one line per row. Fields with a comma,
//! quote or line break are quoted (quotes doubled); nulls, NaN and infinities are empty fields;
//! timestamps are RFC 3339 UTC.

use arrow::record_batch::RecordBatch;

use super::column::{Cell, Column};
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
        let cols = Column::all(batch)?;
        for row in 0..batch.num_rows() {
            for (i, col) in cols.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                match col.cell(row) {
                    Cell::Null => {}
                    Cell::Str(s) => field(s, out),
                    Cell::Int(v) => out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes()),
                    Cell::Float(v) if v.is_finite() => {
                        out.extend_from_slice(ryu::Buffer::new().format_finite(v).as_bytes())
                    }
                    Cell::Float(_) => {}
                    Cell::Bool(b) => out.extend_from_slice(if b { b"true" } else { b"false" }),
                    Cell::Ts(v) => write_rfc3339(v, out),
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
