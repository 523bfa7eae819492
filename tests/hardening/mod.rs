//! The owners' door under attack (SPEC §5.2), against the real binary (`serve --demo`) over real
//! sockets: sign-in guesses and sign-ins sent all at once ([`signin`]), what a password reset,
//! a role change and a new sign-in end, and invites that outlive their creator's rights
//! ([`lifecycle`]), bounded names and counts ([`bounds`]), and the edge: origins with their
//! scheme, headers, the metrics listener, file modes, silent connections and connections per
//! address ([`edge`]). `STOWAGE_TEST_BIN` runs them against another build (an older one fails
//! them).

use crate::common;

use crate::api::client;

mod bounds;
mod edge;
mod lifecycle;
mod signin;

use std::path::Path;

use client::{Api, Who};
use common::process::{self, Proc};
use serde_json::Value;

/// A demo server and a client of it, signed in as the demo owner.
pub struct Demo {
    pub dir: tempfile::TempDir,
    pub proc: Proc,
    pub api: Api,
    pub owner: Who,
}

impl Demo {
    /// Starts `serve --demo` with `env` and signs the demo owner in.
    pub async fn start(env: &[(&str, &str)]) -> Demo {
        let dir = tempfile::tempdir().unwrap();
        let proc = process::start(dir.path(), env).await;
        let api = Api::new(proc.demo["base_url"].as_str().unwrap());
        let r = api
            .try_sign_in(
                &proc.demo_str("owner_email"),
                &proc.demo_str("owner_password"),
            )
            .await;
        r.ok(200, "demo owner signs in");
        let owner = api.session(&r);
        Demo {
            dir,
            proc,
            api,
            owner,
        }
    }

    /// The server's socket address.
    pub fn addr(&self) -> std::net::SocketAddr {
        self.api
            .base
            .strip_prefix("http://")
            .unwrap()
            .parse()
            .unwrap()
    }

    pub fn data_dir(&self) -> &Path {
        self.dir.path()
    }

    /// `stowage admin --json …` on this server's data dir; panics unless it succeeds.
    pub fn admin(&self, args: &[&str]) -> Value {
        let mut all = vec!["admin", "--json"];
        all.extend_from_slice(args);
        let (ok, json, stderr) = process::cli(self.data_dir(), &all, &[]);
        assert!(ok, "admin {args:?}: {stderr}");
        json
    }

    /// A new user of the demo team with a password, signed in: the user's session.
    pub async fn new_user(&self, role: &str) -> (Who, String) {
        let email = client::fresh_email("people.example");
        let made = self.admin(&[
            "user",
            "create",
            "--team",
            &self.team(),
            "--email",
            &email,
            "--name",
            "someone",
            "--role",
            role,
        ]);
        let link = made["set_password_url"].as_str().unwrap().to_string();
        let who = self.use_link(&link, None).await;
        (who, email)
    }

    /// Uses a one-time link with [`client::PASSWORD`]; panics unless it signs in.
    pub async fn use_link(&self, link: &str, name: Option<&str>) -> Who {
        let r = self.try_link(link, name).await;
        r.ok(200, "use the link");
        self.api.session(&r)
    }

    /// Uses a one-time link with [`client::PASSWORD`]; the raw answer.
    pub async fn try_link(&self, link: &str, name: Option<&str>) -> client::Resp {
        let mut body = serde_json::json!({"link": link, "password": client::PASSWORD});
        if let Some(n) = name {
            body["name"] = n.into();
        }
        self.api
            .post(&Who::anonymous(), "/api/v1/links/use", body)
            .await
    }

    /// A page (HTML) as `who`: status and text.
    pub async fn page(&self, who: &Who, path: &str) -> (u16, String) {
        let resp = self
            .api
            .http
            .get(format!("{}{path}", self.api.base))
            .header(
                "Cookie",
                format!(
                    "stowage_session={}",
                    who.cookie.as_deref().unwrap_or_default()
                ),
            )
            .send()
            .await
            .unwrap();
        (resp.status().as_u16(), resp.text().await.unwrap())
    }

    pub fn team(&self) -> String {
        self.proc.demo_str("team_id")
    }
}

trait DemoField {
    fn demo_str(&self, key: &str) -> String;
}

impl DemoField for Proc {
    fn demo_str(&self, key: &str) -> String {
        self.demo[key].as_str().unwrap().to_string()
    }
}

/// Peak resident memory of a process so far (`VmHWM`), in KiB.
pub fn peak_rss_kib(pid: u32) -> u64 {
    rss_field(pid, "VmHWM:")
}

/// Resident memory of a process now (`VmRSS`), in KiB.
pub fn rss_kib(pid: u32) -> u64 {
    rss_field(pid, "VmRSS:")
}

fn rss_field(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}
