//! Keys made through the API are real: a data key downloads a table element until it is
//! revoked (then 401 at the next request), its `last_used_at` is kept, and no listing ever
//! shows a secret again. Tables and elements are listed with what a client needs.

use std::time::Duration;

use serde_json::{Value, json};

use super::client::Who;
use super::common::{SEED_EVENT, status_json, wait_for};
use super::fixture::Fx;

async fn download(fx: &Fx, key: &str, canvas: &str, element: &str) -> (u16, Value) {
    let resp = fx
        .api
        .http
        .post(fx.ts.url("/api/data/table"))
        .header("x-api-key", key)
        .header("Content-Type", "application/json")
        .body(json!({"canvasId": canvas, "elementId": element}).to_string())
        .send()
        .await
        .unwrap();
    status_json(resp).await
}

#[tokio::test(flavor = "multi_thread")]
async fn a_data_key_from_the_api_downloads_until_revoked() {
    let fx = Fx::start().await;
    fx.ts.send(serde_json::from_str(SEED_EVENT).unwrap()).await;
    fx.ts.flush().await;
    // The table and an element on it, as a member sees them.
    let r = fx.api.get(&fx.member, "/api/v1/tables").await;
    let tables = r.ok(200, "tables")["tables"].as_array().unwrap().clone();
    let tracks = tables
        .iter()
        .find(|t| t["name"] == "tracks")
        .expect("tracks");
    assert_eq!(tracks["rows"], 1);
    assert!(
        tracks["bytes"].as_u64().unwrap() > 0 && tracks["files"] == 1,
        "{tracks}"
    );
    assert!(tracks["last_received_at"].is_i64(), "{tracks}");
    let columns = tracks["columns"].as_array().unwrap();
    assert!(
        columns
            .iter()
            .any(|c| c["name"] == "event" && c["type"] == "string"),
        "{tracks}"
    );
    let r = fx
        .api
        .post(&fx.member, "/api/v1/canvases", json!({"name": "Sales"}))
        .await;
    let canvas = r.ok(201, "canvas")["id"].as_str().unwrap().to_string();
    let path = format!("/api/v1/canvases/{canvas}/elements");
    let r = fx
        .api
        .post(
            &fx.member,
            &path,
            json!({"source": "Purchased an Item", "name": "Purchases"}),
        )
        .await;
    let element = r.ok(201, "element").clone();
    assert_eq!(element["source"], "purchased_an_item");
    let share = format!(
        "/canvas/{canvas}/element/{}/new-canvas",
        element["id"].as_str().unwrap()
    );
    assert_eq!(element["share_url"], format!("{}{share}", fx.api.base));
    let element_id = element["id"].as_str().unwrap().to_string();
    let listed = fx.api.get(&fx.member, "/api/v1/canvases").await;
    let listed = listed.ok(200, "canvases")["canvases"]
        .as_array()
        .unwrap()
        .clone();
    let mine = listed.iter().find(|c| c["id"] == canvas.as_str()).unwrap();
    assert_eq!(mine["elements"][0]["share_url"], element["share_url"]);

    // The owner makes a key; it is shown once.
    let r = fx
        .api
        .post(&fx.owner, "/api/v1/keys", json!({"name": "laptop"}))
        .await;
    let created = r.ok(201, "key").clone();
    assert_eq!(r.headers["cache-control"], "no-store");
    let key = created["key"].as_str().unwrap().to_string();
    let id = created["id"].as_str().unwrap().to_string();
    assert!(key.starts_with("stw_data_") && key.starts_with(created["prefix"].as_str().unwrap()));
    assert_eq!(created["name"], "laptop");
    assert!(created["created_at"].is_i64());
    let (status, body) = download(&fx, &key, &canvas, &element_id).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["rows"], 1, "{body}");

    // Listed without the secret; last_used_at is written off the request path, soon.
    let row = |r: &super::client::Resp| {
        let keys = r.json["keys"].as_array().unwrap();
        assert!(
            !r.text.contains(&key),
            "a listing shows the secret: {}",
            r.text
        );
        keys.iter().find(|k| k["id"] == id.as_str()).cloned()
    };
    let r = fx.api.get(&fx.owner, "/api/v1/keys").await;
    r.ok(200, "keys");
    let listed = row(&r).unwrap();
    let mut fields: Vec<&str> = listed
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    fields.sort();
    assert_eq!(
        fields,
        [
            "created_at",
            "created_by",
            "id",
            "last_used_at",
            "name",
            "prefix"
        ]
    );
    assert_eq!(listed["created_by"], fx.owner.user_id.as_str());
    let used = wait_for(Duration::from_secs(15), || async {
        let r = fx.api.get(&fx.owner, "/api/v1/keys").await;
        row(&r).is_some_and(|k| k["last_used_at"].is_i64())
    })
    .await;
    assert!(used, "last_used_at was never recorded");

    // Another team's owner cannot touch it; its owner revokes it and it stops at once.
    let path = format!("/api/v1/keys/{id}");
    fx.api
        .delete(&fx.other, &path)
        .await
        .expect(404, Some("not_found"), "team b revokes");
    fx.api
        .delete(&fx.member, &path)
        .await
        .expect(403, Some("forbidden"), "a member revokes");
    assert_eq!(download(&fx, &key, &canvas, &element_id).await.0, 200);
    fx.api.delete(&fx.owner, &path).await.ok(204, "revoke");
    let (status, body) = download(&fx, &key, &canvas, &element_id).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (401, Some("invalid_api_key")),
        "{body}"
    );
    let r = fx.api.get(&fx.owner, "/api/v1/keys").await;
    assert!(row(&r).is_none(), "a revoked key is not listed");
    fx.api
        .delete(&fx.owner, &path)
        .await
        .expect(404, Some("not_found"), "revoke twice");
    // Another team's key does not open this team's element.
    let r = fx.api.post(&fx.other, "/api/v1/keys", json!({})).await;
    let theirs = r.ok(201, "team b key")["key"].as_str().unwrap().to_string();
    assert_eq!(download(&fx, &theirs, &canvas, &element_id).await.0, 404);
}

