//! A throwaway PostgreSQL cluster for tests, started once per test process: `initdb` and
//! `pg_ctl start` in a fresh directory under the temp dir (its unix socket there too), on a free
//! port of 127.0.0.1, trust authentication, no fsync. [`database_url`] creates a fresh database
//! per caller. The cluster is stopped and its directory removed when the process exits.
//!
//! The binaries are looked up on `PATH` (`initdb`), then in `/usr/lib/postgresql/*/bin`
//! (Debian's `postgresql` package). Without them tests fail, saying so: they never skip. As
//! root (initdb refuses root), the cluster runs as `nobody`.
//!
//! Shared by the library's catalog tests (`src/catalog/testdb.rs`) and integration tests
//! (`mod common;` then `common::pg::database_url()`); it needs only `std` and `libc`.
#![allow(dead_code)]

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// The running cluster.
pub struct Cluster {
    bin: PathBuf,
    dir: PathBuf,
    port: u16,
    user: Option<(u32, u32)>,
}

static CLUSTER: OnceLock<Cluster> = OnceLock::new();

/// The directory holding `initdb`, `pg_ctl` and `psql`.
pub fn bin_dir() -> Result<PathBuf, String> {
    let on_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .map(|d| d.join("initdb"))
        .find(|p| p.is_file());
    if let Some(initdb) = on_path {
        let real = std::fs::canonicalize(&initdb).unwrap_or(initdb);
        return Ok(real.parent().expect("a file has a parent").to_path_buf());
    }
    let mut debian: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("bin"))
        .filter(|b| b.join("initdb").is_file())
        .collect();
    debian.sort_by_key(|b| {
        let version = b.parent().and_then(Path::file_name);
        version.and_then(|v| v.to_str()?.parse::<u32>().ok())
    });
    debian.pop().ok_or_else(|| {
        "PostgreSQL is not installed: no initdb on PATH or under /usr/lib/postgresql/*/bin. \
         The catalog tests run against PostgreSQL too; install it (Debian: apt-get install -y postgresql)."
            .to_string()
    })
}

/// The cluster of this process, started on first use.
pub fn cluster() -> &'static Cluster {
    CLUSTER.get_or_init(|| start().unwrap_or_else(|e| panic!("test PostgreSQL cluster: {e}")))
}

/// A URL of a new, empty database (`t_<pid>_<n>`) on the cluster.
pub fn database_url() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let c = cluster();
    let name = format!(
        "t_{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    c.psql(&format!("CREATE DATABASE {name}"))
        .unwrap_or_else(|e| panic!("creating test database {name}: {e}"));
    c.url(&name)
}

impl Cluster {
    /// `postgres://postgres@127.0.0.1:<port>/<db>`.
    pub fn url(&self, db: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{db}", self.port)
    }

    /// Runs SQL as the superuser on the `postgres` database; returns psql's output.
    pub fn psql(&self, sql: &str) -> Result<String, String> {
        let out = Command::new(self.bin.join("psql"))
            .args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1"])
            .args(["-h", "127.0.0.1", "-U", "postgres", "-d", "postgres"])
            .arg("-p")
            .arg(self.port.to_string())
            .arg("-c")
            .arg(sql)
            .output()
            .map_err(|e| format!("running psql: {e}"))?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    }

    /// Restarts the server (`pg_ctl restart -m fast`: every connection is dropped). Only for a
    /// test binary of its own: other tests of the process share the cluster.
    pub fn restart(&self) {
        let out = self
            .command("pg_ctl")
            .arg("-D")
            .arg(self.dir.join("data"))
            .arg("-l")
            .arg(self.dir.join("log"))
            .args(["-m", "fast", "-w", "-t", "60", "restart"])
            .output()
            .expect("running pg_ctl restart");
        assert!(
            out.status.success(),
            "pg_ctl restart: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn command(&self, program: &str) -> Command {
        let mut cmd = Command::new(self.bin.join(program));
        if let Some((uid, gid)) = self.user {
            cmd.uid(uid).gid(gid);
        }
        cmd.env("LC_ALL", "C");
        cmd
    }

    fn stop(&self) {
        let _ = self
            .command("pg_ctl")
            .arg("-D")
            .arg(self.dir.join("data"))
            .args(["-m", "immediate", "-w", "stop"])
            .output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

extern "C" fn stop_at_exit() {
    if let Some(c) = CLUSTER.get() {
        c.stop();
    }
}

/// `nobody`'s uid and gid when running as root.
fn unprivileged() -> Option<(u32, u32)> {
    // SAFETY: plain libc calls; getpwnam's result is read at once, before any other call.
    unsafe {
        if libc::geteuid() != 0 {
            return None;
        }
        let pw = libc::getpwnam(c"nobody".as_ptr());
        assert!(!pw.is_null(), "running as root and there is no user nobody");
        Some(((*pw).pw_uid, (*pw).pw_gid))
    }
}

fn start() -> Result<Cluster, String> {
    let bin = bin_dir()?;
    let dir = std::env::temp_dir().join(format!(
        "stowage-pg-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    ));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let user = unprivileged();
    if let Some((uid, gid)) = user {
        std::os::unix::fs::chown(&dir, Some(uid), Some(gid)).map_err(|e| format!("chown: {e}"))?;
    }
    let mut cluster = Cluster {
        bin,
        dir,
        port: 0,
        user,
    };
    let data = cluster.dir.join("data");
    let out = cluster
        .command("initdb")
        .arg("-D")
        .arg(&data)
        .args([
            "-U",
            "postgres",
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--locale=C",
            "--no-sync",
        ])
        .output()
        .map_err(|e| format!("running initdb: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "initdb failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    // SAFETY: registering a plain extern "C" function.
    unsafe { libc::atexit(stop_at_exit) };
    let mut last = String::new();
    for _ in 0..5 {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| format!("finding a free port: {e}"))?
            .port();
        let options = format!(
            "-p {port} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off \
             -c full_page_writes=off -c max_connections=300",
            cluster.dir.display()
        );
        let out = cluster
            .command("pg_ctl")
            .arg("-D")
            .arg(&data)
            .arg("-l")
            .arg(cluster.dir.join("log"))
            .args(["-w", "-t", "60", "-o", &options, "start"])
            .output()
            .map_err(|e| format!("running pg_ctl: {e}"))?;
        if out.status.success() {
            cluster.port = port;
            return Ok(cluster);
        }
        last = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stderr),
            std::fs::read_to_string(cluster.dir.join("log")).unwrap_or_default()
        );
    }
    let _ = std::fs::remove_dir_all(&cluster.dir);
    Err(format!("pg_ctl start failed: {last}"))
}
