//! Content negotiation for downloads: the output format (body `format` wins over `Accept`,
//! q-values honoured, nothing acceptable → 406) and the response compression
//! (`Accept-Encoding`: zstd or gzip, by q-value, else identity).

use super::error::DownloadError;
use crate::model::Invalid;

/// The code of a request whose `Accept` names nothing we produce (406).
const NOT_ACCEPTABLE: &str = "not_acceptable";

/// Why no output format was chosen, with the code the client sees: `unsupported_format` (the
/// body's `format` is none of ours, 400 naming `format`) or `not_acceptable` (nothing `Accept`
/// names can be produced, 406).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NoFormat {
    /// `unsupported_format` or `not_acceptable`.
    pub code: &'static str,
    /// What can be asked for instead.
    pub message: String,
}

impl From<Invalid> for NoFormat {
    fn from(e: Invalid) -> Self {
        NoFormat {
            code: e.code,
            message: e.message,
        }
    }
}

impl From<NoFormat> for DownloadError {
    fn from(e: NoFormat) -> Self {
        if e.code == NOT_ACCEPTABLE {
            DownloadError::NotAcceptable(e.message)
        } else {
            DownloadError::Invalid(Invalid::new(e.code, e.message).field("format"))
        }
    }
}

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `{"meta","data","rows","next_cursor"}`.
    Json,
    /// One JSON object per line.
    Ndjson,
    /// RFC 4180 with a header row.
    Csv,
    /// Arrow IPC stream.
    Arrow,
    /// Parquet file.
    Parquet,
}

const ALL: [Format; 5] = [
    Format::Json,
    Format::Ndjson,
    Format::Csv,
    Format::Arrow,
    Format::Parquet,
];

impl Format {
    /// The body's `format` name.
    pub fn name(self) -> &'static str {
        match self {
            Format::Json => "json",
            Format::Ndjson => "ndjson",
            Format::Csv => "csv",
            Format::Arrow => "arrow",
            Format::Parquet => "parquet",
        }
    }

    /// The response `Content-Type`.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Json => "application/json",
            Format::Ndjson => "application/x-ndjson",
            Format::Csv => "text/csv; charset=utf-8",
            Format::Arrow => "application/vnd.apache.arrow.stream",
            Format::Parquet => "application/vnd.apache.parquet",
        }
    }

    /// Media types that select this format in `Accept`.
    fn media_types(self) -> &'static [&'static str] {
        match self {
            Format::Json => &["application/json"],
            Format::Ndjson => &[
                "application/x-ndjson",
                "application/ndjson",
                "application/jsonl",
            ],
            Format::Csv => &["text/csv"],
            Format::Arrow => &[
                "application/vnd.apache.arrow.stream",
                "application/vnd.apache.arrow",
            ],
            Format::Parquet => &["application/vnd.apache.parquet", "application/x-parquet"],
        }
    }

    /// Parses the body's `format`.
    pub fn parse(name: &str) -> Result<Format, Invalid> {
        ALL.into_iter().find(|f| f.name() == name).ok_or_else(|| {
            Invalid::new(
                "unsupported_format",
                format!(
                    "format {name:?} is not supported; use json, ndjson, csv, arrow or parquet"
                ),
            )
            .field("format")
        })
    }
}

/// `(value, q)` pairs of an `Accept`-style header, in order.
fn ranges(header: &str) -> Vec<(String, f32)> {
    header
        .split(',')
        .filter_map(|part| {
            let mut it = part.split(';');
            let value = it.next()?.trim().to_ascii_lowercase();
            if value.is_empty() {
                return None;
            }
            let q = it
                .filter_map(|p| {
                    p.trim()
                        .strip_prefix("q=")
                        .and_then(|q| q.trim().parse::<f32>().ok())
                })
                .next()
                .unwrap_or(1.0);
            Some((value, q))
        })
        .collect()
}

