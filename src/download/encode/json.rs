//! JSON and NDJSON. JSON is `{"meta": [...], "data": [rows...], "rows": N, "next_cursor": …}`
//! written batch by batch; NDJSON is one row object per line. Timestamps are RFC 3339 UTC with
//! `Z` (as many fraction digits as the value needs: 0, 3 or 6), NaN and infinities are null,
//! nulls are explicit, and `int64_as_string` writes int64 values as JSON strings.

use std::sync::Arc;

use arrow::record_batch::RecordBatch;

use super::BatchEncoder;
use super::append::{WINDOW, copy_flagged, json_escape_flags, push_i64, push_window};
use super::clean::{Special, push_if_clean};
use super::column::{Cell, Column, Text};
use super::expand::escape_blocks;
use super::float::push_f64;
use super::sink::{RowSize, Sink};
use super::timestamp::{Rfc3339, write_date};

use crate::model::schema::TableSchema;

/// Encodes one JSON (or NDJSON) response.
pub struct JsonEncoder {
    /// How rows are written (shared with the threads that encode batches in parallel).
    rows_of: Arc<JsonRows>,
    rows: u64,
    /// The header, kept until the first write.
    schema: TableSchema,
    /// `next_cursor` of the footer.
    next_cursor: Option<String>,
}

impl JsonEncoder {
    /// An NDJSON encoder.
    pub fn ndjson(schema: &TableSchema, int64_as_string: bool) -> Self {
        Self::with(schema, true, int64_as_string)
    }

    /// A JSON document encoder.
    pub fn json(schema: &TableSchema, int64_as_string: bool) -> Self {
        Self::with(schema, false, int64_as_string)
    }

    /// A JSON document encoder for `schema`'s columns.
    pub fn new(schema: &TableSchema) -> Self {
        Self::with(schema, false, false)
    }

    fn with(schema: &TableSchema, ndjson: bool, int64_as_string: bool) -> Self {
        let row_open: &[u8] = if ndjson { b"{" } else { b",\n{" };
        let mut prefixes = Vec::new();
        let mut spans = Vec::with_capacity(schema.columns.len());
        for (i, c) in schema.columns.iter().enumerate() {
            let start = prefixes.len();
            prefixes.extend_from_slice(if i == 0 { row_open } else { b"," });
            serde_json::to_writer(&mut prefixes, &c.name).expect("strings serialise");
            prefixes.push(b':');
            spans.push((start, prefixes.len() - start));
        }
        // Room for the last prefix to be copied as a whole window.
        prefixes.resize(prefixes.len() + WINDOW, 0);
        Self {
            rows_of: Arc::new(JsonRows {
                prefixes,
                spans,
                row_open,
                ndjson,
                int64_as_string,
                row_size: RowSize::new(64),
            }),
            rows: 0,
            schema: schema.clone(),
            next_cursor: None,
        }
    }

    /// `{"meta":[…],"data":[`
    pub fn header(schema: &TableSchema) -> Vec<u8> {
        let meta: Vec<_> = schema
            .columns
            .iter()
            .map(|c| serde_json::json!({"name": c.name, "type": c.ty.as_str()}))
            .collect();
        let mut out = b"{\"meta\":".to_vec();
        serde_json::to_writer(&mut out, &meta).expect("in-memory write");
        out.extend_from_slice(b",\"data\":[");
        out
    }

    /// Appends the batch's rows to `out`.
    pub fn batch(&mut self, batch: &RecordBatch, out: &mut Vec<u8>) {
        let start = out.len();
        self.rows_of.rows(batch, out);
        self.accept_at(batch.num_rows(), out, start);
    }

    /// Takes rows written by [`JsonRows`] at `out[start..]`: the document's first row has no
    /// comma before it.
    fn accept_at(&mut self, rows: usize, out: &mut Vec<u8>, start: usize) {
        if self.rows == 0 && rows > 0 && !self.rows_of.ndjson {
            debug_assert_eq!(out[start], b',');
            out.remove(start);
        }
        self.rows += rows as u64;
    }

