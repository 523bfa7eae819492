//! Leases: a named piece of work (compacting one partition of one table) held by one writer at
//! a time, until it releases it or the lease expires (a holder that died). Several nodes sharing
//! the catalog try the same names; exactly one gets each. Expiry bounds how long a dead holder
//! blocks the work, and the work itself stays safe without the lease (a compaction swap checks
//! that its inputs are still live), so the lease saves wasted work rather than guarding data.

use super::db::params;

use super::{Catalog, Result, now_ms};

impl Catalog {
    /// Takes the lease `name` for this writer for `ttl_ms`, if nobody else holds an unexpired
    /// one (this writer's own lease is renewed). `true` if it is now held.
    pub fn try_lease(&self, name: &str, ttl_ms: i64) -> Result<bool> {
        self.with(|c| {
            let now = now_ms();
            let changed = c.execute(
                "INSERT INTO leases (name, holder, expires_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at
                 WHERE leases.expires_at <= ?4 OR leases.holder = excluded.holder",
                params![name, self.owner, now + ttl_ms, now],
            )?;
            Ok(changed == 1)
        })
    }

    /// Gives up the lease `name` if this writer holds it.
    pub fn release_lease(&self, name: &str) -> Result<()> {
        self.with(|c| {
            c.execute(
                "DELETE FROM leases WHERE name = ?1 AND holder = ?2",
                params![name, self.owner],
            )?;
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn one_writer_holds_a_lease_until_it_releases_or_it_expires() {
        for db in crate::catalog::testdb::each() {
            // Two processes' catalogs: two writers.
            let (a, b) = (db.open(), db.open());
            assert!(a.try_lease("compact:t:x:date=2026-01-01", 60_000).unwrap());
            assert!(
                !b.try_lease("compact:t:x:date=2026-01-01", 60_000).unwrap(),
                "held by a"
            );
            assert!(
                b.try_lease("compact:t:x:date=2026-01-02", 60_000).unwrap(),
                "another name"
            );
            assert!(
                a.try_lease("compact:t:x:date=2026-01-01", 60_000).unwrap(),
                "a renews"
            );
            b.release_lease("compact:t:x:date=2026-01-01").unwrap();
            assert!(
                !b.try_lease("compact:t:x:date=2026-01-01", 60_000).unwrap(),
                "b cannot release a's"
            );
            a.release_lease("compact:t:x:date=2026-01-01").unwrap();
            assert!(
                b.try_lease("compact:t:x:date=2026-01-01", 0).unwrap(),
                "released"
            );
            // b's lease had no time to live: it has expired, so a can take it over.
            assert!(
                a.try_lease("compact:t:x:date=2026-01-01", 60_000).unwrap(),
                "expired"
            );
            assert!(!b.try_lease("compact:t:x:date=2026-01-01", 60_000).unwrap());
        }
    }
}
