//! The real binary and its admin CLI sharing one data dir, as an operator and a new owner meet
//! them: the operator's set-password link works once; an events token is refused until the
//! operator enables events, and the owner's request shows in `admin events requests`; and no
//! secret made along the way — password, session, link, key, token, personal access token —
//! is ever in the server's output (debug logs included), the audit log or the catalog file.

use std::path::Path;

use serde_json::{Value, json};

use super::client::{Api, PASSWORD, Who};
use super::common::process;

/// Runs `stowage --json <args>` on `dir`; panics unless it succeeds.
fn admin(dir: &Path, args: &[&str]) -> Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let (ok, json, stderr) = process::cli(dir, &all, &[]);
    assert!(ok, "stowage {args:?}: {stderr}");
    json
}

/// Every file of the catalog (the database, its WAL and shared memory).
fn catalog_bytes(dir: &Path) -> Vec<u8> {
    let mut all = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        if name.starts_with("catalog") {
            all.extend(std::fs::read(&p).unwrap());
        }
    }
    assert!(!all.is_empty(), "no catalog file in {dir:?}");
    all
}

#[tokio::test(flavor = "multi_thread")]
async fn an_operator_made_owner_signs_in_asks_for_events_and_no_secret_leaks() {
    let dir = tempfile::tempdir().unwrap();
    // The server's stdout joins its stderr, so both are searched for secrets.
    let wrapper = ["sh", "-c", "exec \"$0\" \"$@\" 1>&2"];
    let env = [("STOWAGE_LOG__LEVEL", "debug")];
    let server = process::try_start_wrapped(dir.path(), &env, &wrapper)
        .await
        .unwrap_or_else(|log| panic!("server did not start:\n{log}"));
    let log = server.log.clone();
    let api = Api::new(&server.url(""));
    let mut secrets: Vec<String> = vec![PASSWORD.into()];

    admin(dir.path(), &["admin", "team", "create", "--name", "acme"]);
    let created = admin(
        dir.path(),
        &[
            "admin",
            "user",
            "create",
            "--team",
            "acme",
            "--email",
            "Owner@Acme.example",
            "--name",
            "Olga",
            "--role",
            "owner",
        ],
    );
    let link = created["set_password_url"].as_str().unwrap().to_string();
    secrets.push(link.rsplit('/').next().unwrap().to_string());
    assert!(secrets[1].starts_with("stw_link_"), "{created}");
    let use_link = json!({"link": link, "password": PASSWORD});
    let r = api
        .post(&Who::anonymous(), "/api/v1/links/use", use_link.clone())
        .await;
    let me = r.ok(200, "set the password").clone();
    assert_eq!(me["user"]["email"], "owner@acme.example");
    assert_eq!(me["user"]["role"], "owner");
    assert_eq!(me["team"]["events_enabled"], false);
    let owner = api.session(&r);
    secrets.push(owner.cookie.clone().unwrap());
    let r = api
        .post(&Who::anonymous(), "/api/v1/links/use", use_link)
        .await;
    r.expect(410, Some("link_expired"), "the link again");
    let again = api.sign_in("owner@acme.example").await;
    secrets.push(again.cookie.clone().unwrap());
    // A reset link made with a 1 ms lifetime (from the environment) has expired when used.
    // `admin user reset` for the owner with extra environment; its link, whose secret is kept.
    let mut reset_link = |env: &[(&str, &str)]| {
        let args = [
            "--json",
            "admin",
            "user",
            "reset",
            "--email",
            "owner@acme.example",
        ];
        let (ok, reset, stderr) = process::cli(dir.path(), &args, env);
        assert!(ok, "{stderr}");
        let link = reset["set_password_url"].as_str().unwrap().to_string();
        secrets.push(link.rsplit('/').next().unwrap().to_string());
        link
    };
    let reset = reset_link(&[("STOWAGE_ACCOUNTS__LINK_TTL", "1ms")]);
    let body = json!({"link": reset, "password": "another long password"});
    let r = api.post(&Who::anonymous(), "/api/v1/links/use", body).await;
    r.expect(410, Some("link_expired"), "an expired reset link");
    // A reset ends every session and the old password at once (SPEC §5.2): the owner comes back
    // through a fresh reset link.
    let r = api.get(&owner, "/api/v1/me").await;
    r.expect(401, Some("not_signed_in"), "a session after a reset");
    api.try_sign_in("owner@acme.example", PASSWORD)
        .await
        .expect(
            401,
            Some("invalid_credentials"),
            "the password after a reset",
        );
    let reset = reset_link(&[]);
    let body = json!({"link": reset, "password": PASSWORD});
    let r = api.post(&Who::anonymous(), "/api/v1/links/use", body).await;
    r.ok(200, "a fresh reset link");
    let owner = api.session(&r);
    secrets.push(owner.cookie.clone().unwrap());
    // Session CSRF tokens are never stored (derived from the cookie) and never logged.
    let csrf_tokens = [owner.csrf.clone().unwrap(), again.csrf.clone().unwrap()];

    // Events: refused, requested, listed for the operator, enabled, then a working token.
    let r = api.post(&owner, "/api/v1/tokens", json!({})).await;
    r.expect(403, Some("events_disabled"), "token before events");
    let r = api.post(&owner, "/api/v1/events/request", json!({})).await;
    let request = r.ok(202, "request events").clone();
    assert_eq!(request["new"], true);
    let open = admin(dir.path(), &["admin", "events", "requests"]);
    let listed = open
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == request["id"]);
    let listed = listed.unwrap_or_else(|| panic!("{request} not in {open}"));
    assert_eq!(listed["team_name"], "acme");
    assert_eq!(listed["requested_by_email"], "owner@acme.example");
    admin(dir.path(), &["admin", "events", "enable", "--team", "acme"]);
    let open = admin(dir.path(), &["admin", "events", "requests"]);
    assert!(
        open.as_array()
            .unwrap()
            .iter()
            .all(|r| r["id"] != request["id"]),
        "{open}"
    );
    let r = api
        .post(&owner, "/api/v1/tokens", json!({"name": "site"}))
        .await;
    let token = r.ok(201, "token after events")["token"]
        .as_str()
        .unwrap()
        .to_string();
    secrets.push(token.clone());
    let resp = api
        .http
        .post(server.url("/v1/event"))
        .header("X-Auth-Token", &token)
        .header("Content-Type", "application/json")
        .body(super::common::SEED_EVENT)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200, "{}", resp.text().await.unwrap());

    // A key, a personal access token and an invite, each shown once.
    let r = api
        .post(&owner, "/api/v1/keys", json!({"name": "laptop"}))
        .await;
    let key = r.ok(201, "key")["key"].as_str().unwrap().to_string();
    secrets.push(key.clone());
    let r = api.post(&owner, "/api/v1/pats", json!({})).await;
    let pat = r.ok(201, "pat")["token"].as_str().unwrap().to_string();
    secrets.push(pat.clone());
    let r = api
        .post(
            &owner,
            "/api/v1/invites",
            json!({"email": "m@acme.example", "role": "member"}),
        )
        .await;
    let invite = r.ok(201, "invite")["invite_url"]
        .as_str()
        .unwrap()
        .to_string();
    secrets.push(invite.rsplit('/').next().unwrap().to_string());
    let by_pat = Who::pat(&pat);
    api.get(&by_pat, "/api/v1/me").await.ok(200, "pat works");
    for (path, field) in [
        ("/api/v1/keys", "key"),
        ("/api/v1/tokens", "token"),
        ("/api/v1/pats", "token"),
    ] {
        let r = api.get(&by_pat, path).await;
        r.ok(200, path);
        assert!(
            !r.text.contains(&format!("\"{field}\"")),
            "{path} lists a secret: {}",
            r.text
        );
        for s in &secrets {
            assert!(!r.text.contains(s.as_str()), "{path} shows {s}");
        }
    }
    // Revoke everything (audited too), then read the audit log.
    for path in ["/api/v1/keys", "/api/v1/tokens", "/api/v1/pats"] {
        let r = api.get(&owner, path).await;
        let list = r.json.as_object().unwrap().values().next().unwrap().clone();
        for item in list.as_array().unwrap() {
            let id = item["id"].as_str().unwrap();
            api.delete(&owner, &format!("{path}/{id}"))
                .await
                .ok(204, path);
        }
    }
    api.get(&by_pat, "/api/v1/me")
        .await
        .expect(401, Some("not_signed_in"), "revoked pat");
    api.try_sign_in("owner@acme.example", "not the password")
        .await;
    let r = api.get(&owner, "/api/v1/audit?limit=500").await;
    let actions: Vec<&str> = r.ok(200, "audit")["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    for a in [
        "member.create",
        "user.set_password",
        "session.sign_in",
        "session.sign_in_failed",
        "events.request",
        "token.create",
        "token.revoke",
        "key.create",
        "key.revoke",
        "pat.create",
        "pat.revoke",
        "member.invite",
    ] {
        assert!(actions.contains(&a), "no {a} in {actions:?}");
    }
    for s in &secrets {
        assert!(!r.text.contains(s.as_str()), "the audit log shows {s}");
    }

    assert_eq!(server.sigterm(), 0);
    let log = log.lock().unwrap().join("\n");
    assert!(
        log.contains("\"level\":\"DEBUG\""),
        "debug logs were on: {log}"
    );
    let catalog = catalog_bytes(dir.path());
    for t in &csrf_tokens {
        assert!(
            !log.contains(t.as_str()),
            "the server's output shows a CSRF token"
        );
        let stored = catalog.windows(t.len()).any(|w| w == t.as_bytes());
        assert!(!stored, "the catalog file holds a CSRF token");
    }
    for s in &secrets {
        assert!(!log.contains(s.as_str()), "the server's output shows {s}");
        let found = catalog.windows(s.len()).any(|w| w == s.as_bytes());
        assert!(!found, "the catalog file holds {s}");
    }
}
