//! Sessions and tokens end when they should: signing out and revoking a personal access token
//! take effect at the very next request, an idle session expires, and failed sign-ins are slowed
//! per account and per address without telling which emails exist.

use std::time::Duration;

use serde_json::json;
use stowage::catalog::Role;
use stowage::config::HumanDuration;

use super::client::{PASSWORD, Who, fresh_email, user};
use super::common::wait_for;
use super::fixture::Fx;

#[tokio::test(flavor = "multi_thread")]
async fn signing_out_and_revoking_a_token_work_at_the_next_request() {
    let fx = Fx::start().await;
    let email = fx
        .catalog()
        .user(&fx.owner.user_id)
        .unwrap()
        .unwrap()
        .email
        .unwrap();
    let laptop = fx.api.sign_in(&email).await;
    let phone = fx.api.sign_in(&email).await;
    let r = fx.api.delete(&laptop, "/api/v1/session").await;
    r.ok(204, "sign out");
    let cleared = r.headers["set-cookie"].to_str().unwrap();
    assert!(
        cleared.starts_with("stowage_session=;") && cleared.contains("Max-Age=0"),
        "{cleared}"
    );
    let r = fx.api.get(&laptop, "/api/v1/me").await;
    r.expect(401, Some("not_signed_in"), "signed-out session");
    fx.api
        .delete(&laptop, "/api/v1/session")
        .await
        .expect(401, Some("not_signed_in"), "twice");
    let me = fx.api.get(&phone, "/api/v1/me").await;
    assert_eq!(
        me.ok(200, "the other session")["csrf_token"],
        phone.csrf.clone().unwrap().as_str()
    );

    let r = fx
        .api
        .post(&phone, "/api/v1/pats", json!({"name": "deploy"}))
        .await;
    let created = r.ok(201, "create pat").clone();
    let pat = Who::pat(created["token"].as_str().unwrap());
    let me = fx.api.get(&pat, "/api/v1/me").await;
    assert!(
        me.ok(200, "pat")["csrf_token"].is_null(),
        "a token has no CSRF token"
    );
    // A token's DELETE /session ends nothing; the token goes on working.
    fx.api
        .delete(&pat, "/api/v1/session")
        .await
        .ok(204, "pat sign-out");
    fx.api
        .get(&pat, "/api/v1/me")
        .await
        .ok(200, "pat still works");
    // last_used_at is set by the first use (then at most once a minute).
    let r = fx.api.get(&phone, "/api/v1/pats").await;
    let listed = r.ok(200, "pats")["pats"].as_array().unwrap().clone();
    let row = listed.iter().find(|p| p["id"] == created["id"]).unwrap();
    assert!(row["last_used_at"].as_i64().is_some(), "{row}");
    let path = format!("/api/v1/pats/{}", created["id"].as_str().unwrap());
    fx.api
        .delete(&pat, &path)
        .await
        .ok(204, "revoke with itself");
    fx.api
        .get(&pat, "/api/v1/me")
        .await
        .expect(401, Some("not_signed_in"), "revoked pat");
    fx.api
        .delete(&phone, &path)
        .await
        .expect(404, Some("not_found"), "revoke twice");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_idle_session_expires() {
    let idle = Duration::from_secs(1);
    let fx = Fx::start_with(|c| c.accounts.session_idle = HumanDuration(idle)).await;
    let email = fresh_email("a.example");
    user(fx.catalog(), &fx.team, &email, Role::Member);
    let who = fx.api.sign_in(&email).await;
    // In use, it lives on past the idle limit…
    let until = std::time::Instant::now() + idle * 2;
    while std::time::Instant::now() < until {
        fx.api.get(&who, "/api/v1/me").await.ok(200, "in use");
        tokio::time::sleep(idle / 10).await;
    }
    // …and left alone for the idle limit, it has expired. This wait is the point of the test:
    // any request meanwhile would count as use.
    tokio::time::sleep(idle + Duration::from_millis(100)).await;
    let r = fx.api.get(&who, "/api/v1/me").await;
    r.expect(401, Some("not_signed_in"), "idle");
}

#[tokio::test(flavor = "multi_thread")]
async fn failed_sign_ins_are_slowed_and_tell_nothing() {
    let fx = Fx::start_with(|c| {
        c.accounts.max_failures_per_account = 3;
        c.accounts.max_failures_per_address = 6;
    })
    .await;
    let known = fresh_email("a.example");
    let unknown = fresh_email("nobody.example");
    user(fx.catalog(), &fx.team, &known, Role::Member);
    // Each email from its own address, so only the per-account count applies.
    let (k, u) = (fx.api.via_address(2), fx.api.via_address(3));
    for i in 0..2 {
        let a = k.try_sign_in(&known, "wrong password!").await;
        let b = u.try_sign_in(&unknown, "wrong password!").await;
        a.expect(401, Some("invalid_credentials"), &format!("known #{i}"));
        assert_eq!(
            (a.status, &a.json),
            (b.status, &b.json),
            "an unknown email reads the same"
        );
    }
    // The third failure locks the email for a second from when it is counted, before its
    // password is checked: each email is tried again right after its own third failure, so
    // only that one check stands between them (two, on a loaded machine, outlasted the lock).
    let third_known = k.try_sign_in(&known, "wrong password!").await;
    let a = fx.api.via_address(4).try_sign_in(&known, PASSWORD).await;
    let third_unknown = u.try_sign_in(&unknown, "wrong password!").await;
    let b = fx.api.via_address(4).try_sign_in(&unknown, PASSWORD).await;
    third_known.expect(401, Some("invalid_credentials"), "known #2");
    assert_eq!(
        (third_known.status, &third_known.json),
        (third_unknown.status, &third_unknown.json),
        "an unknown email reads the same"
    );
    // Locked now: even the right password is refused, for known and unknown emails alike.
    a.expect(429, Some("too_many_attempts"), "locked account");
    assert_eq!(
        (a.status, &a.json),
        (b.status, &b.json),
        "an unknown email reads the same"
    );
    for r in [&a, &b] {
        let wait: u64 = r.headers["retry-after"].to_str().unwrap().parse().unwrap();
        assert!((1..=2).contains(&wait), "Retry-After {wait}");
    }
    // Once the lock has passed, the right password works and clears the count.
    let unlocked = wait_for(Duration::from_secs(10), || async {
        k.try_sign_in(&known, PASSWORD).await.status == 200
    })
    .await;
    assert!(unlocked, "the account stayed locked");

    // Per address: failures spread over many emails lock the address, not the accounts.
    let other = fresh_email("a.example");
    user(fx.catalog(), &fx.team, &other, Role::Member);
    let noisy = fx.api.via_address(5);
    for _ in 0..6 {
        let r = noisy
            .try_sign_in(&fresh_email("guess.example"), "guess guess guess")
            .await;
        r.expect(401, Some("invalid_credentials"), "guess");
    }
    let r = noisy.try_sign_in(&other, PASSWORD).await;
    r.expect(429, Some("too_many_attempts"), "locked address");
    assert!(r.headers.contains_key("retry-after"));
    fx.api
        .via_address(6)
        .try_sign_in(&other, PASSWORD)
        .await
        .ok(200, "another address");
    let entries = fx.api.get(&fx.owner, "/api/v1/audit?limit=500").await;
    let failed = entries.ok(200, "audit")["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"] == "session.sign_in_failed" && e["actor_email"] == known.as_str())
        .map(|e| e["address"].as_str().unwrap().to_string())
        .collect::<Vec<_>>();
    assert_eq!(
        failed,
        vec!["127.0.0.2"; 3],
        "failures are audited with their address"
    );
}
