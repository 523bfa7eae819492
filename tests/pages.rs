//! The settings pages over HTTP, without a browser (SPEC §5.1): who is sent where, the status
//! and HTML of every refusal (never JSON to a form), the CSRF rule for forms, the sign-in
//! throttle, shown-once secrets after Post/Redirect/Get, and the headers every page carries.
//! `tests/browser.rs` walks the same pages in Chromium.

use crate::common;

use common::TestServer;
use reqwest::header::{HeaderMap, LOCATION};
use reqwest::redirect::Policy;
use serde_json::{Value, json};
use stowage::catalog::Role;

const PASSWORD: &str = "a long enough password";

struct Session {
    cookie: String,
    csrf: String,
}

/// A server whose sign-in throttle locks after two failures.
async fn server() -> (TestServer, reqwest::Client) {
    let t = TestServer::start(|c| {
        c.accounts.max_failures_per_account = 2;
    })
    .await;
    let http = reqwest::Client::builder()
        .redirect(Policy::none())
        .build()
        .unwrap();
    (t, http)
}

/// A user of `team` with a password.
fn user(t: &TestServer, team: &str, email: &str, role: Role) {
    let u = t
        .catalog()
        .create_user(team, Some(email), email, role)
        .unwrap();
    t.catalog()
        .set_password_hash(&u.id, &stowage::accounts::password::hash(PASSWORD))
        .unwrap();
}

