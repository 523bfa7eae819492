//! Live per-team tuning (SPEC §2.2.1, §2.2.2): each team's effective flush triggers, buffer
//! budget and rate limit — the global config overridden by `admin team set` — reloaded whenever
//! the catalog's settings generation changes (polled every [`POLL_EVERY`]), and the per-team
//! rate limiter (token buckets, events/s with a burst).

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Mutex, RwLock};
use std::time::{Duration, Instant};

use crate::catalog::TeamSettings;
use crate::config::Config;
use crate::model::TeamId;

/// How often running servers look for changed settings.
pub const POLL_EVERY: Duration = Duration::from_millis(250);

/// One team's effective values.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Effective {
    /// Age of the oldest buffered row that triggers a flush.
    pub flush_interval: Duration,
    /// Rows in one table that trigger a flush.
    pub flush_max_rows: usize,
    /// Buffered bytes that trigger a flush.
    pub flush_max_bytes: u64,
    /// Bytes the team may hold uncommitted (429 beyond).
    pub budget: u64,
    /// Events per second and burst, when limited.
    pub rate: Option<(f64, f64)>,
}

impl Effective {
    /// The global defaults with `s` applied.
    pub fn with(self, s: &TeamSettings) -> Effective {
        let rate = s.rate_per_sec.filter(|r| *r > 0.0).map(|r| {
            let burst = s.rate_burst.map_or(r.max(1.0), |b| (b as f64).max(1.0));
            (r, burst)
        });
        Effective {
            flush_interval: s
                .flush_interval_ms
                .map_or(self.flush_interval, Duration::from_millis),
            flush_max_rows: s.flush_max_rows.map_or(self.flush_max_rows, |v| v as usize),
            flush_max_bytes: s.flush_max_bytes.unwrap_or(self.flush_max_bytes),
            budget: s.budget_bytes.unwrap_or(self.budget),
            rate,
        }
    }
}

struct Bucket {
    tokens: f64,
    at: Instant,
}

impl std::fmt::Debug for Tuning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tuning")
            .field("defaults", &self.defaults)
            .finish_non_exhaustive()
    }
}

/// Every team's effective values and rate buckets.
pub struct Tuning {
    defaults: Effective,
    teams: RwLock<HashMap<TeamId, Effective>>,
    buckets: Mutex<HashMap<TeamId, Bucket>>,
    generation: AtomicI64,
}

impl Tuning {
    /// Defaults from the config; no team overrides yet.
    pub fn new(config: &Config) -> Self {
        Tuning {
            defaults: Effective {
                flush_interval: config.flush.interval.0,
                flush_max_rows: config.flush.max_rows,
                flush_max_bytes: config.flush.max_bytes.0,
                budget: config.ingest.team_budget.0,
                rate: None,
            },
            teams: RwLock::new(HashMap::new()),
            buckets: Mutex::new(HashMap::new()),
            generation: AtomicI64::new(-1),
        }
    }

    /// The global defaults.
    pub fn defaults(&self) -> Effective {
        self.defaults
    }

    /// A team's effective values.
    pub fn get(&self, team: &TeamId) -> Effective {
        let teams = self.teams.read().unwrap_or_else(|p| p.into_inner());
        teams.get(team).copied().unwrap_or(self.defaults)
    }

    /// The settings generation last loaded (-1 before the first load).
    pub fn generation(&self) -> i64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Replaces every team's overrides with those of `generation`; returns the teams whose
    /// effective values changed.
    pub fn load(&self, generation: i64, all: &HashMap<TeamId, TeamSettings>) -> Vec<TeamId> {
        self.generation.store(generation, Ordering::Release);
        let new: HashMap<TeamId, Effective> = all
            .iter()
            .map(|(t, s)| (t.clone(), self.defaults.with(s)))
            .filter(|(_, e)| *e != self.defaults)
            .collect();
        let mut teams = self.teams.write().unwrap_or_else(|p| p.into_inner());
        let mut changed: Vec<TeamId> = new
            .iter()
            .filter(|(t, e)| teams.get(*t) != Some(*e))
            .map(|(t, _)| t.clone())
            .collect();
        changed.extend(teams.keys().filter(|t| !new.contains_key(*t)).cloned());
        *teams = new;
        changed
    }

    /// Takes `n` events from the team's rate budget, or says how long until they fit. A
    /// request larger than the burst passes when the bucket is full (and empties it below zero).
    pub fn take(&self, team: &TeamId, n: usize, now: Instant) -> Result<(), Duration> {
        let Some((rate, burst)) = self.get(team).rate else {
            return Ok(());
        };
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        let b = buckets.entry(team.clone()).or_insert(Bucket {
            tokens: burst,
            at: now,
        });
        let elapsed = now.saturating_duration_since(b.at).as_secs_f64();
        b.tokens = (b.tokens + elapsed * rate).min(burst);
        b.at = now;
        let need = (n as f64).min(burst);
        if b.tokens >= need {
            b.tokens -= n as f64;
            Ok(())
        } else {
            // A rate too small to express as a wait is an hour's wait (no panic on 1e-20/s).
            let secs = (need - b.tokens) / rate;
            Err(
                Duration::try_from_secs_f64(secs).map_or(Duration::from_secs(3600), |d| {
                    d.min(Duration::from_secs(3600))
                }),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrides_and_rate_buckets() {
        let config = Config::default();
        let t = Tuning::new(&config);
        let team = TeamId::from("tm_a");
        assert_eq!(t.get(&team), t.defaults());
        let s = TeamSettings {
            flush_interval_ms: Some(1500),
            rate_per_sec: Some(10.0),
            rate_burst: Some(20),
            ..Default::default()
        };
        let changed = t.load(1, &HashMap::from([(team.clone(), s)]));
        assert_eq!(changed, vec![team.clone()]);
        assert_eq!(t.get(&team).flush_interval, Duration::from_millis(1500));
        assert_eq!(t.get(&team).flush_max_rows, config.flush.max_rows);
        let now = Instant::now();
        assert!(t.take(&team, 20, now).is_ok(), "the burst");
        let wait = t.take(&team, 5, now).unwrap_err();
        assert!((wait.as_secs_f64() - 0.5).abs() < 1e-6, "{wait:?}");
        assert!(t.take(&team, 5, now + Duration::from_millis(500)).is_ok());
        // Back to the defaults: the team is reported as changed.
        assert_eq!(t.load(2, &HashMap::new()), vec![team.clone()]);
        assert!(t.take(&team, 1_000_000, now).is_ok(), "no limit");
    }
}
