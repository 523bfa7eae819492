//! Catalog writes of many teams on PostgreSQL (SPEC §7, issue 31 item 1): commits of different
//! teams proceed side by side (a team stuck mid-commit holds up no other team) while one team's
//! commits stay exactly-once and watermarks per WAL hold under concurrency, and — ignored, run by
//! `benches/catalog_writes.sh` — the write throughput with 1, 4 and 16 concurrent flushers of
//! different teams.
//!
//! A "flush" here is what a team actor's flush asks of the catalog: one transaction reserving
//! the objects it is about to put, then one committing two data files (`tracks` and the event's
//! table) with the team's new WAL watermark. Each flusher opens its own catalog handle, as one
//! node of a cluster does.

use crate::common::pg;

use std::sync::mpsc;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use stowage::catalog::db::{Conn, PgConn, postgres};
use stowage::catalog::{Catalog, CatalogError, NewDataFile};
use stowage::model::TeamId;
use stowage::model::schema::{Column, ColumnType, TableSchema};

fn file(table: &str, path: &str) -> NewDataFile {
    NewDataFile {
        table: table.into(),
        path: path.into(),
        partition: "date=2026-11-26".into(),
        rows: 100,
        bytes: 4096,
        min_ts: Some(1),
        max_ts: Some(2),
        schema: TableSchema {
            columns: ["id", "event", "timestamp"]
                .iter()
                .map(|n| Column {
                    name: n.to_string(),
                    ty: ColumnType::String,
                })
                .collect(),
        },
    }
}

/// One flush of `team` on `cat`: reserve two objects, then commit them with watermark `seq`.
fn flush(cat: &Catalog, team: &TeamId, seq: u64) -> Result<(), CatalogError> {
    let paths = [
        format!("teams/{team}/tables/tracks/{seq}.parquet"),
        format!("teams/{team}/tables/clicked/{seq}.parquet"),
    ];
    cat.reserve_objects(&paths)?;
    cat.commit_files(
        team,
        &[file("tracks", &paths[0]), file("clicked", &paths[1])],
        seq,
    )
}

/// Waits (no guessing with sleeps) until `cond` holds; fails after 30 s.
fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::yield_now();
    }
}

/// A connection of its own to the catalog's database.
fn connect(url: &str) -> Conn {
    Conn::Pg(Box::new(
        PgConn::open(postgres::config(url).unwrap()).unwrap(),
    ))
}

/// How many advisory-lock requests of this database's writers are waiting (the cluster is
/// shared with other tests' databases).
fn lock_waiters(conn: &Conn) -> i64 {
    conn.query_row(
        "SELECT COUNT(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
         WHERE a.datname = current_database() AND l.locktype = 'advisory' AND NOT l.granted",
        stowage::catalog::db::params![],
        |r| r.get::<i64>(0),
    )
    .unwrap()
}

/// A team whose writer is stuck in the middle of a transaction (holding its team's write lock)
/// holds up its own team's next commit, and nobody else's: another team commits meanwhile, and
/// the held-up commit goes through once the lock is let go.
#[test]
fn a_team_stuck_mid_commit_does_not_hold_up_other_teams() {
    let url = pg::database_url();
    let cat = Arc::new(Catalog::open_postgres(&url).unwrap());
    let a = TeamId::from(cat.create_team("a").unwrap().as_str());
    let b = TeamId::from(cat.create_team("b").unwrap().as_str());
    flush(&cat, &a, 1).unwrap();

    let stuck = connect(&url);
    let held = stuck.team_write_transaction(a.as_str()).unwrap();

    // A's next commit waits for the stuck writer...
    let (done_tx, done) = mpsc::channel();
    let waiting = {
        let (cat, a) = (cat.clone(), a.clone());
        std::thread::spawn(move || {
            let out = flush(&cat, &a, 2);
            done_tx.send(()).unwrap();
            out
        })
    };
    let observer = connect(&url);
    wait_until("team a's commit to wait for its lock", || {
        lock_waiters(&observer) == 1
    });
    // ...while B commits, several times, through the same catalog handle and another one.
    let other = Catalog::open_postgres(&url).unwrap();
    for seq in 1..=3 {
        flush(&cat, &b, seq).unwrap();
        flush(&other, &b, 10 + seq).unwrap();
    }
    assert_eq!(cat.snapshot(&b, "tracks").unwrap().unwrap().files.len(), 6);
    assert!(done.try_recv().is_err(), "a's commit went past a's lock");

    drop(held);
    waiting.join().unwrap().unwrap();
    let files = cat.snapshot(&a, "tracks").unwrap().unwrap().files;
    assert_eq!(files.len(), 2, "both of a's commits, once each");
    assert_eq!(cat.watermark(&a).unwrap(), 2);
}

