//! Three nodes sharing a PostgreSQL catalog agree on who may come in (SPEC §5.2, §7, issue 31):
//! revocation has no window — a token used on two nodes (so their secret caches hold it) is
//! revoked by the operator's CLI or through the API on the third, and the very next requests to
//! the other two, sent the moment the revoking call has answered, are refused, 50 times — and
//! the sign-in throttle is one for all nodes: guesses spread over the three at once are held to
//! the account's limit, not three times it.

mod common;

use std::time::Duration;

use common::cluster::Cluster;
use serde_json::{Value, json};

const ROUNDS: usize = 50;

async fn send(http: &reqwest::Client, url: &str, token: &str) -> u16 {
    http.post(format!("{url}/v1/event"))
        .header("X-Auth-Token", token)
        .header("Content-Type", "application/json")
        .body(r#"{"event":"ping"}"#)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_node_agrees_on_revocations_and_sign_in_attempts() {
    let warehouse = tempfile::tempdir().unwrap();
    let env = vec![
        (
            "STOWAGE_CATALOG__URL".to_string(),
            common::pg::database_url(),
        ),
        (
            "STOWAGE_STORAGE__URL".to_string(),
            format!("file://{}", warehouse.path().display()),
        ),
    ];
    let cluster = Cluster::start(3, env).await;
    let team = cluster.admin(&["team", "create", "--name", "revokers"]);
    let team = team["id"].as_str().unwrap().to_string();
    let owner = cluster.admin(&[
        "user",
        "create",
        "--team",
        &team,
        "--email",
        "o@revokers.example",
        "--name",
        "o",
        "--role",
        "owner",
    ]);
    let owner_id = owner["id"].as_str().unwrap().to_string();
    cluster.admin(&["events", "enable", "--team", &team]);
    // The owner's personal access token, for revoking through the API on node 1.
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let link = owner["set_password_url"].as_str().unwrap();
    let signed_in = http
        .post(cluster.nodes[0].url("/api/v1/links/use"))
        .header("Content-Type", "application/json")
        .body(json!({"link": link, "password": "correct horse battery staple"}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(signed_in.status(), 200);
    let cookie = signed_in
        .headers()
        .get_all("set-cookie")
        .iter()
        .find_map(|v| v.to_str().ok()?.strip_prefix("stowage_session="))
        .and_then(|v| v.split(';').next())
        .unwrap()
        .to_string();
    let me: Value = serde_json::from_str(&signed_in.text().await.unwrap()).unwrap();
    let pat: Value = http
        .post(cluster.nodes[0].url("/api/v1/pats"))
        .header("Cookie", format!("stowage_session={cookie}"))
        .header("X-CSRF-Token", me["csrf_token"].as_str().unwrap())
        .header("Content-Type", "application/json")
        .body(json!({"name": "revoker"}).to_string())
        .send()
        .await
        .unwrap()
        .text()
        .await
        .map(|t| serde_json::from_str(&t).unwrap())
        .unwrap();
    let pat = pat["token"].as_str().unwrap().to_string();

    let (others, revoker) = (&cluster.nodes[1..], &cluster.nodes[0]);
    let mut accepted_after = Vec::new();
    for round in 0..ROUNDS {
        let made = cluster.admin(&["token", "create", "--team", &team, "--user", &owner_id]);
        let (id, token) = (
            made["id"].as_str().unwrap().to_string(),
            made["token"].as_str().unwrap().to_string(),
        );
        for node in others {
            assert_eq!(
                send(&http, &node.url(""), &token).await,
                200,
                "round {round}: warm"
            );
        }
        if round % 2 == 0 {
            cluster.admin(&["token", "revoke", "--id", &id]);
        } else {
            let r = http
                .delete(revoker.url(&format!("/api/v1/tokens/{id}")))
                .header("Authorization", format!("Bearer {pat}"))
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 204, "round {round}: revoke through the API");
        }
        let after = futures::future::join_all(
            others
                .iter()
                .map(|node| async { (node.id.clone(), send(&http, &node.url(""), &token).await) }),
        )
        .await;
        for (node, status) in after {
            if status != 401 {
                accepted_after.push(format!("round {round}: {node} answered {status}"));
            }
        }
    }
    assert!(
        accepted_after.is_empty(),
        "a revoked token was accepted after the revocation answered: {accepted_after:?}"
    );

    // 40 wrong passwords and the right one, sent at once, spread over the three nodes, each
    // from its own address: at most the account's 5 attempts are checked, cluster-wide.
    let guesses = (0..41u8).map(|i| {
        let url = cluster.nodes[usize::from(i) % 3].url("/api/v1/session");
        let password = if i == 20 {
            "correct horse battery staple".to_string()
        } else {
            format!("wrong guess {i}")
        };
        async move {
            let client = reqwest::Client::builder()
                .local_address(std::net::IpAddr::from([127, 0, 1, i + 1]))
                .build()
                .unwrap();
            client
                .post(url)
                .header("Content-Type", "application/json")
                .body(json!({"email": "o@revokers.example", "password": password}).to_string())
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }
    });
    let statuses = futures::future::join_all(guesses).await;
    let checked = statuses.iter().filter(|s| **s == 401 || **s == 200).count();
    let throttled = statuses.iter().filter(|s| **s == 429).count();
    assert_eq!(checked + throttled, 41, "{statuses:?}");
    assert!(
        checked <= 5,
        "{checked} attempts were checked across three nodes; the limit is 5: {statuses:?}"
    );
}
