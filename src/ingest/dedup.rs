//! Duplicate suppression: a client `messageId` already accepted for the team within the window
//! is acknowledged again but not stored again. Bounded: at most `capacity` ids, oldest first out.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use crate::catalog::TeamId;

/// Remembered ids with their acceptance time.
pub struct Dedup {
    window_us: i64,
    capacity: usize,
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    seen: HashMap<(TeamId, String), i64>,
    order: VecDeque<(i64, TeamId, String)>,
}

impl Dedup {
    /// Remembers ids for `window`, at most `capacity` of them.
    pub fn new(window: std::time::Duration, capacity: usize) -> Self {
        Self {
            window_us: window.as_micros() as i64,
            capacity,
            inner: Mutex::new(Inner::default()),
        }
    }

    /// Records `id` for `team` at `now_us`; `false` if it was already there (a duplicate).
    pub fn insert(&self, team: &TeamId, id: &str, now_us: i64) -> bool {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        inner.expire(now_us - self.window_us, self.capacity);
        let key = (team.clone(), id.to_string());
        if let Some(at) = inner.seen.get(&key)
            && *at >= now_us - self.window_us
        {
            return false;
        }
        inner.seen.insert(key, now_us);
        inner
            .order
            .push_back((now_us, team.clone(), id.to_string()));
        true
    }

    /// Forgets `id` (its event was not accepted after all, so a retry must go through).
    pub fn forget(&self, team: &TeamId, id: &str) {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        inner.seen.remove(&(team.clone(), id.to_string()));
    }

    /// Ids remembered.
    pub fn len(&self) -> usize {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .seen
            .len()
    }

    /// Whether nothing is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Inner {
    fn expire(&mut self, older_than: i64, capacity: usize) {
        while let Some((at, _, _)) = self.order.front() {
            if *at >= older_than && self.seen.len() < capacity {
                break;
            }
            let (at, team, id) = self.order.pop_front().expect("front exists");
            let key = (team, id);
            if self.seen.get(&key) == Some(&at) {
                self.seen.remove(&key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn window_and_capacity() {
        let d = Dedup::new(Duration::from_secs(10), 3);
        let t = TeamId::from("t");
        assert!(d.insert(&t, "a", 0));
        assert!(!d.insert(&t, "a", 1_000_000), "duplicate within the window");
        assert!(
            d.insert(&TeamId::from("u"), "a", 1_000_000),
            "ids are per team"
        );
        assert!(d.insert(&t, "a", 11_000_001), "the window passed");
        d.forget(&t, "a");
        assert!(d.insert(&t, "a", 11_000_002));
        for i in 0..10 {
            d.insert(&t, &format!("x{i}"), 11_000_003);
        }
        assert!(d.len() <= 3, "capacity bounds memory: {}", d.len());
    }
}
