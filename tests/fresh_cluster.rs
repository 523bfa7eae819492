//! Fresh reads on three nodes (SPEC §3.5 with §7): nodes sharing a PostgreSQL catalog and an
//! S3 bucket (moto) behind nginx, flush interval one hour. Events sent through nginx land on
//! each team's node; a fresh download from every node returns them all, exactly once, while a
//! plain download sees only committed files. A node killed with SIGKILL makes fresh reads fail
//! (503 `fresh_timeout`), never miss its events; restarted on its WAL it answers again, a node
//! stopped cleanly is no longer waited for, and one gone for good is once an operator forgets it.

use crate::common;

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use common::cluster::{Cluster, ClusterTeam};
use common::{ids, status_json};
use serde_json::{Value, json};

/// Sends `n` events through nginx; returns their ids and the node that took them.
async fn send(c: &Cluster, team: &ClusterTeam, from: usize, n: usize) -> (Vec<String>, String) {
    let http = reqwest::Client::new();
    let mut out = Vec::new();
    let mut node = String::new();
    for k in from..from + n {
        let id = format!("{}-{k:04}", team.name);
        let r = http
            .post(c.url("/v1/event"))
            .header("X-Auth-Token", &team.token)
            .header("Content-Type", "application/json")
            .body(json!({"event": "step", "messageId": id, "properties": {"k": k}}).to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        node = r.headers()["x-stowage-node"].to_str().unwrap().to_string();
        out.push(id);
    }
    (out, node)
}

async fn download(url: &str, team: &ClusterTeam, fresh: bool) -> (u16, Value) {
    let r = reqwest::Client::new()
        .post(url)
        .header("x-api-key", &team.key)
        .header("Content-Type", "application/json")
        .body(
            json!({"canvasId": team.canvas, "elementId": team.element, "fresh": fresh}).to_string(),
        )
        .send()
        .await
        .unwrap();
    status_json(r).await
}

/// Asserts `doc` holds exactly `want`, each once.
fn exactly(doc: &Value, want: &[String], what: &str) {
    let got = ids(doc);
    let set: HashSet<&String> = got.iter().collect();
    assert_eq!(set.len(), got.len(), "{what}: an event read twice");
    let missing: Vec<_> = want.iter().filter(|w| !set.contains(w)).take(5).collect();
    assert!(missing.is_empty(), "{what}: missing {missing:?}");
    assert_eq!(got.len(), want.len(), "{what}: rows that were never sent");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fresh_reads_see_every_nodes_buffer_or_fail() {
    let moto = common::s3::Moto::start("stowage").await;
    let mut env = moto.process_env("warehouse");
    env.push(("STOWAGE_CATALOG__URL".into(), common::pg::database_url()));
    env.extend(
        [
            ("STOWAGE_FLUSH__INTERVAL", "1h"),
            ("STOWAGE_COMPACTION__ENABLED", "false"),
            ("STOWAGE_READ__FRESH_TIMEOUT", "2s"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string())),
    );
    let mut cluster = Cluster::start(3, env).await;
    // Four teams at least, and more until they live on two nodes or more: nginx hashes each
    // team's (random) token, so four teams all land on one node about one run in 27.
    let mut teams: Vec<ClusterTeam> = Vec::new();
    let mut sent: HashMap<String, Vec<String>> = HashMap::new();
    let mut home: HashMap<String, String> = HashMap::new();
    while teams.len() < 4 || home.values().collect::<HashSet<_>>().len() < 2 {
        assert!(
            teams.len() < 16,
            "the teams spread over the nodes: {home:?}"
        );
        let t = cluster.team(teams.len());
        let (ids, node) = send(&cluster, &t, 0, 40).await;
        sent.insert(t.name.clone(), ids);
        home.insert(t.name.clone(), node);
        teams.push(t);
    }

    // Nothing is committed yet (one-hour flushes): plain reads see nothing; fresh reads from
    // every node see every event once.
    for t in &teams {
        let (status, doc) = download(&cluster.nodes[0].url("/data/table"), t, false).await;
        assert_eq!(status, 200, "{doc}");
        assert_eq!(ids(&doc).len(), 0, "{}: not committed yet", t.name);
        for node in &cluster.nodes {
            let (status, doc) = download(&node.url("/data/table"), t, true).await;
            assert_eq!(status, 200, "{} from {}: {doc}", t.name, node.id);
            exactly(
                &doc,
                &sent[&t.name],
                &format!("{} fresh from {}", t.name, node.id),
            );
        }
    }

    // More events on the killed node's team, then SIGKILL mid-read: a fresh read from another
    // node fails or has them all — never a silent gap — and keeps failing while it is down.
    let victim_team = &teams[0];
    let victim = cluster
        .nodes
        .iter()
        .position(|n| n.id == home[&victim_team.name])
        .unwrap();
    let reader = cluster.nodes[(victim + 1) % 3].url("/data/table");
    let (more, _) = send(&cluster, victim_team, 40, 30).await;
    sent.get_mut(&victim_team.name).unwrap().extend(more);
    let read = {
        let (reader, team_key, canvas, element) = (
            reader.clone(),
            victim_team.key.clone(),
            victim_team.canvas.clone(),
            victim_team.element.clone(),
        );
        tokio::spawn(async move {
            let r = reqwest::Client::new()
                .post(reader)
                .header("x-api-key", team_key)
                .body(json!({"canvasId": canvas, "elementId": element, "fresh": true}).to_string())
                .send()
                .await
                .unwrap();
            status_json(r).await
        })
    };
    cluster.nodes[victim].kill9();
    let (status, doc) = read.await.unwrap();
    match status {
        200 => exactly(&doc, &sent[&victim_team.name], "fresh read racing the kill"),
        503 => assert_eq!(doc["error"]["code"], "fresh_timeout", "{doc}"),
        other => panic!("fresh read racing the kill: {other} {doc}"),
    }
    let started = Instant::now();
    let (status, doc) = download(&reader, victim_team, true).await;
    assert_eq!(
        (status, doc["error"]["code"].as_str()),
        (503, Some("fresh_timeout")),
        "{doc}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "bounded by read.fresh_timeout"
    );
    // A team whose events are on a live node is refused too: the dead node might hold some.
    let (status, _) = download(&reader, &teams[1], true).await;
    assert_eq!(status, 503);

    // Restarted on its WAL, the node answers again: everything acknowledged, once.
    cluster.start_node(victim).await;
    for t in &teams {
        let (status, doc) = download(&reader, t, true).await;
        assert_eq!(status, 200, "{doc}");
        exactly(
            &doc,
            &sent[&t.name],
            &format!("{} after the restart", t.name),
        );
    }

    // A node stopped cleanly committed everything and is not waited for.
    let stopped = (victim + 2) % 3;
    cluster.nodes[stopped].sigterm();
    let (status, doc) = download(&reader, &teams[2], true).await;
    assert_eq!(status, 200, "{doc}");
    exactly(&doc, &sent[&teams[2].name], "after a clean stop");
    let nodes = cluster.admin(&["node", "list"]);
    let nodes = nodes["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 3, "{nodes:?}");
    assert_eq!(
        nodes.iter().filter(|n| !n["stopped_at"].is_null()).count(),
        1
    );

    // A node gone for good (killed, its WAL never coming back) is waited for until an
    // operator forgets it. Everything it had was committed by the reads above.
    cluster.nodes[victim].kill9();
    let (status, _) = download(&reader, &teams[2], true).await;
    assert_eq!(status, 503);
    let wal = std::fs::read_to_string(cluster.nodes[victim].data_dir.join("wal/wal.id")).unwrap();
    cluster.admin(&["node", "forget", wal.trim()]);
    for t in &teams {
        let (status, doc) = download(&reader, t, true).await;
        assert_eq!(status, 200, "{doc}");
        exactly(
            &doc,
            &sent[&t.name],
            &format!("{} after forgetting a node", t.name),
        );
    }
}
