"""The operator console through HTTP (issue 29): off unless configured, login and session,
roles, CSRF on every action, no note text for the read-only role, counts equal to the
database's, actions recorded, every request logged without text."""

from __future__ import annotations

import logging
import re

import pytest

from pinlog.console.access import SESSION_COOKIE
from tests.integration.ai.support import ai_settings_for
from tests.integration.core.support import full_count
from tests.integration.console.conftest import (
    ADMIN_TOKEN,
    OTHER_NOTE,
    READ_TOKEN,
    SECRET_NOTE,
    console_app,
    console_settings,
    create_notes,
    csrf_of,
    login,
)

READ_PAGES = ("/console", "/console/api/overview", "/console/failures", "/console/replicas",
              "/console/profiles", "/console/actions")


def raise_rollback(tx) -> None:
    import psycopg

    raise psycopg.Rollback(tx)


def nonzero(rows: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    return {stage: {s: n for s, n in counts.items() if n} for stage, counts in rows.items()}


async def test_console_is_off_without_a_token(tmp_path, db_url, provider, judge, presets):
    async with console_app(ai_settings_for(tmp_path, db_url), db_url, provider, judge) as app:
        for path in ("/console", "/console/login", "/console/api/overview",
                     "/console/static/console.js"):
            assert (await app.http.get(path)).status_code == 404, path


async def test_login_sets_a_strict_httponly_session_and_refuses_wrong_tokens(
        settings, db_url, provider, judge, presets):
    async with console_app(settings, db_url, provider, judge) as app:
        assert (await app.http.get("/console")).status_code == 303  # → login
        assert (await app.http.get("/console/api/overview")).status_code == 401
        wrong = await login(app.http, "not-the-token-0123456789")
        assert wrong.status_code == 401 and SESSION_COOKIE not in app.http.cookies
        # no nonce (a forged cross-site login form) → refused
        forged = await app.http.post("/console/login", data={"token": ADMIN_TOKEN})
        assert forged.status_code == 403 and SESSION_COOKIE not in app.http.cookies
        ok = await login(app.http, ADMIN_TOKEN)
        assert ok.status_code == 303
        cookie = next(v for k, v in ok.headers.multi_items()
                      if k == "set-cookie" and v.startswith(SESSION_COOKIE + "="))
        flags = {part.strip().lower() for part in cookie.split(";")[1:]}
        assert {"httponly", "samesite=strict", "path=/console"} <= flags
        assert ADMIN_TOKEN not in cookie
        page = await app.http.get("/console")
        assert page.status_code == 200 and "admin" in page.text
        assert page.headers["content-security-policy"].startswith("default-src 'none'")
        # a tampered cookie is no session
        app.http.cookies.set(SESSION_COOKIE, cookie.split(";")[0].split("=", 1)[1][:-2] + "xx",
                             path="/console")
        assert (await app.http.get("/console")).status_code == 303


async def test_changing_a_token_ends_its_sessions(tmp_path, db_url, provider, judge, presets):
    async with console_app(console_settings(tmp_path, db_url), db_url, provider, judge) as app:
        await login(app.http, READ_TOKEN)
        session = app.http.cookies[SESSION_COOKIE]
    rotated = console_settings(tmp_path, db_url, console_read_token="another-read-token-987654")
    async with console_app(rotated, db_url, provider, judge) as app:
        app.http.cookies.set(SESSION_COOKIE, session, path="/console")
        assert (await app.http.get("/console")).status_code == 303


async def test_overview_counts_equal_the_database_after_every_kind_of_write(
        settings, db_url, provider, judge, presets, sync_conn):
    async with console_app(settings, db_url, provider, judge) as app:
        await create_notes(app, [SECRET_NOTE, OTHER_NOTE, "세 번째 메모"])
        await login(app.http, READ_TOKEN)
        # writes by anyone (a manual fix, a bulk update, a delete) are counted too
        sync_conn.execute("UPDATE ai.context_ai_state SET keyword_status = 'FAILED', "
                          "last_error = 'keyword permanent: judge said 400' WHERE context_id = 1")
        sync_conn.execute("INSERT INTO ai.context_ai_state (context_id) "
                          "SELECT g FROM generate_series(100, 104) g")
        sync_conn.execute("DELETE FROM ai.context_ai_state WHERE context_id = 104")
        with sync_conn.transaction() as tx:  # rolled back: no trace in the counts
            sync_conn.execute("UPDATE ai.context_ai_state SET embedding_status = 'CANCELLED'")
            raise_rollback(tx)
        body = (await app.http.get("/console/api/overview")).json()
        assert nonzero(body["rows"]) == full_count(sync_conn)
        assert body["total"] == sync_conn.execute("SELECT count(*) FROM ai.context_ai_state").fetchone()[0]
        assert body["unfinished"] == 4
        assert body["reasons"] == [{"reason": "keyword permanent: judge said N", "n": 1,
                                    "last_at": body["reasons"][0]["last_at"]}]
        assert [c["context_id"] for c in body["recent"]][:2] == [103, 102]
        assert sum(m["completed"] for m in body["per_minute"]) == 3  # three keyword stages completed
        html = (await app.http.get("/console")).text
        for stage, counts in full_count(sync_conn).items():
            for status, n in counts.items():
                assert f'data-count="{stage}.{status}">{n}<' in html


async def test_the_read_only_role_never_sees_note_text_nor_secrets(
        settings, db_url, provider, judge, presets, sync_conn):
    async with console_app(settings, db_url, provider, judge) as app:
        _, contexts = await create_notes(app, [SECRET_NOTE, OTHER_NOTE])
        sync_conn.execute("UPDATE ai.context_ai_state SET keyword_status = 'FAILED', "
                          "last_error = 'keyword permanent: judge said 400' WHERE context_id = %s",
                          (contexts[0],))
        await login(app.http, READ_TOKEN)
        reason = "keyword permanent: judge said N"
        pages = [*READ_PAGES, f"/console/contexts/{contexts[0]}",
                 f"/console/failures?reason={reason}"]
        secrets = [ADMIN_TOKEN, READ_TOKEN, *settings.secret_values(),
                   settings.jwt_secret.get_secret_value(), "console-member"]
        for path in pages:
            answer = await app.http.get(path)
            assert answer.status_code == 200, path
            for text in (SECRET_NOTE, OTHER_NOTE, "비밀메모", "privatenote", *secrets):
                assert text not in answer.text, (path, text)
        drill = (await app.http.get(f"/console/contexts/{contexts[0]}")).text
        assert "judge said 400" in drill and "FAILED" in drill
        # admin-only pages and actions answer 403 to the read-only role
        csrf = csrf_of((await app.http.get("/console/actions")).text)
        for path in ("/console/search", "/console/actions/rescan",
                     "/console/actions/reprocess?mode=presets"):
            assert (await app.http.get(path)).status_code == 403, path
        refused = await app.http.post("/console/actions/rescan", data={"csrf": csrf, "confirm": "yes"})
        assert refused.status_code == 403
        searched = await app.http.post("/console/search", data={"csrf": csrf, "member": "1",
                                                                 "query": "조용한"})
        assert searched.status_code == 403 and SECRET_NOTE not in searched.text
        assert sync_conn.execute("SELECT count(*) FROM core.console_action").fetchone()[0] == 0


async def test_actions_need_the_csrf_token_a_confirmation_and_are_recorded(
        settings, db_url, provider, judge, presets, sync_conn):
    async with console_app(settings, db_url, provider, judge) as app:
        await create_notes(app, ["하나", "둘"])
        sync_conn.execute("UPDATE ai.context_ai_state SET embedding_status = 'PENDING', "
                          "keyword_status = 'PENDING', updated_at = now() - interval '1 hour' "
                          "WHERE context_id = 1")
        await login(app.http, ADMIN_TOKEN)
        confirm = await app.http.get("/console/actions/rescan")
        assert confirm.status_code == 200 and "expired rows now" in confirm.text
        csrf = csrf_of(confirm.text)
        for data in ({"confirm": "yes"}, {"confirm": "yes", "csrf": "0" * 64},
                     {"confirm": "yes", "csrf": csrf.upper()}):
            assert (await app.http.post("/console/actions/rescan", data=data)).status_code == 403
        unconfirmed = await app.http.post("/console/actions/rescan", data={"csrf": csrf})
        assert unconfirmed.status_code == 303 and unconfirmed.headers["location"].endswith("/rescan")
        assert sync_conn.execute("SELECT count(*) FROM core.console_action").fetchone()[0] == 0
        assert sync_conn.execute("SELECT retry_count FROM ai.context_ai_state "
                                 "WHERE context_id = 1").fetchone()[0] == 0
        done = await app.http.post("/console/actions/rescan", data={"csrf": csrf, "confirm": "yes"})
        assert done.status_code == 303
        await app.settle()
        assert sync_conn.execute("SELECT retry_count FROM ai.context_ai_state "
                                 "WHERE context_id = 1").fetchone()[0] == 1
        role, action, outcome = sync_conn.execute(
            "SELECT role, action, outcome FROM core.console_action").fetchone()
        assert (role, action, outcome["claimed"], outcome["dispatched"]) == ("admin", "rescan_round", 1, 1)
        log_page = (await app.http.get("/console/actions")).text
        assert "rescan_round" in log_page


async def test_reprocess_runs_only_after_its_dry_run(settings, db_url, provider, judge, presets,
                                                     sync_conn):
    async with console_app(settings, db_url, provider, judge) as app:
        await create_notes(app, ["하나", "둘"])
        sync_conn.execute("UPDATE ai.context_keyword SET preset_version = 0")
        sync_conn.execute("UPDATE ai.context_keyword_analysis SET preset_version = 0")
        await login(app.http, ADMIN_TOKEN)
        csrf = csrf_of((await app.http.get("/console/actions")).text)
        skipped = await app.http.post("/console/actions/reprocess", data={
            "csrf": csrf, "confirm": "yes", "mode": "presets", "ticket": "presets:2:9999999999",
            "signature": "0" * 64})
        assert skipped.status_code == 409
        dry = await app.http.get("/console/actions/reprocess?mode=presets")
        assert dry.status_code == 200 and "Dry-run: 2 context(s)" in dry.text
        fields = dict(re.findall(r'name="(\w+)" value="([^"]*)"', dry.text))
        ticket, signature = fields["ticket"], fields["signature"]
        tampered = await app.http.post("/console/actions/reprocess", data={
            "csrf": csrf, "confirm": "yes", "mode": "presets", "ticket": ticket.replace(":2:", ":9:"),
            "signature": signature})
        assert tampered.status_code == 409
        assert sync_conn.execute("SELECT count(*) FROM ai.context_ai_state "
                                 "WHERE keyword_status = 'COMPLETED'").fetchone()[0] == 2
        run = await app.http.post("/console/actions/reprocess", data={
            "csrf": csrf, "confirm": "yes", "mode": "presets", "ticket": ticket,
            "signature": signature})
        assert run.status_code == 303
        actions = dict(sync_conn.execute("SELECT action, params FROM core.console_action").fetchall())
        assert actions["reprocess_dry_run"] == {"mode": "presets"}
        assert actions["reprocess"] == {"mode": "presets", "dry_run": 2}


async def test_search_debugger_explains_every_channel_for_admins_only(
        settings, db_url, provider, judge, presets, sync_conn):
    async with console_app(settings, db_url, provider, judge) as app:
        member_id, contexts = await create_notes(app, [SECRET_NOTE, OTHER_NOTE])
        await login(app.http, ADMIN_TOKEN)
        csrf = csrf_of((await app.http.get("/console/search")).text)
        answer = await app.http.post("/console/search", data={
            "csrf": csrf, "member": str(member_id), "query": "한정식집"})
        assert answer.status_code == 200
        html = answer.text
        assert "vector: score" in html and "text/place: score" in html
        assert SECRET_NOTE in html  # admins see the matched note (documented decision)
        row = re.search(r"<tr class=\"shown\"><td>1</td><td>(\d+)</td>", html)
        assert row is not None
        without_csrf = await app.http.post("/console/search", data={"member": str(member_id),
                                                                     "query": "한정식집"})
        assert without_csrf.status_code == 403 and SECRET_NOTE not in without_csrf.text
        params, outcome = sync_conn.execute(
            "SELECT params, outcome FROM core.console_action WHERE action = 'search_debug'").fetchone()
        assert params == {"member_id": member_id} and outcome["shown"] >= 1
        assert "한정식집" not in str(params) + str(outcome)


async def test_every_console_request_is_logged_without_text(settings, db_url, provider, judge,
                                                            presets, caplog):
    async with console_app(settings, db_url, provider, judge) as app:
        member_id, contexts = await create_notes(app, [SECRET_NOTE])
        caplog.set_level(logging.INFO, logger="pinlog.console")
        await login(app.http, ADMIN_TOKEN)
        csrf = csrf_of((await app.http.get("/console")).text)
        await app.http.get(f"/console/contexts/{contexts[0]}")
        await app.http.post("/console/search", data={"csrf": csrf, "member": str(member_id),
                                                     "query": "비밀메모 한정식집"})
        records = [r for r in caplog.records if r.name == "pinlog.console"
                   and r.getMessage() == "console request"]
        routes = [(r.route, r.method, r.status, r.role) for r in records]
        assert ("/console/contexts/{context_id}", "GET", 200, "admin") in routes
        assert ("/console/search", "POST", 200, "admin") in routes
        assert ("/console/login", "POST", 303, "-") in routes or ("/console/login", "POST", 303, "admin") in routes
        for r in caplog.records:
            line = r.getMessage() + " " + " ".join(str(v) for v in r.__dict__.values())
            assert "비밀메모" not in line and ADMIN_TOKEN not in line


@pytest.mark.parametrize("path", ["/console/contexts/0", "/console/contexts/999999"])
async def test_unknown_context_is_404(settings, db_url, provider, judge, presets, path):
    async with console_app(settings, db_url, provider, judge) as app:
        await login(app.http, READ_TOKEN)
        assert (await app.http.get(path)).status_code == 404


async def test_logout_needs_csrf_and_ends_the_session(settings, db_url, provider, judge, presets):
    async with console_app(settings, db_url, provider, judge) as app:
        await login(app.http, READ_TOKEN)
        csrf = csrf_of((await app.http.get("/console")).text)
        assert (await app.http.post("/console/logout", data={})).status_code == 403
        assert (await app.http.post("/console/logout", data={"csrf": "0" * 64})).status_code == 403
        out = await app.http.post("/console/logout", data={"csrf": csrf})
        assert out.status_code == 303
        assert (await app.http.get("/console")).status_code == 303


class HeldClient:
    """A process client at the contract whose sends wait on ``release`` (``entered`` is set
    once a send waits); records whether a waiting send was cancelled."""

    def __init__(self) -> None:
        import asyncio

        self.entered, self.release = asyncio.Event(), asyncio.Event()
        self.cancelled = False

    async def _hold(self, n: int) -> list[int]:
        import asyncio

        self.entered.set()
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        return [202] * n

    async def send(self, request) -> int:
        return (await self._hold(1))[0]

    async def send_batch(self, requests) -> list[int]:
        return await self._hold(len(requests))


async def test_a_running_console_reprocess_is_stopped_and_recorded_at_shutdown(
        settings, db_url, provider, judge, presets, sync_conn):
    """The app's shutdown stops a console reprocess still running (its dispatch held) while the
    engine is open: the task has ended and the action log says ``stopped`` (a task that outlived
    the engine left its session idle in a transaction at the lowest allowed versions, and the
    next test's TRUNCATE waited on it for good)."""
    held = HeldClient()
    async with console_app(settings, db_url, provider, judge) as app:
        await create_notes(app, ["하나", "둘"])
        sync_conn.execute("UPDATE ai.context_keyword_analysis SET preset_version = 0")
        app.core.client = held  # the reprocess's re-sends wait on the hook
        await login(app.http, ADMIN_TOKEN)
        csrf = csrf_of((await app.http.get("/console/actions")).text)
        dry = await app.http.get("/console/actions/reprocess?mode=presets")
        fields = dict(re.findall(r'name="(\w+)" value="([^"]*)"', dry.text))
        run = await app.http.post("/console/actions/reprocess", data={
            "csrf": csrf, "confirm": "yes", "mode": "presets", "ticket": fields["ticket"],
            "signature": fields["signature"]})
        assert run.status_code == 303
        await held.entered.wait()  # the reprocess runs: its first batch's re-send waits
        actions = app.app.state.console_actions
        assert actions.names() == ["reprocess"]
    assert held.cancelled and actions.names() == []
    (outcome,) = sync_conn.execute(
        "SELECT outcome FROM core.console_action WHERE action = 'reprocess'").fetchone()
    assert outcome == {"state": "stopped"}
