"""The operator console in a real browser (issue 29): Debian's headless Chromium driven by
Playwright for Python (``executable_path``, no browser download), against a real `pinlog serve`
subprocess on the test database whose model is the fake OpenAI-compatible server.

The overview's counts equal the database's; a new note appears without a reload; a failure
drills down to its context's timeline (no note text for the read-only role); an action is
refused to the read-only role and without the CSRF token; the pages work from the keyboard.
Screenshots of the pages go to ``tmp_path`` (``docs/console-*.png`` were taken this way).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg
import pytest

from pinlog.core.api.auth import issue_token
from tests.conftest import config_of, create_database, make_settings
from tests.helpers import free_port, run_pinlog
from tests.support.fake_openai import DIMENSION, FakeOpenAI
from tests.support.serve import Server, serve_env

pytestmark = pytest.mark.slow
playwright = pytest.importorskip("playwright.sync_api", reason="pip install -e '.[browser]'")

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync"]
ADMIN_TOKEN = "browser-admin-token-0123456789"
READ_TOKEN = "browser-read-token-0123456789"
NOTE = "창가 자리에서 비 구경하기 좋았던 찻집"
FAILING_NOTE = "이 메모의 벡터는 전부 0이라 실패한다"

if not shutil.which(CHROMIUM) and not Path(CHROMIUM).exists():
    pytest.skip(f"no Chromium at {CHROMIUM} (.ci/run installs Debian's chromium)",
                allow_module_level=True)


class Deployment:
    """A serve with the console on, its database, its fake model and an API client."""

    def __init__(self, tmp: Path, db_url: str) -> None:
        self.db_url = db_url
        self.fake = FakeOpenAI().start()
        self.fake.vectors[FAILING_NOTE] = [0.0] * DIMENSION  # degenerate: a permanent failure
        port = free_port()
        # the rescan runs (short expiries): a stage a slow machine timed out is re-sent
        env = serve_env(tmp, db_url, port, self.fake, PINLOG_EMBEDDING_TIMEOUT="1.2",
                        PINLOG_CONSOLE_ADMIN_TOKEN=ADMIN_TOKEN,
                        PINLOG_CONSOLE_READ_TOKEN=READ_TOKEN, PINLOG_CONSOLE_REFRESH="0.3")
        assert run_pinlog(["presets", "load"], env, timeout=120).returncode == 0
        self.server = Server(env, tmp, "serve")
        self.server.wait_ready()
        self.url = self.server.url
        self.settings = make_settings(tmp, db_url)
        self.sql = psycopg.connect(db_url, autocommit=True)
        member = self.sql.execute("INSERT INTO core.member (external_ref) VALUES ('browser') "
                                  "RETURNING id").fetchone()[0]
        self.auth = {"Authorization": "Bearer " + issue_token(config_of(self.settings).core.auth,
                                                               member)}
        self.places = 0

    def note(self, text: str) -> int:
        """A new record with ``text`` through the public API; its context id."""
        self.places += 1
        body = {"place": {"externalPlaceId": f"browser-{self.places}", "name": f"찻집 {self.places}",
                          "lat": 37.5, "lng": 127.0}, "text": text}
        answer = httpx.post(f"{self.url}/v1/records", json=body, headers=self.auth, timeout=10)
        assert answer.status_code == 201, answer.text
        return answer.json()["contextId"]

    def idle(self) -> bool:
        """No stage left to run (a keyword stage behind a FAILED embedding is the finalizer's)."""
        return self.sql.execute("SELECT count(*) FROM ai.context_ai_state WHERE embedding_status "
                                "IN ('PENDING','PROCESSING') OR (keyword_status IN "
                                "('PENDING','PROCESSING') AND embedding_status <> 'FAILED')"
                                ).fetchone()[0] == 0

    def counts(self) -> dict[str, int]:
        out = {}
        for stage in ("embedding", "keyword"):
            for status, n in self.sql.execute(
                    f"SELECT {stage}_status, count(*) FROM ai.context_ai_state GROUP BY 1"):
                out[f"{stage}.{status}"] = n
        return out

    def close(self) -> None:
        self.sql.close()
        self.server.stop()
        self.fake.stop()


@pytest.fixture(scope="module")
def deployment(pg_server_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    tmp = tmp_path_factory.mktemp("console-browser")
    from pinlog.db import migrate

    url = create_database(pg_server_url, "pinlog_browser")
    migrate.upgrade(url)
    deployment = Deployment(tmp, url)
    try:
        yield deployment
    finally:
        deployment.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with playwright.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        try:
            yield chromium
        finally:
            chromium.close()


def logged_in(browser: object, deployment: Deployment, token: str) -> object:
    page = browser.new_context().new_page()  # type: ignore[attr-defined]
    page.goto(f"{deployment.url}/console")
    assert page.url.endswith("/console/login")
    page.fill("#token", token)
    page.press("#token", "Enter")
    page.wait_for_url(f"{deployment.url}/console")
    return page


def wait_until(deployment: Deployment, what: str, done: object = None) -> None:
    """Poll the database a separate process writes (no event to wait on) until ``done()``
    (default: no unfinished stage) holds."""
    import time

    check = done or deployment.idle
    deadline = time.monotonic() + 60
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def test_overview_counts_equal_the_database_and_a_new_note_appears_live(
        deployment: Deployment, browser: object, tmp_path: Path) -> None:
    for i in range(3):
        deployment.note(f"{NOTE} {i}")
    wait_until(deployment, "the notes to finish")
    page = logged_in(browser, deployment, READ_TOKEN)
    shown = {cell.get_attribute("data-count"): int(cell.inner_text())
             for cell in page.query_selector_all("td[data-count]")}
    assert {k: n for k, n in shown.items() if n} == deployment.counts()
    assert page.inner_text("#role") == "read-only"
    page.evaluate("window.__noReload = 'still the same page'")
    context_id = deployment.note("새로 저장한 메모, 새로고침 없이 보여야 한다")
    page.wait_for_selector(f'#recent tr[data-context="{context_id}"]', timeout=30_000)
    assert page.evaluate("window.__noReload") == "still the same page"
    wait_until(deployment, "the new note to finish")
    expected = deployment.counts()
    page.wait_for_function(
        """expected => Object.entries(expected).every(([k, n]) => {
               const td = document.querySelector(`td[data-count="${k}"]`);
               return td && Number(td.textContent) === n; })""", arg=expected, timeout=30_000)
    page.screenshot(path=str(tmp_path / "console-overview.png"), full_page=True)


def test_a_failure_drills_down_to_its_timeline_without_note_text(
        deployment: Deployment, browser: object, tmp_path: Path) -> None:
    context_id = deployment.note(FAILING_NOTE)
    wait_until(deployment, "the failing note to end FAILED (the finalizer ends its keyword "
               "stage)", lambda: deployment.sql.execute(
                   "SELECT embedding_status || '/' || keyword_status FROM ai.context_ai_state "
                   "WHERE context_id = %s", (context_id,)).fetchone()[0] == "FAILED/FAILED")
    page = logged_in(browser, deployment, READ_TOKEN)
    page.click("nav >> text=Failures")
    page.click("#reasons a")  # the (only) reason
    page.click(f'#failed a[href="/console/contexts/{context_id}"]')
    page.wait_for_url(f"**/console/contexts/{context_id}")
    assert page.inner_text('[data-fact="embedding"]') == "FAILED"
    assert "embedding permanent" in page.inner_text('[data-fact="last_error"]')
    assert page.inner_text('[data-fact="member"]').isdigit()
    timeline = page.inner_text("#timeline")
    assert "PENDING → PROCESSING" in timeline and "PROCESSING → FAILED" in timeline
    assert FAILING_NOTE not in page.content() and "browser" not in page.inner_text("main")
    page.screenshot(path=str(tmp_path / "console-context.png"), full_page=True)


def test_actions_are_refused_to_read_only_and_without_csrf(
        deployment: Deployment, browser: object, tmp_path: Path) -> None:
    reader = logged_in(browser, deployment, READ_TOKEN)
    reader.goto(f"{deployment.url}/console/actions/rescan")
    assert "admin role" in reader.inner_text("#denied")
    status = reader.evaluate("""async () => (await fetch('/console/actions/rescan', {method: 'POST',
        headers: {'Content-Type': 'application/x-www-form-urlencoded'},
        body: 'confirm=yes&csrf=' + document.querySelector('input[name=csrf]').value})).status""")
    assert status == 403
    before = deployment.sql.execute("SELECT count(*) FROM core.console_action").fetchone()[0]
    admin = logged_in(browser, deployment, ADMIN_TOKEN)
    admin.goto(f"{deployment.url}/console/actions/rescan")
    admin.evaluate("document.querySelector('#confirm-form input[name=csrf]').value = 'forged'")
    admin.click("#confirm")
    assert "CSRF" in admin.inner_text("#denied")
    assert deployment.sql.execute("SELECT count(*) FROM core.console_action").fetchone()[0] == before
    admin.goto(f"{deployment.url}/console/actions/rescan")
    admin.click("#confirm")
    admin.wait_for_url("**/console/actions?done=*")
    assert "rescan_round" in admin.inner_text("#log")
    assert deployment.sql.execute("SELECT count(*) FROM core.console_action "
                                  "WHERE action = 'rescan_round'").fetchone()[0] == 1
    admin.goto(f"{deployment.url}/console/search")
    admin.fill("#member", "browser")
    admin.fill("#query", "비 구경")
    admin.click("text=Explain")
    admin.wait_for_selector("#explain")
    admin.screenshot(path=str(tmp_path / "console-search.png"), full_page=True)


def test_keyboard_navigation(deployment: Deployment, browser: object) -> None:
    page = logged_in(browser, deployment, READ_TOKEN)
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Skip to content"
    page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement.id") == "main"
    page.goto(f"{deployment.url}/console")
    page.keyboard.press("Tab")  # the skip link
    order = []
    for _ in range(6):
        page.keyboard.press("Tab")
        order.append(page.evaluate("document.activeElement.textContent.trim()"))
    assert order[:5] == ["Overview", "Failures", "Replicas", "Profiles & presets", "Actions"]
    while page.evaluate("document.activeElement.textContent.trim()") != "Replicas":
        page.keyboard.press("Shift+Tab")
    page.keyboard.press("Enter")
    page.wait_for_url("**/console/replicas")
    assert page.evaluate("document.querySelector('[aria-current=page]').textContent") == "Replicas"
