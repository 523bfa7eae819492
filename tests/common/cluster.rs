//! N `stowage serve` processes sharing one catalog and one bucket, behind a real nginx running
//! `config/nginx-scaleout.conf` (its upstream and listen ports rewritten to this run's free
//! ports), as an operator would run them (SPEC §7, README "Scale-out"). Each node and nginx run
//! in a process group of their own, killed with their guard ([`Node`], [`Cluster`]), also when a
//! test panics.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::process::{bin, kill_group, own_group};

/// A free TCP port on 127.0.0.1 (bound, then released).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// One node: its port, data dir (its WAL) and process.
pub struct Node {
    pub id: String,
    pub port: u16,
    /// Where its `/metrics` is served.
    pub metrics_port: u16,
    pub data_dir: PathBuf,
    pub child: Option<Child>,
    /// Its stderr lines.
    pub log: Arc<Mutex<Vec<String>>>,
}

impl Node {
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// `/metrics` on the node's metrics listener.
    pub fn metrics_url(&self) -> String {
        format!("http://127.0.0.1:{}/metrics", self.metrics_port)
    }

    /// SIGKILL (a crash) and reap.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            kill_group(&mut c);
        }
    }

    /// SIGTERM (flushes everything) and wait.
    pub fn sigterm(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = Command::new("kill")
                .args(["-TERM", &c.id().to_string()])
                .status();
            c.wait().unwrap();
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// The nodes, the environment they share, and nginx in front.
pub struct Cluster {
    pub dir: tempfile::TempDir,
    pub env: Vec<(String, String)>,
    pub nodes: Vec<Node>,
    pub lb_port: u16,
    nginx: Option<Child>,
}

impl Cluster {
    /// Starts `n` nodes with `env` (catalog, storage and any tuning) and nginx before them.
    pub async fn start(n: usize, env: Vec<(String, String)>) -> Cluster {
        let dir = tempfile::tempdir().unwrap();
        let mut c = Cluster {
            nodes: Vec::new(),
            lb_port: free_port(),
            nginx: None,
            env,
            dir,
        };
        for i in 1..=n {
            let node = Node {
                id: format!("node-{i}"),
                port: free_port(),
                metrics_port: free_port(),
                data_dir: c.dir.path().join(format!("node-{i}")),
                child: None,
                log: Arc::new(Mutex::new(Vec::new())),
            };
            c.nodes.push(node);
            c.start_node(i - 1).await;
        }
        c.start_nginx();
        c.wait_lb().await;
        c
    }

    /// The load balancer's URL for `path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.lb_port)
    }

    /// (Re)starts node `i` on its port with its data dir, and waits until it is ready.
    pub async fn start_node(&mut self, i: usize) {
        let node = &mut self.nodes[i];
        let mut cmd = Command::new(bin());
        own_group(&mut cmd);
        cmd.args([
            "serve",
            "--listen",
            &format!("127.0.0.1:{}", node.port),
            "--data-dir",
        ])
        .arg(&node.data_dir)
        .env("STOWAGE_LOG__FORMAT", "json")
        .env("STOWAGE_NODE__ID", &node.id)
        .env("STOWAGE_SERVER__TRUSTED_PROXIES", "127.0.0.1")
        .env(
            "STOWAGE_SERVER__METRICS_LISTEN",
            format!("127.0.0.1:{}", node.metrics_port),
        )
        .env("STOWAGE_SERVER__NODE_HEADER", "true")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().unwrap();
        let stderr = BufReader::new(child.stderr.take().unwrap());
        let sink = node.log.clone();
        std::thread::spawn(move || {
            for line in stderr.lines() {
                let Ok(line) = line else { break };
                sink.lock().unwrap().push(line);
            }
        });
        node.child = Some(child);
        let (url, log) = (node.url("/readyz"), node.log.clone());
        let http = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if http.get(&url).send().await.is_ok_and(|r| r.status() == 200) {
                return;
            }
            if let Some(status) = self.nodes[i].child.as_mut().unwrap().try_wait().unwrap() {
                panic!(
                    "node {} exited ({status}):\n{}",
                    i + 1,
                    log.lock().unwrap().join("\n")
                );
            }
            assert!(
                Instant::now() < deadline,
                "node {} never became ready",
                i + 1
            );
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// `config/nginx-scaleout.conf` with this run's ports.
    fn nginx_conf(&self) -> String {
        let conf = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("config/nginx-scaleout.conf"),
        )
        .unwrap();
        let mut out = String::new();
        for line in conf.lines() {
            let t = line.trim_start();
            if t.starts_with("server 127.0.0.1:808") {
                // One line per node, in place of the example's three.
                if t.starts_with("server 127.0.0.1:8081") {
                    let rest = t.split_once(' ').unwrap().1.split_once(' ').unwrap().1;
                    for n in &self.nodes {
                        out.push_str(&format!("        server 127.0.0.1:{} {rest}\n", n.port));
                    }
                }
                continue;
            }
            if t.starts_with("listen 127.0.0.1:8080;") {
                out.push_str(&format!("        listen 127.0.0.1:{};\n", self.lb_port));
                continue;
            }
            out.push_str(line);
            out.push('\n');
        }
        out
    }

    fn start_nginx(&mut self) {
        let prefix = self.dir.path().join("nginx");
        std::fs::create_dir_all(prefix.join("logs")).unwrap();
        let conf = prefix.join("nginx.conf");
        std::fs::write(&conf, self.nginx_conf()).unwrap();
        let child = own_group(&mut Command::new(nginx_binary()))
            .arg("-p")
            .arg(&prefix)
            .arg("-c")
            .arg(&conf)
            .args(["-g", "daemon off;"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run nginx ({e}); .ci/run installs it"));
        self.nginx = Some(child);
    }

    async fn wait_lb(&mut self) {
        let http = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if http
                .get(self.url("/healthz"))
                .send()
                .await
                .is_ok_and(|r| r.status() == 200)
            {
                return;
            }
            if let Some(status) = self.nginx.as_mut().unwrap().try_wait().unwrap() {
                let mut err = String::new();
                let _ = std::io::Read::read_to_string(
                    self.nginx.as_mut().unwrap().stderr.as_mut().unwrap(),
                    &mut err,
                );
                let log = std::fs::read_to_string(self.dir.path().join("nginx/logs/error.log"))
                    .unwrap_or_default();
                panic!("nginx exited ({status}): {err}\n{log}");
            }
            assert!(Instant::now() < deadline, "nginx never answered");
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// `stowage admin --json …` against the shared catalog.
    pub fn admin(&self, args: &[&str]) -> serde_json::Value {
        let out = Command::new(bin())
            .args(["admin", "--json"])
            .args(args)
            .arg("--data-dir")
            .arg(self.dir.path().join("admin"))
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "admin {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // SIGTERM first: the master then stops its workers. Then SIGKILL to the group, which
        // reaches a worker a master that did not stop in time would leave holding the port.
        if let Some(mut c) = self.nginx.take() {
            let _ = Command::new("kill")
                .args(["-TERM", &c.id().to_string()])
                .status();
            let deadline = Instant::now() + Duration::from_secs(10);
            while matches!(c.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            kill_group(&mut c);
        }
    }
}

/// nginx on PATH or where Debian puts it.
pub fn nginx_binary() -> PathBuf {
    for dir in std::env::var("PATH").unwrap_or_default().split(':') {
        let p = Path::new(dir).join("nginx");
        if p.exists() {
            return p;
        }
    }
    PathBuf::from("/usr/sbin/nginx")
}

/// A team made through the CLI: an owner, events enabled, an events token, a data key, a
/// canvas and a table element on `step`.
pub struct ClusterTeam {
    pub name: String,
    pub token: String,
    pub key: String,
    pub key_id: String,
    pub canvas: String,
    pub element: String,
}

impl Cluster {
    /// Team number `i` (`team{i}`).
    pub fn team(&self, i: usize) -> ClusterTeam {
        let c = self;
        let name = format!("team{i}");
        let team = c.admin(&["team", "create", "--name", &name]);
        let team_id = team["id"].as_str().unwrap().to_string();
        let owner = c.admin(&[
            "user",
            "create",
            "--team",
            &team_id,
            "--email",
            &format!("owner{i}@example.com"),
            "--name",
            "owner",
            "--role",
            "owner",
        ]);
        let owner = owner["id"].as_str().unwrap().to_string();
        c.admin(&["events", "enable", "--team", &team_id]);
        let token = c.admin(&["token", "create", "--team", &team_id, "--user", &owner]);
        let key = c.admin(&["key", "create", "--team", &team_id, "--user", &owner]);
        let canvas = c.admin(&["canvas", "create", "--team", &team_id, "--name", "c"]);
        let canvas = canvas["id"].as_str().unwrap().to_string();
        let element = c.admin(&["element", "create", "--canvas", &canvas, "--table", "step"]);
        ClusterTeam {
            name,
            token: token["token"].as_str().unwrap().to_string(),
            key: key["key"].as_str().unwrap().to_string(),
            key_id: key["id"].as_str().unwrap().to_string(),
            canvas,
            element: element["id"].as_str().unwrap().to_string(),
        }
    }
}