/// The orphan collector's sweep runs beside commits (no catalog-wide lock): a commit in flight
/// that has consumed its reservation holds the sweep of that row until it ends, and its path is
/// kept — in `data_files` once it commits; and a reservation dropped by the sweep first fails
/// the commit that would have named it.
#[test]
fn the_orphan_sweep_never_loses_a_commit_in_flight() {
    let url = pg::database_url();
    let writer = Catalog::open_postgres(&url).unwrap();
    let collector = Arc::new(Catalog::open_postgres(&url).unwrap());
    let team = TeamId::from(writer.create_team("t").unwrap().as_str());
    let path = format!("teams/{team}/tables/x/1.parquet");
    writer.reserve_objects(std::slice::from_ref(&path)).unwrap();

    // A commit in flight: reservation consumed, file recorded, not committed yet.
    let stuck = connect(&url);
    let tx = stuck.team_write_transaction(team.as_str()).unwrap();
    let consumed = tx
        .execute(
            "DELETE FROM pending_objects WHERE path = ?1",
            [path.as_str()],
        )
        .unwrap();
    assert_eq!(consumed, 1);
    tx.execute(
        "INSERT INTO data_files (team_id, table_name, path, partition, rows, bytes, schema_version, created_at)
         VALUES (?1, 'x', ?2, 'date=2026-11-26', 1, 1, 1, 0)",
        [team.as_str(), path.as_str()],
    )
    .unwrap();
    // The writer looks dead to the sweep (its heartbeat is older than "now + 1 ms").
    let sweep = {
        let collector = collector.clone();
        std::thread::spawn(move || collector.paths_to_keep(stowage::catalog::now_ms() + 1))
    };
    let observer = connect(&url);
    wait_until(
        "the sweep to wait on the consumed reservation's row",
        || {
            observer
                .query_row(
                    "SELECT COUNT(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
                 WHERE a.datname = current_database() AND l.locktype = 'transactionid'
                   AND NOT l.granted",
                    stowage::catalog::db::params![],
                    |r| r.get::<i64>(0),
                )
                .unwrap()
                == 1
        },
    );
    tx.commit().unwrap();
    let keep = sweep.join().unwrap().unwrap();
    assert!(keep.contains(&path), "a committed object is kept");

    // The other order: the sweep drops a silent writer's reservation, then its commit fails.
    let late = format!("teams/{team}/tables/x/2.parquet");
    writer.reserve_objects(std::slice::from_ref(&late)).unwrap();
    let keep = collector
        .paths_to_keep(stowage::catalog::now_ms() + 1)
        .unwrap();
    assert!(!keep.contains(&late));
    let err = writer.commit_files(&team, &[file("x", &late)], 2);
    assert!(matches!(err, Err(CatalogError::Reclaimed(_))), "{err:?}");
}