/// The format to send: the body's `format`, else the best `Accept` match, else JSON.
pub fn negotiate(body_format: Option<&str>, accept: Option<&str>) -> Result<Format, NoFormat> {
    if let Some(name) = body_format {
        return Ok(Format::parse(name)?);
    }
    let Some(accept) = accept.filter(|a| !a.trim().is_empty()) else {
        return Ok(Format::Json);
    };
    let mut best: Option<(Format, f32)> = None;
    for (media, q) in ranges(accept) {
        if q <= 0.0 {
            continue;
        }
        let format = match media.as_str() {
            "*/*" | "application/*" => Some(Format::Json),
            m => ALL.into_iter().find(|f| f.media_types().contains(&m)),
        };
        if let Some(f) = format
            && best.is_none_or(|(_, bq)| q > bq)
        {
            best = Some((f, q));
        }
    }
    best.map(|(f, _)| f).ok_or_else(|| NoFormat {
        code: NOT_ACCEPTABLE,
        message: format!(
            "cannot produce {accept:?}; available: application/json, application/x-ndjson, text/csv, \
             application/vnd.apache.arrow.stream, application/vnd.apache.parquet"
        ),
    })
}

/// Response compression.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// None.
    Identity,
    /// `gzip`.
    Gzip,
    /// `zstd`.
    Zstd,
}

impl Compression {
    /// The `Content-Encoding` value.
    pub fn header(self) -> Option<&'static str> {
        match self {
            Compression::Identity => None,
            Compression::Gzip => Some("gzip"),
            Compression::Zstd => Some("zstd"),
        }
    }
}

/// The best compression `Accept-Encoding` allows (zstd preferred on a tie).
pub fn negotiate_encoding(accept_encoding: Option<&str>) -> Compression {
    let Some(header) = accept_encoding else {
        return Compression::Identity;
    };
    let mut best = (Compression::Identity, 0.0f32);
    for (coding, q) in ranges(header) {
        let c = match coding.as_str() {
            "zstd" => Compression::Zstd,
            "gzip" | "x-gzip" => Compression::Gzip,
            "*" => Compression::Zstd,
            _ => continue,
        };
        let better = q > best.1 || (q == best.1 && q > 0.0 && c == Compression::Zstd);
        if q > 0.0 && better {
            best = (c, q);
        }
    }
    best.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_negotiation() {
        assert_eq!(negotiate(None, None).unwrap(), Format::Json);
        assert_eq!(
            negotiate(Some("csv"), Some("application/json")).unwrap(),
            Format::Csv,
            "body wins"
        );
        assert_eq!(negotiate(None, Some("text/csv")).unwrap(), Format::Csv);
        assert_eq!(
            negotiate(None, Some("text/csv;q=0.5, application/x-ndjson;q=0.9")).unwrap(),
            Format::Ndjson
        );
        assert_eq!(
            negotiate(None, Some("text/html, */*;q=0.1")).unwrap(),
            Format::Json
        );
        assert_eq!(
            negotiate(None, Some("application/vnd.apache.arrow.stream")).unwrap(),
            Format::Arrow
        );
        assert_eq!(
            negotiate(None, Some("text/html")).unwrap_err().code,
            "not_acceptable"
        );
        assert_eq!(
            negotiate(None, Some("text/csv;q=0")).unwrap_err().code,
            "not_acceptable"
        );
        assert_eq!(
            negotiate(Some("xml"), None).unwrap_err().code,
            "unsupported_format"
        );
    }

    #[test]
    fn encoding_negotiation() {
        assert_eq!(negotiate_encoding(None), Compression::Identity);
        assert_eq!(negotiate_encoding(Some("gzip, deflate")), Compression::Gzip);
        assert_eq!(negotiate_encoding(Some("gzip, zstd")), Compression::Zstd);
        assert_eq!(
            negotiate_encoding(Some("gzip;q=1, zstd;q=0.5")),
            Compression::Gzip
        );
        assert_eq!(
            negotiate_encoding(Some("zstd;q=0, br")),
            Compression::Identity
        );
    }
}
