//! Every endpoint × every kind of caller: team A's owner (cookie, and personal access token),
//! a member of team A, team B's owner, nobody, and a cookie request with a missing or wrong CSRF
//! token or from another site — then bad input, wrong methods and unknown paths. Each case makes
//! a fresh target for every call, so a success never spoils the next caller's case.

use stowage::catalog::SecretKind;

use super::client::{Resp, Who};
use super::fixture::Fx;

/// `METHOD path | body | status for team A's owner, team A's member, team B's owner`. A
/// `{name}` in a path is a fresh thing of team A, made for each call (see [`target`]).
const CASES: &[&str] = &[
    "GET /api/v1/me | | 200 200 200",
    "GET /api/v1/members | | 200 200 200",
    r#"POST /api/v1/invites | {"email":"new@x.example","role":"member"} | 201 403 201"#,
    "GET /api/v1/invites | | 200 403 200",
    "DELETE /api/v1/invites/{invite} | | 204 403 404",
    r#"PATCH /api/v1/members/{member} | {"role":"owner"} | 200 403 404"#,
    "DELETE /api/v1/members/{member} | | 204 403 404",
    "GET /api/v1/keys | | 200 403 200",
    r#"POST /api/v1/keys | {"name":"ci"} | 201 403 201"#,
    "DELETE /api/v1/keys/{key} | | 204 403 404",
    "GET /api/v1/tokens | | 200 403 200",
    "POST /api/v1/tokens | | 201 403 201",
    "DELETE /api/v1/tokens/{token} | | 204 403 404",
    "POST /api/v1/events/request | | 202 403 202",
    "GET /api/v1/canvases | | 200 200 200",
    r#"POST /api/v1/canvases | {"name":"Sales"} | 201 201 201"#,
    r#"PATCH /api/v1/canvases/{canvas} | {"name":"Renamed"} | 200 200 404"#,
    "DELETE /api/v1/canvases/{canvas} | | 204 204 404",
    "GET /api/v1/canvases/{canvas}/elements | | 200 200 404",
    r#"POST /api/v1/canvases/{canvas}/elements | {"source":"tracks"} | 201 201 404"#,
    "DELETE /api/v1/elements/{element} | | 204 204 404",
    "GET /api/v1/tables | | 200 200 200",
    "GET /api/v1/pats | | 200 200 200",
    r#"POST /api/v1/pats | {"name":"script"} | 201 201 201"#,
    // Only its own user may revoke a token: to anyone else it does not exist.
    "DELETE /api/v1/pats/{pat} | | 204 404 404",
    "GET /api/v1/audit | | 200 403 200",
];

/// `"METHOD path | body | rest"` → (method, path, body, rest); bodies hold no `|`.
fn split(case: &str) -> (&str, &str, Option<&str>, &str) {
    let parts: Vec<&str> = case.splitn(3, '|').map(str::trim).collect();
    let (method, path) = parts[0].split_once(' ').unwrap();
    (
        method,
        path,
        Some(parts[1]).filter(|b| !b.is_empty()),
        parts[2],
    )
}

/// The path with its `{name}` replaced by a fresh thing of team A. Creating a token needs
/// events enabled, requesting them needs them disabled (for both teams).
fn target(fx: &Fx, path: &str) -> String {
    if path.starts_with("/api/v1/tokens") {
        fx.events(true);
    }
    if path == "/api/v1/events/request" {
        fx.events(false);
    }
    let Some((head, rest)) = path.split_once('{') else {
        return path.to_string();
    };
    let (name, tail) = rest.split_once('}').unwrap();
    let id = match name {
        "member" => fx.new_member(),
        "key" => fx.new_secret(SecretKind::DataKey).0,
        "token" => fx.new_secret(SecretKind::EventsToken).0,
        "canvas" => fx.new_canvas(),
        "element" => fx.new_element(),
        "pat" => fx.new_pat().0,
        "invite" => fx.new_invite(),
        other => panic!("no fresh {other}"),
    };
    format!("{head}{id}{tail}")
}

/// The code an error status means here.
fn code_of(status: u16) -> Option<&'static str> {
    match status {
        401 => Some("not_signed_in"),
        403 => Some("forbidden"),
        404 => Some("not_found"),
        _ => None,
    }
}

