//! Scale-out (SPEC §7, issue 12): three nodes sharing a PostgreSQL catalog and an S3 bucket
//! (moto), behind nginx with `config/nginx-scaleout.conf`. Several teams send events through
//! nginx concurrently while one node is killed with SIGKILL and restarted on its own WAL; every
//! node then serves every team's table, equal to what was acknowledged, each acknowledged
//! event exactly once; compaction running on all three nodes at once merges each partition once;
//! a key revoked through one node fails on the others at their next request.

use crate::common;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::cluster::{Cluster, ClusterTeam as Team};
use common::{ids, status_json, wait_for};
use serde_json::{Value, json};

const TEAMS: usize = 6;
const EVENTS_PER_TEAM: usize = 300;

/// Sends the team's events one after another through nginx; returns the message ids that were
/// acknowledged (200) and those that were not (their event may or may not be stored; never
/// re-sent, so no acknowledged event can have a twin).
async fn send_all(
    lb: String,
    team: Arc<Team>,
    sent: Arc<AtomicUsize>,
) -> (Vec<String>, HashSet<String>) {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let (mut acked, mut unsure) = (Vec::new(), HashSet::new());
    for n in 0..EVENTS_PER_TEAM {
        let id = format!("{}-{n:05}", team.name);
        let body = json!({"event": "step", "messageId": id, "properties": {"n": n}});
        let r = http
            .post(format!("{lb}/v1/event"))
            .header("X-Auth-Token", &team.token)
            .header("Content-Type", "application/json")
            .body(body.to_string())
            .send()
            .await;
        match r {
            Ok(r) if r.status() == 200 => acked.push(id),
            Ok(r) if r.status() == 502 || r.status() == 503 => {
                unsure.insert(id);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Ok(r) => panic!("{id}: {} {}", r.status(), r.text().await.unwrap()),
            Err(_) => {
                unsure.insert(id);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        sent.fetch_add(1, Ordering::Relaxed);
    }
    (acked, unsure)
}

async fn download(url: &str, team: &Team) -> (u16, Value) {
    let r = reqwest::Client::new()
        .post(url)
        .header("x-api-key", &team.key)
        .header("Content-Type", "application/json")
        .body(json!({"canvasId": team.canvas, "elementId": team.element}).to_string())
        .send()
        .await
        .unwrap();
    status_json(r).await
}

/// The `stowage_compaction_runs_total` counters of one node, by result.
async fn compaction_runs(url: &str) -> HashMap<String, u64> {
    let text = reqwest::get(url).await.unwrap().text().await.unwrap();
    let mut out = HashMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("stowage_compaction_runs_total{result=\"")
            && let Some((result, value)) = rest.split_once("\"} ")
        {
            out.insert(result.to_string(), value.trim().parse().unwrap());
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_nodes_behind_nginx_survive_a_kill_and_agree() {
    let moto = common::s3::Moto::start("stowage").await;
    let mut env = moto.process_env("warehouse");
    env.push(("STOWAGE_CATALOG__URL".into(), common::pg::database_url()));
    env.extend(
        [
            ("STOWAGE_FLUSH__INTERVAL", "150ms"),
            ("STOWAGE_COMPACTION__INTERVAL", "500ms"),
            ("STOWAGE_COMPACTION__MIN_FILES", "4"),
            ("STOWAGE_COMPACTION__GRACE", "1h"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string())),
    );
    let mut cluster = Cluster::start(3, env).await;
    // Which node serves each team's ingestion (nginx's hash of its token): TEAMS teams at
    // least, and more until they live on two nodes or more (random tokens put all six on one
    // node about one run in 243).
    let mut teams: Vec<Arc<Team>> = Vec::new();
    let mut home = HashMap::new();
    while teams.len() < TEAMS || home.values().collect::<HashSet<&String>>().len() < 2 {
        assert!(
            teams.len() < 16,
            "the teams spread over the nodes: {home:?}"
        );
        let t = Arc::new(cluster.team(teams.len()));
        let r = reqwest::Client::new()
            .post(cluster.url("/v1/event"))
            .header("X-Auth-Token", &t.token)
            .header("Content-Type", "application/json")
            .body(json!({"event": "probe", "messageId": format!("{}-probe", t.name)}).to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        home.insert(
            t.name.clone(),
            r.headers()["x-stowage-node"].to_str().unwrap().to_string(),
        );
        teams.push(t);
    }

    // Everyone sends at once; node 2 is killed a third of the way in and restarted at two thirds.
    let sent = Arc::new(AtomicUsize::new(0));
    let senders: Vec<_> = teams
        .iter()
        .map(|t| tokio::spawn(send_all(cluster.url(""), t.clone(), sent.clone())))
        .collect();
    let total = teams.len() * EVENTS_PER_TEAM;
    assert!(
        wait_for(Duration::from_secs(120), || async {
            sent.load(Ordering::Relaxed) >= total / 3
        })
        .await
    );
    cluster.nodes[1].kill9();
    assert!(
        wait_for(Duration::from_secs(120), || async {
            sent.load(Ordering::Relaxed) >= 2 * total / 3
        })
        .await
    );
    cluster.start_node(1).await;
    let mut acked = HashMap::new();
    let mut unsure = HashMap::new();
    for (t, s) in teams.iter().zip(senders) {
        let (a, u) = s.await.unwrap();
        assert!(
            a.len() > EVENTS_PER_TEAM / 2,
            "{}: most events acknowledged ({})",
            t.name,
            a.len()
        );
        // The kill does not disturb teams served by the other nodes: all their events land.
        if home[&t.name] != cluster.nodes[1].id {
            assert!(
                u.is_empty(),
                "{} (on {}) lost requests to another node's crash: {u:?}",
                t.name,
                home[&t.name]
            );
        }
        acked.insert(t.name.clone(), a);
        unsure.insert(t.name.clone(), u);
    }

    // Every node serves every team's table: each acknowledged event exactly once, nothing that
    // was never sent, and — for teams whose node was not the one killed — in sending order.
    let killed = cluster.nodes[1].id.clone();
    for t in &teams {
        let want = &acked[&t.name];
        for node in &cluster.nodes {
            let url = node.url("/data/table");
            let settled = wait_for(Duration::from_secs(60), || async {
                let (status, doc) = download(&url, t).await;
                let got: HashSet<String> = ids(&doc).into_iter().collect();
                status == 200 && want.iter().all(|id| got.contains(id))
            })
            .await;
            assert!(
                settled,
                "{} on {}: acknowledged events missing",
                t.name, node.id
            );
            let (_, doc) = download(&url, t).await;
            let got: Vec<String> = ids(&doc)
                .into_iter()
                .filter(|id| !id.ends_with("-probe"))
                .collect();
            let distinct: HashSet<&String> = got.iter().collect();
            assert_eq!(
                distinct.len(),
                got.len(),
                "{} on {}: a row twice",
                t.name,
                node.id
            );
            for id in &got {
                assert!(
                    want.contains(id) || unsure[&t.name].contains(id),
                    "{} on {}: {id} was never acknowledged nor attempted",
                    t.name,
                    node.id
                );
            }
            if home[&t.name] != killed {
                let in_order: Vec<&String> = got.iter().filter(|id| want.contains(id)).collect();
                assert_eq!(
                    in_order,
                    want.iter().collect::<Vec<_>>(),
                    "{} on {}: order",
                    t.name,
                    node.id
                );
            }
        }
    }

    // Compaction ran on all three nodes at the same time: some partitions merged, none twice.
    let merged = wait_for(Duration::from_secs(60), || async {
        let mut merged = 0;
        for node in &cluster.nodes {
            merged += compaction_runs(&node.metrics_url())
                .await
                .get("merged")
                .copied()
                .unwrap_or(0);
        }
        merged > 0
    })
    .await;
    assert!(merged, "no node compacted anything");
    for node in &cluster.nodes {
        let runs = compaction_runs(&node.metrics_url()).await;
        assert_eq!(
            runs.get("lost").copied().unwrap_or(0),
            0,
            "{}: a merge thrown away: {runs:?}",
            node.id
        );
    }

    // A key revoked (by the admin CLI: another process on the shared catalog) fails on every
    // node at the very next request.
    let t = &teams[0];
    for node in &cluster.nodes {
        assert_eq!(download(&node.url("/data/table"), t).await.0, 200);
    }
    cluster.admin(&["key", "revoke", "--id", &t.key_id]);
    for node in &cluster.nodes {
        let (status, body) = download(&node.url("/data/table"), t).await;
        assert_eq!(status, 401, "{}: revoked key still works: {body}", node.id);
    }
}
