//! Paging cursors: opaque (URL-safe base64 of JSON) tokens carrying the snapshot a download
//! started from, the position after its last row, and a fingerprint of the request (element,
//! columns, filters) so a cursor is only accepted for the same query.

use base64::Engine;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::catalog::SnapshotId;
use crate::model::Invalid;
use crate::warehouse::reader::Position;

/// What a cursor holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Cursor {
    /// Format version.
    pub v: u8,
    /// The snapshot of the first page.
    pub snap: SnapshotId,
    /// Where the next page starts.
    pub pos: Position,
    /// Fingerprint of the query.
    pub q: String,
}

/// Fingerprint of a query: element plus the request's columns and filters.
pub fn fingerprint(
    element: &str,
    columns: &Option<Vec<String>>,
    filters: &Option<serde_json::Value>,
) -> String {
    let canonical = serde_json::json!([element, columns, filters]).to_string();
    let digest = Sha256::digest(canonical.as_bytes());
    digest[..8].iter().map(|b| format!("{b:02x}")).collect()
}

/// Encodes a cursor.
pub fn encode(c: &Cursor) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(serde_json::to_vec(c).expect("serialisable"))
}

/// Decodes and checks a cursor against the query's fingerprint.
pub fn decode(token: &str, fingerprint: &str) -> Result<Cursor, Invalid> {
    let invalid = |why: &str| {
        Invalid::new("invalid_cursor", format!("cursor is not valid: {why}")).field("cursor")
    };
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token.trim())
        .map_err(|_| invalid("not a cursor returned by this service"))?;
    let c: Cursor = serde_json::from_slice(&bytes)
        .map_err(|_| invalid("not a cursor returned by this service"))?;
    if c.v != 1 {
        return Err(invalid("unknown version"));
    }
    if c.q != fingerprint {
        return Err(invalid(
            "it belongs to a different element, column list or filter list",
        ));
    }
    Ok(c)
}
