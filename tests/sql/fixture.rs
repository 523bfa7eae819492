//! A server with one team's warehouse built through the Segment endpoints — `order_completed`
//! and `page_viewed` events, `identifies`, and `tracks` — flushed in two rounds so the event
//! tables have several files and mixed schemas (`qty` int64 then float64, `code` int64 then
//! string) — plus an owner's personal access token to create elements with.

use serde_json::{Value, json};
use stowage::catalog::Role;
use stowage::config::Config;
use stowage::model::TeamId;

use super::common::{TestServer, post_json};

pub struct Fx {
    pub t: TestServer,
    /// `Authorization: Bearer …` of the team's owner.
    pub pat: String,
}

/// Plans shown in identify traits and events.
const PLANS: [&str; 3] = ["free", "pro", "team"];

fn ts(day: u32, hour: u32, minute: u32) -> String {
    format!("2024-03-{day:02}T{hour:02}:{minute:02}:07.250Z")
}

/// The first round: integers for `qty` and `code`; no `coupon` yet.
fn round_one() -> Vec<Value> {
    let mut out = Vec::new();
    for i in 0..40u32 {
        let user = format!("u{}", i % 12);
        out.push(json!({
            "type": "track", "event": "Order Completed", "userId": user,
            "messageId": format!("o1-{i}"), "timestamp": ts(1 + i % 4, i % 24, i),
            "properties": {"revenue": 5.25 + f64::from(i * 7 % 60), "qty": i % 5 + 1,
                           "plan": PLANS[(i % 3) as usize], "code": i * 11}
        }));
        out.push(json!({
            "type": "track", "event": "Page Viewed",
            "userId": if i % 7 == 0 { Value::Null } else { json!(format!("u{}", i % 15)) },
            "anonymousId": format!("anon-{}", i % 9), "messageId": format!("p1-{i}"),
            "timestamp": ts(1 + i % 5, (i * 5) % 24, i % 60),
            "properties": {"path": format!("/page/{}", i % 6),
                           "referrer": if i % 3 == 0 { Value::Null } else { json!("https://ex.example/") }}
        }));
    }
    for u in 0..10u32 {
        let country = ["de", "fr", "us", "jp"][(u % 4) as usize];
        out.push(json!({
            "type": "identify", "userId": format!("u{u}"), "messageId": format!("id-{u}"),
            "timestamp": ts(1, 0, u),
            "traits": {"email": format!("u{u}@ex.example"), "plan": PLANS[(u % 3) as usize],
                       "country": country, "age": 20 + u}
        }));
    }
    out
}

/// The second round: `qty` as floats, `code` as strings, and a new `coupon` column.
fn round_two() -> Vec<Value> {
    (0..30u32)
        .map(|i| {
            let coupon = if i % 4 == 0 { json!(format!("SAVE{i}")) } else { Value::Null };
            let user = if i % 10 == 9 { Value::Null } else { json!(format!("u{}", i % 14)) };
            json!({
                "type": "track", "event": "Order Completed", "userId": user,
                "anonymousId": format!("anon-{}", i % 5), "messageId": format!("o2-{i}"),
                "timestamp": ts(3 + i % 3, (i * 3) % 24, i),
                "properties": {"revenue": 12.5 * f64::from(i % 7) + 0.75, "qty": 0.5 + f64::from(i % 3),
                               "plan": PLANS[(i % 3) as usize], "code": format!("C-{i}"),
                               "coupon": coupon}
            })
        })
        .collect()
}

impl Fx {
    pub async fn start() -> Fx {
        Self::start_with(|_| {}).await
    }

    pub async fn start_with(tweak: impl FnOnce(&mut Config)) -> Fx {
        let t = TestServer::start(|c| {
            c.download.batch_rows = 16;
            tweak(c);
        })
        .await;
        let owner = t
            .catalog()
            .create_user(
                &t.seeded.team,
                Some("owner@sql.example"),
                "Owner",
                Role::Owner,
            )
            .unwrap();
        let (_, pat) = t.catalog().create_pat(&owner.id, None).unwrap();
        let fx = Fx { t, pat };
        fx.batch(round_one()).await;
        fx.t.flush().await;
        fx.batch(round_two()).await;
        fx.t.flush().await;
        fx
    }

    /// Sends Segment messages through `/v1/batch`.
    pub async fn batch(&self, messages: Vec<Value>) {
        self.t.batch(messages).await;
    }

    /// `POST /api/v1/canvases/{canvas}/elements` with `body` as the team's owner.
    pub async fn create(&self, body: Value) -> (u16, Value) {
        let url = self.t.url(&format!(
            "/api/v1/canvases/{}/elements",
            self.t.seeded.canvas
        ));
        let auth = format!("Bearer {}", self.pat);
        let headers = [("Authorization", auth.as_str())];
        post_json(&self.t.http, url, &headers, body.to_string()).await
    }

    /// Creates an SQL element; panics unless it is accepted. Returns its id.
    pub async fn sql_element(&self, sql: &str) -> String {
        let (status, body) = self.create(json!({ "sql": sql })).await;
        assert_eq!(status, 201, "{sql}: {body}");
        assert_eq!(body["kind"], "sql", "{body}");
        body["id"].as_str().unwrap().to_string()
    }

    /// The live files of each table, as absolute paths.
    pub fn files(&self, tables: &[&str]) -> Value {
        let team = TeamId::from(self.t.seeded.team.as_str());
        let root = self.t.dir.path().join("warehouse");
        let mut out = serde_json::Map::new();
        for table in tables {
            let snap = self.t.catalog().snapshot(&team, table).unwrap().unwrap();
            let paths: Vec<String> = snap
                .files
                .iter()
                .map(|f| root.join(&f.path).to_string_lossy().into_owned())
                .collect();
            out.insert(table.to_string(), json!(paths));
        }
        Value::Object(out)
    }
}
