"""Replicas with different rule-relevant settings (issue 16 #7): each process records its
values at start-up; a process whose values differ from a live one logs an ERROR naming the
setting and both values, and `pinlog status` shows it."""

from __future__ import annotations

import logging

import pytest

from pinlog.core.status import status_snapshot
from pinlog.composition import replica_rules
from pinlog.db.process_settings import ProcessRegistry, live_processes
from tests.conftest import TEST_JWT_SECRET, TEST_SECRET, make_settings, config_of
from tests.helpers import pinlog_env, run_pinlog

SHORT = {"processing_expiry": 60, "embedding_timeout": 5.0, "llm_timeout": 5.0}


def registry(engine, settings, components) -> ProcessRegistry:
    """The registry a process running ``components`` with ``settings`` starts."""
    return ProcessRegistry(engine, replica_rules(config_of(settings), components), components)


async def test_a_replica_with_a_shorter_expiry_logs_an_error_and_status_shows_it(
        tmp_path, db_url, engine, caplog):
    long_lived = registry(engine, make_settings(tmp_path / "a", db_url), ("core", "ai"))
    short = registry(engine, make_settings(tmp_path / "b", db_url, **SHORT), ("ai",))
    assert await long_lived.start() == []
    try:
        with caplog.at_level(logging.ERROR, logger="pinlog.db.process_settings"):
            found = await short.start()
        settings_named = {d.setting for d in found}
        assert settings_named == {"processing_expiry", "embedding_timeout", "llm_timeout"}
        errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
        assert any("PINLOG_PROCESSING_EXPIRY: 60.0 here vs 600.0" in m for m in errors)
        # the older process sees the newcomer at its next heartbeat check, too
        caplog.clear()
        with caplog.at_level(logging.ERROR, logger="pinlog.db.process_settings"):
            assert {d.setting for d in await long_lived.check()} == settings_named
        assert any("PINLOG_PROCESSING_EXPIRY: 600.0 here vs 60.0" in r.getMessage()
                   for r in caplog.records)
        snap = await status_snapshot(engine,
                                     config_of(make_settings(tmp_path / "c", db_url)).core.status)
        assert len(snap["processes"]) == 2
        assert {d.setting for d in snap["setting_differences"]} == settings_named
    finally:
        await short.stop()
        await long_lived.stop()
    assert await live_processes(engine) == []


async def test_agreeing_replicas_and_disjoint_settings_log_nothing(tmp_path, db_url, engine,
                                                                   caplog):
    settings = make_settings(tmp_path, db_url)
    first = registry(engine, settings, ("core",))
    second = registry(engine, settings, ("core", "ai"))
    # a core-only process does not use embedding timeouts: not compared
    ai_only = registry(engine, make_settings(tmp_path / "x", db_url, embedding_timeout=7.0),
                              ("ai",))
    with caplog.at_level(logging.ERROR, logger="pinlog.db.process_settings"):
        assert await first.start() == []
        assert await second.start() == []
        found = await ai_only.start()
    assert {d.setting for d in found} == {"embedding_timeout"}
    assert all(d.first.components != "core" for d in found)
    for one in (first, second, ai_only):
        await one.stop()


async def test_a_core_only_rescan_process_and_an_ai_only_process_disagreeing_on_the_expiry(
        tmp_path, db_url, engine, caplog):
    """Replicas of different kinds share one rule: core's rescan claims a PROCESSING stage by
    PINLOG_PROCESSING_EXPIRY, the ai side re-claims by it. A core-only process (running the
    rescan) and an ai-only process that disagree on it are reported, by both and by status."""
    core_only = registry(engine, make_settings(tmp_path / "core", db_url), ("core",))
    ai_only = registry(engine, make_settings(tmp_path / "ai", db_url, **SHORT), ("ai",))
    assert await core_only.start() == []
    try:
        with caplog.at_level(logging.ERROR, logger="pinlog.db.process_settings"):
            found = await ai_only.start()
            assert {d.setting for d in await core_only.check()} == {"processing_expiry"}
        assert {d.setting for d in found} == {"processing_expiry"}
        errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
        assert any("PINLOG_PROCESSING_EXPIRY: 60.0 here vs 600.0" in m for m in errors)
        assert any("PINLOG_PROCESSING_EXPIRY: 600.0 here vs 60.0" in m for m in errors)
        snap = await status_snapshot(engine, config_of(make_settings(tmp_path / "c", db_url)).core.status)
        assert {d.setting for d in snap["setting_differences"]} == {"processing_expiry"}
    finally:
        await ai_only.stop()
        await core_only.stop()