    /// `],"rows":N,"next_cursor":null}`
    pub fn footer(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(48);
        if self.rows > 0 {
            out.push(b'\n');
        }
        out.extend_from_slice(b"],\"rows\":");
        out.extend_from_slice(itoa::Buffer::new().format(self.rows).as_bytes());
        out.extend_from_slice(b",\"next_cursor\":");
        match &self.next_cursor {
            Some(c) => serde_json::to_writer(&mut out, c).expect("in-memory write"),
            None => out.extend_from_slice(b"null"),
        }
        out.extend_from_slice(b"}\n");
        out
    }

    /// Rows written so far.
    pub fn rows(&self) -> u64 {
        self.rows
    }
}

impl super::Encoder for JsonEncoder {
    fn header(&mut self, out: &mut Vec<u8>) -> Result<(), super::EncodeError> {
        if !self.rows_of.ndjson {
            out.extend_from_slice(&JsonEncoder::header(&self.schema));
        }
        Ok(())
    }

    fn batch(&mut self, batch: &RecordBatch, out: &mut Vec<u8>) -> Result<(), super::EncodeError> {
        JsonEncoder::batch(self, batch, out);
        Ok(())
    }

    fn set_next_cursor(&mut self, cursor: Option<String>) {
        self.next_cursor = cursor;
    }

    fn parallel(&self) -> Option<Arc<dyn BatchEncoder>> {
        Some(self.rows_of.clone())
    }

    fn accept(&mut self, rows: usize, out: &mut Vec<u8>) {
        self.accept_at(rows, out, 0);
    }

    fn footer(&mut self, out: &mut Vec<u8>) -> Result<(), super::EncodeError> {
        if !self.rows_of.ndjson {
            out.extend_from_slice(&JsonEncoder::footer(self));
        }
        Ok(())
    }
}

/// The rows of a batch as JSON objects, each as it appears after another row: `,\n{…}` in a
/// document, `{…}\n` in NDJSON.
pub struct JsonRows {
    /// What goes before each column's value, back to back (`,\n{"a":`, `,"b":`, …), then
    /// [`WINDOW`] bytes of padding.
    prefixes: Vec<u8>,
    /// (start, length) of each column's prefix in `prefixes`.
    spans: Vec<(usize, usize)>,
    /// What opens a row (only written alone when there are no columns).
    row_open: &'static [u8],
    /// Document (`false`) or one object per line (`true`).
    ndjson: bool,
    /// Write int64 values as strings.
    int64_as_string: bool,
    /// The largest row size seen, to size each batch's buffer once.
    row_size: RowSize,
}

impl JsonRows {
    fn rows(&self, batch: &RecordBatch, out: &mut Vec<u8>) {
        // Each column's encoder is chosen once per batch, not per cell.
        let cols = Column::all(batch).expect("the reader only yields warehouse types");
        let mut times = Rfc3339::default();
        self.row_size.write(out, batch.num_rows(), |cur| {
            for row in 0..batch.num_rows() {
                if cols.is_empty() {
                    cur.put_slice(self.row_open);
                }
                for (col, &(at, len)) in cols.iter().zip(&self.spans) {
                    push_window(cur, &self.prefixes, at, len);
                    write_cell(col.cell(row), self.int64_as_string, &mut times, cur);
                }
                // Two constant closers rather than one slice chosen above: a slice of unknown
                // length is copied by a `memcpy` call per row (~1 % of a numeric download).
                if self.ndjson {
                    cur.put(b"}\n", 2);
                } else {
                    cur.push(b'}');
                }
            }
        });
    }
}

impl BatchEncoder for JsonRows {
    fn encode(&self, batch: &RecordBatch, out: &mut Vec<u8>) -> Result<(), super::EncodeError> {
        self.rows(batch, out);
        Ok(())
    }
}

