//! The download request body (SPEC §3.1) and its validation.

use serde::Deserialize;

use crate::model::Invalid;

/// What a client asks for.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DownloadRequest {
    /// Canvas id.
    pub canvas_id: String,
    /// Element id.
    pub element_id: String,
    /// Output format (`json`, `ndjson`, `csv`, `arrow`, `parquet`); wins over `Accept`.
    #[serde(default)]
    pub format: Option<String>,
    /// Write int64 values as JSON strings (JavaScript clients).
    #[serde(default, rename = "int64_as_string", alias = "int64AsString")]
    pub int64_as_string: bool,
    /// Ordered subset of the element's columns.
    #[serde(default)]
    pub columns: Option<Vec<String>>,
    /// Most rows to return (the page size when paging).
    #[serde(default)]
    pub limit: Option<u64>,
    /// Row filters (checked against the element's columns when planning).
    #[serde(default)]
    pub filters: Option<serde_json::Value>,
    /// Resume after a previous page.
    #[serde(default)]
    pub cursor: Option<String>,
    /// Values of an SQL element's `$name` parameters.
    #[serde(default)]
    pub params: Option<serde_json::Map<String, serde_json::Value>>,
    /// Include events acknowledged but not yet committed (SPEC §3.5); `None`: the element's
    /// default.
    #[serde(default)]
    pub fresh: Option<bool>,
}

/// Parses and checks the body.
pub fn parse(body: &[u8]) -> Result<DownloadRequest, Invalid> {
    let value: serde_json::Value = serde_json::from_slice(body)
        .map_err(|e| Invalid::new("invalid_json", format!("body is not valid JSON: {e}")))?;
    if !value.is_object() {
        return Err(Invalid::new("invalid_body", "body must be a JSON object"));
    }
    for field in ["canvasId", "elementId"] {
        match value.get(field) {
            Some(serde_json::Value::String(s)) if !s.is_empty() => {}
            Some(serde_json::Value::String(_)) | None | Some(serde_json::Value::Null) => {
                return Err(
                    Invalid::new("missing_field", format!("{field} is required")).field(field),
                );
            }
            Some(_) => {
                return Err(
                    Invalid::new("invalid_field", format!("{field} must be a string")).field(field),
                );
            }
        }
    }
    let req: DownloadRequest = serde_path_to_error::deserialize(value).map_err(|e| {
        let field = e.path().to_string();
        Invalid::new("invalid_field", format!("{field}: {}", e.inner())).field(field)
    })?;
    if req.fresh == Some(true) && req.cursor.is_some() {
        return Err(Invalid::new(
            "fresh_with_cursor",
            "a fresh read cannot resume from a cursor (cursors page over committed files); drop one of them",
        )
        .field("fresh"));
    }
    Ok(req)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validates_fields() {
        assert!(parse(br#"{"canvasId":"c","elementId":"e","columns":["a"],"limit":5}"#).is_ok());
        assert_eq!(parse(b"nope").unwrap_err().code, "invalid_json");
        assert_eq!(parse(b"[]").unwrap_err().code, "invalid_body");
        assert_eq!(
            parse(br#"{"elementId":"e"}"#).unwrap_err().field.as_deref(),
            Some("canvasId")
        );
        assert_eq!(
            parse(br#"{"canvasId":1,"elementId":"e"}"#)
                .unwrap_err()
                .code,
            "invalid_field"
        );
        let e = parse(br#"{"canvasId":"c","elementId":"e","limit":-1}"#).unwrap_err();
        assert_eq!(
            (e.code, e.field.as_deref()),
            ("invalid_field", Some("limit"))
        );
        assert!(
            parse(br#"{"canvasId":"c","elementId":"e","int64_as_string":true}"#)
                .unwrap()
                .int64_as_string
        );
        let e =
            parse(br#"{"canvasId":"c","elementId":"e","fresh":true,"cursor":"x"}"#).unwrap_err();
        assert_eq!(e.code, "fresh_with_cursor");
        let e = parse(br#"{"canvasId":"c","elementId":"e","fresh":"yes"}"#).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("fresh"));
    }
}