#[tokio::test(flavor = "multi_thread")]
async fn tokens_need_events_and_are_shown_once() {
    let fx = Fx::start().await;
    fx.events(false);
    let r = fx.api.post(&fx.owner, "/api/v1/tokens", json!({})).await;
    r.expect(403, Some("events_disabled"), "events off");
    let r = fx
        .api
        .post(&fx.owner, "/api/v1/events/request", json!({}))
        .await;
    let first = r.ok(202, "request").clone();
    assert_eq!(first["new"], true);
    let r = fx
        .api
        .post(&fx.owner, "/api/v1/events/request", json!({}))
        .await;
    assert_eq!(
        r.ok(202, "again").clone(),
        json!({"id": first["id"], "new": false})
    );
    fx.events(true);
    let r = fx
        .api
        .post(&fx.owner, "/api/v1/events/request", json!({}))
        .await;
    r.expect(409, Some("events_enabled"), "nothing to ask for");
    let r = fx
        .api
        .post(&fx.owner, "/api/v1/tokens", json!({"name": "web"}))
        .await;
    let created = r.ok(201, "token").clone();
    let token = created["token"].as_str().unwrap().to_string();
    assert!(token.starts_with("stw_evt_"), "{created}");
    let (status, body) = fx.ts.send_as(&token, SEED_EVENT, &[]).await;
    assert_eq!(status, 200, "{body}");
    let r = fx.api.get(&fx.owner, "/api/v1/tokens").await;
    r.ok(200, "tokens");
    assert!(
        !r.text.contains(&token) && !r.text.contains("\"token\""),
        "{}",
        r.text
    );
    let path = format!("/api/v1/tokens/{}", created["id"].as_str().unwrap());
    fx.api.delete(&fx.owner, &path).await.ok(204, "revoke");
    let (status, body) = fx.ts.send_as(&token, SEED_EVENT, &[]).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (401, Some("invalid_token")),
        "{body}"
    );
    // A data key is no management credential, nor is an events token.
    let key = fx.ts.seeded.key.clone();
    for secret in [key.as_str(), token.as_str()] {
        let r = fx.api.get(&Who::pat(secret), "/api/v1/me").await;
        r.expect(401, Some("not_signed_in"), "a data key as a bearer");
    }
}