#[track_caller]
fn check(r: &Resp, status: u16, what: &str) {
    r.expect(status, code_of(status), what);
    match status {
        204 => assert!(r.text.is_empty(), "{what}: 204 with a body"),
        200..=202 => assert!(r.json.is_object(), "{what}: {}", r.text),
        _ => {}
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn every_endpoint_answers_every_kind_of_caller() {
    let fx = Fx::start().await;
    let stranger = "https://evil.example";
    for case in CASES {
        let (method, path, body, rest) = split(case);
        let expect: Vec<u16> = rest.split(' ').map(|s| s.parse().unwrap()).collect();
        let call = |who: Who| {
            let path = target(&fx, path);
            let label = format!("{method} {path}");
            let api = fx.api.clone();
            async move { (api.call(&who, method, &path, body).await, label) }
        };
        let callers = [&fx.owner, &fx.member, &fx.other];
        for (who, status) in callers.into_iter().zip(expect.iter().copied()) {
            let (r, label) = call(who.clone()).await;
            check(&r, status, &format!("{label} as {}", who.user_id));
        }
        // Scripts use a token and need no CSRF token.
        let (r, label) = call(fx.owner_pat.clone()).await;
        check(&r, expect[0], &format!("{label} with the owner's token"));
        for nobody in [Who::anonymous(), Who::pat("stw_pat_not-a-real-token")] {
            let (r, label) = call(nobody).await;
            check(&r, 401, &format!("{label} signed out"));
        }
        let forged = [
            fx.owner.csrf(None),
            fx.owner.csrf(Some("wrong")),
            fx.owner.origin(stranger),
        ];
        for who in forged {
            let (r, label) = call(who.clone()).await;
            if method == "GET" {
                // Reading needs no CSRF token (and browsers do not let another site read it).
                check(&r, expect[0], &label);
            } else {
                r.expect(403, Some("csrf"), &format!("{label} forged: {who:?}"));
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn bad_input_is_refused_with_the_field_named() {
    let fx = Fx::start().await;
    let member = fx.new_member();
    let canvas = fx.new_canvas();
    let values = [
        ("{member}", member.clone()),
        ("{canvas}", canvas),
        (
            "{long_name}",
            format!(r#"{{"name":"{}"}}"#, "n".repeat(101)),
        ),
        (
            "{huge}",
            format!(r#"{{"name":"{}"}}"#, "n".repeat(70 * 1024)),
        ),
        ("{n201}", "n".repeat(201)),
        ("{c5000}", {
            let names: Vec<String> = (0..5000).map(|i| format!("\"c{i}\"")).collect();
            names.join(",")
        }),
    ];
    // `METHOD path | body | status code field?`; `{name}` is replaced from `values`.
    let cases = [
        "POST /api/v1/invites | { | 400 invalid_json",
        r#"POST /api/v1/invites | {"email":"a@b.example"} | 400 invalid_request role"#,
        r#"POST /api/v1/invites | {"email":"nope","role":"member"} | 400 invalid_request email"#,
        r#"POST /api/v1/invites | {"email":"a@b.example","role":"admin"} | 400 invalid_request role"#,
        r#"POST /api/v1/invites | {"email":"a@b.example","role":"member","x":1} | 400 invalid_request x"#,
        r#"PATCH /api/v1/members/{member} | {"role":5} | 400 invalid_request role"#,
        "PATCH /api/v1/members/{member} | | 400 invalid_request role",
        r#"PATCH /api/v1/members/us_nobody | {"role":"owner"} | 404 not_found"#,
        r#"POST /api/v1/keys | {"name":5} | 400 invalid_request name"#,
        "POST /api/v1/keys | {long_name} | 400 invalid_request name",
        r#"POST /api/v1/keys | {"nam":"typo"} | 400 invalid_request nam"#,
        r#"POST /api/v1/keys | "a string" | 400 invalid_request"#,
        "POST /api/v1/keys | {huge} | 413 payload_too_large",
        "DELETE /api/v1/keys/key_nothing | | 404 not_found",
        "POST /api/v1/tokens | nonsense | 400 invalid_json",
        r#"POST /api/v1/pats | {"name":"a\u0000b"} | 400 invalid_request name"#,
        "DELETE /api/v1/pats/pat_nothing | | 404 not_found",
        "POST /api/v1/canvases | {} | 400 invalid_request name",
        r#"POST /api/v1/canvases | {"name":"  "} | 400 invalid_request name"#,
        r#"PATCH /api/v1/canvases/{canvas} | {"name":""} | 400 invalid_request name"#,
        r#"POST /api/v1/canvases/{canvas}/elements | {"source":"!!"} | 400 invalid_request source"#,
        r#"POST /api/v1/canvases/{canvas}/elements | {"source":"tracks","limit":0} | 400 invalid_request limit"#,
        r#"POST /api/v1/canvases/{canvas}/elements | {"source":"tracks","limit":-1} | 400 invalid_request limit"#,
        r#"POST /api/v1/canvases/{canvas}/elements | {"source":"tracks","limit":18446744073709551615} | 400 invalid_request limit"#,
        r#"POST /api/v1/canvases/{canvas}/elements | {"source":"tracks","filters":{}} | 400 invalid_request filters"#,
        r#"POST /api/v1/canvases/{canvas}/elements | {"source":"tracks","colour":1} | 400 invalid_request colour"#,
        // Bounds (SPEC §5.2): names, and columns and filters checked against the table.
        r#"POST /api/v1/canvases | {"name":"{n201}"} | 400 invalid_request name"#,
        r#"POST /api/v1/canvases | {"name":"tab\there"} | 400 invalid_request name"#,
        r#"PATCH /api/v1/canvases/{canvas} | {"name":"{n201}"} | 400 invalid_request name"#,
        r#"POST /api/v1/canvases/{canvas}/elements | {"source":"tracks","name":"{n201}"} | 400 invalid_request name"#,
        r#"POST /api/v1/canvases/{canvas}/elements | {"source":"tracks","name":"a\u0007b"} | 400 invalid_request name"#,
        r#"POST /api/v1/canvases/{canvas}/elements | {"source":"{n201}"} | 400 invalid_request source"#,
        r#"POST /api/v1/canvases/{canvas}/elements | {"source":"tracks","columns":[{c5000}]} | 400 invalid_request columns"#,
        r#"POST /api/v1/canvases/{canvas}/elements | {"source":"tracks","columns":["no_such_column"]} | 400 invalid_request columns"#,
        r#"POST /api/v1/canvases/{canvas}/elements | {"source":"tracks","columns":[]} | 400 invalid_request columns"#,
        r#"POST /api/v1/canvases/{canvas}/elements | {"source":"tracks","filters":[{"junk":true}]} | 400 invalid_request filters"#,
        r#"POST /api/v1/canvases/{canvas}/elements | {"source":"tracks","filters":[{"column":"nope","op":"eq","value":1}]} | 400 invalid_request filters"#,
        r#"POST /api/v1/canvases/{canvas}/elements | {"source":"no_data_yet","columns":["a"]} | 400 invalid_request columns"#,
        "GET /api/v1/canvases/cv_nothing/elements | | 404 not_found",
        "DELETE /api/v1/elements/el_nothing | | 404 not_found",
        "GET /api/v1/audit?limit=0 | | 400 invalid_request limit",
        "GET /api/v1/audit?before=soon | | 400 invalid_request before",
        r#"POST /api/v1/session | {"email":"a@b.example"} | 400 invalid_request password"#,
        r#"POST /api/v1/links/use | {"link":"stw_link_x","password":"short"} | 400 invalid_request password"#,
        r#"POST /api/v1/links/use | {"link":"stw_link_x","password":"long enough, surely"} | 410 link_expired"#,
    ];
    let fill = |s: &str| {
        values
            .iter()
            .fold(s.to_string(), |s, (name, value)| s.replace(name, value))
    };
    for case in cases {
        let (method, path, body, want) = split(case);
        let (path, body) = (fill(path), body.map(fill));
        let mut want = want.split(' ');
        let status: u16 = want.next().unwrap().parse().unwrap();
        let (code, field) = (want.next(), want.next());
        let r = fx.api.call(&fx.owner, method, &path, body.as_deref()).await;
        let what = case;
        r.expect(status, code, what);
        assert_eq!(
            r.json["error"]["field"].as_str(),
            field,
            "{what}: {}",
            r.text
        );
        assert!(r.json["error"]["message"].is_string(), "{what}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn wrong_methods_and_unknown_paths_answer_in_json() {
    let fx = Fx::start().await;
    for (method, path, allow) in [
        ("PUT", "/api/v1/invites", "GET, HEAD, POST"),
        ("GET", "/api/v1/invites/ln_x", "DELETE"),
        ("PUT", "/api/v1/keys", "GET, HEAD, POST"),
        ("GET", "/api/v1/keys/key_x", "DELETE"),
        ("POST", "/api/v1/me", "GET, HEAD"),
        ("GET", "/api/v1/session", "POST, DELETE"),
        ("POST", "/api/v1/tables", "GET, HEAD"),
        ("GET", "/api/v1/events/request", "POST"),
        ("PUT", "/api/v1/canvases/cv_x", "PATCH, DELETE"),
        (
            "DELETE",
            "/api/v1/canvases/cv_x/elements",
            "GET, HEAD, POST",
        ),
    ] {
        let r = fx.api.call(&fx.owner, method, path, None).await;
        r.expect(405, Some("method_not_allowed"), &format!("{method} {path}"));
        assert_eq!(r.headers["allow"], allow, "{method} {path}");
    }
    for path in [
        "/api/v1",
        "/api/v1/nothing",
        "/api/v1/keys/key_x/more",
        "/api/v1/members/",
    ] {
        for who in [&fx.owner, &Who::anonymous()] {
            let r = fx.api.get(who, path).await;
            r.expect(404, Some("not_found"), path);
        }
    }
}
