//! Paging cursors: opaque (URL-safe base64 of JSON) tokens carrying the snapshot a download
//! started from, the position after its last row, and a fingerprint of the request (element,
//! columns, filters; an SQL element's parameters too) so a cursor is only accepted for the same
//! query. A table's cursor ([`Cursor`]) holds one snapshot and a position in its files; an SQL
//! element's ([`QueryCursor`]) holds the snapshot of every table the query read and how many
//! of its rows were sent — the query reruns over those snapshots and skips them.

use std::collections::BTreeMap;

use base64::Engine;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::catalog::SnapshotId;
use crate::model::Invalid;
use crate::model::schema::TableSchema;
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

/// The format version of an SQL element's cursor (a table's is 1).
pub const QUERY_CURSOR_VERSION: u8 = 2;

/// What an SQL element's cursor holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct QueryCursor {
    /// Format version.
    pub v: u8,
    /// The snapshot of each table the first page read.
    pub snaps: BTreeMap<String, SnapshotId>,
    /// Rows of the result (after the request's filters) sent by the pages so far.
    pub sent: u64,
    /// Digest of the result's columns and types on the first page.
    pub cols: String,
    /// The first page's query time, `now()` on every page (µs since the epoch).
    pub t: i64,
    /// Fingerprint of the query.
    pub q: String,
}

/// Fingerprint of a query: element plus the request's columns and filters.
pub fn fingerprint(
    element: &str,
    columns: &Option<Vec<String>>,
    filters: &Option<serde_json::Value>,
) -> String {
    digest(&serde_json::json!([element, columns, filters]))
}

/// Fingerprint of an SQL element's query: [`fingerprint`] and the parameters' values.
pub fn query_fingerprint(
    element: &str,
    columns: &Option<Vec<String>>,
    filters: &Option<serde_json::Value>,
    params: &Option<serde_json::Map<String, serde_json::Value>>,
) -> String {
    digest(&serde_json::json!([element, columns, filters, params]))
}

/// Digest of a result's columns (names and types), to tell when they changed between pages.
pub fn columns_digest(schema: &TableSchema) -> String {
    let columns: Vec<[&str; 2]> = schema
        .columns
        .iter()
        .map(|c| [c.name.as_str(), c.ty.as_str()])
        .collect();
    digest(&serde_json::json!(columns))
}

fn digest(canonical: &serde_json::Value) -> String {
    let digest = Sha256::digest(canonical.to_string().as_bytes());
    digest[..8].iter().map(|b| format!("{b:02x}")).collect()
}

/// Encodes a cursor of either kind.
pub fn encode<C: Serialize>(c: &C) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(serde_json::to_vec(c).expect("serialisable"))
}

/// Decodes and checks a table's cursor against the query's fingerprint.
pub fn decode(token: &str, fingerprint: &str) -> Result<Cursor, Invalid> {
    let c: Cursor = open(token)?;
    check(c.v, 1, &c.q, fingerprint)?;
    Ok(c)
}

/// Decodes and checks an SQL element's cursor against the query's fingerprint.
pub fn decode_query(token: &str, fingerprint: &str) -> Result<QueryCursor, Invalid> {
    let c: QueryCursor = open(token)?;
    check(c.v, QUERY_CURSOR_VERSION, &c.q, fingerprint)?;
    if c.sent > i64::MAX as u64 {
        return Err(invalid("not a cursor returned by this service"));
    }
    Ok(c)
}

fn invalid(why: &str) -> Invalid {
    Invalid::new("invalid_cursor", format!("cursor is not valid: {why}")).field("cursor")
}

fn open<C: DeserializeOwned>(token: &str) -> Result<C, Invalid> {
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token.trim())
        .map_err(|_| invalid("not a cursor returned by this service"))?;
    serde_json::from_slice(&bytes).map_err(|_| invalid("not a cursor returned by this service"))
}

fn check(version: u8, want: u8, q: &str, fingerprint: &str) -> Result<(), Invalid> {
    if version != want {
        return Err(invalid("unknown version"));
    }
    if q != fingerprint {
        return Err(invalid(
            "it belongs to a different element, column list or filter list",
        ));
    }
    Ok(())
}
