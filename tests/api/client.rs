//! Speaking to `/api/v1` as someone: a session cookie with its CSRF token (and the browser's
//! same-origin `Origin`), a personal access token, or nobody; and seeding users whose password
//! is [`PASSWORD`].

use std::net::{IpAddr, Ipv4Addr};
use std::sync::LazyLock;
use std::sync::atomic::{AtomicU32, Ordering};

use reqwest::header::HeaderMap;
use serde_json::{Value, json};
use stowage::accounts::password;
use stowage::catalog::{Catalog, Role};

/// Every seeded user's password.
pub const PASSWORD: &str = "correct horse battery staple";

/// Its Argon2id hash, computed once for all users.
static PHC: LazyLock<String> = LazyLock::new(|| password::hash(PASSWORD));

/// Creates a user with an email and [`PASSWORD`]; returns its id.
pub fn user(catalog: &Catalog, team: &str, email: &str, role: Role) -> String {
    let u = catalog.create_user(team, Some(email), email, role).unwrap();
    catalog.set_password_hash(&u.id, &PHC).unwrap();
    u.id
}

/// A fresh, unique email.
pub fn fresh_email(domain: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    format!("user{}@{domain}", N.fetch_add(1, Ordering::Relaxed))
}

/// How a request proves who it is.
#[derive(Clone, Debug, Default)]
pub struct Who {
    /// The user, when known.
    pub user_id: String,
    /// `stowage_session` value.
    pub cookie: Option<String>,
    /// `X-CSRF-Token`.
    pub csrf: Option<String>,
    /// `Origin`.
    pub origin: Option<String>,
    /// `Authorization: Bearer …`
    pub bearer: Option<String>,
}

impl Who {
    /// Nobody.
    pub fn anonymous() -> Who {
        Who::default()
    }

    /// A personal access token.
    pub fn pat(token: &str) -> Who {
        Who {
            bearer: Some(token.into()),
            ..Who::default()
        }
    }

    /// The same, with another CSRF token (`None`: without one).
    pub fn csrf(&self, csrf: Option<&str>) -> Who {
        Who {
            csrf: csrf.map(str::to_string),
            ..self.clone()
        }
    }

    /// The same, from another site.
    pub fn origin(&self, origin: &str) -> Who {
        Who {
            origin: Some(origin.into()),
            ..self.clone()
        }
    }
}

/// An answer: status, JSON body (`Null` when empty), headers.
#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub json: Value,
    pub text: String,
    pub headers: HeaderMap,
}

impl Resp {
    /// The error code, if the body is the error body.
    pub fn code(&self) -> Option<&str> {
        self.json["error"]["code"].as_str()
    }

    /// Panics unless the status (and, for an error, the code) is as expected.
    #[track_caller]
    pub fn expect(&self, status: u16, code: Option<&str>, what: &str) -> &Value {
        assert_eq!(
            (self.status, self.code()),
            (status, code),
            "{what}: {}",
            self.text
        );
        &self.json
    }

    /// Panics unless the status is `status` (a success).
    #[track_caller]
    pub fn ok(&self, status: u16, what: &str) -> &Value {
        self.expect(status, None, what)
    }
}

/// A client of one server.
#[derive(Clone)]
pub struct Api {
    pub http: reqwest::Client,
    pub base: String,
}

impl Api {
    /// A client of the server at `base` (`http://host:port`).
    pub fn new(base: &str) -> Api {
        Api {
            http: reqwest::Client::new(),
            base: base.trim_end_matches('/').to_string(),
        }
    }

    /// The same server, connecting from another loopback address (`127.0.0.n`).
    pub fn via_address(&self, n: u8) -> Api {
        Api {
            http: reqwest::Client::builder()
                .local_address(IpAddr::V4(Ipv4Addr::new(127, 0, 0, n)))
                .build()
                .unwrap(),
            base: self.base.clone(),
        }
    }

    /// Sends a request as `who`.
    pub async fn call(&self, who: &Who, method: &str, path: &str, body: Option<&str>) -> Resp {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let mut req = self.http.request(method, format!("{}{path}", self.base));
        if let Some(c) = &who.cookie {
            req = req.header("Cookie", format!("stowage_session={c}"));
        }
        if let Some(t) = &who.csrf {
            req = req.header("X-CSRF-Token", t);
        }
        if let Some(o) = &who.origin {
            req = req.header("Origin", o);
        }
        if let Some(b) = &who.bearer {
            req = req.header("Authorization", format!("Bearer {b}"));
        }
        if let Some(body) = body {
            req = req
                .header("Content-Type", "application/json")
                .body(body.to_string());
        }
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let text = resp.text().await.unwrap();
        let json = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
        };
        Resp {
            status,
            json,
            text,
            headers,
        }
    }

    pub async fn get(&self, who: &Who, path: &str) -> Resp {
        self.call(who, "GET", path, None).await
    }

    pub async fn post(&self, who: &Who, path: &str, body: Value) -> Resp {
        self.call(who, "POST", path, Some(&body.to_string())).await
    }

    pub async fn delete(&self, who: &Who, path: &str) -> Resp {
        self.call(who, "DELETE", path, None).await
    }

    /// `POST /api/v1/session`; the raw answer.
    pub async fn try_sign_in(&self, email: &str, password: &str) -> Resp {
        let body = json!({"email": email, "password": password});
        self.post(&Who::anonymous(), "/api/v1/session", body).await
    }

    /// Signs in with [`PASSWORD`]; panics unless it works.
    pub async fn sign_in(&self, email: &str) -> Who {
        let r = self.try_sign_in(email, PASSWORD).await;
        r.ok(200, "sign in");
        self.session(&r)
    }

    /// The caller behind a sign-in answer (`POST /api/v1/session` or `/links/use`).
    pub fn session(&self, r: &Resp) -> Who {
        let cookie = r
            .headers
            .get_all("set-cookie")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .find_map(|v| v.strip_prefix("stowage_session="))
            .and_then(|v| v.split(';').next())
            .expect("a session cookie")
            .to_string();
        Who {
            user_id: r.json["user"]["id"].as_str().unwrap().to_string(),
            cookie: Some(cookie),
            csrf: Some(r.json["csrf_token"].as_str().unwrap().to_string()),
            origin: Some(self.base.clone()),
            bearer: None,
        }
    }
}
