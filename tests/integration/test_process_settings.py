"""Replicas with different rule-relevant settings (issue 16 #7): each process records its
values at start-up; a process whose values differ from a live one logs an ERROR naming the
setting and both values, and `pinlog status` shows it."""

from __future__ import annotations

import logging

import pytest

from pinlog.core.status import status_snapshot
from pinlog.db.process_settings import ProcessRegistry, live_processes
from tests.conftest import TEST_JWT_SECRET, TEST_SECRET, make_settings
from tests.helpers import pinlog_env, run_pinlog

SHORT = {"processing_expiry": 60, "embedding_timeout": 5.0, "llm_timeout": 5.0}


async def test_a_replica_with_a_shorter_expiry_logs_an_error_and_status_shows_it(
        tmp_path, db_url, engine, caplog):
    long_lived = ProcessRegistry(engine, make_settings(tmp_path / "a", db_url), ("core", "ai"))
    short = ProcessRegistry(engine, make_settings(tmp_path / "b", db_url, **SHORT), ("ai",))
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
        snap = await status_snapshot(engine, make_settings(tmp_path / "c", db_url))
        assert len(snap["processes"]) == 2
        assert {d.setting for d in snap["setting_differences"]} == settings_named
    finally:
        await short.stop()
        await long_lived.stop()
    assert await live_processes(engine) == []


async def test_agreeing_replicas_and_disjoint_settings_log_nothing(tmp_path, db_url, engine,
                                                                   caplog):
    settings = make_settings(tmp_path, db_url)
    first = ProcessRegistry(engine, settings, ("core",))
    second = ProcessRegistry(engine, settings, ("core", "ai"))
    # a core-only process does not use embedding timeouts: not compared
    ai_only = ProcessRegistry(engine, make_settings(tmp_path / "x", db_url, embedding_timeout=7.0),
                              ("ai",))
    with caplog.at_level(logging.ERROR, logger="pinlog.db.process_settings"):
        assert await first.start() == []
        assert await second.start() == []
        found = await ai_only.start()
    assert {d.setting for d in found} == {"embedding_timeout"}
    assert all(d.first.components != "core" for d in found)
    for registry in (first, second, ai_only):
        await registry.stop()


@pytest.mark.slow
async def test_pinlog_status_shows_the_disagreement(tmp_path, db_url, engine):
    registries = [ProcessRegistry(engine, make_settings(tmp_path / "a", db_url), ("core",)),
                  ProcessRegistry(engine, make_settings(tmp_path / "b", db_url,
                                                        pending_expiry=30), ("core",))]
    for registry in registries:
        await registry.start()
    try:
        env = pinlog_env(tmp_path / "data", PINLOG_DATABASE_URL=db_url,
                         PINLOG_INTERNAL_SECRETS=TEST_SECRET, PINLOG_JWT_SECRET=TEST_JWT_SECRET,
                         COLUMNS="250")
        result = run_pinlog(["status"], env)
    finally:
        for registry in registries:
            await registry.stop()
    assert result.returncode == 0, result.stderr
    assert "live processes" in result.stdout
    assert "PINLOG_PENDING_EXPIRY: 300.0" in result.stderr and "30.0" in result.stderr
