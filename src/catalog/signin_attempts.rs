//! Sign-in attempts per key (a digest of an email or a client address), kept in the catalog so
//! that every node sharing it counts the same attempts (SPEC §5.2: the throttle and the lockout
//! hold across nodes). An attempt is counted before its password is checked, in one write
//! transaction for all its keys, so attempts sent at once — to one node or to several — are held
//! to the same limit as attempts sent one by one. The rules (how many, how long a lock) are the
//! caller's; this file only keeps the counts atomically.

use super::db::{Conn, OptionalExtension, params};
use super::{Catalog, Result, now_ms};

/// Counts are forgotten this long after a key's last attempt (unless it is still locked).
const FORGET_AFTER_MS: i64 = 3_600_000;
/// About one attempt in this many also sweeps forgotten keys.
const SWEEP_EVERY: u64 = 256;
/// Most keys kept; a sweep past it drops every key that is not locked.
const MAX_KEYS: i64 = 100_000;

/// One key an attempt counts against, with its limit.
#[derive(Debug, Clone, Copy)]
pub struct AttemptKey<'a> {
    /// A digest naming what is counted.
    pub key: &'a [u8],
    /// Attempts allowed before each further one locks the key.
    pub allowed: u32,
}

/// The lock after `attempts` attempts of which `allowed` were free: 1 s, doubling per attempt
/// beyond, at most `max_lock_ms`; none below the limit.
fn lock_ms(attempts: i64, allowed: u32, max_lock_ms: i64) -> Option<i64> {
    let over = attempts - i64::from(allowed.max(1));
    (over >= 0).then(|| (1000i64 << over.min(20)).min(max_lock_ms))
}

impl Catalog {
    /// Counts one sign-in attempt against every key, before its password is checked: `Ok(Err(ms))`
    /// (nothing counted) while any key is locked, `ms` being the wait; else each key's count goes
    /// up, and a key that reaches its limit is locked at once.
    pub fn count_sign_in_attempt(
        &self,
        keys: &[AttemptKey<'_>],
        max_lock_ms: i64,
    ) -> Result<std::result::Result<(), i64>> {
        let now = now_ms();
        let sweep = rand_u64().is_multiple_of(SWEEP_EVERY);
        self.with(|c| {
            let tx = c.write_transaction()?;
            let mut rows = Vec::with_capacity(keys.len());
            for k in keys {
                let row: Option<(i64, i64, Option<i64>)> = tx
                    .query_row(
                        "SELECT attempts, last_attempt, locked_until FROM signin_attempts WHERE key = ?1",
                        params![k.key],
                        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
                    )
                    .optional()?;
                if let Some((_, _, Some(until))) = row
                    && until > now
                {
                    return Ok(Err(until - now));
                }
                rows.push(row);
            }
            for (k, row) in keys.iter().zip(rows) {
                let attempts = match row {
                    Some((n, last, _)) if now - last < FORGET_AFTER_MS => n + 1,
                    _ => 1,
                };
                let locked_until = lock_ms(attempts, k.allowed, max_lock_ms).map(|ms| now + ms);
                tx.execute(
                    "INSERT INTO signin_attempts (key, attempts, allowed, last_attempt, locked_until)
                     VALUES (?1, ?2, ?3, ?4, ?5)
                     ON CONFLICT (key) DO UPDATE SET attempts = ?2, allowed = ?3,
                         last_attempt = ?4, locked_until = ?5",
                    params![k.key, attempts, i64::from(k.allowed.max(1)), now, locked_until],
                )?;
            }
            if sweep {
                sweep_forgotten(&tx, now)?;
            }
            tx.commit()?;
            Ok(Ok(()))
        })
    }

    /// A successful sign-in: clears `clear` (the email) and takes the attempt back from each of
    /// `refund` (the address), so people signing in from one address never lock it.
    pub fn sign_in_succeeded(&self, clear: &[u8], refund: &[&[u8]]) -> Result<()> {
        self.with(|c| {
            let tx = c.write_transaction()?;
            tx.execute("DELETE FROM signin_attempts WHERE key = ?1", params![clear])?;
            for key in refund {
                tx.execute(
                    "UPDATE signin_attempts SET attempts = attempts - 1,
                         locked_until = CASE WHEN attempts - 1 < allowed THEN NULL ELSE locked_until END
                     WHERE key = ?1 AND attempts > 0",
                    params![*key],
                )?;
            }
            tx.commit()?;
            Ok(())
        })
    }
}

/// Drops keys whose count is forgotten; past [`MAX_KEYS`], every key that is not locked.
fn sweep_forgotten(c: &Conn, now: i64) -> Result<()> {
    c.execute(
        "DELETE FROM signin_attempts WHERE last_attempt < ?1
         AND (locked_until IS NULL OR locked_until < ?2)",
        params![now - FORGET_AFTER_MS, now],
    )?;
    let kept: i64 = c.query_row("SELECT COUNT(*) FROM signin_attempts", params![], |r| {
        r.get(0)
    })?;
    if kept > MAX_KEYS {
        c.execute(
            "DELETE FROM signin_attempts WHERE locked_until IS NULL OR locked_until < ?1",
            params![now],
        )?;
    }
    Ok(())
}

fn rand_u64() -> u64 {
    let mut buf = [0u8; 8];
    getrandom::fill(&mut buf).expect("the OS random source is available");
    u64::from_le_bytes(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locks_double_and_are_capped() {
        assert_eq!(lock_ms(4, 5, 60_000), None);
        assert_eq!(lock_ms(5, 5, 60_000), Some(1000));
        assert_eq!(lock_ms(6, 5, 60_000), Some(2000));
        assert_eq!(lock_ms(40, 5, 60_000), Some(60_000));
    }

    #[test]
    fn attempts_are_counted_before_the_check_on_every_backend() {
        for db in crate::catalog::testdb::each() {
            let c = db.open();
            let other = db.open();
            let email = [1u8; 32];
            let addr = [2u8; 32];
            let keys = [
                AttemptKey {
                    key: &email,
                    allowed: 3,
                },
                AttemptKey {
                    key: &addr,
                    allowed: 20,
                },
            ];
            // Two handles (two nodes) share the count.
            for handle in [&c, &other, &c] {
                assert!(handle.count_sign_in_attempt(&keys, 60_000).unwrap().is_ok());
            }
            let wait = other.count_sign_in_attempt(&keys, 60_000).unwrap();
            assert!(matches!(wait, Err(ms) if ms > 0 && ms <= 1000), "{wait:?}");
            // A success clears the email and refunds the address.
            c.sign_in_succeeded(&email, &[&addr]).unwrap();
            assert!(c.count_sign_in_attempt(&keys, 60_000).unwrap().is_ok());
        }
    }
}
