//! Shown-once messages kept for a session's next page, in the catalog so that every node sees
//! them (SPEC §7: any node may serve the GET that follows a POST). The catalog holds them
//! sealed — the settings pages encrypt under a key only the session's cookie yields
//! ([`super::secrets::flash_key`]) — so a row here is unreadable without the browser's cookie.
//! A row is taken (deleted) by the read that returns it, in one statement, so of two nodes
//! reading at once exactly one gets it; rows expire, and expired ones are swept by later puts.

use super::db::{OptionalExtension, params};

use super::{Catalog, Result, now_ms};

impl Catalog {
    /// Leaves `sealed` for session `session_id`'s next page until `expires_at` (ms), replacing
    /// an earlier one; sweeps every session's expired messages.
    pub fn put_flash(&self, session_id: &str, sealed: &[u8], expires_at: i64) -> Result<()> {
        self.with(|c| {
            c.execute(
                "DELETE FROM flash_messages WHERE expires_at <= ?1",
                params![now_ms()],
            )?;
            c.execute(
                "INSERT INTO flash_messages (session_id, sealed, expires_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT (session_id) DO UPDATE SET sealed = excluded.sealed,
                     expires_at = excluded.expires_at",
                params![session_id, sealed, expires_at],
            )?;
            Ok(())
        })
    }

    /// Takes session `session_id`'s message: deleted as it is read, `None` if there is none or
    /// it has expired.
    pub fn take_flash(&self, session_id: &str) -> Result<Option<Vec<u8>>> {
        self.with(|c| {
            let row: Option<(Vec<u8>, i64)> = c
                .query_row(
                    "DELETE FROM flash_messages WHERE session_id = ?1 RETURNING sealed, expires_at",
                    params![session_id],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .optional()?;
            Ok(row.and_then(|(sealed, expires_at)| (expires_at > now_ms()).then_some(sealed)))
        })
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_message_is_taken_once_by_any_process_until_it_expires() {
        for db in crate::catalog::testdb::each() {
            let (a, b) = (db.open(), db.open());
            a.put_flash("se_1", b"sealed one", super::now_ms() + 60_000)
                .unwrap();
            assert_eq!(b.take_flash("se_2").unwrap(), None, "another session's");
            assert_eq!(
                b.take_flash("se_1").unwrap().as_deref(),
                Some(&b"sealed one"[..])
            );
            assert_eq!(a.take_flash("se_1").unwrap(), None, "taken once");
            a.put_flash("se_1", b"old", super::now_ms() - 1).unwrap();
            assert_eq!(b.take_flash("se_1").unwrap(), None, "expired");
        }
    }
}
