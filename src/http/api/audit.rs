//! `GET /api/v1/audit?limit=&before=` (owners): the team's audit log, newest first — who did
//! what, when, from which address; never a secret. `limit` (default 100, at most 500) entries
//! with ids below `before`; `next_before` continues the listing when there may be more.

use axum::Json;
use axum::extract::{RawQuery, State};
use serde_json::{Value, json};

use super::super::AppState;
use crate::accounts::Caller;
use crate::http::error::ApiError;

/// Entries per page unless `limit` says otherwise.
const DEFAULT_LIMIT: u32 = 100;
/// The most entries per page.
const MAX_LIMIT: u32 = 500;

/// The page asked for.
#[derive(Debug, PartialEq)]
struct Page {
    limit: u32,
    before: Option<i64>,
}

fn invalid(field: &str, message: &str) -> ApiError {
    ApiError::bad_request("invalid_request", message).field(field)
}

/// Reads `limit` and `before` (both plain numbers); anything else is refused by name.
fn page(query: Option<&str>) -> Result<Page, ApiError> {
    let mut page = Page {
        limit: DEFAULT_LIMIT,
        before: None,
    };
    for pair in query
        .unwrap_or_default()
        .split('&')
        .filter(|p| !p.is_empty())
    {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        match key {
            "limit" => {
                page.limit = value
                    .parse()
                    .ok()
                    .filter(|n| (1..=MAX_LIMIT).contains(n))
                    .ok_or_else(|| invalid("limit", "limit is a number from 1 to 500"))?
            }
            "before" => {
                page.before = Some(value.parse().map_err(|_| {
                    invalid("before", "before is an entry id (next_before of a page)")
                })?)
            }
            _ => {
                return Err(invalid(
                    key,
                    "unknown query parameter; use limit and before",
                ));
            }
        }
    }
    Ok(page)
}

/// `{"entries": [{id, at, actor_id, actor_email, action, target, address, detail}],
/// "next_before"}`
pub async fn list(
    State(state): State<AppState>,
    caller: Caller,
    RawQuery(query): RawQuery,
) -> Result<Json<Value>, ApiError> {
    let page = page(query.as_deref())?;
    let entries = state.accounts.audit_log(&caller, page.limit, page.before)?;
    let next_before = match entries.last() {
        Some(last) if entries.len() == page.limit as usize => Some(last.id),
        _ => None,
    };
    Ok(Json(
        json!({"entries": entries, "next_before": next_before}),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_limit_and_before_and_names_what_is_wrong() {
        assert_eq!(
            page(None).unwrap(),
            Page {
                limit: 100,
                before: None
            }
        );
        assert_eq!(
            page(Some("limit=5&before=42")).unwrap(),
            Page {
                limit: 5,
                before: Some(42)
            }
        );
        for (q, field) in [
            ("limit=0", "limit"),
            ("limit=501", "limit"),
            ("limit=x", "limit"),
            ("before=", "before"),
            ("befor=1", "befor"),
        ] {
            assert_eq!(
                page(Some(q)).unwrap_err().field.as_deref(),
                Some(field),
                "{q}"
            );
        }
    }
}
