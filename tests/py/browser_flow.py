"""The settings page in a real browser, driven by tests/browser.rs against the real binary.

Environment (set by the Rust test): STOWAGE_URL (the server), STOWAGE_BIN and STOWAGE_DATA_DIR
(for the operator's CLI), STOWAGE_TEAM, STOWAGE_OWNER_EMAIL, STOWAGE_OWNER_LINK (the path of
the owner's set-password link), STOWAGE_SCREENSHOTS (a directory), STOWAGE_SECRETS_OUT (where
to list the secrets the page showed, for the Rust side to look for in logs and files).

Every wait is for a condition (page text, a new page), never a fixed sleep. Exits non-zero
with the failed step on the first thing that is not as expected.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from browser import start_browser  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402

BASE = os.environ["STOWAGE_URL"].rstrip("/")
TEAM = os.environ["STOWAGE_TEAM"]
OWNER_EMAIL = os.environ["STOWAGE_OWNER_EMAIL"]
OWNER_PASSWORD = "correct horse battery staple"
MEMBER_EMAIL = "max@acme.example"
MEMBER_PASSWORD = "member password 123"
SHOTS = Path(os.environ["STOWAGE_SCREENSHOTS"])
STARTED = time.monotonic()
SECRETS: list[str] = []


def step(text: str) -> None:
    print(f"[{time.monotonic() - STARTED:5.1f}s] {text}", flush=True)


def admin(*args: str) -> dict:
    """The operator: `stowage admin --json …` on the server's data directory."""
    out = subprocess.run(
        [os.environ["STOWAGE_BIN"], "admin", "--json", *args,
         "--data-dir", os.environ["STOWAGE_DATA_DIR"]],
        capture_output=True, text=True, check=False,
    )
    assert out.returncode == 0, f"stowage admin {' '.join(args)}: {out.stderr}"
    return json.loads(out.stdout) if out.stdout.strip() else {}


def http(method: str, path: str, body: bytes | None = None, headers: dict | None = None):
    """(status, headers, body text) without following redirects."""

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *a, **k):
            return None

    req = urllib.request.Request(BASE + path, data=body, method=method, headers=headers or {})
    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(req, timeout=30) as r:
            return r.status, r.headers, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read().decode()


def download(key: str, canvas: str, element: str):
    body = json.dumps({"canvasId": canvas, "elementId": element}).encode()
    status, _, text = http("POST", "/api/data/table", body,
                           {"x-api-key": key, "Content-Type": "application/json"})
    return status, text


def shown_secret(b, label: str) -> str:
    """The secret in the shown-once box, by its field's label; noted for the leak check."""
    value = b.field(label).get_attribute("value")
    assert value, f"no value in the {label!r} field"
    SECRETS.append(value.rsplit("/invite/", 1)[-1])
    return value


def buttons(b) -> list[str]:
    """The visible buttons' names (what a screen reader announces)."""
    return b.driver.execute_script(
        """
        return Array.from(document.querySelectorAll('button'))
          .filter(e => e.offsetWidth || e.offsetHeight || e.getClientRects().length)
          .map(e => (e.innerText || e.textContent).replace(/\\s+/g, ' ').trim());
        """
    )


def curl_of(b, element: str) -> str:
    """The download command the canvas list shows for the element named `element`."""
    return b.driver.find_element(
        By.CSS_SELECTOR, f'pre[aria-label="Download command for {element}"]'
    ).text


def ids_of(curl: str) -> dict:
    """The canvas and element ids in a download command's body."""
    return json.loads(re.search(r"-d '(\{.*\})'", curl).group(1))


def download_as_shown(b, key: str, element: str) -> dict:
    """Downloads `element` as its command on the page says, which must already carry `key`."""
    curl = curl_of(b, element)
    assert f"x-api-key: {key}" in curl, curl
    ids = ids_of(curl)
    status, body = download(key, ids["canvasId"], ids["elementId"])
    assert status == 200, (element, status, body)
    return json.loads(body)


def elements_listed(b) -> int:
    return len(b.driver.find_elements(By.CSS_SELECTOR, "#canvases .element"))


