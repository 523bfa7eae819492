//! Driving the real `stowage` binary: start `serve --demo` on a free port (and its metrics on
//! another) with extra env, wait until ready, stop it with SIGTERM or SIGKILL. Each server runs
//! in a process group of its own ([`own_group`]), with any wrapper it was started under
//! (`strace`, `sh`); a dropped [`Proc`] — a test that finished or panicked — kills the whole
//! group ([`kill_group`]), so neither the server nor a wrapper's child outlives its test.
//! `STOWAGE_TEST_BIN` runs another build of the binary (e.g. an older one, to show a test
//! failing on it).
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

pub const BIN: &str = env!("CARGO_BIN_EXE_stowage");

/// The binary to run: `STOWAGE_TEST_BIN` when set, else this build's.
pub fn bin() -> String {
    std::env::var("STOWAGE_TEST_BIN").unwrap_or_else(|_| BIN.to_string())
}

/// A running server process.
pub struct Proc {
    pub child: Child,
    pub demo: Value,
    /// Every stderr line so far (JSON logs).
    pub log: Arc<Mutex<Vec<String>>>,
}

/// Starts `cmd` as the leader of a new process group, so [`kill_group`] reaches it and every
/// process it starts (a wrapper's child: `strace -f -- stowage`).
pub fn own_group(cmd: &mut Command) -> &mut Command {
    cmd.process_group(0)
}

/// SIGKILLs the process group `child` leads (see [`own_group`]) and reaps `child`. Killing only
/// the leader would leave a traced server running once its `strace` is gone.
pub fn kill_group(child: &mut Child) {
    // SAFETY: kill(2) with a negative pid signals that process group; nothing else is touched.
    unsafe {
        libc::kill(-(child.id() as libc::pid_t), libc::SIGKILL);
    }
    let _ = child.wait();
}

impl Drop for Proc {
    fn drop(&mut self) {
        // Also after a stop: a wrapper's child may outlive the wrapper.
        kill_group(&mut self.child);
    }
}

impl Proc {
    /// `http://<metrics address>/metrics`, from the start-up log line.
    pub fn metrics_url(&self) -> String {
        let log = self.log.lock().unwrap();
        let addr = log
            .iter()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|l| l["fields"]["message"] == "stowage listening")
            .and_then(|l| l["fields"]["metrics"].as_str().map(str::to_string))
            .expect("the start-up line names the metrics address");
        format!("http://{addr}/metrics")
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.demo["base_url"].as_str().unwrap())
    }

    pub fn log_text(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }

    /// SIGTERM and wait; returns the exit code.
    pub fn sigterm(mut self) -> i32 {
        let status = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        self.child
            .wait()
            .unwrap()
            .code()
            .expect("exited, not killed by a signal")
    }

    /// SIGKILL (a crash) and reap.
    pub fn kill9(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

/// Starts `stowage serve --demo` on 127.0.0.1:0 in `dir` and waits for `/readyz`; `None` if the
/// process exits first (its stderr is returned).
pub async fn try_start(dir: &Path, env: &[(&str, &str)]) -> Result<Proc, String> {
    try_start_wrapped(dir, env, &[]).await
}

/// Like [`try_start`], with the binary run under `wrapper` (e.g. `["strace", …, "--"]`, or
/// `["sh", "-c", "ulimit -f 64; exec \"$0\" \"$@\""]`): the command is `wrapper… BIN args…`.
pub async fn try_start_wrapped(
    dir: &Path,
    env: &[(&str, &str)],
    wrapper: &[&str],
) -> Result<Proc, String> {
    let mut cmd = match wrapper.split_first() {
        None => Command::new(bin()),
        Some((first, rest)) => {
            let mut c = Command::new(first);
            c.args(rest).arg(bin());
            c
        }
    };
    own_group(&mut cmd);
    cmd.args(["serve", "--demo", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir)
        .env("STOWAGE_LOG__FORMAT", "json")
        .env("STOWAGE_FLUSH__INTERVAL", "1h")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    if std::env::var_os("STOWAGE_TEST_BIN").is_none() {
        // A free port for /metrics, so servers of tests running at once do not collide (an
        // older binary given by STOWAGE_TEST_BIN may not know the key).
        cmd.env("STOWAGE_SERVER__METRICS_LISTEN", "127.0.0.1:0");
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    let stderr = BufReader::new(child.stderr.take().unwrap());
    let log = Arc::new(Mutex::new(Vec::new()));
    let (tx, rx) = std::sync::mpsc::channel::<bool>();
    let sink = log.clone();
    std::thread::spawn(move || {
        let mut told = false;
        for line in stderr.lines() {
            let Ok(line) = line else { break };
            if !told && line.contains("stowage listening") {
                told = tx.send(true).is_ok();
            }
            sink.lock().unwrap().push(line);
        }
        let _ = tx.send(false);
    });
    let listening = tokio::task::spawn_blocking(move || {
        rx.recv_timeout(Duration::from_secs(60)).unwrap_or(false)
    })
    .await
    .unwrap();
    if !listening {
        // Exited, or never said it listens: either way, no process is left behind.
        kill_group(&mut child);
        return Err(log.lock().unwrap().join("\n"));
    }
    let demo: Value =
        serde_json::from_slice(&std::fs::read(dir.join("demo.json")).unwrap()).unwrap();
    let proc = Proc { child, demo, log };
    let http = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let ok = http
            .get(proc.url("/readyz"))
            .send()
            .await
            .is_ok_and(|r| r.status() == 200);
        if ok {
            return Ok(proc);
        }
        assert!(Instant::now() < deadline, "server never became ready");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub async fn start(dir: &Path, env: &[(&str, &str)]) -> Proc {
    try_start(dir, env)
        .await
        .unwrap_or_else(|log| panic!("server did not start:\n{log}"))
}

/// POSTs an event with the demo token; the status, or `None` on a transport error.
pub async fn send(http: &reqwest::Client, demo: &Value, body: &Value) -> Option<u16> {
    let resp = http
        .post(format!("{}/v1/event", demo["events_url"].as_str().unwrap()))
        .header("X-Auth-Token", demo["events_token"].as_str().unwrap())
        .header("Content-Type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .ok()?;
    Some(resp.status().as_u16())
}

/// Downloads a demo element (`element_id` or `event_element_id`).
pub async fn download(http: &reqwest::Client, demo: &Value, element: &str) -> Value {
    let resp = http
        .post(format!("{}/data/table", demo["base_url"].as_str().unwrap()))
        .header("x-api-key", demo["data_api_key"].as_str().unwrap())
        .header("Content-Type", "application/json")
        .body(json!({"canvasId": demo["canvas_id"], "elementId": demo[element]}).to_string())
        .send()
        .await
        .unwrap();
    let (status, body) = super::status_json(resp).await;
    assert_eq!(status, 200, "{body}");
    body
}

/// Runs the binary with `args` plus `--data-dir dir` and `env`: success, the JSON it printed
/// (stdout, else stderr; `Null` if neither is JSON), and its stderr.
pub fn cli(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> (bool, Value, String) {
    let out = Command::new(bin())
        .args(args)
        .arg("--data-dir")
        .arg(dir)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let json = serde_json::from_str(stdout.trim())
        .or_else(|_| serde_json::from_str(stderr.trim()))
        .unwrap_or(Value::Null);
    (out.status.success(), json, stderr)
}
