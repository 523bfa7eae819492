//! Members and invites: a team never loses its last owner, a removed member's session and token
//! stop at once, an invite link works once and expires, and the audit log says who did what from
//! where.

use std::time::Duration;

use serde_json::{Value, json};
use stowage::catalog::{Role, now_ms};
use stowage::config::HumanDuration;

use super::client::{PASSWORD, Who, fresh_email, user};
use super::common::wait_for;
use super::fixture::Fx;

#[tokio::test(flavor = "multi_thread")]
async fn a_team_always_keeps_an_owner() {
    let fx = Fx::start().await;
    let c = fx.catalog();
    let team = c.create_team("solo").unwrap();
    let (a_email, b_email) = (fresh_email("solo.example"), fresh_email("solo.example"));
    user(c, &team, &a_email, Role::Owner);
    let b_id = user(c, &team, &b_email, Role::Member);
    let a = fx.api.sign_in(&a_email).await;
    let b = fx.api.sign_in(&b_email).await;
    let me = format!("/api/v1/members/{}", a.user_id);
    let demote = json!({"role": "member"}).to_string();
    let r = fx.api.call(&a, "PATCH", &me, Some(&demote)).await;
    r.expect(409, Some("last_owner"), "demote the only owner");
    fx.api
        .delete(&a, &me)
        .await
        .expect(409, Some("last_owner"), "remove the only owner");
    // With a second owner, the first may step down.
    let promote = json!({"role": "owner"}).to_string();
    let b_path = format!("/api/v1/members/{b_id}");
    let r = fx.api.call(&a, "PATCH", &b_path, Some(&promote)).await;
    assert_eq!(r.ok(200, "promote")["role"], "owner");
    // A role change ends the member's sessions (SPEC §5.2): b signs in again, as an owner.
    let r = fx.api.get(&b, "/api/v1/members").await;
    r.expect(
        401,
        Some("not_signed_in"),
        "b's session after the promotion",
    );
    let b = fx.api.sign_in(&b_email).await;
    let r = fx.api.call(&a, "PATCH", &me, Some(&demote)).await;
    assert_eq!(r.ok(200, "step down")["role"], "member");
    // The change applies to a's very next request: its session ended; signed in again, a is a
    // member.
    let r = fx.api.post(&a, "/api/v1/keys", json!({})).await;
    r.expect(401, Some("not_signed_in"), "a demoted owner's old session");
    let a = fx.api.sign_in(&a_email).await;
    let r = fx.api.post(&a, "/api/v1/keys", json!({})).await;
    r.expect(403, Some("forbidden"), "a demoted owner");
    let r = fx.api.call(&b, "PATCH", &b_path, Some(&demote)).await;
    r.expect(409, Some("last_owner"), "demote the new only owner");
    fx.api.delete(&b, &me).await.ok(204, "remove a");
    fx.api
        .delete(&b, &b_path)
        .await
        .expect(409, Some("last_owner"), "remove the last owner");
    let members = fx.api.get(&b, "/api/v1/members").await;
    let members = members.ok(200, "members")["members"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(members.len(), 1);
    assert_eq!(members[0]["id"], b_id.as_str());
    for field in ["id", "email", "name", "role", "created_at"] {
        assert!(!members[0][field].is_null(), "{field}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_removed_member_is_signed_out_at_once() {
    let fx = Fx::start().await;
    let email = fresh_email("a.example");
    let id = user(fx.catalog(), &fx.team, &email, Role::Member);
    let session = fx.api.sign_in(&email).await;
    let r = fx
        .api
        .post(&session, "/api/v1/pats", json!({"name": "cron"}))
        .await;
    let pat = Who::pat(r.ok(201, "pat")["token"].as_str().unwrap());
    fx.api.get(&pat, "/api/v1/me").await.ok(200, "pat before");
    fx.api
        .get(&session, "/api/v1/me")
        .await
        .ok(200, "session before");
    let path = format!("/api/v1/members/{id}");
    fx.api.delete(&fx.owner, &path).await.ok(204, "remove");
    for who in [&session, &pat] {
        let r = fx.api.get(who, "/api/v1/me").await;
        r.expect(401, Some("not_signed_in"), "after removal");
    }
    let r = fx.api.try_sign_in(&email, PASSWORD).await;
    r.expect(
        401,
        Some("invalid_credentials"),
        "a removed member signs in",
    );
    fx.api
        .delete(&fx.owner, &path)
        .await
        .expect(404, Some("not_found"), "again");
}

/// Accepts an invite link with a name and [`PASSWORD`].
async fn accept(fx: &Fx, link: &str) -> super::client::Resp {
    let body = json!({"link": link, "password": PASSWORD, "name": "New Person"});
    fx.api
        .post(&Who::anonymous(), "/api/v1/links/use", body)
        .await
}

#[tokio::test(flavor = "multi_thread")]
async fn an_invite_works_once() {
    let fx = Fx::start().await;
    let email = fresh_email("a.example");
    let r = fx
        .api
        .post(
            &fx.owner,
            "/api/v1/invites",
            json!({"email": email, "role": "owner"}),
        )
        .await;
    let body = r.ok(201, "invite");
    let link = body["invite_url"].as_str().unwrap().to_string();
    assert!(
        link.starts_with(&format!("{}/invite/stw_link_", fx.api.base)),
        "{link}"
    );
    assert_eq!(r.headers["cache-control"], "no-store");
    let r = accept(&fx, &link).await;
    let joined = r.ok(200, "accept").clone();
    assert_eq!(joined["user"]["email"], email.as_str());
    assert_eq!(joined["user"]["role"], "owner");
    assert_eq!(joined["user"]["name"], "New Person");
    assert_eq!(joined["team"]["id"], fx.team.as_str());
    let newcomer = fx.api.session(&r);
    fx.api
        .get(&newcomer, "/api/v1/keys")
        .await
        .ok(200, "an owner now");
    accept(&fx, &link)
        .await
        .expect(410, Some("link_expired"), "second use");
    fx.api.sign_in(&email).await;
    // Inviting an email that has an account is answered as for a new one (no enumeration,
    // SPEC §5.2); the collision is told to whoever uses the link.
    let r = fx
        .api
        .post(
            &fx.owner,
            "/api/v1/invites",
            json!({"email": email, "role": "member"}),
        )
        .await;
    r.expect(201, None, "invite an existing user");
    let again = r.json["invite_url"].as_str().unwrap().to_string();
    accept(&fx, &again)
        .await
        .expect(409, Some("email_taken"), "use an invite for a taken email");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_invite_expires() {
    let fx =
        Fx::start_with(|c| c.accounts.link_ttl = HumanDuration(Duration::from_millis(500))).await;
    let r = fx
        .api
        .post(
            &fx.owner,
            "/api/v1/invites",
            json!({"email": fresh_email("a.example"), "role": "member"}),
        )
        .await;
    let body = r.ok(201, "invite").clone();
    let expires_at = body["expires_at"].as_i64().unwrap();
    assert!(
        expires_at > now_ms() && expires_at <= now_ms() + 500,
        "{body}"
    );
    assert!(wait_for(Duration::from_secs(5), || async { now_ms() > expires_at }).await);
    let r = accept(&fx, body["invite_url"].as_str().unwrap()).await;
    r.expect(410, Some("link_expired"), "after expiry");
}

/// The actions of the team's audit log (newest first), with their entries.
async fn audit(fx: &Fx) -> Vec<Value> {
    let r = fx.api.get(&fx.owner, "/api/v1/audit?limit=500").await;
    r.ok(200, "audit")["entries"].as_array().unwrap().clone()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_audit_log_says_who_did_what_from_where() {
    let fx = Fx::start().await;
    let owner_email = fx
        .catalog()
        .user(&fx.owner.user_id)
        .unwrap()
        .unwrap()
        .email
        .unwrap();
    fx.api
        .try_sign_in(&owner_email, "not the password")
        .await
        .expect(401, Some("invalid_credentials"), "wrong");
    let r = fx
        .api
        .post(&fx.owner, "/api/v1/keys", json!({"name": "audited"}))
        .await;
    let key_id = r.ok(201, "key")["id"].as_str().unwrap().to_string();
    fx.api
        .delete(&fx.owner, &format!("/api/v1/keys/{key_id}"))
        .await
        .ok(204, "revoke");
    let member = fx.new_member();
    let path = format!("/api/v1/members/{member}");
    fx.api
        .call(&fx.owner, "PATCH", &path, Some(r#"{"role":"owner"}"#))
        .await
        .ok(200, "role");
    fx.api.delete(&fx.owner, &path).await.ok(204, "remove");
    fx.api
        .post(
            &fx.owner,
            "/api/v1/invites",
            json!({"email": fresh_email("a.example"), "role": "member"}),
        )
        .await
        .ok(201, "invite");
    let entries = audit(&fx).await;
    let find = |action: &str, target: Option<&str>| {
        entries
            .iter()
            .find(|e| {
                e["action"] == action
                    && e["actor_email"] == owner_email.as_str()
                    && target.is_none_or(|t| e["target"] == t)
            })
            .unwrap_or_else(|| panic!("no {action} by the owner in {entries:#?}"))
            .clone()
    };
    for (action, target) in [
        ("session.sign_in", None),
        ("session.sign_in_failed", None),
        ("key.create", Some(key_id.as_str())),
        ("key.revoke", Some(key_id.as_str())),
        ("member.role", Some(member.as_str())),
        ("member.remove", Some(member.as_str())),
        ("member.invite", None),
    ] {
        let e = find(action, target);
        assert_eq!(e["address"], "127.0.0.1", "{e}");
        assert!(e["at"].as_i64().unwrap() > 0, "{e}");
    }
    assert_eq!(find("member.role", None)["detail"], "owner");
    // Pages: newest first, continued with next_before.
    let r = fx.api.get(&fx.owner, "/api/v1/audit?limit=2").await;
    let first = r.ok(200, "page 1").clone();
    assert_eq!(first["entries"].as_array().unwrap().len(), 2);
    let before = first["next_before"].as_i64().unwrap();
    assert_eq!(before, first["entries"][1]["id"].as_i64().unwrap());
    let r = fx
        .api
        .get(&fx.owner, &format!("/api/v1/audit?limit=2&before={before}"))
        .await;
    let second = r.ok(200, "page 2");
    assert!(second["entries"][0]["id"].as_i64().unwrap() < before);
    // Team B sees none of it.
    let r = fx.api.get(&fx.other, "/api/v1/audit").await;
    let theirs = r.ok(200, "team b")["entries"].as_array().unwrap().clone();
    assert!(
        theirs.iter().all(|e| e["target"] != key_id.as_str()),
        "{theirs:#?}"
    );
}

/// Behind a load balancer listed in `server.trusted_proxies`, the audit log records the client
/// its `X-Forwarded-For` names; a peer that is not listed cannot claim another address.
#[tokio::test(flavor = "multi_thread")]
async fn the_address_behind_a_trusted_proxy_is_the_forwarded_one() {
    let fx = Fx::start_with(|c| c.server.trusted_proxies = "127.0.0.2, 10.0.0.0/8".into()).await;
    let owner_email = fx
        .catalog()
        .user(&fx.owner.user_id)
        .unwrap()
        .unwrap()
        .email
        .unwrap();
    let fail_from = |n: u8, forwarded: &'static str| {
        let (base, email) = (fx.api.base.clone(), owner_email.clone());
        async move {
            let http = reqwest::Client::builder()
                .local_address(std::net::IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 0, n)))
                .build()
                .unwrap();
            let r = http
                .post(format!("{base}/api/v1/session"))
                .header("X-Forwarded-For", forwarded)
                .header("Content-Type", "application/json")
                .body(json!({"email": email, "password": "not the password"}).to_string())
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), 401);
        }
    };
    // The proxy (127.0.0.2) forwards for 198.51.100.7, through another trusted hop (10.1.2.3);
    // the left-most entry is whatever the client wrote and is not believed.
    fail_from(2, "6.6.6.6, 198.51.100.7, 10.1.2.3").await;
    // An untrusted peer's header is ignored.
    fail_from(3, "198.51.100.8").await;
    let mut seen: Vec<String> = audit(&fx)
        .await
        .iter()
        .filter(|e| e["action"] == "session.sign_in_failed")
        .map(|e| e["address"].as_str().unwrap().to_string())
        .collect();
    seen.sort();
    assert_eq!(seen, ["127.0.0.3", "198.51.100.7"]);
}
