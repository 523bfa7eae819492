//! WAL watermarks: per team, the highest WAL sequence number whose rows are committed — per
//! WAL, because every node numbers its own WAL (SPEC §7), and one node's commits must never
//! mark another node's unflushed records as done. A WAL is named by the id stored in its
//! directory ([`crate::wal::identity`]); this catalog handle learns it once
//! ([`Catalog::set_wal`]). A WAL with no row of its own for a team reads the team's
//! `teams.wal_watermark`, the single watermark of the time before (frozen since), so a node
//! upgraded in place keeps its progress.

use std::collections::HashMap;

use super::db::{Conn, DbResult, OptionalExtension, params};

use super::{Catalog, Result};
use crate::model::TeamId;

impl Catalog {
    /// Names the WAL whose watermarks this handle reads and raises (once; later calls are
    /// ignored).
    pub fn set_wal(&self, wal_id: &str) {
        let _ = self.wal.set(wal_id.to_string());
    }

    /// The WAL this handle commits for ("" before [`Catalog::set_wal`]: tests, the CLI).
    pub(super) fn wal_key(&self) -> &str {
        self.wal.get().map_or("", String::as_str)
    }

    /// Every team's watermark in this WAL.
    pub fn watermarks(&self) -> Result<HashMap<TeamId, u64>> {
        self.with(|c| {
            let mut st = c.prepare(
                "SELECT t.id, COALESCE(w.watermark, t.wal_watermark) FROM teams t
                 LEFT JOIN wal_watermarks w ON w.team_id = t.id AND w.wal_id = ?1",
            )?;
            let rows = st.query_map(params![self.wal_key()], |r| {
                Ok((r.get::<String>(0)?, r.get::<i64>(1)?))
            })?;
            let mut out = HashMap::new();
            for row in rows {
                let (team, w) = row?;
                out.insert(TeamId(team.into()), w.max(0) as u64);
            }
            Ok(out)
        })
    }

    /// One team's watermark in this WAL.
    pub fn watermark(&self, team: &TeamId) -> Result<u64> {
        self.with(|c| Ok(read(c, self.wal_key(), team)?))
    }
}

/// `team`'s watermark in WAL `wal`, read on `c` (inside the caller's transaction, if any).
pub(super) fn read(c: &Conn, wal: &str, team: &TeamId) -> DbResult<u64> {
    let w: Option<i64> = c
        .query_row(
            "SELECT COALESCE(w.watermark, t.wal_watermark) FROM teams t
             LEFT JOIN wal_watermarks w ON w.team_id = t.id AND w.wal_id = ?1
             WHERE t.id = ?2",
            params![wal, team.as_str()],
            |r| r.get(0),
        )
        .optional()?;
    Ok(w.unwrap_or(0).max(0) as u64)
}

/// Raises `team`'s watermark in WAL `wal` to `watermark` (never lowers it; 0 changes nothing:
/// an import, which comes from no WAL).
pub(super) fn raise_tx(tx: &Conn, wal: &str, team: &TeamId, watermark: u64) -> DbResult<()> {
    if watermark == 0 {
        return Ok(());
    }
    tx.execute(
        "INSERT INTO wal_watermarks (wal_id, team_id, watermark) VALUES (?1, ?2, ?3)
         ON CONFLICT (wal_id, team_id) DO UPDATE SET watermark =
             CASE WHEN excluded.watermark > wal_watermarks.watermark
                  THEN excluded.watermark ELSE wal_watermarks.watermark END",
        params![wal, team.as_str(), watermark as i64],
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_wal_has_its_own_watermark_and_old_ones_carry_over() {
        for db in crate::catalog::testdb::each() {
            each_wal_has_its_own_watermark_on(&db);
        }
    }

    fn each_wal_has_its_own_watermark_on(db: &crate::catalog::testdb::TestDb) {
        let (a, b) = (db.open(), db.open());
        let team = TeamId::from(a.create_team("t").unwrap().as_str());
        // A watermark from before per-WAL watermarks.
        a.with(|c| {
            c.execute(
                "UPDATE teams SET wal_watermark = 40 WHERE id = ?1",
                [team.as_str()],
            )?;
            Ok(())
        })
        .unwrap();
        a.set_wal("wal_a");
        b.set_wal("wal_b");
        assert_eq!(
            (a.watermark(&team).unwrap(), b.watermark(&team).unwrap()),
            (40, 40)
        );
        a.with(|c| {
            let tx = c.transaction()?;
            raise_tx(&tx, "wal_a", &team, 900)?;
            tx.commit()?;
            Ok(())
        })
        .unwrap();
        assert_eq!(a.watermark(&team).unwrap(), 900);
        assert_eq!(
            b.watermark(&team).unwrap(),
            40,
            "a's commits are not b's progress"
        );
        assert_eq!(b.watermarks().unwrap()[&team], 40);
        a.with(|c| {
            let tx = c.transaction()?;
            raise_tx(&tx, "wal_a", &team, 100)?;
            tx.commit()?;
            Ok(())
        })
        .unwrap();
        assert_eq!(a.watermarks().unwrap()[&team], 900, "never lowered");
    }
}
