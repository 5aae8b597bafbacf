"""The retention job's settings, report and loop (issue 31), without a database: defaults and
durations, the late-result window (the bound of a CANCELLED state row), the per-context ai
tables the purge knows, and the loop's rounds (fake parts, ordered by events)."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from prometheus_client import REGISTRY

from pinlog.ai.retention import context_tables
from pinlog.db.retention import PurgeReport, RetentionLoop, count_purged, purge_all
from pinlog.settings import SettingsError
from tests.conftest import config_of, make_settings


def test_retention_defaults(tmp_path):
    s = make_settings(tmp_path, retention_enabled=True)
    assert (s.retention_deleted, s.retention_events, s.retention_interval,
            s.retention_batch_size) == (timedelta(days=30), timedelta(days=90),
                                        timedelta(hours=1), 500)
    config = config_of(s)
    assert config.ai.retention.enabled and config.core.retention.enabled
    assert config.ai.retention.deleted == config.core.retention.deleted == timedelta(days=30)
    assert config.ai.retention.events == timedelta(days=90)


def test_retention_durations_take_seconds_or_iso8601_and_must_be_positive(tmp_path):
    s = make_settings(tmp_path, retention_deleted="P7D", retention_events="1209600",
                      retention_interval="PT10M")
    assert (s.retention_deleted, s.retention_events, s.retention_interval) == (
        timedelta(days=7), timedelta(days=14), timedelta(minutes=10))
    for name in ("retention_deleted", "retention_events", "retention_interval"):
        with pytest.raises(SettingsError, match=f"PINLOG_{name.upper()}"):
            make_settings(tmp_path, **{name: 0})


def test_the_late_result_window_is_the_processing_expiry_plus_the_longest_stage_budget(tmp_path):
    # defaults: 600 s + the keyword stage's budget, 90 s × 3 attempts + 0.5 + 1 s of backoff
    assert make_settings(tmp_path).late_result_window() == timedelta(seconds=871.5)
    s = make_settings(tmp_path, processing_expiry=1200, embedding_timeout=300, llm_timeout=10)
    assert s.late_result_window() == timedelta(seconds=1200 + 300 * 3 + 1.5)
    assert config_of(s).ai.retention.late_result_window == s.late_result_window()


def test_the_purge_knows_every_per_context_ai_table():
    """One ``context_rows_<table>`` statement per ai table keyed by context_id (issue 31)."""
    assert [table for _, table in context_tables()] == [
        "ai.context_embedding", "ai.context_keyword", "ai.context_keyword_analysis"]


def test_reports_merge_by_table():
    a, b = PurgeReport(), PurgeReport()
    a.add("core.context", 2)
    b.add("core.context", 3)
    b.add("ai.context_embedding", 1)
    b.keep("why", 1)
    b.keep("nothing", 0)
    a.merge(b)
    assert a.removed == {"core.context": 5, "ai.context_embedding": 1} and a.total == 6
    assert a.kept == {"why": 1}


class FakePart:
    """A purge part that counts its rounds and fails the ones it is told to."""

    name = "fake"

    def __init__(self, fail_rounds: set[int]) -> None:
        self.rounds = 0
        self.fail_rounds = fail_rounds
        self.reached: dict[int, asyncio.Event] = {}

    def round_reached(self, n: int) -> asyncio.Event:
        return self.reached.setdefault(n, asyncio.Event())

    async def purge(self, *, dry_run: bool = False, stop=None) -> PurgeReport:
        self.rounds += 1
        self.round_reached(self.rounds).set()
        if self.rounds in self.fail_rounds:
            raise RuntimeError("database unavailable")
        report = PurgeReport(dry_run=dry_run)
        report.add("unit.rows", 1)
        return report

    async def oldest_retained(self) -> dict[str, float | None]:
        return {"unit.rows": None}


async def test_the_loop_runs_rounds_until_stopped_and_survives_a_failing_round():
    part = FakePart(fail_rounds={2})
    loop = RetentionLoop([part], timedelta(seconds=0.01))
    await loop.start()
    await asyncio.wait_for(part.round_reached(4).wait(), 10)  # round 2 failed, 3 and 4 ran
    await loop.stop()
    rounds = part.rounds
    await asyncio.sleep(0)
    assert part.rounds == rounds >= 4
    assert REGISTRY.get_sample_value("pinlog_retention_oldest_deleted_seconds",
                                     {"table": "unit.rows"}) == 0.0


async def test_only_a_real_purge_counts_rows():
    def value() -> float:
        return REGISTRY.get_sample_value("pinlog_purged_rows_total", {"table": "unit.rows"}) or 0
    start = value()
    await purge_all([FakePart(set())], dry_run=True)
    assert value() == start
    report = await purge_all([FakePart(set())])
    count_purged(PurgeReport(dry_run=True, removed={"unit.rows": 5}))
    assert value() == start + report.total == start + 1
