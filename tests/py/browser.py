"""Real-browser helpers for end-to-end tests: headless Chromium driven over WebDriver (selenium).

Not a test itself: a test script does

    import sys; sys.path.insert(0, os.path.dirname(__file__))   # tests/py
    from browser import start_browser

    b = start_browser(screenshot_dir)
    try:
        b.get(url)
        b.fill("Email", "ada@example.com")       # finds the input by its <label> text
        b.click_button("Sign in")                # waits for the form's navigation
        b.wait_for_text("Welcome")
        b.shot("signed-in")                      # screenshot_dir/01-signed-in.png
    finally:
        b.quit()

Nothing is downloaded: the system chromedriver and Chromium are passed explicitly
(`Service(executable_path=...)`, `options.binary_location`), so Selenium Manager is never run,
and SE_OFFLINE is set in case it ever is. Paths come from $STOWAGE_CHROMEDRIVER /
$STOWAGE_CHROMIUM, else `chromedriver` / `chromium` on PATH (Debian packages `chromium-driver`
and `chromium`, which .ci/run installs).
"""

from __future__ import annotations

import base64
import os
import re
import shutil
import tempfile
import time
from pathlib import Path

# Selenium Manager (only run when no driver path is given, which never happens here) must not
# download anything or send usage statistics.
os.environ.setdefault("SE_OFFLINE", "true")
os.environ.setdefault("SE_AVOID_STATS", "true")

from selenium import webdriver  # noqa: E402
from selenium.common.exceptions import (  # noqa: E402
    StaleElementReferenceException,
    TimeoutException,
    WebDriverException,
)
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support import expected_conditions as EC  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402

WINDOW = (1280, 900)
# Longest full-page screenshot, in CSS pixels (a runaway page must not make a huge PNG).
MAX_SHOT_HEIGHT = 8000


def _find(env: str, names: list[str]) -> str:
    path = os.environ.get(env)
    if path:
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            raise RuntimeError(f"${env}={path} is not an executable file")
        return path
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    raise RuntimeError(
        f"none of {names} on PATH and ${env} not set "
        "(Debian: apt-get install chromium chromium-driver; .ci/run does)"
    )


def chromium_path() -> str:
    return _find("STOWAGE_CHROMIUM", ["chromium", "chromium-browser"])


def chromedriver_path() -> str:
    return _find("STOWAGE_CHROMEDRIVER", ["chromedriver"])


def _norm(s: str) -> str:
    return re.sub(r"\s+", " ", s or "").strip()