/// Writes one cell as a JSON value.
#[inline(always)]
fn write_cell(cell: Cell, int64_as_string: bool, times: &mut Rfc3339, out: &mut impl Sink) {
    match cell {
        Cell::Null => out.put(b"null", 4),
        Cell::Str(t) => write_str(t, out),
        Cell::Int(v) if int64_as_string => {
            out.push(b'"');
            push_i64(out, v);
            out.push(b'"');
        }
        Cell::Int(v) => push_i64(out, v),
        Cell::Float(v, short) if v.is_finite() => push_f64(out, v, short),
        Cell::Float(..) => out.put(b"null", 4),
        Cell::Bool(true) => out.put(b"true", 4),
        Cell::Bool(false) => out.put(b"false", 5),
        Cell::Ts(v) => {
            out.push(b'"');
            times.write(v, out);
            out.push(b'"');
        }
        Cell::Date(days) => out.vec(|out| {
            out.push(b'"');
            write_date(days, out);
            out.push(b'"');
        }),
    }
}

/// A JSON string: copied as is when nothing needs escaping (the common case), else escaped as
/// it is copied (as serde_json does: `\"`, `\\`, `\b \f \n \r \t`, other control bytes as
/// `\u00XX`).
#[inline(always)]
fn write_str(t: Text, out: &mut impl Sink) {
    out.push(b'"');
    if !push_if_clean(out, t.data, t.start, t.len, Special::Json) {
        out.vec(|out| escape(t.bytes(), out));
    }
    out.push(b'"');
}

/// Appends `s` with JSON escapes. Never inlined: kept out of the row loop, whose other
/// columns' code it would crowd.
#[inline(never)]
fn escape(s: &[u8], out: &mut Vec<u8>) {
    // Whole 16-byte blocks by shuffles where the CPU has them, the rest word by word.
    let done = escape_blocks(s, out);
    copy_flagged(&s[done..], out, json_escape_flags, push_escaped);
}

/// Appends the escape of `b` (a control byte, `"` or `\`).
#[inline(always)]
fn push_escaped(b: u8, out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let short = match b {
        b'"' => b'"',
        b'\\' => b'\\',
        b'\n' => b'n',
        b'\r' => b'r',
        b'\t' => b't',
        0x08 => b'b',
        0x0c => b'f',
        _ => {
            out.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[(b >> 4) as usize],
                HEX[(b & 15) as usize],
            ]);
            return;
        }
    };
    out.extend_from_slice(&[b'\\', short]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_match_serde_json() {
        let cases = [
            "plain",
            "",
            "say \"hi\"",
            "back\\slash",
            "line\nbreak\r\n\ttab",
            "\u{0}\u{1}\u{8}\u{b}\u{c}\u{1f}\u{7f}",
            "é 日本 🎉 👍🏽 \"quoted\"\n",
        ];
        for s in cases {
            let mut out = Vec::new();
            write_str(
                Text {
                    data: s.as_bytes(),
                    start: 0,
                    len: s.len(),
                },
                &mut out,
            );
            assert_eq!(out, serde_json::to_vec(s).unwrap(), "{s:?}");
        }
    }

    #[test]
    fn every_special_byte_at_every_offset_matches_serde_json() {
        let specials = [
            "\"", "\\", "\n", "\u{0}", "\u{1f}", "\u{7f}", " ", "é", "日",
        ];
        for len in [15, 16, 17, 31, 32, 33, 48] {
            for at in 0..len {
                for sp in specials {
                    let s = format!("{}{sp}{}", "a".repeat(at), "z".repeat(len - at));
                    let mut out = Vec::new();
                    escape(s.as_bytes(), &mut out);
                    let want = serde_json::to_vec(&s).unwrap();
                    assert_eq!(out, want[1..want.len() - 1], "{s:?}");
                }
            }
        }
    }

    #[test]
    fn escaping_random_text_matches_serde_json() {
        let alphabet = [
            "a", "bcdefgh", "\"", "\\", "\n", "\r", "\t", "\u{1}", "\u{1f}", "é", "日本", "🎉", " ",
        ];
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..5000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let s: String = (0..(x % 40))
                .map(|k| alphabet[((x >> (k % 50)) as usize + k as usize * 7) % alphabet.len()])
                .collect();
            let mut out = Vec::new();
            write_str(
                Text {
                    data: s.as_bytes(),
                    start: 0,
                    len: s.len(),
                },
                &mut out,
            );
            assert_eq!(out, serde_json::to_vec(&s).unwrap(), "{s:?}");
        }
    }
}
