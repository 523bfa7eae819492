//! Buffered acknowledgements when the WAL cannot be written, in process: this test binary lowers
//! its own file-size limit (RLIMIT_FSIZE) below the WAL segment, so every WAL write fails with
//! EFBIG, then raises it again. While writes fail, no event is acknowledged (503
//! `wal_unavailable`); events acknowledged just before the failure was seen are kept; ids that
//! got 503 are not remembered as stored; and the log recovers by itself once the limit is gone.
//! (Alone in its binary: the limit is process-wide.)

mod common;

use common::{TestServer, ids};
use serde_json::json;
use stowage::config::AckMode;

fn set_file_size_limit(bytes: Option<u64>) {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_FSIZE, &mut lim), 0);
        lim.rlim_cur = bytes.unwrap_or(lim.rlim_max);
        assert_eq!(libc::setrlimit(libc::RLIMIT_FSIZE, &lim), 0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn buffered_acks_stop_while_the_wal_fails_and_nothing_acknowledged_is_lost() {
    // Writing past the limit raises SIGXFSZ, which would end the process; ignored, the write
    // fails with EFBIG instead.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
    let t = TestServer::start(|c| c.ingest.ack = AckMode::Buffered).await;
    let mut acked = Vec::new();
    let mut refused = Vec::new();
    for i in 0..5 {
        let id = format!("before-{i}");
        let (s, _) = t
            .send_raw(&json!({"event": "w", "messageId": id}).to_string())
            .await;
        assert_eq!(s, 200);
        acked.push(id);
    }
    // Make sure those are in the log: a committed wait goes through the writer.
    t.flush().await;

    set_file_size_limit(Some(1));
    let mut order = Vec::new();
    for i in 0..20 {
        let id = format!("during-{i}");
        let (s, body) = t
            .send_raw(&json!({"event": "w", "messageId": id}).to_string())
            .await;
        order.push(s == 200);
        match s {
            200 => acked.push(id),
            503 => {
                assert_eq!(body["error"]["code"], "wal_unavailable", "{body}");
                refused.push(id);
            }
            other => panic!("unexpected {other}: {body}"),
        }
    }
    set_file_size_limit(None);
    let kept = acked.iter().filter(|i| i.starts_with("during")).count();
    eprintln!(
        "while failing: {kept} acknowledged before the failure was seen, {} refused",
        refused.len()
    );
    assert!(
        kept >= 1,
        "the first event after the fault is acknowledged before its write fails"
    );
    // Which events get acknowledged before the writer has seen its failed write depends on
    // how soon its thread runs (a loaded machine lets a few more through); what must hold is
    // that once one is refused, every later one is too, and that the refusals start promptly.
    let first_refused = order.iter().position(|acked| !acked).expect("some refused");
    assert!(
        order[first_refused..].iter().all(|acked| !acked),
        "once a write failed, events are refused, not acknowledged: {order:?}"
    );
    assert!(
        refused.len() >= 10,
        "refusals start promptly: {} of 20 refused",
        refused.len()
    );

    // The cause is gone: the log recovers by itself; refused ids are free to be stored.
    for id in refused.iter().chain(["after".to_string()].iter()) {
        let (s, body) = t
            .send_raw(&json!({"event": "w", "messageId": id}).to_string())
            .await;
        assert_eq!(s, 200, "{body}");
        acked.push(id.clone());
    }
    t.flush().await;
    let rows = t.rows(&t.element("w", None)).await;
    let got = ids(&json!({ "data": rows }));
    let mut want = acked.clone();
    want.sort();
    let mut sorted = got.clone();
    sorted.sort();
    assert_eq!(sorted, want, "every acknowledged event exactly once");
}