async def test_a_process_whose_heartbeat_stopped_is_not_compared(tmp_path, db_url, engine,
                                                                sync_conn):
    """Only live processes count: a replica that crashed (its heartbeat older than the live
    window — the database clock moved back instead of waiting) is no longer compared."""
    crashed = registry(engine, make_settings(tmp_path / "a", db_url, **SHORT), ("ai",))
    assert await crashed.start() == []
    newcomer = registry(engine, make_settings(tmp_path / "b", db_url), ("ai",))
    try:
        sync_conn.execute("UPDATE ai.process_settings SET seen_at = now() - interval '1 hour' "
                          "WHERE process_id = %s", (crashed.process_id,))
        assert await newcomer.start() == []
        assert [p.process_id for p in await live_processes(engine)] == [newcomer.process_id]
        sync_conn.execute("UPDATE ai.process_settings SET seen_at = now() "
                          "WHERE process_id = %s", (crashed.process_id,))
        assert {d.setting for d in await newcomer.check()} >= {"processing_expiry"}  # can fail
    finally:
        await newcomer.stop()
        await crashed.stop()


@pytest.mark.slow
async def test_pinlog_status_shows_the_disagreement(tmp_path, db_url, engine):
    registries = [registry(engine, make_settings(tmp_path / "a", db_url), ("core",)),
                  registry(engine, make_settings(tmp_path / "b", db_url,
                                                        pending_expiry=30), ("core",))]
    for one in registries:
        await one.start()
    try:
        env = pinlog_env(tmp_path / "data", PINLOG_DATABASE_URL=db_url,
                         PINLOG_INTERNAL_SECRETS=TEST_SECRET, PINLOG_JWT_SECRET=TEST_JWT_SECRET,
                         COLUMNS="250")
        result = run_pinlog(["status"], env)
    finally:
        for one in registries:
            await one.stop()
    assert result.returncode == 0, result.stderr
    assert "live processes" in result.stdout
    assert "PINLOG_PENDING_EXPIRY: 300.0" in result.stderr and "30.0" in result.stderr


# --- the heartbeat lease of the owner rule (SPEC §7.3.1) -------------------------------------------
def _lease(sync_conn, process_id: str):
    return sync_conn.execute(
        "SELECT alive_until - now() FROM ai.process_settings WHERE process_id = %s",
        (process_id,)).fetchone()


async def test_the_registry_keeps_a_lease_of_its_own_timeout_and_ends_it_when_it_stops(
        tmp_path, db_url, engine, sync_conn):
    """Each beat extends the lease by the process's OWN timeout (replicas never judge each other
    by their own setting); a clean stop ends it at once — the row stays as a tombstone, which is
    what makes its owner "gone" (its work is released) — and it leaves `live_processes`."""
    from datetime import timedelta

    one = ProcessRegistry(engine, replica_rules(config_of(make_settings(tmp_path, db_url)),
                                                ("ai",)), ("ai",), lease=300)
    assert one.heartbeat == 100  # a third of the lease
    await one.start()
    try:
        (left,) = _lease(sync_conn, one.process_id)
        assert timedelta(seconds=200) < left <= timedelta(seconds=300)
        sync_conn.execute("UPDATE ai.process_settings SET alive_until = now() "
                          "WHERE process_id = %s", (one.process_id,))
        await one.beat()
        (left,) = _lease(sync_conn, one.process_id)
        assert timedelta(seconds=200) < left <= timedelta(seconds=300)
    finally:
        await one.stop()
    (left,) = _lease(sync_conn, one.process_id)
    assert left <= timedelta(0)  # released
    assert await live_processes(engine) == []


async def test_a_heartbeat_whose_row_vanished_registers_again(tmp_path, db_url, engine,
                                                              sync_conn):
    one = registry(engine, make_settings(tmp_path, db_url), ("core",))
    await one.start()
    try:
        sync_conn.execute("DELETE FROM ai.process_settings")
        await one.beat()
        assert [p.process_id for p in await live_processes(engine)] == [one.process_id]
        assert _lease(sync_conn, one.process_id)[0].total_seconds() > 0
    finally:
        await one.stop()


async def test_the_heartbeat_keeps_trying_when_the_first_registration_failed(
        tmp_path, db_url, engine):
    """A process that starts while the database is unreachable registers as soon as it answers
    (its claims record an owner from then on), instead of never."""
    import asyncio

    one = registry(engine, make_settings(tmp_path, db_url), ("core",))
    one.heartbeat = 0.05
    registered = asyncio.Event()
    real_register = one._register
    calls = 0

    async def flaky_register() -> None:  # the database refuses the first connection
        nonlocal calls
        calls += 1
        if calls == 1:
            raise ConnectionError("database unreachable")
        await real_register()
        registered.set()

    one._register = flaky_register  # type: ignore[method-assign]
    try:
        assert await one.start() == []
        await asyncio.wait_for(registered.wait(), timeout=30)  # the heartbeat registered it
        assert [p.process_id for p in await live_processes(engine)] == [one.process_id]
    finally:
        await one.stop()
