//! JSON and NDJSON. JSON is `{"meta": [...], "data": [rows...], "rows": N, "next_cursor": …}`
//! written batch by batch; NDJSON is one row object per line. Timestamps are RFC 3339 UTC with
//! `Z` (as many fraction digits as the value needs: 0, 3 or 6), NaN and infinities are null,
//! nulls are explicit, and `int64_as_string` writes int64 values as JSON strings.

use arrow::record_batch::RecordBatch;

use super::column::{Cell, Column};

use crate::warehouse::schema::TableSchema;

/// Encodes one JSON (or NDJSON) response.
pub struct JsonEncoder {
    /// `"name":` for each column, escaped once.
    keys: Vec<Vec<u8>>,
    rows: u64,
    /// Document (`false`) or one object per line (`true`).
    ndjson: bool,
    /// Write int64 values as strings.
    int64_as_string: bool,
    /// The header, kept until the first write.
    schema: TableSchema,
    /// `next_cursor` of the footer.
    next_cursor: Option<String>,
}

impl JsonEncoder {
    /// An NDJSON encoder.
    pub fn ndjson(schema: &TableSchema, int64_as_string: bool) -> Self {
        let mut e = Self::new(schema);
        e.ndjson = true;
        e.int64_as_string = int64_as_string;
        e
    }

    /// A JSON document encoder.
    pub fn json(schema: &TableSchema, int64_as_string: bool) -> Self {
        let mut e = Self::new(schema);
        e.int64_as_string = int64_as_string;
        e
    }

    /// An encoder for `schema`'s columns.
    pub fn new(schema: &TableSchema) -> Self {
        let keys = schema
            .columns
            .iter()
            .map(|c| {
                let mut k = serde_json::to_vec(&c.name).expect("strings serialise");
                k.push(b':');
                k
            })
            .collect();
        Self {
            keys,
            rows: 0,
            ndjson: false,
            int64_as_string: false,
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
        // Each column's encoder is chosen once per batch, not per cell.
        let cols = Column::all(batch).expect("the reader only yields warehouse types");
        for row in 0..batch.num_rows() {
            out.extend_from_slice(match (self.ndjson, self.rows) {
                (true, _) => b"{",
                (false, 0) => b"\n{",
                (false, _) => b",\n{",
            });
            for (i, col) in cols.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                out.extend_from_slice(&self.keys[i]);
                write_cell(col.cell(row), self.int64_as_string, out);
            }
            out.extend_from_slice(if self.ndjson { b"}\n" } else { b"}" });
            self.rows += 1;
        }
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
        if !self.ndjson {
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

    fn footer(&mut self, out: &mut Vec<u8>) -> Result<(), super::EncodeError> {
        if !self.ndjson {
            out.extend_from_slice(&JsonEncoder::footer(self));
        }
        Ok(())
    }
}

/// Writes one cell as a JSON value.
fn write_cell(cell: Cell, int64_as_string: bool, out: &mut Vec<u8>) {
    match cell {
        Cell::Null => out.extend_from_slice(b"null"),
        Cell::Str(s) => write_str(s, out),
        Cell::Int(v) => {
            let mut buf = itoa::Buffer::new();
            let text = buf.format(v).as_bytes();
            if int64_as_string {
                out.push(b'"');
                out.extend_from_slice(text);
                out.push(b'"');
            } else {
                out.extend_from_slice(text);
            }
        }
        Cell::Float(v) if v.is_finite() => {
            out.extend_from_slice(ryu::Buffer::new().format_finite(v).as_bytes())
        }
        Cell::Float(_) => out.extend_from_slice(b"null"),
        Cell::Bool(b) => out.extend_from_slice(if b { b"true" } else { b"false" }),
        Cell::Ts(v) => {
            out.push(b'"');
            write_rfc3339(v, out);
            out.push(b'"');
        }
    }
}

/// A JSON string: copied as is when nothing needs escaping (the common case), else escaped by
/// serde_json.
fn write_str(s: &str, out: &mut Vec<u8>) {
    if s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.reserve(s.len() + 2);
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    } else {
        serde_json::to_writer(&mut *out, s).expect("in-memory write");
    }
}

/// Writes µs since the epoch as `YYYY-MM-DDTHH:MM:SS[.fff[fff]]Z`.
pub fn write_rfc3339(micros: i64, out: &mut Vec<u8>) {
    let secs = micros.div_euclid(1_000_000);
    let frac = micros.rem_euclid(1_000_000);
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    let two = |out: &mut Vec<u8>, v: i64| {
        out.push(b'0' + (v / 10) as u8);
        out.push(b'0' + (v % 10) as u8);
    };
    if (0..=9999).contains(&y) {
        two(out, y / 100);
        two(out, y % 100);
    } else {
        out.extend_from_slice(format!("{y:+}").as_bytes());
    }
    out.push(b'-');
    two(out, m);
    out.push(b'-');
    two(out, d);
    out.push(b'T');
    two(out, sod / 3600);
    out.push(b':');
    two(out, sod / 60 % 60);
    out.push(b':');
    two(out, sod % 60);
    if frac != 0 {
        let (v, digits) = if frac % 1000 == 0 {
            (frac / 1000, 3)
        } else {
            (frac, 6)
        };
        out.push(b'.');
        // Zero-padded digits without `fmt` (this runs once per timestamp cell).
        let mut buf = [b'0'; 6];
        let mut v = v;
        for slot in buf[..digits].iter_mut().rev() {
            *slot = b'0' + (v % 10) as u8;
            v /= 10;
        }
        out.extend_from_slice(&buf[..digits]);
    }
    out.push(b'Z');
}

/// Days since 1970-01-01 → (year, month, day), proleptic Gregorian (H. Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(micros: i64) -> String {
        let mut v = Vec::new();
        write_rfc3339(micros, &mut v);
        String::from_utf8(v).unwrap()
    }

    #[test]
    fn timestamps_match_chrono() {
        assert_eq!(ts(1_354_408_208_276_000), "2012-12-02T00:30:08.276Z");
        assert_eq!(ts(1_354_408_208_000_000), "2012-12-02T00:30:08Z");
        assert_eq!(ts(1_354_408_208_000_001), "2012-12-02T00:30:08.000001Z");
        for micros in [
            0i64,
            -1,
            951_782_400_123_456,
            4_102_444_799_999_999,
            -2_208_988_800_000_000,
        ] {
            let chrono = chrono::DateTime::from_timestamp_micros(micros)
                .unwrap()
                .to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true);
            assert_eq!(ts(micros), chrono, "{micros}");
        }
    }
}