class Browser:
    """One headless Chromium session. `driver` is the selenium WebDriver for anything not
    wrapped here."""

    def __init__(self, driver, screenshot_dir: Path, tmp_dir: str, startup_seconds: float):
        self.driver = driver
        self.screenshot_dir = screenshot_dir
        self.tmp_dir = tmp_dir  # the profile and chromedriver.log
        self.startup_seconds = startup_seconds
        self._shots = 0

    # -- navigation and reading --------------------------------------------------------------

    def get(self, url: str) -> None:
        """Opens `url` and waits for the page to load."""
        self.driver.get(url)

    @property
    def url(self) -> str:
        return self.driver.current_url

    def text(self) -> str:
        """The page's visible text (what a user sees: hidden elements are left out)."""
        return self.driver.find_element(By.TAG_NAME, "body").text

    def wait_for_text(self, text: str, timeout: float = 10) -> str:
        """Waits until `text` is part of the page's visible text; returns the page text.
        On timeout, saves a screenshot and fails with the text the page had."""
        try:
            WebDriverWait(self.driver, timeout).until(
                EC.text_to_be_present_in_element((By.TAG_NAME, "body"), text)
            )
        except TimeoutException:
            shot = self.shot("timeout")
            raise AssertionError(
                f"{text!r} not on {self.url} after {timeout}s (screenshot {shot}); page text:\n"
                + self._safe_text()
            ) from None
        return self.text()

    def _safe_text(self) -> str:
        try:
            return self.text()
        except Exception as e:  # noqa: BLE001 — only for an error message
            return f"<no text: {e}>"

    # -- forms ----------------------------------------------------------------------------------

    def field(self, label_text: str):
        """The form control labelled `label_text`: a <label> whose own text (whitespace
        collapsed, nested controls left out) is exactly that, associated by `for=` or by nesting (HTMLLabelElement.control). Fails if
        no such label, or it labels nothing, or two labels match — so a test also checks that the
        page's fields are labelled accessibly."""
        want = _norm(label_text)
        found = self.driver.execute_script(
            """
            const want = arguments[0];
            const norm = s => (s || '').replace(/\\s+/g, ' ').trim();
            // A label's own text: without the controls nested in it (a <select>'s options).
            const name = l => {
                const c = l.cloneNode(true);
                c.querySelectorAll('input, select, textarea, button').forEach(e => e.remove());
                return norm(c.textContent);
            };
            const labels = Array.from(document.querySelectorAll('label'));
            const hits = labels.filter(l => name(l) === want);
            return {hits: hits.map(l => l.control), all: labels.map(name)};
            """,
            want,
        )
        hits = found["hits"]
        if len(hits) != 1:
            raise AssertionError(
                f"{len(hits)} <label>s read {want!r} on {self.url}; labels there: {found['all']}"
            )
        if hits[0] is None:
            raise AssertionError(f"the <label> {want!r} is not associated with any control")
        return hits[0]

    def fill(self, label_text: str, value) -> None:
        """Types `value` into the control labelled `label_text` (replacing what was there); for a
        <select>, picks the option with that visible text; for a checkbox, `value` is a bool."""
        el = self.field(label_text)
        tag = el.tag_name.lower()
        kind = (el.get_attribute("type") or "").lower()
        if tag == "select":
            Select(el).select_by_visible_text(str(value))
        elif kind in ("checkbox", "radio"):
            if bool(value) != el.is_selected():
                el.click()
        else:
            el.clear()
            el.send_keys(str(value))

    def click_button(self, text: str, timeout: float = 10) -> None:
        """Clicks the one visible <button> (or input type=submit/button) whose text is `text`.
        If it submits a form, waits until the next page has replaced this one."""
        want = _norm(text)
        buttons = self.driver.execute_script(
            """
            const want = arguments[0];
            const norm = s => (s || '').replace(/\\s+/g, ' ').trim();
            const all = Array.from(document.querySelectorAll(
                'button, input[type=submit], input[type=button]'));
            const visible = b => !!(b.offsetWidth || b.offsetHeight || b.getClientRects().length);
            const name = b => b.tagName === 'INPUT' ? norm(b.value) : norm(b.innerText || b.textContent);
            return {hits: all.filter(b => visible(b) && name(b) === want),
                    all: all.filter(visible).map(name)};
            """,
            want,
        )
        hits = buttons["hits"]
        if len(hits) != 1:
            raise AssertionError(
                f"{len(hits)} visible buttons read {want!r} on {self.url}; buttons there: {buttons['all']}"
            )
        el = hits[0]
        submits = self.driver.execute_script(
            "const b = arguments[0]; return !!b.form && b.type === 'submit';", el
        )
        old = self.driver.find_element(By.TAG_NAME, "html")
        el.click()
        if submits:
            self._wait_for_new_page(old, timeout, f"after clicking {want!r}")

    def post_form_without_csrf(self, url: str, fields, timeout: float = 10) -> str:
        """Forges a POST: builds a <form method=post action=url> with hidden inputs from `fields`
        (a dict, or (name, value) pairs for repeated names) on the *current* page with
        document.createElement('form'), submits it, and returns the resulting page's text.

        It adds nothing — in particular no csrf field (a field whose name contains "csrf" is
        refused). The browser sends the session's cookies and this page's Origin/Referer, so it
        checks that the server wants the form's token, not only a same-origin request."""
        pairs = list(fields.items()) if isinstance(fields, dict) else list(fields)
        for name, _ in pairs:
            if "csrf" in name.lower():
                raise ValueError(f"post_form_without_csrf got a csrf field {name!r}")
        old = self.driver.find_element(By.TAG_NAME, "html")
        self.driver.execute_script(
            """
            const [url, pairs] = arguments;
            const form = document.createElement('form');
            form.method = 'POST';
            form.action = url;
            for (const [name, value] of pairs) {
                const input = document.createElement('input');
                input.type = 'hidden';
                input.name = name;
                input.value = value;
                form.appendChild(input);
            }
            document.body.appendChild(form);
            // The prototype's submit: a field named "submit" would shadow form.submit.
            HTMLFormElement.prototype.submit.call(form);
            """,
            url,
            [[str(k), str(v)] for k, v in pairs],
        )
        self._wait_for_new_page(old, timeout, f"after the forged POST to {url}")
        return self.text()

    def _wait_for_new_page(self, old, timeout: float, what: str) -> None:
        """Waits until `old` (an element of the page before) is gone and the new page loaded."""
        try:
            WebDriverWait(self.driver, timeout).until(lambda _: _gone(old))
            WebDriverWait(self.driver, timeout).until(
                lambda d: d.execute_script("return document.readyState") == "complete"
            )
        except TimeoutException:
            shot = self.shot("no-navigation")
            raise AssertionError(
                f"no new page {what} within {timeout}s (still {self.url}, screenshot {shot})"
            ) from None

    # -- screenshots and teardown -------------------------------------------------------------

    def shot(self, name: str) -> Path:
        """Saves the whole page (up to MAX_SHOT_HEIGHT CSS px tall, at least the window) as
        screenshot_dir/NN-name.png, NN counting up from 01 per browser; returns the path."""
        self._shots += 1
        safe = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-") or "shot"
        path = self.screenshot_dir / f"{self._shots:02d}-{safe}.png"
        try:
            # Chromium only: capture beyond the viewport, clipped to the content's size.
            size = self.driver.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]
            width = max(1, int(size["width"]))
            height = max(1, min(int(size["height"]), MAX_SHOT_HEIGHT))
            data = self.driver.execute_cdp_cmd(
                "Page.captureScreenshot",
                {
                    "format": "png",
                    "captureBeyondViewport": True,
                    "clip": {"x": 0, "y": 0, "width": width, "height": height, "scale": 1},
                },
            )["data"]
            path.write_bytes(base64.b64decode(data))
        except Exception:  # noqa: BLE001 — fall back to the plain viewport screenshot
            self.driver.save_screenshot(str(path))
        return path

    def quit(self) -> None:
        """Ends the browser and chromedriver and removes the temporary profile."""
        try:
            self.driver.quit()
        finally:
            shutil.rmtree(self.tmp_dir, ignore_errors=True)

    def __enter__(self) -> "Browser":
        return self

    def __exit__(self, *exc) -> None:
        self.quit()


