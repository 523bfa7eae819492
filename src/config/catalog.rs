//! `[catalog]`: SQLite under the data dir, or a PostgreSQL URL several nodes share — a plain
//! value the catalog interprets — and the redaction that keeps its password out of logs.

use serde::Deserialize;

/// `[catalog]`
#[derive(Clone, Deserialize, Default)]
#[serde(default, deny_unknown_fields)]
pub struct CatalogConfig {
    /// Empty: SQLite at `<data_dir>/catalog.sqlite` (the embedded default). Else
    /// `postgres://user:password@host:port/db`: a PostgreSQL catalog several nodes can share.
    pub url: String,
}

impl std::fmt::Debug for CatalogConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CatalogConfig")
            .field("url", &redact(&self.url))
            .finish()
    }
}

/// A URL fit for logs: the password, if any — after the user name (`user:pw@`, even one with an
/// unescaped `@`) or as a `password=` parameter — replaced by `***`.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return "(not a URL)".into();
    };
    let (base, query) = match rest.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (rest, None),
    };
    let base = match base.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _)) => format!("{user}:***@{host}"),
            None => base.to_string(),
        },
        None => base.to_string(),
    };
    let mut out = format!("{scheme}://{base}");
    if let Some(query) = query {
        let params: Vec<String> = query
            .split('&')
            .map(|kv| match kv.split_once('=') {
                Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}=***"),
                _ => kv.to_string(),
            })
            .collect();
        out.push('?');
        out.push_str(&params.join("&"));
    }
    out
}
