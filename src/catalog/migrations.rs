//! The catalog's schema, as an ordered list of migrations tracked by `PRAGMA user_version`.

use rusqlite::Connection;

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
];

/// Brings `conn` to the newest schema; safe to run from several processes at once.
pub fn migrate(conn: &mut Connection) -> rusqlite::Result<()> {
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let version: usize = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(version) {
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", i + 1)?;
    }
    tx.commit()
}