/// Many teams committing at once, each from its own node with its own WAL, while two committers
/// of one team race for the same objects and readers page through snapshots: every commit lands
/// exactly once, watermarks are per WAL and never go down, and a snapshot read again later
/// (a download's cursor) lists exactly the files it listed first.
#[test]
fn concurrent_commits_of_many_teams_keep_exactly_once_and_watermarks() {
    const TEAMS: usize = 6;
    const FLUSHES: u64 = 15;
    let url = pg::database_url();
    let setup = Catalog::open_postgres(&url).unwrap();
    let teams: Vec<TeamId> = (0..TEAMS)
        .map(|i| TeamId::from(setup.create_team(&format!("team {i}")).unwrap().as_str()))
        .collect();
    let start = Arc::new(Barrier::new(TEAMS + 2));
    let mut threads = Vec::new();
    for (i, team) in teams.iter().cloned().enumerate() {
        let (url, start) = (url.clone(), start.clone());
        threads.push(std::thread::spawn(move || {
            let cat = Catalog::open_postgres(&url).unwrap();
            cat.set_wal(&format!("wal_{i}"));
            start.wait();
            for seq in 1..=FLUSHES {
                flush(&cat, &team, seq).unwrap();
            }
        }));
    }
    // Two committers of team 0 (threads of one writer, as a retried flush racing the first try)
    // commit the same reserved objects: one wins each round, the other is told the reservation
    // is gone, and nothing is committed twice.
    let racer = Arc::new(Catalog::open_postgres(&url).unwrap());
    racer.set_wal("wal_racer");
    let race_team = teams[0].clone();
    let race = {
        let (racer, start) = (racer.clone(), start.clone());
        std::thread::spawn(move || {
            start.wait();
            let mut wins = 0;
            for round in 1..=FLUSHES {
                let path = format!("teams/{race_team}/tables/raced/{round}.parquet");
                racer.reserve_objects(std::slice::from_ref(&path)).unwrap();
                let go = Arc::new(Barrier::new(2));
                let tries: Vec<_> = (0..2)
                    .map(|_| {
                        let (racer, go, team, path) =
                            (racer.clone(), go.clone(), race_team.clone(), path.clone());
                        std::thread::spawn(move || {
                            go.wait();
                            racer.commit_files(&team, &[file("raced", &path)], round)
                        })
                    })
                    .collect();
                let outcomes: Vec<_> = tries.into_iter().map(|t| t.join().unwrap()).collect();
                let won = outcomes.iter().filter(|o| o.is_ok()).count();
                assert_eq!(won, 1, "round {round}: {outcomes:?}");
                assert!(
                    outcomes
                        .iter()
                        .any(|o| matches!(o, Err(CatalogError::Reclaimed(_)))),
                    "round {round}: the loser is told its reservation is gone: {outcomes:?}"
                );
                wins += won;
            }
            wins
        })
    };
    // A reader pages through team 1's table while everyone commits.
    let reader = Catalog::open_postgres(&url).unwrap();
    start.wait();
    let mut checked = 0;
    while threads.iter().any(|t| !t.is_finished()) || checked == 0 {
        if let Some(first) = reader.snapshot(&teams[1], "tracks").unwrap() {
            let again = reader
                .snapshot_as_of(&teams[1], "tracks", Some(first.as_of))
                .unwrap()
                .unwrap();
            let ids = |s: &stowage::catalog::TableSnapshot| {
                s.files.iter().map(|f| f.id).collect::<Vec<_>>()
            };
            assert_eq!(ids(&first), ids(&again), "a snapshot read twice");
            checked += 1;
        }
    }
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(race.join().unwrap(), FLUSHES as usize);

    let cat = Catalog::open_postgres(&url).unwrap();
    for (i, team) in teams.iter().enumerate() {
        for table in ["tracks", "clicked"] {
            let files = cat.snapshot(team, table).unwrap().unwrap().files;
            let paths: Vec<_> = files.iter().map(|f| f.path.clone()).collect();
            let expected: Vec<_> = (1..=FLUSHES)
                .map(|seq| format!("teams/{team}/tables/{table}/{seq}.parquet"))
                .collect();
            assert_eq!(
                paths, expected,
                "team {i} {table}: each flush once, in commit order"
            );
        }
    }
    let raced = cat.snapshot(&teams[0], "raced").unwrap().unwrap().files;
    assert_eq!(
        raced.len(),
        FLUSHES as usize,
        "each raced object committed once"
    );
    // Watermarks: each WAL's own, at its last commit; another WAL's commits are not its progress.
    for (i, team) in teams.iter().enumerate() {
        let node = Catalog::open_postgres(&url).unwrap();
        node.set_wal(&format!("wal_{i}"));
        assert_eq!(node.watermark(team).unwrap(), FLUSHES, "team {i}");
        let other = (i + 1) % TEAMS;
        assert_eq!(
            node.watermark(&teams[other]).unwrap(),
            0,
            "team {other} in wal_{i}"
        );
    }
    let node = Catalog::open_postgres(&url).unwrap();
    node.set_wal("wal_racer");
    assert_eq!(node.watermark(&teams[0]).unwrap(), FLUSHES);
}

/// Flushes per second of `flushers` threads, each flushing its own team for `secs`.
fn measure(url: &str, flushers: usize, secs: f64) -> f64 {
    let setup = Catalog::open_postgres(url).unwrap();
    let teams: Vec<TeamId> = (0..flushers)
        .map(|i| {
            TeamId::from(
                setup
                    .create_team(&format!("bench {flushers}.{i}"))
                    .unwrap()
                    .as_str(),
            )
        })
        .collect();
    let start = Arc::new(Barrier::new(flushers + 1));
    let threads: Vec<_> = teams
        .into_iter()
        .enumerate()
        .map(|(i, team)| {
            let (url, start) = (url.to_string(), start.clone());
            std::thread::spawn(move || {
                let cat = Catalog::open_postgres(&url).unwrap();
                cat.set_wal(&format!("wal_bench_{i}"));
                // Warm up: statements prepared, tables created.
                flush(&cat, &team, 1).unwrap();
                start.wait();
                let began = Instant::now();
                let mut n = 0u64;
                while began.elapsed().as_secs_f64() < secs {
                    flush(&cat, &team, n + 2).unwrap();
                    n += 1;
                }
                n as f64 / began.elapsed().as_secs_f64()
            })
        })
        .collect();
    start.wait();
    threads.into_iter().map(|t| t.join().unwrap()).sum()
}

/// Catalog write throughput with 1, 4 and 16 flushers of different teams. The PostgreSQL server
/// is `STOWAGE_BENCH_PG_URL` (`benches/catalog_writes.sh` starts one with the default durability:
/// fsync and synchronous commit on), else this process's throwaway cluster (fsync off: the
/// figures then show lock waits and CPU, not the disk). `STOWAGE_BENCH_SECS` per point (5).
#[test]
#[ignore = "a benchmark: benches/catalog_writes.sh"]
fn catalog_write_throughput() {
    let secs: f64 = std::env::var("STOWAGE_BENCH_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5.0);
    let base = std::env::var("STOWAGE_BENCH_PG_URL").ok();
    println!("flushers  flushes/s  write transactions/s");
    for flushers in [1, 4, 16] {
        let url = match &base {
            Some(u) => u.clone(),
            None => pg::database_url(),
        };
        let per_s = measure(&url, flushers, secs);
        println!("{flushers:>8}  {per_s:>9.0}  {:>20.0}", per_s * 2.0);
    }
}
