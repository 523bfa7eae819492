//! Tests that every catalog call behaves the same on both backends, plus what only PostgreSQL
//! has to show: several nodes migrating one fresh database at once, and connections (the
//! listening one included) surviving the server dropping them.

use std::time::Duration;

use super::testdb::{TestDb, each, pg};
use super::*;
use crate::model::TeamId;

fn file(table: &str, path: &str, bytes: u64) -> NewDataFile {
    NewDataFile {
        table: table.into(),
        path: path.into(),
        partition: "date=2024-01-01".into(),
        rows: 2,
        bytes,
        min_ts: Some(1),
        max_ts: Some(2),
        schema: Default::default(),
    }
}

#[test]
fn every_module_answers_the_same_on_both_backends() {
    for db in each() {
        every_module_on(&db);
    }
}

fn every_module_on(db: &TestDb) {
    let c = db.open();
    assert!(c.ping());
    let team = c.create_team("t").unwrap();
    assert!(matches!(c.create_team("t"), Err(CatalogError::Refused(_))));
    assert_eq!(c.list_teams().unwrap().len(), 1);
    let owner = c
        .create_user(&team, Some("o@x.io"), "o", Role::Owner)
        .unwrap();
    c.set_password_hash(&owner.id, "$phc").unwrap();
    let (found, hash) = c.user_for_sign_in("O@x.io").unwrap().unwrap();
    assert_eq!(
        (found.id.as_str(), hash.as_deref()),
        (owner.id.as_str(), Some("$phc"))
    );
    assert_eq!(c.list_members(&team).unwrap().len(), 1);

    // Sessions and personal access tokens.
    let limits = SessionLimits {
        idle_ms: 60_000,
        absolute_ms: 600_000,
    };
    let (session, cookie) = c.create_session(&owner.id, Some("1.2.3.4")).unwrap();
    assert_eq!(c.session(&cookie, limits).unwrap().unwrap().id, session.id);
    c.revoke_session(&session.id).unwrap();
    assert!(c.session(&cookie, limits).unwrap().is_none());
    let (pat, token) = c.create_pat(&owner.id, Some("ci")).unwrap();
    assert_eq!(c.pat(&token).unwrap().unwrap().id, pat.id);
    assert_eq!(c.list_pats(&owner.id).unwrap().len(), 1);
    c.revoke_pat(&owner.id, &pat.id).unwrap();
    assert!(c.pat(&token).unwrap().is_none());

    // Keys, events, their requests and the audit log.
    let (key, secret) = c.create_secret(SecretKind::DataKey, &team, "o").unwrap();
    assert!(c.secret_is_live(SecretKind::DataKey, &secret).unwrap());
    assert!(c.auth_data_key(&secret).unwrap().is_some());
    assert_eq!(c.write_last_used().unwrap(), 1);
    assert!(matches!(
        c.revoke_team_secret(SecretKind::DataKey, Some("tm_other"), &key),
        Err(CatalogError::NotFound(_))
    ));
    // The revoking process refuses it at once, without waiting for the revocation to settle.
    let _settled = c
        .revoke_team_secret(SecretKind::DataKey, Some(&team), &key)
        .unwrap();
    assert!(c.auth_data_key(&secret).unwrap().is_none());
    assert!(
        c.list_secrets(SecretKind::DataKey, &team).unwrap()[0]
            .revoked_at
            .is_some()
    );
    assert!(c.request_events(&team, &owner.id).unwrap().1);
    assert!(!c.request_events(&team, &owner.id).unwrap().1);
    assert!(c.events_requested(&team).unwrap());
    assert_eq!(c.events_requests().unwrap().len(), 1);
    c.set_events_enabled(&team, true).unwrap();
    assert!(!c.events_requested(&team).unwrap());
    for action in ["a", "b", "c"] {
        c.audit(&AuditEvent {
            team_id: Some(&team),
            action,
            ..Default::default()
        })
        .unwrap();
    }
    let log = c.audit_log(&team, 2, None).unwrap();
    assert_eq!(
        log.iter().map(|e| e.action.as_str()).collect::<Vec<_>>(),
        ["c", "b"]
    );
    assert_eq!(c.audit_log(&team, 5, Some(log[1].id)).unwrap().len(), 1);

    // Settings.
    let generation = c.settings_generation().unwrap();
    let change = SettingsChange {
        flush_interval_ms: Change::Set(250),
        flush_max_rows: Change::Keep,
        flush_max_bytes: Change::Keep,
        budget_bytes: Change::Reset,
        rate_per_sec: Change::Set(2.5),
        rate_burst: Change::Keep,
    };
    c.set_team_settings(&team, change).unwrap();
    let s = c.team_settings(&team).unwrap();
    assert_eq!(
        (s.flush_interval_ms, s.rate_per_sec),
        (Some(250), Some(2.5))
    );
    assert_eq!(c.settings_generation().unwrap(), generation + 1);

    // Canvases and elements.
    let canvas = c.create_canvas(&team, "main").unwrap();
    c.rename_canvas(&team, &canvas, "renamed").unwrap();
    assert_eq!(c.canvas(&team, &canvas).unwrap().name, "renamed");
    assert_eq!(
        c.find_canvas_by_name(&team, "renamed").unwrap(),
        Some(canvas.clone())
    );
    let element = c
        .create_element(&NewElement {
            canvas: canvas.clone(),
            table: "Page Views".into(),
            columns: Some(vec!["a".into()]),
            limit: Some(5),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(c.list_elements(&team, None).unwrap().len(), 1);
    assert_eq!(c.list_elements(&team, Some(&canvas)).unwrap().len(), 1);
    let row = c.element_row(&team, &element).unwrap();
    assert_eq!((row.source.as_str(), row.limit), ("page_views", Some(5)));
    let tid = TeamId::from(team.as_str());
    assert!(
        c.element_for_team(&tid, &canvas, &element)
            .unwrap()
            .is_some()
    );
    assert_eq!(
        c.find_element(&canvas, "page_views").unwrap(),
        Some(element.clone())
    );
    c.delete_element(&team, &element).unwrap();
    c.delete_canvas(&team, &canvas).unwrap();
    assert!(matches!(
        c.canvas(&team, &canvas),
        Err(CatalogError::NotFound(_))
    ));

    // Files, stats and compaction.
    let paths: Vec<String> = (0..3).map(|i| format!("p{i}")).collect();
    c.reserve_objects(&paths).unwrap();
    for (i, p) in paths.iter().enumerate() {
        c.commit_files(&tid, &[file("x", p, 10)], i as u64 + 1)
            .unwrap();
    }
    assert_eq!(c.watermarks().unwrap()[&tid], 3);
    let stats = c.table_stats(&tid).unwrap();
    assert_eq!(
        (stats["x"].rows, stats["x"].files, stats["x"].bytes),
        (6, 3, 30)
    );
    assert_eq!(c.tables_with_small_files(3, 100).unwrap().len(), 1);
    let live = c.live_files(&tid, "x").unwrap();
    let before = c.snapshot(&tid, "x").unwrap().unwrap().as_of;
    // A snapshot sees files retired after its millisecond (`retired_at > at_ms`): let the
    // clock move on so the swap below is not in the same one.
    std::thread::sleep(Duration::from_millis(2));
    c.reserve_objects(&["merged".into()]).unwrap();
    assert!(
        c.replace_files(&tid, &live, &file("x", "merged", 30))
            .unwrap()
    );
    assert!(
        !c.replace_files(&tid, &live, &file("x", "again", 30))
            .unwrap()
    );
    let snap = c.snapshot(&tid, "x").unwrap().unwrap();
    assert_eq!(
        snap.files
            .iter()
            .map(|f| f.path.as_str())
            .collect::<Vec<_>>(),
        ["merged"]
    );
    let old = c.snapshot_as_of(&tid, "x", Some(before)).unwrap().unwrap();
    assert_eq!(old.files.len(), 3, "a snapshot keeps seeing what it saw");
    let retired = c.retired_before(now_ms() + 1).unwrap();
    assert_eq!(retired.len(), 3);
    for (id, _) in retired {
        c.mark_deleted(id).unwrap();
    }
    assert!(matches!(
        c.snapshot_as_of(&tid, "x", Some(before)),
        Err(CatalogError::Refused(_))
    ));
}

/// A fresh PostgreSQL database, its name, and its URL.
fn fresh_pg() -> (String, TestDb) {
    let db = TestDb::postgres();
    let Location::Postgres(url) = db.location().clone() else {
        unreachable!()
    };
    let name = url.rsplit('/').next().unwrap().to_string();
    (name, db)
}

#[test]
fn nodes_starting_at_once_migrate_one_database_safely() {
    let (_, db) = fresh_pg();
    let catalogs: Vec<Catalog> = std::thread::scope(|s| {
        let opening: Vec<_> = (0..6).map(|_| s.spawn(|| db.open())).collect();
        opening.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let team = catalogs[0].create_team("t").unwrap();
    for c in &catalogs {
        assert_eq!(c.find_team(&team).unwrap().name, "t");
    }
    let c = &catalogs[0];
    let (n, v) = c
        .with(|conn| {
            Ok(conn.query_row(
                "SELECT COUNT(*), MAX(version) FROM schema_version",
                db::params![],
                |r| Ok((r.get::<i64>(0)?, r.get::<i64>(1)?)),
            )?)
        })
        .unwrap();
    assert_eq!((n, v), (1, migrations_pg::LATEST));
}

#[test]
fn dropped_connections_are_reopened_and_the_cache_never_serves_stale_secrets() {
    let (name, db) = fresh_pg();
    let server = db.open();
    let cli = db.open();
    let team = cli.create_team("t").unwrap();
    cli.create_user(&team, None, "o", Role::Owner).unwrap();
    let (id, secret) = cli.create_secret(SecretKind::DataKey, &team, "o").unwrap();
    assert!(
        server.auth_data_key(&secret).unwrap().is_some(),
        "now cached"
    );
    let before = server.change_generation();
    // PostgreSQL drops every connection (as when it restarts).
    pg::cluster()
        .psql(&format!(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}'"
        ))
        .unwrap();
    // A restart takes far longer than a client takes to see its socket close: let the server's
    // listener see it, as it would have by then. (A notification lost with the connection
    // before the listener noticed cannot be known of; see the window in `db::listen`.)
    let until = std::time::Instant::now() + Duration::from_secs(10);
    while server.change_generation() == before && std::time::Instant::now() < until {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_ne!(
        server.change_generation(),
        before,
        "the listener notices its connection dropped"
    );
    // The first call on a dropped connection may fail; within a few calls each reconnects.
    let revoked = (0..20).any(|_| cli.revoke_secret(SecretKind::DataKey, &id).is_ok());
    assert!(revoked, "the catalog reconnects");
    // Whether the listener is still down or back, the revoked key is refused.
    let mut refused = false;
    for _ in 0..20 {
        if let Ok(r) = server.auth_data_key(&secret) {
            assert!(r.is_none(), "a revoked key was served from the cache");
            refused = true;
            break;
        }
    }
    assert!(refused);
    for _ in 0..10 {
        let _ = server.ping();
    }
    assert!(server.ping(), "every pooled connection is back");
    assert!(
        server.wait_for_change_notice(None, Duration::from_secs(10)),
        "the listener reconnects"
    );
}

#[test]
fn postgres_writers_wait_for_the_lock_a_bounded_time_like_sqlite() {
    let (_, db) = fresh_pg();
    let c = db.open();
    let settings = c
        .with(|conn| {
            let tx = conn.write_transaction()?;
            let show = |name: &str| {
                tx.query_row(&format!("SHOW {name}"), db::params![], |r| {
                    r.get::<String>(0)
                })
            };
            let out = (
                show("lock_timeout")?,
                show("idle_in_transaction_session_timeout")?,
            );
            tx.commit()?;
            Ok(out)
        })
        .unwrap();
    // PostgreSQL shows them normalised: WRITE_LOCK_WAIT is "10s", WRITE_IDLE_LIMIT "60s".
    assert_eq!(settings, ("10s".to_string(), "1min".to_string()));
    // Outside a write transaction the server's defaults apply again.
    let lock_timeout = c
        .with(
            |conn| Ok(conn.query_row("SHOW lock_timeout", db::params![], |r| r.get::<String>(0))?),
        )
        .unwrap();
    assert_eq!(lock_timeout, "0");
}

/// Every table and column of a freshly migrated catalog, sorted.
fn columns(c: &Catalog) -> Vec<(String, String)> {
    let sql = match c.with(|conn| Ok(conn.dialect())).unwrap() {
        db::Dialect::Sqlite => {
            "SELECT m.name, p.name FROM sqlite_master m JOIN pragma_table_info(m.name) p
             WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%'"
        }
        db::Dialect::Postgres => {
            "SELECT table_name, column_name FROM information_schema.columns
             WHERE table_schema = current_schema() AND table_name <> 'schema_version'"
        }
    };
    let mut out = c
        .with(|conn| {
            Ok(conn.query_all(sql, db::params![], |r| {
                Ok((r.get::<String>(0)?, r.get::<String>(1)?))
            })?)
        })
        .unwrap();
    out.sort();
    out
}

#[test]
fn both_backends_migrate_to_the_same_tables_and_columns() {
    let mut schemas = each().map(|db| columns(&db.open()));
    let (sqlite, postgres) = (schemas.next().unwrap(), schemas.next().unwrap());
    assert!(sqlite.len() > 50, "{sqlite:?}");
    assert_eq!(
        sqlite, postgres,
        "a migration added to one backend needs its twin on the other \
         (migrations.rs, migrations_pg.rs)"
    );
}
