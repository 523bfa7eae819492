//! The catalog's schema, as an ordered list of migrations tracked by `PRAGMA user_version`.

use rusqlite::{Connection, OptionalExtension};

/// Each entry moves the schema one version forward. Append only; never edit a shipped entry.
const MIGRATIONS: &[&str] = &[
    r#"
CREATE TABLE teams (
    id             TEXT PRIMARY KEY,
    name           TEXT NOT NULL UNIQUE,
    events_enabled INTEGER NOT NULL DEFAULT 0,
    created_at     INTEGER NOT NULL
);
CREATE TABLE users (
    id         TEXT PRIMARY KEY,
    team_id    TEXT NOT NULL REFERENCES teams(id),
    name       TEXT NOT NULL,
    role       TEXT NOT NULL CHECK (role IN ('owner', 'member')),
    created_at INTEGER NOT NULL,
    UNIQUE (team_id, name)
);
-- Data API keys and events tokens: only the SHA-256 of the secret is kept.
CREATE TABLE secrets (
    id           TEXT PRIMARY KEY,
    kind         TEXT NOT NULL CHECK (kind IN ('data_key', 'events_token')),
    team_id      TEXT NOT NULL REFERENCES teams(id),
    hash         BLOB NOT NULL UNIQUE,
    prefix       TEXT NOT NULL,
    created_by   TEXT NOT NULL REFERENCES users(id),
    created_at   INTEGER NOT NULL,
    last_used_at INTEGER,
    revoked_at   INTEGER
);
CREATE TABLE canvases (
    id         TEXT PRIMARY KEY,
    team_id    TEXT NOT NULL REFERENCES teams(id),
    name       TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE TABLE elements (
    id         TEXT PRIMARY KEY,
    canvas_id  TEXT NOT NULL REFERENCES canvases(id),
    name       TEXT,
    kind       TEXT NOT NULL DEFAULT 'table' CHECK (kind IN ('table')),
    source     TEXT NOT NULL,
    columns    TEXT,          -- JSON array of column names, NULL = all
    filters    TEXT,          -- JSON filter list (download filter language), NULL = none
    row_limit  INTEGER,
    created_at INTEGER NOT NULL
);
CREATE TABLE wh_tables (
    team_id        TEXT NOT NULL REFERENCES teams(id),
    name           TEXT NOT NULL,
    schema_version INTEGER NOT NULL DEFAULT 1,
    created_at     INTEGER NOT NULL,
    PRIMARY KEY (team_id, name)
);
CREATE TABLE wh_columns (
    team_id    TEXT NOT NULL,
    table_name TEXT NOT NULL,
    position   INTEGER NOT NULL,
    name       TEXT NOT NULL,
    type       TEXT NOT NULL,
    PRIMARY KEY (team_id, table_name, name)
);
-- Every type a column has had, oldest first.
CREATE TABLE wh_column_history (
    team_id        TEXT NOT NULL,
    table_name     TEXT NOT NULL,
    name           TEXT NOT NULL,
    type           TEXT NOT NULL,
    schema_version INTEGER NOT NULL,
    changed_at     INTEGER NOT NULL
);
-- Committed data files; id order is commit order, which is the table's row order.
CREATE TABLE data_files (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    team_id        TEXT NOT NULL,
    table_name     TEXT NOT NULL,
    path           TEXT NOT NULL UNIQUE,
    partition      TEXT NOT NULL,
    rows           INTEGER NOT NULL,
    bytes          INTEGER NOT NULL,
    min_ts         INTEGER,
    max_ts         INTEGER,
    schema_version INTEGER NOT NULL,
    wal_watermark  INTEGER,
    created_at     INTEGER NOT NULL,
    retired_at     INTEGER
);
CREATE INDEX data_files_by_table ON data_files (team_id, table_name, id);
"#,
    r#"
-- Every WAL record of a team with seq <= wal_watermark is in a committed data file.
ALTER TABLE teams ADD COLUMN wal_watermark INTEGER NOT NULL DEFAULT 0;
"#,
    r#"
-- Row order of a table is (sort_key, id); a compacted file takes the sort key of the first file
-- it replaces. retired_at: replaced by compaction; deleted_at: its object was deleted.
ALTER TABLE data_files ADD COLUMN sort_key INTEGER;
ALTER TABLE data_files ADD COLUMN deleted_at INTEGER;
UPDATE data_files SET sort_key = id;
CREATE INDEX data_files_order ON data_files (team_id, table_name, sort_key, id);
"#,
    r#"
-- Objects written but not committed yet. A writer (one process, `owner`) reserves a path before
-- it puts the object; the commit that names it consumes the row in the same transaction, and
-- fails if the row is gone. The orphan collector deletes an object only after deleting its row,
-- which it does only when the owner's heartbeat is older than the orphan grace.
CREATE TABLE pending_objects (
    path         TEXT PRIMARY KEY,
    owner        TEXT NOT NULL,
    heartbeat_at INTEGER NOT NULL
);
CREATE INDEX pending_objects_by_owner ON pending_objects (owner);
"#,
    r#"
-- Operator tuning per team (NULL: the global default). Running servers poll `generation`, which
-- every change bumps, and apply the new values within a second.
CREATE TABLE team_settings (
    team_id         TEXT PRIMARY KEY REFERENCES teams(id),
    flush_interval_ms INTEGER,
    flush_max_rows  INTEGER,
    flush_max_bytes INTEGER,
    budget_bytes    INTEGER,
    rate_per_sec    REAL,
    rate_burst      INTEGER
);
CREATE TABLE settings_generation (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    generation INTEGER NOT NULL
);
INSERT INTO settings_generation (id, generation) VALUES (1, 0);
"#,
    r#"
-- Accounts (SPEC §5.1). `users` is rebuilt: display names need not be unique any more; a user
-- has an email (unique among users not removed) and an Argon2id password hash (PHC string).
-- Removed members are kept (keys they created still name them) but can no longer sign in.
CREATE TABLE users_new (
    id            TEXT PRIMARY KEY,
    team_id       TEXT NOT NULL REFERENCES teams(id),
    name          TEXT NOT NULL,
    role          TEXT NOT NULL CHECK (role IN ('owner', 'member')),
    created_at    INTEGER NOT NULL,
    email         TEXT,
    password_hash TEXT,
    removed_at    INTEGER
);
INSERT INTO users_new (id, team_id, name, role, created_at)
    SELECT id, team_id, name, role, created_at FROM users;
DROP TABLE users;
ALTER TABLE users_new RENAME TO users;
CREATE UNIQUE INDEX users_email ON users (email) WHERE removed_at IS NULL;
CREATE INDEX users_by_team ON users (team_id);
ALTER TABLE secrets ADD COLUMN name TEXT;
-- One-time links (only their SHA-256 is kept): `password` sets an existing user's password,
-- `invite` creates a user of `team_id` with `email` and `role` when used.
CREATE TABLE links (
    id         TEXT PRIMARY KEY,
    hash       BLOB NOT NULL UNIQUE,
    kind       TEXT NOT NULL CHECK (kind IN ('password', 'invite')),
    team_id    TEXT NOT NULL REFERENCES teams(id),
    user_id    TEXT REFERENCES users(id),
    email      TEXT,
    role       TEXT CHECK (role IN ('owner', 'member')),
    created_by TEXT,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    used_at    INTEGER
);
-- Sign-in sessions (cookie `stowage_session`; only its SHA-256 is kept).
CREATE TABLE sessions (
    id           TEXT PRIMARY KEY,
    hash         BLOB NOT NULL UNIQUE,
    user_id      TEXT NOT NULL REFERENCES users(id),
    csrf         TEXT NOT NULL,
    address      TEXT,
    created_at   INTEGER NOT NULL,
    last_seen_at INTEGER NOT NULL,
    revoked_at   INTEGER
);
CREATE INDEX sessions_by_user ON sessions (user_id);
-- Personal access tokens (`Authorization: Bearer stw_pat_…`).
CREATE TABLE pats (
    id           TEXT PRIMARY KEY,
    hash         BLOB NOT NULL UNIQUE,
    user_id      TEXT NOT NULL REFERENCES users(id),
    name         TEXT,
    prefix       TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    last_used_at INTEGER,
    revoked_at   INTEGER
);
CREATE INDEX pats_by_user ON pats (user_id);
-- Who did what, when, from where. Never holds a secret.
CREATE TABLE audit_log (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    team_id     TEXT,
    at          INTEGER NOT NULL,
    actor_id    TEXT,
    actor_email TEXT,
    action      TEXT NOT NULL,
    target      TEXT,
    address     TEXT,
    detail      TEXT
);
CREATE INDEX audit_by_team ON audit_log (team_id, id);
-- Owners asking the operator to enable events.
CREATE TABLE events_requests (
    id           TEXT PRIMARY KEY,
    team_id      TEXT NOT NULL REFERENCES teams(id),
    requested_by TEXT NOT NULL REFERENCES users(id),
    requested_at INTEGER NOT NULL,
    resolved_at  INTEGER
);
"#,
    // 7: leases, so that of several nodes sharing the catalog one at a time works on a partition
    // (compaction).
    r#"
CREATE TABLE leases (
    name       TEXT PRIMARY KEY,
    holder     TEXT NOT NULL,
    expires_at INTEGER NOT NULL
);
"#,
    // 8: WAL watermarks per WAL (each node has its own WAL and numbering); teams.wal_watermark
    // stays as the value of WALs from before, read when a WAL has no row of its own.
    r#"
CREATE TABLE wal_watermarks (
    wal_id    TEXT NOT NULL,
    team_id   TEXT NOT NULL REFERENCES teams(id),
    watermark INTEGER NOT NULL,
    PRIMARY KEY (wal_id, team_id)
);
"#,
    // 9: owners revoke pending invites; session CSRF tokens are derived from the cookie
    // secret instead of stored, so the stored ones are wiped.
    r#"
ALTER TABLE links ADD COLUMN revoked_at INTEGER;
UPDATE sessions SET csrf = '';
"#,
    // 10: sign-in attempts per key (a digest of an email or an address), shared by every
    // node, so the throttle and the lockout hold across nodes.
    r#"
CREATE TABLE signin_attempts (
    key          BLOB PRIMARY KEY,
    attempts     INTEGER NOT NULL,
    allowed      INTEGER NOT NULL,
    last_attempt INTEGER NOT NULL,
    locked_until INTEGER
);
"#,
    // 11: shown-once messages of the settings pages, shared by every node, sealed under a
    // key derived from the session's cookie (src/catalog/flash.rs).
    r#"
CREATE TABLE flash_messages (
    session_id TEXT PRIMARY KEY,
    sealed     BLOB NOT NULL,
    expires_at INTEGER NOT NULL
);
CREATE INDEX flash_messages_by_expiry ON flash_messages (expires_at);
"#,
    // 12: SQL elements (SPEC §3.4). `elements` is rebuilt so `kind` may be 'sql'; such an
    // element keeps its query in `query` and the output schema found when it was created in
    // `query_schema` (JSON `[{name, type}]`), and has an empty `source`.
    r#"
CREATE TABLE elements_new (
    id           TEXT PRIMARY KEY,
    canvas_id    TEXT NOT NULL REFERENCES canvases(id),
    name         TEXT,
    kind         TEXT NOT NULL DEFAULT 'table' CHECK (kind IN ('table', 'sql')),
    source       TEXT NOT NULL,
    columns      TEXT,
    filters      TEXT,
    row_limit    INTEGER,
    created_at   INTEGER NOT NULL,
    query        TEXT,
    query_schema TEXT
);
INSERT INTO elements_new (id, canvas_id, name, kind, source, columns, filters, row_limit, created_at)
    SELECT id, canvas_id, name, kind, source, columns, filters, row_limit, created_at FROM elements;
DROP TABLE elements;
ALTER TABLE elements_new RENAME TO elements;
"#,
    // 13: an element's default for fresh reads (SPEC §3.5): 1 = downloads include rows not yet
    // committed unless the request says `"fresh": false`.
    r#"
ALTER TABLE elements ADD COLUMN fresh INTEGER NOT NULL DEFAULT 0;
"#,
    // 14: the nodes of a cluster, by WAL id (`nodes.rs`); one row with SQLite.
    r#"
CREATE TABLE nodes (
    wal_id     TEXT PRIMARY KEY,
    started_at INTEGER NOT NULL,
    stopped_at INTEGER
);
"#,
];

/// Brings `conn` to the newest schema; safe to run from several processes at once. Foreign-key
/// enforcement is off while it runs (a migration may rebuild a referenced table, and the bundled
/// SQLite turns it on by default); the transaction checks every reference before it commits.
/// Leaves enforcement off: the caller decides.
pub fn migrate(conn: &mut Connection) -> rusqlite::Result<()> {
    conn.pragma_update(None, "foreign_keys", false)?;
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let version: usize = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(version) {
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", i + 1)?;
    }
    let broken: Option<String> = tx
        .query_row("PRAGMA foreign_key_check", [], |r| r.get(0))
        .optional()?;
    if let Some(table) = broken {
        return Err(rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CONSTRAINT_FOREIGNKEY),
            Some(format!("migration left a broken reference in {table}")),
        ));
    }
    tx.commit()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accounts_migration_keeps_users_and_the_secrets_that_name_them() {
        let mut conn = Connection::open_in_memory().unwrap();
        for (i, sql) in MIGRATIONS.iter().take(5).enumerate() {
            conn.execute_batch(sql).unwrap();
            conn.pragma_update(None, "user_version", i + 1).unwrap();
        }
        conn.execute_batch(
            "INSERT INTO teams (id, name, created_at) VALUES ('tm_a', 'a', 1);
             INSERT INTO users (id, team_id, name, role, created_at) VALUES ('us_a', 'tm_a', 'ann', 'owner', 1);
             INSERT INTO secrets (id, kind, team_id, hash, prefix, created_by, created_at)
                 VALUES ('key_a', 'data_key', 'tm_a', x'00', 'stw_data_abcd', 'us_a', 1);",
        )
        .unwrap();
        migrate(&mut conn).unwrap();
        conn.pragma_update(None, "foreign_keys", true).unwrap();
        let (name, email): (String, Option<String>) = conn
            .query_row("SELECT name, email FROM users WHERE id = 'us_a'", [], |r| {
                Ok((r.get(0)?, r.get(1)?))
            })
            .unwrap();
        assert_eq!((name.as_str(), email), ("ann", None));
        let by: String = conn
            .query_row(
                "SELECT created_by FROM secrets WHERE id = 'key_a'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(by, "us_a");
        // Display names need not be unique any more; emails must.
        conn.execute_batch(
            "INSERT INTO users (id, team_id, name, role, created_at, email) VALUES ('us_b', 'tm_a', 'ann', 'member', 2, 'x@y.z');",
        )
        .unwrap();
        assert!(conn
            .execute_batch("INSERT INTO users (id, team_id, name, role, created_at, email) VALUES ('us_c', 'tm_a', 'c', 'member', 3, 'x@y.z');")
            .is_err());
        // References into the rebuilt table are still enforced.
        assert!(conn
            .execute_batch("INSERT INTO sessions (id, hash, user_id, csrf, created_at, last_seen_at) VALUES ('se', x'01', 'us_nobody', 'c', 1, 1);")
            .is_err());
    }
}