def sql_error(b) -> str:
    """The refusal shown beside the "New SQL table" form."""
    return b.driver.find_element(By.ID, "sql-error").text


def preview_rows(b) -> list[list[str]]:
    return [
        [td.text for td in tr.find_elements(By.TAG_NAME, "td")]
        for tr in b.driver.find_elements(By.CSS_SELECTOR, "#sql-preview tbody tr")
    ]


def reload(b) -> None:
    old = b.driver.find_element(By.TAG_NAME, "html")
    b.driver.refresh()
    b._wait_for_new_page(old, 10, "after a reload")


def main() -> None:
    b = start_browser(SHOTS)
    step(f"Chromium up in {b.startup_seconds:.1f}s")
    try:
        flow(b)
    finally:
        Path(os.environ["STOWAGE_SECRETS_OUT"]).write_text(json.dumps(SECRETS))
        b.quit()


def flow(b) -> None:
    # -- The owner sets a password through the operator's link and lands on the settings.
    SECRETS.append(os.environ["STOWAGE_OWNER_LINK"].rsplit("/", 1)[1])
    b.get(BASE + os.environ["STOWAGE_OWNER_LINK"])
    b.wait_for_text("Choose your password")
    b.wait_for_text(OWNER_EMAIL)
    b.fill("Password", OWNER_PASSWORD)
    b.fill("Confirm password", OWNER_PASSWORD)
    b.shot("set-password")
    b.click_button("Set password")
    assert b.url.startswith(BASE + "/settings"), b.url
    text = b.wait_for_text("Team settings")
    for section in ("Members", "Data API keys", "Events", "Canvases and table elements",
                    "Warehouse tables", "Personal access tokens", "Audit log"):
        assert section in text, f"no {section} section"
    assert "Olivia Owner" in text and "orders" in text, text
    b.shot("settings-signed-in")
    step("owner set a password and is signed in")

    # A used link is gone.
    b.get(BASE + os.environ["STOWAGE_OWNER_LINK"])
    b.wait_for_text("This link can no longer be used")
    status, _, _ = http("GET", os.environ["STOWAGE_OWNER_LINK"])
    assert status == 410, status
    b.get(BASE + "/settings")

    # -- A canvas and a table element on the imported table.
    b.fill("Canvas name", "Sales")
    b.click_button("Create canvas")
    b.wait_for_text("Canvas “Sales” created.")
    b.fill("Canvas", "Sales")
    b.fill("Source table", "orders")
    b.fill("Element name (optional)", "All orders")
    b.click_button("Add table element")
    text = b.wait_for_text("Table element on orders created.")
    assert "<your data key>" in text, "the download command has a placeholder until a key exists"
    b.shot("table-element")
    step("canvas and table element created")

    # -- A "New SQL table": a preview of its first rows, refusals beside the form, then saved.
    grouped = (
        "WITH sized AS (SELECT CASE WHEN amount < 10 THEN 'small' ELSE 'large' END AS size,\n"
        "                      amount FROM orders)\n"
        "SELECT size, COUNT(*) AS orders, SUM(amount) AS revenue\n"
        "FROM sized GROUP BY size ORDER BY size"
    )
    b.fill("SQL table canvas", "Sales")
    b.fill("SQL table name (optional)", "Orders by size")
    b.fill("SQL query", grouped)
    b.click_button("Preview")
    b.wait_for_text("All 2 rows of the query")
    assert b.url.endswith("/settings/sql-elements/preview#new-sql"), b.url
    headers = [
        th.get_attribute("textContent")
        for th in b.driver.find_elements(By.CSS_SELECTOR, "#sql-preview th")
    ]
    assert headers == ["size string", "orders int64", "revenue float64"], headers
    rows = preview_rows(b)
    assert rows == [["large", "2", "52.45"], ["small", "1", "7.0"]], rows
    assert b.field("SQL query").get_attribute("value") == grouped, "the query stays in the form"
    assert b.field("SQL table name (optional)").get_attribute("value") == "Orders by size"
    assert elements_listed(b) == 1, "a preview saves nothing"
    b.shot("sql-preview")
    step("SQL preview: the GROUP BY's 2 rows under the form, nothing saved")

    b.fill("SQL query", "SELECT customer, nope FROM orders")
    b.click_button("Save SQL table")
    b.wait_for_text("The query was not accepted.")
    error = sql_error(b)
    assert "nope" in error, error
    assert b.field("SQL query").get_attribute("value") == "SELECT customer, nope FROM orders"
    assert elements_listed(b) == 1, "an invalid query is not saved"
    b.shot("sql-invalid")
    step(f"an invalid query is refused beside the form, nothing saved: {error!r}")

    b.fill("SQL query", "DROP TABLE orders")
    b.click_button("Save SQL table")
    b.wait_for_text("The query was not accepted.")
    error = sql_error(b)
    assert "Only a SELECT query is allowed" in error, error
    assert elements_listed(b) == 1, "a refused statement is not saved"
    b.shot("sql-refused-drop")
    b.fill("SQL query", "SELECT * FROM '/etc/passwd'")
    b.click_button("Preview")
    b.wait_for_text("The query was not accepted.")
    error = sql_error(b)
    assert "/etc/passwd" in error, error
    assert "root:" not in b.text(), "a file was read"
    assert not b.driver.find_elements(By.ID, "sql-preview"), "no rows for a refused query"
    b.shot("sql-refused-file")
    step("DROP TABLE and a file path are refused beside the form")

    b.fill("SQL query", grouped)
    b.click_button("Save SQL table")
    text = b.wait_for_text("SQL table “Orders by size” created.")
    assert b.url.endswith("/settings#canvases"), b.url
    assert elements_listed(b) == 2
    query = b.driver.find_element(By.CSS_SELECTOR, 'pre[aria-label="Query of Orders by size"]')
    assert query.text == grouped, query.text
    assert "columns size, orders, revenue" in text, text
    share = ids_of(curl_of(b, "Orders by size"))
    assert f"/canvas/{share['canvasId']}/element/{share['elementId']}/new-canvas" in text, text
    # The orders table is still there, with its 3 rows.
    assert "orders" in text and "DROP" not in text
    b.shot("sql-table-saved")
    step("SQL table saved; listed as SQL with its query and share URL")

    # -- A data key, shown once; the page's download command works with it.
    b.fill("Key name (optional)", "ci-download")
    b.click_button("Create key")
    text = b.wait_for_text("Copy it now, it will not be shown again")
    assert b.url.endswith("/settings#keys"), b.url
    key = shown_secret(b, "New data key")
    assert key.startswith("stw_data_"), key
    b.shot("data-key-shown")
    ids = ids_of(curl_of(b, "All orders"))
    doc = download_as_shown(b, key, "All orders")
    assert doc["rows"] == 3, doc
    assert [r["customer"] for r in doc["data"]] == ["Ada", "Grace", "Linus"], doc
    doc = download_as_shown(b, key, "Orders by size")
    got = [(r["size"], int(r["orders"]), r["revenue"]) for r in doc["data"]]
    assert got == [("large", 2, 52.45), ("small", 1, 7.0)], doc
    step("data key shown once; downloads 200: the table's 3 rows, the SQL table's 2")

    reload(b)
    text = b.wait_for_text("Data API keys")
    assert "Copy it now" not in text and key not in b.driver.page_source, "key shown twice"
    assert "ci-download" in text and key[:12] in text, "the key is listed by its prefix"
    b.shot("data-key-gone-after-reload")
    step("after a reload the key is no longer shown")

    b.click_button("Revoke key ci-download")
    text = b.wait_for_text("Key revoked")
    assert "ci-download" not in text, "a revoked key is not listed"
    b.shot("data-key-revoked")
    status, body = download(key, ids["canvasId"], ids["elementId"])
    assert status == 401, (status, body)
    step("revoked: the download gets 401")

    # -- Events: no token while disabled; request access; the operator enables; a token.
    text = b.text()
    assert "Not enabled" in text and "Create events token" not in buttons(b), "no token offer"
    b.click_button("Request access")
    text = b.wait_for_text("Access requested")
    assert "Create events token" not in buttons(b)
    b.shot("events-requested")
    requests = admin("events", "requests")
    assert TEAM in json.dumps(requests), requests
    admin("events", "enable", "--team", TEAM)
    reload(b)
    b.wait_for_text("Enabled")
    b.fill("Events token name (optional)", "website")
    b.click_button("Create events token")
    b.wait_for_text("Copy it now, it will not be shown again")
    token = shown_secret(b, "New events token")
    sample = b.driver.find_element(By.ID, "events-curl").text
    assert f"X-Auth-Token: {token}" in sample and "Purchased an Item" in sample, sample
    b.shot("events-token-shown")
    sample_body = re.search(r"-d '(\{.*\})'", sample).group(1).encode()
    status, _, body = http("POST", "/v1/event", sample_body,
                           {"X-Auth-Token": token, "Content-Type": "application/json"})
    assert status == 200 and '"success":true' in body, (status, body)
    step("events: requested, enabled by the operator, token created; sample event accepted")

    # -- A forged form (no CSRF token) is refused, and nothing is created.
    text = b.post_form_without_csrf(BASE + "/settings/keys", {"name": "forged"})
    assert "This form has expired" in text, text
    b.shot("forged-post-refused")
    cookie = next(c["value"] for c in b.driver.get_cookies() if c["name"] == "stowage_session")
    status, _, body = http("POST", "/settings/keys", b"name=forged", {
        "Cookie": f"stowage_session={cookie}", "Origin": BASE,
        "Content-Type": "application/x-www-form-urlencoded"})
    assert status == 403 and "<html" in body, (status, body[:200])
    b.get(BASE + "/settings")
    assert "forged" not in b.wait_for_text("Data API keys"), "a forged key was created"
    step("a form POST without the CSRF token: 403, nothing created")

    # -- The owner invites a member and signs out.
    b.fill("Email", MEMBER_EMAIL)
    b.fill("Role", "Member")
    b.click_button("Create invite link")
    b.wait_for_text(f"Invite link for {MEMBER_EMAIL}")
    invite = shown_secret(b, "Invite link")
    assert invite.startswith(BASE + "/invite/"), invite
    b.shot("invite-link")
    b.click_button("Sign out")
    b.wait_for_text("Sign in")
    assert b.url == BASE + "/login", b.url
    step("invite link shown; owner signed out")

    # -- The member accepts and sees only what a member may use.
    b.get(invite)
    b.wait_for_text(f"You were invited to {TEAM}")
    b.fill("Your name", "Max Member")
    b.fill("Password", MEMBER_PASSWORD)
    b.fill("Confirm password", "not the same password")
    b.click_button(f"Join {TEAM}")
    b.wait_for_text("The two passwords differ")
    b.fill("Password", MEMBER_PASSWORD)
    b.fill("Confirm password", MEMBER_PASSWORD)
    b.shot("member-joins")
    b.click_button(f"Join {TEAM}")
    text = b.wait_for_text("Team settings")
    names = buttons(b)
    for owner_only in ("Create key", "Create events token", "Create invite link"):
        assert owner_only not in names, f"a member sees {owner_only!r}: {names}"
    assert not any(n.startswith(("Revoke key", "Remove", "Change")) for n in names), names
    assert "Audit log" not in text and "Ask one for a key" in text, text
    assert "Create canvas" in names and "Create personal token" in names, names
    b.shot("member-settings")
    text = b.post_form_without_csrf(BASE + "/settings/canvases", {"name": "forged"})
    assert "This form has expired" in text, text
    step("member joined: no owner actions; a forged form refused")

    # -- Signing in at /login: a wrong password is refused alike, the right one lands on settings.
    b.get(BASE + "/settings")
    b.click_button("Sign out")
    b.fill("Email", OWNER_EMAIL)
    b.fill("Password", "wrong password!")
    b.click_button("Sign in")
    b.wait_for_text("Wrong email or password.")
    b.shot("login-wrong-password")
    b.fill("Password", OWNER_PASSWORD)
    b.click_button("Sign in")
    text = b.wait_for_text("Team settings")
    assert "Max Member" in text and "member.join" in text, "the member and the audit entry"
    b.shot("owner-back")
    step("owner signed in again at /login; sees the member and the audit log")


if __name__ == "__main__":
    main()
