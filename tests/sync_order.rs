//! Power-loss durability, shown by the order of system calls: the real binary runs under
//! `strace`, and for every Parquet object the catalog names — flushed or compacted — the
//! object's data (`fsync` of its staged file) and its directory entry (`fsync` of the
//! directory) are synced before the catalog transaction that names it is written. Without
//! those syncs a power cut after the commit could leave an empty file as the only copy.

use crate::common;

use std::process::Command;

use common::parquet_files;
use common::process::{self, download};
use serde_json::json;

/// One traced system call: its line number in the trace and its text.
struct Call<'a> {
    at: usize,
    text: &'a str,
}

fn calls<'a>(trace: &'a str, name: &str) -> Vec<Call<'a>> {
    let needle = format!(" {name}(");
    trace
        .lines()
        .enumerate()
        .filter(|(_, l)| l.contains(&needle) && !l.contains("= -1"))
        .map(|(at, text)| Call { at, text })
        .collect()
}

/// The path strace's `-y` printed for a call's first (fd) argument.
fn fd_path(text: &str) -> &str {
    let start = text.find('<').map_or(0, |i| i + 1);
    let end = text[start..].find('>').map_or(text.len(), |i| start + i);
    &text[start..end]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_and_their_directories_are_synced_before_the_commit_that_names_them() {
    if Command::new("strace").arg("-V").output().is_err() {
        panic!("strace is required for this test (.ci/run installs it)");
    }
    let dir = tempfile::tempdir().unwrap();
    let trace_file = dir.path().join("strace.txt");
    let trace_arg = trace_file.to_str().unwrap().to_string();
    let wrapper = [
        "strace",
        "-f",
        "-y",
        "-qq",
        "-s",
        "65536",
        "-e",
        "trace=fsync,fdatasync,pwrite64",
        "-o",
        &trace_arg,
        "--",
    ];
    let env = [
        ("STOWAGE_FLUSH__INTERVAL", "100ms"),
        ("STOWAGE_COMPACTION__MIN_FILES", "2"),
        ("STOWAGE_COMPACTION__INTERVAL", "100ms"),
    ];
    let proc = process::try_start_wrapped(dir.path(), &env, &wrapper)
        .await
        .unwrap_or_else(|log| panic!("server under strace did not start:\n{log}"));
    let http = reqwest::Client::new();
    // Two separate commits of one table, so compaction has two files to merge.
    for round in 0..2 {
        let resp = http
            .post(proc.url("/v1/event"))
            .header("X-Auth-Token", proc.demo["events_token"].as_str().unwrap())
            .header("Content-Type", "application/json")
            .header("X-Stowage-Wait", "committed")
            .body(json!({"event": "synced", "messageId": format!("s{round}")}).to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
    }
    let compacted = common::wait_for(std::time::Duration::from_secs(60), || {
        let log = proc.log_text();
        async move { log.contains("compaction pass") }
    })
    .await;
    assert!(compacted, "compaction never ran:\n{}", proc.log_text());
    let tracks = download(&http, &proc.demo, "element_id").await;
    assert_eq!(tracks["rows"], 2);
    stop_traced(proc);

    let trace = std::fs::read_to_string(&trace_file).unwrap();
    let catalog = dir.path().join("catalog.sqlite-wal");
    let catalog = catalog.to_str().unwrap();
    let catalog_writes: Vec<Call> = calls(&trace, "pwrite64")
        .into_iter()
        .filter(|c| fd_path(c.text) == catalog)
        .collect();
    let syncs: Vec<Call> = calls(&trace, "fsync")
        .into_iter()
        .chain(calls(&trace, "fdatasync"))
        .collect();
    let objects = parquet_files(&dir.path().join("warehouse"));
    let names: Vec<String> = objects
        .iter()
        .map(|p| p.file_name().unwrap().to_str().unwrap().to_string())
        .collect();
    assert!(
        names.len() >= 2,
        "flushed and compacted objects exist: {names:?}"
    );
    let mut checked = 0;
    for path in &objects {
        let name = path.file_name().unwrap().to_str().unwrap();
        // The data_files row: the path followed directly by its partition column. (The
        // reservation written before the put names the path too, followed by its writer id.)
        let row = format!("{name}date=");
        let Some(commit) = catalog_writes.iter().find(|c| c.text.contains(&row)) else {
            continue; // never committed by name (e.g. a compaction input already retired)
        };
        let object = path.to_str().unwrap();
        let parent = path.parent().unwrap().to_str().unwrap();
        // The staged file (`<object>#<n>`) is synced, then renamed into place.
        let data = syncs
            .iter()
            .find(|s| fd_path(s.text).starts_with(object))
            .unwrap_or_else(|| panic!("{name}: its data is never synced"));
        let directory = syncs
            .iter()
            .find(|s| fd_path(s.text) == parent && s.at > data.at)
            .unwrap_or_else(|| panic!("{name}: its directory is never synced after the data"));
        assert!(
            data.at < commit.at && directory.at < commit.at,
            "{name}: data synced at trace line {}, directory at {}, but the catalog commit \
             naming it was written at line {}",
            data.at,
            directory.at,
            commit.at
        );
        checked += 1;
    }
    assert!(
        checked >= 2,
        "at least the flushed and the compacted object were checked"
    );
}

/// SIGTERM to the traced server (strace's child), then wait for strace.
fn stop_traced(mut proc: process::Proc) {
    let out = Command::new("pgrep")
        .args(["-P", &proc.child.id().to_string()])
        .output()
        .unwrap();
    let pid = String::from_utf8(out.stdout).unwrap();
    let pid = pid
        .split_whitespace()
        .next()
        .expect("the traced server runs");
    assert!(
        Command::new("kill")
            .args(["-TERM", pid])
            .status()
            .unwrap()
            .success()
    );
    proc.child.wait().unwrap();
}
