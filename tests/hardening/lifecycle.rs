//! What ends what (SPEC §5.2): a password reset ends every session and personal access token, a
//! new sign-in ends the session it replaces, a role change ends the user's sessions; an invite
//! works only while its creator may still invite, owners list and revoke pending invites, and
//! inviting an email with an account elsewhere is answered as for a new one.

use serde_json::json;

use super::Demo;
use super::client::{PASSWORD, Who};

async fn me(demo: &Demo, who: &Who) -> u16 {
    demo.api.get(who, "/api/v1/me").await.status
}

/// An owner invite made by `by`; its link.
async fn invite(demo: &Demo, by: &Who, email: &str, role: &str) -> String {
    let r = demo
        .api
        .post(by, "/api/v1/invites", json!({"email": email, "role": role}))
        .await;
    r.ok(201, "invite")["invite_url"]
        .as_str()
        .unwrap()
        .to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_password_reset_ends_every_session_and_token() {
    let demo = Demo::start(&[]).await;
    let (user, email) = demo.new_user("owner").await;
    let r = demo
        .api
        .post(&user, "/api/v1/pats", json!({"name": "script"}))
        .await;
    let pat = Who::pat(r.ok(201, "pat")["token"].as_str().unwrap());
    assert_eq!(me(&demo, &user).await, 200);
    assert_eq!(me(&demo, &pat).await, 200);

    let reset = demo.admin(&["user", "reset", "--email", &email]);
    let link = reset["set_password_url"].as_str().unwrap().to_string();
    assert_eq!(
        me(&demo, &user).await,
        401,
        "the session ended at the reset"
    );
    assert_eq!(
        me(&demo, &pat).await,
        401,
        "the token was revoked at the reset"
    );
    demo.api.try_sign_in(&email, PASSWORD).await.expect(
        401,
        Some("invalid_credentials"),
        "the old password stopped working",
    );

    let fresh = demo.use_link(&link, None).await;
    assert_eq!(me(&demo, &fresh).await, 200, "the link signs in");
    assert_eq!(me(&demo, &user).await, 401);
    assert_eq!(me(&demo, &pat).await, 401);
}

#[tokio::test(flavor = "multi_thread")]
async fn signing_in_rotates_the_session_and_a_role_change_ends_them() {
    let demo = Demo::start(&[]).await;
    let (member, email) = demo.new_user("member").await;

    // Signing in again from the same browser (its cookie sent along) replaces the session.
    let again = demo
        .api
        .call(
            &Who {
                csrf: None,
                ..member.clone()
            },
            "POST",
            "/api/v1/session",
            Some(&json!({"email": email, "password": PASSWORD}).to_string()),
        )
        .await;
    again.ok(200, "sign in again");
    let rotated = demo.api.session(&again);
    assert_ne!(rotated.cookie, member.cookie, "a new session id");
    assert_eq!(me(&demo, &member).await, 401, "the replaced session ended");
    assert_eq!(me(&demo, &rotated).await, 200);

    // Another session of the same user, elsewhere.
    let elsewhere = demo.api.sign_in(&email).await;
    let r = demo
        .api
        .call(
            &demo.owner,
            "PATCH",
            &format!("/api/v1/members/{}", rotated.user_id),
            Some(r#"{"role":"owner"}"#),
        )
        .await;
    r.ok(200, "promote");
    assert_eq!(
        me(&demo, &rotated).await,
        401,
        "sessions end at a role change"
    );
    assert_eq!(me(&demo, &elsewhere).await, 401);
    let promoted = demo.api.sign_in(&email).await;
    let r = demo.api.get(&promoted, "/api/v1/keys").await;
    r.ok(200, "signed in again, as an owner");
}

#[tokio::test(flavor = "multi_thread")]
async fn an_invite_dies_with_its_creators_rights() {
    let demo = Demo::start(&[]).await;
    let (b, _) = demo.new_user("owner").await;

    // B invites C as an owner; A removes B: the link no longer works.
    let c_link = invite(&demo, &b, "c@invited.example", "owner").await;
    // B invites D too; A demotes B to member: that link no longer works either.
    let (b2, _) = demo.new_user("owner").await;
    let d_link = invite(&demo, &b2, "d@invited.example", "member").await;
    let listed = demo.api.get(&demo.owner, "/api/v1/invites").await;
    let invites = listed.ok(200, "list")["invites"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(invites.len(), 2, "{invites:?}");
    assert!(
        !listed.text.contains("stw_link_"),
        "a listing never shows a link"
    );

    demo.api
        .delete(&demo.owner, &format!("/api/v1/members/{}", b.user_id))
        .await
        .ok(204, "remove B");
    demo.api
        .call(
            &demo.owner,
            "PATCH",
            &format!("/api/v1/members/{}", b2.user_id),
            Some(r#"{"role":"member"}"#),
        )
        .await
        .ok(200, "demote B2");
    for link in [&c_link, &d_link] {
        demo.try_link(link, Some("Someone")).await.expect(
            410,
            Some("link_expired"),
            "invite of a creator who may no longer invite",
        );
    }
    let listed = demo.api.get(&demo.owner, "/api/v1/invites").await;
    assert_eq!(
        listed.json["invites"],
        json!([]),
        "dead invites are not pending"
    );

    // An owner revokes a pending invite: its link stops working at once.
    let e_link = invite(&demo, &demo.owner, "e@invited.example", "member").await;
    let listed = demo.api.get(&demo.owner, "/api/v1/invites").await;
    let id = listed.json["invites"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(listed.json["invites"][0]["email"], "e@invited.example");
    demo.api
        .delete(&demo.owner, &format!("/api/v1/invites/{id}"))
        .await
        .ok(204, "revoke");
    demo.try_link(&e_link, None)
        .await
        .expect(410, Some("link_expired"), "revoked invite");
    demo.api
        .delete(&demo.owner, &format!("/api/v1/invites/{id}"))
        .await
        .expect(404, Some("not_found"), "revoked twice");

    // The settings page lists pending invites with a revoke button.
    let f_link = invite(&demo, &demo.owner, "f@invited.example", "member").await;
    let (_, page) = demo.page(&demo.owner, "/settings").await;
    assert!(page.contains("Pending invites") && page.contains("f@invited.example"));
    let listed = demo.api.get(&demo.owner, "/api/v1/invites").await;
    let id = listed.json["invites"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(page.contains(&format!("/settings/invites/{id}/revoke")));
    let no_redirects = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let form = no_redirects
        .post(format!("{}/settings/invites/{id}/revoke", demo.api.base))
        .header(
            "Cookie",
            format!("stowage_session={}", demo.owner.cookie.as_ref().unwrap()),
        )
        .header("Origin", &demo.api.base)
        .form(&[("csrf", demo.owner.csrf.as_ref().unwrap())])
        .send()
        .await
        .unwrap();
    assert_eq!(
        form.status(),
        303,
        "the page's revoke answers with a redirect"
    );
    demo.try_link(&f_link, None)
        .await
        .expect(410, Some("link_expired"), "revoked on the page");
}

#[tokio::test(flavor = "multi_thread")]
async fn inviting_an_email_with_an_account_elsewhere_tells_nothing() {
    let demo = Demo::start(&[]).await;
    let other_team = demo.admin(&["team", "create", "--name", "elsewhere"]);
    let other_team = other_team["id"].as_str().unwrap().to_string();
    demo.admin(&[
        "user",
        "create",
        "--team",
        &other_team,
        "--email",
        "taken@elsewhere.example",
        "--name",
        "t",
        "--role",
        "owner",
    ]);
    let taken = demo
        .api
        .post(
            &demo.owner,
            "/api/v1/invites",
            json!({"email": "taken@elsewhere.example", "role": "member"}),
        )
        .await;
    let fresh = demo
        .api
        .post(
            &demo.owner,
            "/api/v1/invites",
            json!({"email": "fresh@elsewhere.example", "role": "member"}),
        )
        .await;
    assert_eq!((taken.status, fresh.status), (201, 201));
    let keys = |v: &serde_json::Value| {
        let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
        k.sort();
        k
    };
    assert_eq!(keys(&taken.json), keys(&fresh.json), "the same shape");
    // The collision is told to whoever uses the link.
    let link = taken.json["invite_url"].as_str().unwrap();
    demo.try_link(link, None)
        .await
        .expect(409, Some("email_taken"), "the link's user learns it");
}

/// A change is judged when its whole body has arrived: an owner who sends a request's head,
/// is removed, then sends the body, is no longer an owner by then.
#[tokio::test(flavor = "multi_thread")]
async fn rights_are_checked_when_the_body_has_arrived() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let demo = Demo::start(&[]).await;
    let (b, _) = demo.new_user("owner").await;
    let (c, _) = demo.new_user("member").await;
    let addr = demo.addr().to_string();
    let body = r#"{"role":"owner"}"#;
    let mut held = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let head = format!(
        "PATCH /api/v1/members/{} HTTP/1.1\r\nHost: {addr}\r\nOrigin: {}\r\n\
         Cookie: stowage_session={}\r\nX-CSRF-Token: {}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        c.user_id,
        demo.api.base,
        b.cookie.as_ref().unwrap(),
        b.csrf.as_ref().unwrap(),
        body.len()
    );
    held.write_all(head.as_bytes()).await.unwrap();
    demo.api
        .delete(&demo.owner, &format!("/api/v1/members/{}", b.user_id))
        .await
        .ok(204, "remove B while its request is half sent");
    held.write_all(body.as_bytes()).await.unwrap();
    let mut answer = String::new();
    held.read_to_string(&mut answer).await.unwrap();
    assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
    let members = demo.api.get(&demo.owner, "/api/v1/members").await;
    let c_now = members.json["members"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == c.user_id.as_str())
        .unwrap()
        .clone();
    assert_eq!(c_now["role"], "member", "the removed owner promoted nobody");
}
