//! CSV (RFC 4180): a header row of column names, then one line per row. Fields with a comma,
//! quote or line break are quoted (quotes doubled); nulls, NaN and infinities are empty fields;
//! timestamps are RFC 3339 UTC.

use std::sync::Arc;

use arrow::record_batch::RecordBatch;

use super::append::{copy_flagged, needs_csv_quote, push_i64, quote_flags};
use super::clean::{Special, push_if_clean};
use super::column::{Cell, Column};
use super::expand::double_quotes_blocks;
use super::float::push_f64;
use super::sink::{RowSize, Sink};
use super::timestamp::{Rfc3339, write_date};
use super::{BatchEncoder, EncodeError, Encoder};
use crate::model::schema::TableSchema;

/// CSV encoder.
pub struct CsvEncoder {
    names: Vec<String>,
    /// Writes the rows (shared with the threads that encode batches in parallel).
    rows: Arc<CsvRows>,
}

impl CsvEncoder {
    /// An encoder for `schema`'s columns.
    pub fn new(schema: &TableSchema) -> Self {
        Self {
            names: schema.columns.iter().map(|c| c.name.clone()).collect(),
            rows: Arc::new(CsvRows {
                row_size: RowSize::new(32),
            }),
        }
    }
}

fn field(s: &[u8], out: &mut Vec<u8>) {
    if needs_csv_quote(s, 0, s.len()) {
        quoted(s, out);
    } else {
        out.extend_from_slice(s);
    }
}

/// `s` in quotes, its quotes doubled.
fn quoted(s: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    // Whole 16-byte blocks by shuffles where the CPU has them, the rest word by word.
    let done = double_quotes_blocks(s, out);
    copy_flagged(&s[done..], out, quote_flags, |_, out| {
        out.extend_from_slice(b"\"\"")
    });
    out.push(b'"');
}

impl Encoder for CsvEncoder {
    fn header(&mut self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        for (i, n) in self.names.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            field(n.as_bytes(), out);
        }
        out.extend_from_slice(b"\r\n");
        Ok(())
    }

    fn batch(&mut self, batch: &RecordBatch, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        self.rows.encode(batch, out)
    }

    fn footer(&mut self, _out: &mut Vec<u8>) -> Result<(), EncodeError> {
        Ok(())
    }

    fn parallel(&self) -> Option<Arc<dyn BatchEncoder>> {
        Some(self.rows.clone())
    }
}

/// CSV rows of a batch: every line is the same wherever it appears.
struct CsvRows {
    /// The largest row size seen, to size each batch's buffer once.
    row_size: RowSize,
}

impl BatchEncoder for CsvRows {
    fn encode(&self, batch: &RecordBatch, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        let cols = Column::all(batch)?;
        let mut times = Rfc3339::default();
        self.row_size.write(out, batch.num_rows(), |cur| {
            for row in 0..batch.num_rows() {
                for (i, col) in cols.iter().enumerate() {
                    if i > 0 {
                        cur.push(b',');
                    }
                    match col.cell(row) {
                        Cell::Null => {}
                        Cell::Str(t) => {
                            if !push_if_clean(cur, t.data, t.start, t.len, Special::Csv) {
                                cur.vec(|out| quoted(t.bytes(), out))
                            }
                        }
                        Cell::Int(v) => push_i64(cur, v),
                        Cell::Float(v, short) if v.is_finite() => push_f64(cur, v, short),
                        Cell::Float(..) => {}
                        Cell::Bool(true) => cur.put(b"true", 4),
                        Cell::Bool(false) => cur.put(b"false", 5),
                        Cell::Ts(v) => times.write(v, cur),
                        Cell::Date(days) => cur.vec(|out| write_date(days, out)),
                    }
                }
                cur.put(b"\r\n", 2);
            }
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_matches_rfc_4180_byte_by_byte() {
        let naive = |s: &[u8]| {
            let mut out = vec![b'"'];
            for &b in s {
                if b == b'"' {
                    out.push(b'"');
                }
                out.push(b);
            }
            out.push(b'"');
            out
        };
        let alphabet: [&[u8]; 9] = [
            b"a",
            b"bcdefghij",
            b"\"",
            b"\"\"",
            b",",
            b"\n",
            b"\r\n",
            "é🎉".as_bytes(),
            b" ",
        ];
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..5000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let s: Vec<u8> = (0..(x % 30))
                .flat_map(|k| {
                    alphabet[((x >> (k % 50)) as usize + k as usize * 5) % alphabet.len()]
                        .iter()
                        .copied()
                })
                .collect();
            let mut out = Vec::new();
            quoted(&s, &mut out);
            assert_eq!(out, naive(&s), "{:?}", String::from_utf8_lossy(&s));
        }
    }
}
