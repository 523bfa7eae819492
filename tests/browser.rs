//! The settings page in a real browser (SPEC §5.1): headless Chromium, driven over WebDriver by
//! `tests/py/browser_flow.py`, against the real binary over HTTP. The operator makes a team, its
//! first owner and a table with the CLI; the owner sets a password through the one-time link,
//! builds a table element, previews a "New SQL table" (a GROUP BY over the table), sees an
//! invalid query, `DROP TABLE` and a file path refused beside the form with nothing saved, saves
//! the query, creates a data key that is shown once and downloads both elements with it, revokes
//! it, gets an events token once the operator enabled events, invites a member who sees no owner
//! action, and a forged form without the CSRF token is refused. Screenshots of every step go to
//! `target/screenshots/settings/`. Needs `chromium` and `chromedriver` (`.ci/run` installs them)
//! and selenium in `STOWAGE_PYTHON` (`scripts/test` sets it up).

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use common::process::{self, BIN, cli};
use common::python;

/// Every file under `dir`, recursively.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

/// Runs `stowage admin --json …` on the server's data dir; panics unless it succeeds.
fn admin(dir: &Path, args: &[&str]) -> serde_json::Value {
    let mut all = vec!["admin", "--json"];
    all.extend_from_slice(args);
    let (ok, json, stderr) = cli(dir, &all, &[]);
    assert!(ok, "stowage {}: {stderr}", all.join(" "));
    json
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_serves_themselves_in_a_real_browser() {
    let started = Instant::now();
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let server = process::start(&data, &[]).await;

    // The operator: a team, its first owner (with a one-time set-password link), a table.
    admin(&data, &["team", "create", "--name", "acme"]);
    let owner = admin(
        &data,
        &[
            "user",
            "create",
            "--team",
            "acme",
            "--email",
            "olivia@acme.example",
            "--name",
            "Olivia Owner",
            "--role",
            "owner",
        ],
    );
    let link = owner["set_password_url"]
        .as_str()
        .expect("set_password_url");
    // The CLI does not know the port the server bound; the path is what matters.
    let link_path = &link[link.find("/invite/").expect("an /invite/ link")..];
    let csv = tmp.path().join("orders.csv");
    std::fs::write(
        &csv,
        "order_id,customer,amount\n1001,Ada,39.95\n1002,Grace,12.50\n1003,Linus,7.00\n",
    )
    .unwrap();
    let imported = admin(
        &data,
        &[
            "table",
            "import",
            "--team",
            "acme",
            "--table",
            "orders",
            csv.to_str().unwrap(),
        ],
    );
    assert_eq!(imported["rows"], 3, "{imported}");

    let shots = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/screenshots/settings");
    std::fs::create_dir_all(&shots).unwrap();
    for old in files(&shots) {
        if old.extension().is_some_and(|e| e == "png") {
            std::fs::remove_file(old).unwrap();
        }
    }
    let secrets_out = tmp.path().join("secrets.json");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/py/browser_flow.py");
    let setup = started.elapsed();
    let out = tokio::task::spawn_blocking({
        let base = server.url("");
        let data = data.clone();
        let shots = shots.clone();
        let secrets_out = secrets_out.clone();
        let link_path = link_path.to_string();
        move || {
            Command::new(python())
                .arg(script)
                .env("PYTHONDONTWRITEBYTECODE", "1")
                .env("STOWAGE_URL", base)
                .env("STOWAGE_BIN", BIN)
                .env("STOWAGE_DATA_DIR", data)
                .env("STOWAGE_TEAM", "acme")
                .env("STOWAGE_OWNER_EMAIL", "olivia@acme.example")
                .env("STOWAGE_OWNER_LINK", link_path)
                .env("STOWAGE_SCREENSHOTS", shots)
                .env("STOWAGE_SECRETS_OUT", secrets_out)
                .output()
                .expect("run tests/py/browser_flow.py")
        }
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the browser flow failed (screenshots in {}; STOWAGE_PYTHON needs selenium, which scripts/test installs):\n{stdout}\n{stderr}\n--- server log (tail) ---\n{}",
        shots.display(),
        tail(&server.log_text(), 40)
    );
    eprintln!("{stdout}");

    // The secrets the page showed once are in neither the server's log nor its data directory
    // (the catalog keeps hashes only).
    let shown: Vec<String> =
        serde_json::from_slice(&std::fs::read(&secrets_out).expect("the flow lists its secrets"))
            .unwrap();
    assert!(
        shown.len() >= 4,
        "a key, a token, an invite, a password link: {shown:?}"
    );
    let log = server.log_text();
    let stored: Vec<(PathBuf, Vec<u8>)> = files(&data)
        .into_iter()
        .filter_map(|p| std::fs::read(&p).ok().map(|b| (p, b)))
        .collect();
    for secret in &shown {
        assert!(!log.contains(secret.as_str()), "a secret in the server log");
        for (path, bytes) in &stored {
            assert!(
                !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
                "a secret stored in {}",
                path.display()
            );
        }
    }
    assert_eq!(server.sigterm(), 0);
    eprintln!(
        "browser test: {:.1?} in all ({setup:.1?} set-up); screenshots in {}",
        started.elapsed(),
        shots.display()
    );
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