async fn sign_in(t: &TestServer, http: &reqwest::Client, email: &str) -> Session {
    let resp = http
        .post(t.url("/api/v1/session"))
        .header("content-type", "application/json")
        .body(json!({"email": email, "password": PASSWORD}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let cookie = cookie_of(resp.headers());
    let body: Value = serde_json::from_str(&resp.text().await.unwrap()).unwrap();
    Session {
        cookie,
        csrf: body["csrf_token"].as_str().unwrap().to_string(),
    }
}

fn cookie_of(h: &HeaderMap) -> String {
    let set = h["set-cookie"].to_str().unwrap();
    set.split(';').next().unwrap().to_string()
}

/// POSTs a form as `s`; (status, Location, body).
async fn post(
    t: &TestServer,
    http: &reqwest::Client,
    s: Option<&Session>,
    path: &str,
    form: &[(&str, &str)],
) -> (u16, String, String) {
    let mut req = http.post(t.url(path)).form(form);
    if let Some(s) = s {
        req = req.header("cookie", &s.cookie);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    let location = resp
        .headers()
        .get(LOCATION)
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    if status != 303 {
        let ct = resp.headers()["content-type"].to_str().unwrap().to_string();
        assert!(ct.starts_with("text/html"), "{path}: {status} as {ct}");
    }
    (status, location, resp.text().await.unwrap())
}

async fn get(t: &TestServer, http: &reqwest::Client, s: &Session, path: &str) -> String {
    let resp = http
        .get(t.url(path))
        .header("cookie", &s.cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    resp.text().await.unwrap()
}

#[tokio::test]
async fn signed_out_visitors_are_sent_to_the_sign_in_form() {
    let (t, http) = server().await;
    let resp = http.get(t.url("/settings")).send().await.unwrap();
    assert_eq!(resp.status(), 303);
    assert_eq!(resp.headers()[LOCATION], "/login");
    let (status, location, _) = post(&t, &http, None, "/settings/keys", &[("csrf", "x")]).await;
    assert_eq!((status, location.as_str()), (303, "/login"));

    let resp = http.get(t.url("/login")).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let h = resp.headers();
    assert_eq!(h["cache-control"], "no-store");
    assert_eq!(h["x-frame-options"], "DENY");
    let csp = h["content-security-policy"].to_str().unwrap();
    for part in [
        "default-src 'none'",
        "style-src 'self'",
        "script-src 'self'",
        "frame-ancestors 'none'",
    ] {
        assert!(csp.contains(part), "{csp}");
    }
    let html = resp.text().await.unwrap();
    assert!(
        html.contains(r#"<label for="email">Email</label>"#),
        "{html}"
    );

    let css = http.get(t.url("/static/style.css")).send().await.unwrap();
    assert_eq!(css.status(), 200);
    assert!(
        css.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/css")
    );
}

#[tokio::test]
async fn the_sign_in_form_answers_alike_throttles_and_signs_in() {
    let (t, http) = server().await;
    user(&t, &t.seeded.team, "ada@example.com", Role::Owner);
    let (status, _, known) = post(
        &t,
        &http,
        None,
        "/login",
        &[("email", "ada@example.com"), ("password", "wrong password")],
    )
    .await;
    assert_eq!(status, 401);
    let (status, _, unknown) = post(
        &t,
        &http,
        None,
        "/login",
        &[
            ("email", "nobody@example.com"),
            ("password", "wrong password"),
        ],
    )
    .await;
    assert_eq!(status, 401);
    for html in [&known, &unknown] {
        assert!(html.contains("Wrong email or password."), "{html}");
    }
    // A few more failures lock the account: even the right password waits.
    let mut locked = None;
    for _ in 0..5 {
        let resp = http
            .post(t.url("/login"))
            .form(&[("email", "ada@example.com"), ("password", "wrong again")])
            .send()
            .await
            .unwrap();
        if resp.status() == 429 {
            locked = Some(resp);
            break;
        }
        assert_eq!(resp.status(), 401);
    }
    let resp = locked.expect("locked after a few failures");
    assert!(resp.headers().contains_key("retry-after"));
    assert!(
        resp.text()
            .await
            .unwrap()
            .contains("Too many failed sign-ins")
    );
    let resp = http
        .post(t.url("/login"))
        .form(&[("email", "ada@example.com"), ("password", PASSWORD)])
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 429);

    // A cross-site form is refused before any password is checked.
    user(&t, &t.seeded.team, "bob@example.com", Role::Member);
    let resp = http
        .post(t.url("/login"))
        .header("origin", "https://evil.example")
        .form(&[("email", "bob@example.com"), ("password", PASSWORD)])
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 403);
    let resp = http
        .post(t.url("/login"))
        .form(&[("email", "bob@example.com"), ("password", PASSWORD)])
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 303);
    assert_eq!(resp.headers()[LOCATION], "/settings");
    let cookie = resp.headers()["set-cookie"].to_str().unwrap();
    assert!(cookie.starts_with("stowage_session=") && cookie.contains("HttpOnly"));
}

#[tokio::test]
async fn forms_need_the_csrf_token_and_show_a_secret_once() {
    let (t, http) = server().await;
    user(&t, &t.seeded.team, "ada@example.com", Role::Owner);
    let s = sign_in(&t, &http, "ada@example.com").await;
    for form in [vec![("name", "k")], vec![("name", "k"), ("csrf", "wrong")]] {
        let (status, _, html) = post(&t, &http, Some(&s), "/settings/keys", &form).await;
        assert_eq!(status, 403);
        assert!(html.contains("This form has expired"), "{html}");
    }
    let resp = http
        .post(t.url("/settings/keys"))
        .header("cookie", &s.cookie)
        .header("origin", "https://evil.example")
        .form(&[("name", "k"), ("csrf", s.csrf.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 403);
    let page = get(&t, &http, &s, "/settings").await;
    assert!(!page.contains(">k<"), "no key was created");

    let (status, location, _) = post(
        &t,
        &http,
        Some(&s),
        "/settings/keys",
        &[("name", "ci"), ("csrf", &s.csrf)],
    )
    .await;
    assert_eq!((status, location.as_str()), (303, "/settings#keys"));
    let page = get(&t, &http, &s, "/settings").await;
    assert!(page.contains("Copy it now, it will not be shown again"));
    let key = page
        .split("value=\"")
        .find_map(|rest| rest.strip_prefix("stw_data_"))
        .map(|rest| format!("stw_data_{}", &rest[..rest.find('"').unwrap()]))
        .expect("the key on the page");
    let page = get(&t, &http, &s, "/settings").await;
    assert!(
        !page.contains(&key) && !page.contains("Copy it now"),
        "shown twice"
    );
}

#[tokio::test]
async fn refusals_are_shown_on_the_page_with_their_status() {
    let (t, http) = server().await;
    let team = &t.seeded.team;
    user(&t, team, "owner@example.com", Role::Owner);
    user(&t, team, "member@example.com", Role::Member);
    let quiet = t.catalog().create_team("quiet").unwrap();
    user(&t, &quiet, "quiet@example.com", Role::Owner);
    let owner = sign_in(&t, &http, "owner@example.com").await;
    let member = sign_in(&t, &http, "member@example.com").await;
    let lonely = sign_in(&t, &http, "quiet@example.com").await;

    // (who, path, form, status, text on the page)
    type Case<'a> = (&'a Session, &'a str, Vec<(&'a str, &'a str)>, u16, &'a str);
    let cases: Vec<Case> = vec![
        (&member, "/settings/keys", vec![], 403, "Only an owner"),
        (
            &member,
            "/settings/members/invite",
            vec![("email", "x@example.com"), ("role", "member")],
            403,
            "Only an owner",
        ),
        (
            &lonely,
            "/settings/tokens",
            vec![],
            403,
            "Events are not enabled",
        ),
        (
            &owner,
            "/settings/canvases",
            vec![("name", "  ")],
            400,
            "A canvas name is 1 to 200 characters",
        ),
        (
            &owner,
            "/settings/keys/key_nope/revoke",
            vec![],
            404,
            "no longer exists",
        ),
        (
            &owner,
            "/settings/members/invite",
            vec![("email", "x@example.com"), ("role", "admin")],
            400,
            "Choose owner or member",
        ),
    ];
    for (s, path, mut form, want, text) in cases {
        form.push(("csrf", &s.csrf));
        let (status, _, html) = post(&t, &http, Some(s), path, &form).await;
        assert_eq!(status, want, "{path}: {html}");
        assert!(html.contains(text), "{path}: {text:?} not in {html}");
        assert!(
            html.contains("Team settings"),
            "the page again, with the error on it"
        );
    }
    // The last owner of "quiet" cannot become a member.
    let me = t
        .catalog()
        .user_for_sign_in("quiet@example.com")
        .unwrap()
        .unwrap()
        .0;
    let (status, _, html) = post(
        &t,
        &http,
        Some(&lonely),
        &format!("/settings/members/{}/role", me.id),
        &[("role", "member"), ("csrf", &lonely.csrf)],
    )
    .await;
    assert_eq!(status, 409);
    assert!(
        html.contains("A team must keep at least one owner"),
        "{html}"
    );

    // Members see no owner-only section or action.
    let page = get(&t, &http, &member, "/settings").await;
    for absent in ["Create key", "Create invite link", "Audit log", "/revoke"] {
        assert!(!page.contains(absent), "a member sees {absent:?}");
    }
}

#[tokio::test]
async fn a_used_or_unknown_link_is_gone() {
    let (t, http) = server().await;
    let resp = http
        .get(t.url("/invite/stw_link_nothing"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 410);
    assert!(
        resp.text()
            .await
            .unwrap()
            .contains("This link can no longer be used")
    );
}

/// The "New SQL table" form of a signed-in user, saving on `canvas`.
struct SqlForm<'a> {
    t: &'a TestServer,
    http: &'a reqwest::Client,
    s: &'a Session,
    canvas: &'a str,
}

impl SqlForm<'_> {
    /// Posts `sql` (named "Totals") to `path`, with `csrf` if given.
    async fn post(&self, path: &str, sql: &str, csrf: Option<&str>) -> (u16, String, String) {
        let mut form = vec![("canvas", self.canvas), ("sql", sql), ("name", "Totals")];
        form.extend(csrf.map(|c| ("csrf", c)));
        post(self.t, self.http, Some(self.s), path, &form).await
    }

    /// Posts `sql` with the session's token to `path`.
    async fn send(&self, path: &str, sql: &str) -> (u16, String, String) {
        self.post(path, sql, Some(&self.s.csrf)).await
    }
}

const PREVIEW: &str = "/settings/sql-elements/preview";
const SAVE: &str = "/settings/sql-elements";

/// `text` as the page's templates escape it.
fn escaped(text: &str) -> String {
    text.replace('&', "&#38;")
        .replace('<', "&#60;")
        .replace('>', "&#62;")
        .replace('"', "&#34;")
        .replace('\'', "&#39;")
}

/// The "New SQL table" form (SPEC §3.4), for any user of the team as in the API: a preview
/// shows the query's first rows, escaped, and saves nothing; a query the planner refuses, a
/// statement that is not a SELECT, a file read, a parameter and an oversized query are each
/// shown beside the form with their status (never a 500) and the query kept in it; a forged
/// post is refused; saving creates the element, which the canvas list shows as SQL and which
/// downloads with a data key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sql_form_previews_refuses_beside_the_form_and_saves() {
    let (t, http) = server().await;
    let team = t.seeded.team.clone();
    user(&t, &team, "member@example.com", Role::Member);
    let s = sign_in(&t, &http, "member@example.com").await;
    for (i, (who, amount)) in [("ada", 30.5), ("grace", 12.0), ("ada", 1.5)]
        .into_iter()
        .enumerate()
    {
        t.send(json!({"event": "purchase", "messageId": format!("p{i}"),
                      "properties": {"who": who, "amount": amount}}))
            .await;
    }
    t.flush().await;
    let canvas = t.seeded.canvas.clone();
    let form = SqlForm {
        t: &t,
        http: &http,
        s: &s,
        canvas: &canvas,
    };
    let elements = || t.catalog().list_elements(&team, None).unwrap();
    let before = elements().len();

    // A preview: the rows, escaped, in a table under the form; the query still in it.
    let sql = "SELECT who, SUM(amount) AS total, '<b>' AS tag FROM purchase \
               GROUP BY who ORDER BY who";
    let rows = [
        "<td>ada</td><td class=\"num\">32.0</td><td>&#60;b&#62;</td>",
        "<td>grace</td><td class=\"num\">12.0</td><td>&#60;b&#62;</td>",
    ];
    let (status, _, html) = form.send(PREVIEW, sql).await;
    assert_eq!(status, 200, "{html}");
    assert!(html.contains("All 2 rows of the query"), "{html}");
    for row in rows {
        assert!(html.contains(row), "{row} not in {html}");
    }
    assert!(!html.contains("<td><b>"), "a cell is escaped");
    assert!(html.contains(&escaped(sql)), "the query stays in the form");
    assert!(!html.contains("id=\"sql-error\""), "{html}");
    assert_eq!(elements().len(), before, "a preview saves nothing");

    // Refusals, by preview and by save: beside the form, with their status, the query kept.
    let long = format!("SELECT 1 AS one -- {}", "x".repeat(70 * 1024));
    let refused: [(&str, &str, &str); 6] = [
        (PREVIEW, "SELECT nope FROM purchase", "nope"),
        (SAVE, "SELECT nope FROM purchase", "nope"),
        (SAVE, "DROP TABLE purchase", "a SELECT query is allowed"),
        (PREVIEW, "SELECT * FROM '/etc/passwd'", "/etc/passwd"),
        (
            PREVIEW,
            "SELECT * FROM purchase WHERE amount > $least",
            "takes parameters ($least)",
        ),
        (SAVE, &long, "at most 65536"),
    ];
    for (path, sql, says) in refused {
        let (status, _, html) = form.send(path, sql).await;
        assert_eq!(status, 400, "{path} {sql:.60}: {html:.2000}");
        let error = html
            .split("id=\"sql-error\"")
            .nth(1)
            .unwrap_or_else(|| panic!("no error beside the form for {sql:.60}: {html:.2000}"));
        let error = &error[..error.find("</div>").unwrap()];
        assert!(error.contains(&escaped(says)), "{sql:.60}: {error}");
        assert!(html.contains(&escaped(sql)), "the query stays in the form");
        assert!(html.contains("Team settings"), "the whole page again");
    }
    assert_eq!(elements().len(), before, "a refused query saves nothing");
    let (status, _, html) = form.send(PREVIEW, sql).await;
    assert_eq!(status, 200, "{html}");
    assert!(html.contains(rows[0]), "the table is untouched: {html}");

    // Longer than a plain settings form may be, but within the query's own limit.
    let padded = format!(
        "SELECT COUNT(*) AS n FROM purchase -- {}",
        "y".repeat(20 * 1024)
    );
    let (status, _, html) = form.send(PREVIEW, &padded).await;
    assert_eq!(status, 200, "{html:.2000}");
    assert!(html.contains("<td class=\"num\">3</td>"), "{html:.2000}");

    // Another team's canvas is no canvas of this team.
    let other = t.catalog().create_team("other").unwrap();
    let theirs = t.catalog().create_canvas(&other, "theirs").unwrap();
    let elsewhere = SqlForm {
        canvas: &theirs,
        ..form
    };
    let (status, _, html) = elsewhere.send(SAVE, sql).await;
    assert_eq!(status, 404, "{html}");
    assert!(html.contains("no longer exists"), "{html}");

    // Forged posts: no token, a wrong one, another site.
    for forged in [None, Some("wrong")] {
        let (status, _, html) = form.post(SAVE, sql, forged).await;
        assert_eq!(status, 403);
        assert!(html.contains("This form has expired"), "{html}");
    }
    let resp = http
        .post(t.url(PREVIEW))
        .header("cookie", &s.cookie)
        .header("origin", "https://evil.example")
        .form(&[("canvas", canvas.as_str()), ("sql", sql), ("csrf", &s.csrf)])
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 403);
    assert_eq!(elements().len(), before, "nothing forged was saved");

    // Save: back to the canvas list, where the element is marked SQL with its query.
    let (status, location, _) = form.send(SAVE, sql).await;
    assert_eq!((status, location.as_str()), (303, "/settings#canvases"));
    let saved = elements();
    assert_eq!(saved.len(), before + 1);
    let element = saved.last().unwrap();
    assert_eq!(
        (element.kind.as_str(), element.sql.as_deref()),
        ("sql", Some(sql))
    );
    let page = get(&t, &http, &s, "/settings").await;
    assert!(page.contains("SQL table “Totals” created."), "{page}");
    assert!(page.contains(r#"<span class="badge badge-sql">SQL</span>"#));
    assert!(
        page.contains(&format!("<code>{}</code>", escaped(sql))),
        "{page}"
    );
    let share = format!("/canvas/{canvas}/element/{}/new-canvas", element.id);
    assert!(page.contains(&share), "{share} not in {page}");
    let rows = t.rows(&element.id).await;
    assert_eq!(
        rows,
        [
            json!({"who": "ada", "total": 32.0, "tag": "<b>"}),
            json!({"who": "grace", "total": 12.0, "tag": "<b>"}),
        ]
    );
}
