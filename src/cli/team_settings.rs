//! `stowage admin team set|show` (SPEC §2.2.1): operators tune one team's flushing, buffer
//! budget and rate limit without a restart; a running server applies a change within a second.
//! An empty value resets a setting to the global default.

use clap::Args;
use serde_json::json;

use super::output::{AdminError, Output};
use crate::catalog::{Catalog, Change, SettingsChange};
use crate::config::{Config, parse_size};
use crate::ingest::tuning::Effective;

/// `admin team set` flags.
#[derive(Debug, Args)]
pub struct SetArgs {
    /// Team id or name.
    #[arg(long)]
    pub team: String,
    /// Flush when the oldest buffered row is this old (e.g. `2s`); empty resets.
    #[arg(long, value_name = "DURATION")]
    pub flush_interval: Option<String>,
    /// Flush when a table buffers this many rows; empty resets.
    #[arg(long, value_name = "N")]
    pub flush_max_rows: Option<String>,
    /// Flush when the team buffers this many bytes (e.g. `64MiB`); empty resets.
    #[arg(long, value_name = "SIZE")]
    pub flush_max_bytes: Option<String>,
    /// Bytes the team may hold uncommitted before 429 `team_buffer_full`; empty resets.
    #[arg(long, value_name = "SIZE")]
    pub budget: Option<String>,
    /// Events per second the team may send (429 `rate_limited` beyond); empty or 0 removes it.
    #[arg(long, value_name = "EVENTS_PER_SEC")]
    pub rate: Option<String>,
    /// Events the team may send at once above the rate (default: one second's worth).
    #[arg(long, value_name = "EVENTS")]
    pub burst: Option<String>,
}

fn invalid(flag: &str, value: &str, what: &str) -> AdminError {
    AdminError::InvalidArgument(format!("--{flag} {value:?}: expected {what}"))
}

fn change<T>(
    flag: &str,
    value: Option<&str>,
    what: &str,
    parse: impl Fn(&str) -> Option<T>,
) -> Result<Change<T>, AdminError> {
    match value.map(str::trim) {
        None => Ok(Change::Keep),
        Some("") => Ok(Change::Reset),
        Some(v) => parse(v)
            .map(Change::Set)
            .ok_or_else(|| invalid(flag, v, what)),
    }
}

/// Parses the flags into a change of the stored settings.
pub fn parse_change(a: &SetArgs) -> Result<SettingsChange, AdminError> {
    let positive = |v: &str| v.parse::<u64>().ok().filter(|n| *n > 0);
    let size = |v: &str| parse_size(v).filter(|n| *n > 0);
    let rate = change("rate", a.rate.as_deref(), "events per second", |v| {
        v.parse::<f64>().ok().filter(|r| r.is_finite() && *r >= 0.0)
    })?;
    Ok(SettingsChange {
        flush_interval_ms: change(
            "flush-interval",
            a.flush_interval.as_deref(),
            "a duration like 2s or 500ms",
            |v| {
                humantime::parse_duration(v)
                    .ok()
                    .filter(|d| !d.is_zero())
                    .map(|d| d.as_millis().max(1) as u64)
            },
        )?,
        flush_max_rows: change(
            "flush-max-rows",
            a.flush_max_rows.as_deref(),
            "a positive integer",
            positive,
        )?,
        flush_max_bytes: change(
            "flush-max-bytes",
            a.flush_max_bytes.as_deref(),
            "a size like 64MiB",
            size,
        )?,
        budget_bytes: change("budget", a.budget.as_deref(), "a size like 256MiB", size)?,
        // A rate of 0 means no limit.
        rate_per_sec: match rate {
            Change::Set(0.0) => Change::Reset,
            other => other,
        },
        rate_burst: change("burst", a.burst.as_deref(), "a positive integer", positive)?,
    })
}

/// The effective values of a team as output.
pub fn show(config: &Config, catalog: &Catalog, team: &str) -> Result<Output, AdminError> {
    let t = catalog.find_team(team)?;
    let settings = catalog.team_settings(&t.id)?;
    let defaults = Effective {
        flush_interval: config.flush.interval.0,
        flush_max_rows: config.flush.max_rows,
        flush_max_bytes: config.flush.max_bytes.0,
        budget: config.ingest.team_budget.0,
        rate: None,
    };
    let e = defaults.with(&settings);
    let source = |overridden: bool| if overridden { "team" } else { "default" };
    let json = json!({
        "team": t.id,
        "flush_interval": humantime::format_duration(e.flush_interval).to_string(),
        "flush_interval_ms": e.flush_interval.as_millis() as u64,
        "flush_max_rows": e.flush_max_rows,
        "flush_max_bytes": e.flush_max_bytes,
        "budget_bytes": e.budget,
        "rate_per_sec": e.rate.map(|r| r.0),
        "rate_burst": e.rate.map(|r| r.1 as u64),
        "overrides": settings,
    });
    let line = |name: &str, value: String, overridden: bool| {
        format!("{name:<16}{value:<20}({})", source(overridden))
    };
    let human = [
        format!("team {} ({})", t.name, t.id),
        line(
            "flush-interval",
            humantime::format_duration(e.flush_interval).to_string(),
            settings.flush_interval_ms.is_some(),
        ),
        line(
            "flush-max-rows",
            e.flush_max_rows.to_string(),
            settings.flush_max_rows.is_some(),
        ),
        line(
            "flush-max-bytes",
            e.flush_max_bytes.to_string(),
            settings.flush_max_bytes.is_some(),
        ),
        line(
            "budget",
            e.budget.to_string(),
            settings.budget_bytes.is_some(),
        ),
        line(
            "rate",
            e.rate
                .map_or("unlimited".into(), |(r, b)| format!("{r}/s burst {b}")),
            settings.rate_per_sec.is_some(),
        ),
    ]
    .join("\n");
    Ok(Output { json, human })
}
