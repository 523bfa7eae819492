//! What an SQL element may not be: anything but one SELECT, a table of another team, a file
//! path or URL, a settings change — each refused at creation with 400 `invalid_sql` and the
//! planner's words; and one team's query never sees another team's rows.

use serde_json::json;

use super::common::seed;
use super::fixture::Fx;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_statement_but_select_is_refused_with_the_planners_words() {
    let fx = Fx::start().await;
    for (sql, says) in [
        ("CREATE TABLE x AS SELECT 1", "only a SELECT"),
        (
            "CREATE EXTERNAL TABLE x STORED AS PARQUET LOCATION '/etc'",
            "only a SELECT",
        ),
        ("CREATE VIEW v AS SELECT 1", "only a SELECT"),
        ("DROP TABLE tracks", "only a SELECT"),
        ("INSERT INTO tracks (id) VALUES ('x')", "only a SELECT"),
        ("DELETE FROM tracks", "only a SELECT"),
        ("UPDATE tracks SET id = 'x'", "only a SELECT"),
        ("COPY tracks TO '/tmp/stolen.parquet'", "only a SELECT"),
        ("COPY (SELECT 1) TO '/tmp/stolen.csv'", "only a SELECT"),
        ("EXPLAIN SELECT * FROM tracks", "only a SELECT"),
        ("SET datafusion.execution.batch_size = 1", "only a SELECT"),
        ("SELECT 1; SELECT 2", "single SQL statement"),
        ("SELECT * FROM nope", "nope"),
        ("SELECT nope FROM tracks", "nope"),
        ("SELECT * FROM '/etc/passwd'", "/etc/passwd"),
        (
            "SELECT * FROM 'https://example.com/x.parquet'",
            "example.com",
        ),
        ("SELECT * FROM read_parquet('/etc/passwd')", "read_parquet"),
        (
            "SELECT * FROM information_schema.tables",
            "information_schema",
        ),
        (
            "SELECT * FROM datafusion.public.tracks",
            "warehouse name alone",
        ),
        ("SELECT revenue + 'x' FROM order_completed", ""),
        ("", "empty"),
    ] {
        let (status, body) = fx.create(json!({ "sql": sql })).await;
        assert_eq!(status, 400, "{sql}: {body}");
        assert_eq!(body["error"]["code"], "invalid_sql", "{sql}: {body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{sql}: {message}");
    }
    // Over 64 KiB: refused (by the API's body limit before the query's own).
    let long = format!("SELECT 1 -- {}", "x".repeat(70 * 1024));
    let (status, body) = fx.create(json!({ "sql": long })).await;
    assert!(
        [(400, "invalid_sql"), (413, "payload_too_large")]
            .contains(&(status, body["error"]["code"].as_str().unwrap())),
        "{status} {body}"
    );
    // Nothing was written anywhere.
    assert!(!std::path::Path::new("/tmp/stolen.parquet").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_query_sees_only_its_own_teams_tables() {
    let fx = Fx::start().await;
    // Team B has a table of its own with a name team A does not have, and a `tracks` too.
    let other = seed(fx.t.catalog(), "team-b");
    for (event, id) in [("Secret Thing", "s1"), ("Order Completed", "s2")] {
        let (status, body) =
            fx.t.send_as(
                &other.token,
                &json!({"event": event, "messageId": id, "userId": "spy",
                        "properties": {"revenue": 1e9}})
                .to_string(),
                &[],
            )
            .await;
        assert_eq!(status, 200, "{body}");
    }
    fx.t.flush().await;
    let (status, body) = fx
        .create(json!({"sql": "SELECT * FROM secret_thing"}))
        .await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (400, &json!("invalid_sql")),
        "{body}"
    );
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("secret_thing")
    );
    let element = fx
        .sql_element(
            "SELECT count(*) AS n, max(revenue) AS top FROM order_completed WHERE user_id = 'spy'",
        )
        .await;
    let (status, body) = fx.t.download(&element, json!({})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"], json!([{"n": 0, "top": null}]), "{body}");
    // Team B's key cannot download team A's element.
    let resp =
        fx.t.http
            .post(fx.t.url("/data/table"))
            .header("x-api-key", &other.key)
            .body(json!({"canvasId": fx.t.seeded.canvas, "elementId": element}).to_string())
            .send()
            .await
            .unwrap();
    assert_eq!(resp.status().as_u16(), 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_creates_sql_elements_with_the_cli_checked_the_same_way() {
    let fx = Fx::start().await;
    let dir = fx.t.dir.path();
    let canvas = fx.t.seeded.canvas.as_str();
    let (ok, out, err) = super::common::process::cli(
        dir,
        &[
            "admin",
            "element",
            "create",
            "--canvas",
            canvas,
            "--name",
            "by plan",
            "--sql",
            "SELECT plan, count(*) AS n FROM order_completed GROUP BY plan",
            "--json",
        ],
        &[],
    );
    assert!(ok, "{out} {err}");
    let element = out["id"].as_str().unwrap();
    assert!(out["share_url"].as_str().unwrap().contains(element));
    let (status, body) = fx.t.download(element, json!({})).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["data"].as_array().unwrap().len(), 3, "{body}");
    let (ok, out, _) = super::common::process::cli(
        dir,
        &[
            "admin",
            "element",
            "create",
            "--canvas",
            canvas,
            "--sql",
            "DROP TABLE tracks",
            "--json",
        ],
        &[],
    );
    assert!(!ok);
    assert_eq!(out["error"]["code"], "invalid_sql", "{out}");
}