def start_browser(screenshot_dir) -> Browser:
    """Starts headless Chromium (window 1280x900 — the page's viewport is 1280x757 of that — a
    fresh temporary profile, no sandbox, as CI runs as root in a container, and no /dev/shm,
    which is small in containers) under the system chromedriver. `startup_seconds` on the
    result is how long that took (about 0.4-1 s on a warm 2-core machine)."""
    chromium, chromedriver = chromium_path(), chromedriver_path()
    shots = Path(screenshot_dir)
    shots.mkdir(parents=True, exist_ok=True)
    # The profile and chromedriver's log, removed by quit().
    tmp = tempfile.mkdtemp(prefix="stowage-chromium-")
    profile = os.path.join(tmp, "profile")

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        f"--window-size={WINDOW[0]},{WINDOW[1]}",
        f"--user-data-dir={profile}",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--lang=en-US",
    ):
        options.add_argument(arg)
    log = os.path.join(tmp, "chromedriver.log")
    service = Service(executable_path=chromedriver, log_output=log)

    started = time.monotonic()
    try:
        driver = webdriver.Chrome(service=service, options=options)
    except Exception as e:
        try:
            tail = Path(log).read_text(errors="replace")[-4000:]
        except OSError:
            tail = ""
        shutil.rmtree(tmp, ignore_errors=True)
        raise RuntimeError(
            f"Chromium did not start ({options.binary_location}, {service.path}): {e}\n"
            f"chromedriver log:\n{tail}"
        ) from e
    startup = time.monotonic() - started
    driver.set_page_load_timeout(30)
    driver.set_script_timeout(30)
    return Browser(driver, shots, tmp, startup)


def _gone(old) -> bool:
    """Whether the element `old` has left the document (its page was replaced). Selenium's
    `staleness_of` knows only StaleElementReferenceException; Chromium answers a node caught
    mid-navigation with "Node with given id does not belong to the document" (or "No node with
    given id found") instead, which means the same."""
    try:
        old.is_enabled()
        return False
    except StaleElementReferenceException:
        return True
    except WebDriverException as e:
        if "does not belong to the document" in str(e) or "No node with given id" in str(e):
            return True
        raise
