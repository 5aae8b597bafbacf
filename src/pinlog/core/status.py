"""The state-machine picture: Prometheus gauges and the ``pinlog status`` snapshot (SPEC §12).

Read-only queries in ``status.sql``. ``refresh_gauges`` is called when ``/metrics`` is scraped
(by ``CoreRuntime.refresh_gauges``); ``status_snapshot`` feeds the ``pinlog status`` command.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from pinlog import metrics
from pinlog.db.process_settings import all_differences, live_processes
from pinlog.db.sql import SqlStatements
from pinlog.settings import Settings
from pinlog.states import Stage, Status

_q = SqlStatements("pinlog.core", "status.sql", fragments_from=("rescan.sql",))


@dataclass(frozen=True)
class StatusConfig:
    """What the state picture reads: ``max_retries`` (``PINLOG_MAX_RETRIES``), to count the
    rows whose retries are exhausted."""

    max_retries: int

    @classmethod
    def from_settings(cls, settings: Settings) -> StatusConfig:
        return cls(max_retries=settings.max_retries)

#: Rows shown under "recent failures" by default.
RECENT_FAILURES = 10


#: What each anomaly kind means and what ends it (``pinlog status``).
ANOMALY_MEANING: dict[str, str] = {
    "half_cancelled": "one stage CANCELLED, the other unfinished; the next rescan round ends it "
                      "CANCELLED",
    "dead_end_keyword": "keyword PENDING behind a FAILED embedding; the next round ends it FAILED",
    "keyword_ahead_of_embedding": "keyword PROCESSING/COMPLETED without a COMPLETED embedding "
                                  "(manual change?)",
    "deleted_not_cancelled": "context/record/member deleted but a stage not CANCELLED "
                             "(missed invalidation)",
    "state_without_context": "state row (not CANCELLED) without its core.context row (a "
                             "CANCELLED one is a purged note's tombstone)",
}


async def status_snapshot(engine: AsyncEngine, config: StatusConfig,
                          *, recent: int = RECENT_FAILURES,
                          anomalies: bool = False) -> dict[str, Any]:
    """Everything ``pinlog status`` shows, read in one short read-only transaction.

    Returns:
        ``{"rows": {"embedding": {status: n, …all 5 statuses}, "keyword": {…}},
        "retry_distribution": {retry_count: n} (unfinished rows only),
        "exhausted_unfinished": int, "dead_ends": int, "unfinished": int,
        "oldest_unfinished_seconds": float | None (rescan clock, DB time),
        "max_retries": int,
        "recent_failures": [{"context_id", "embedding_status", "keyword_status",
        "retry_count", "last_error", "at"}, …] (newest first, at most ``recent``),
        "processes": [ProcessInfo] (live processes and their rule-relevant settings),
        "setting_differences": [Difference] (settings on which live processes disagree),
        "anomalies": {kind: n} (every kind of ``status.sql``'s ``anomalies``, zeros included;
        only with ``anomalies=True``)}``.
    """
    rows: dict[str, dict[str, int]] = {
        stage.label: {status.value: 0 for status in Status} for stage in Stage}
    async with engine.connect() as conn:
        for r in (await conn.execute(_q("rows_per_stage_status"))).mappings():
            rows[r["stage"]][r["status"]] = int(r["n"])
        retry = {int(r["retry_count"]): int(r["n"])
                 for r in (await conn.execute(_q("unfinished_by_retry_count"))).mappings()}
        summary = (await conn.execute(_q("unfinished_summary"),
                                      {"max_retries": config.max_retries})).mappings().one()
        failures = [dict(r) for r in (await conn.execute(
            _q("recent_failures"), {"limit": recent})).mappings()]
        kinds = ({r["kind"]: int(r["n"]) for r in (await conn.execute(_q("anomalies"))).mappings()}
                 if anomalies else {})
    try:
        processes = await live_processes(engine)
    except Exception:  # noqa: BLE001 - a database before migration 0003_process_settings: nothing recorded
        processes = []
    oldest = summary["oldest_unfinished_seconds"]
    return {
        "rows": rows,
        "retry_distribution": retry,
        "exhausted_unfinished": int(summary["exhausted_unfinished"]),
        "dead_ends": int(summary["dead_ends"]),
        "unfinished": int(summary["unfinished"]),
        "oldest_unfinished_seconds": float(oldest) if oldest is not None else None,
        "max_retries": config.max_retries,
        "recent_failures": failures,
        "processes": processes,
        "setting_differences": all_differences(processes),
        "anomalies": kinds,
    }


async def refresh_gauges(engine: AsyncEngine, config: StatusConfig) -> None:
    """Fill ``STATE_ROWS`` (stage × status, every combination, zeros included),
    ``RETRY_COUNT_ROWS`` (unfinished rows per retry_count; stale labels removed),
    ``EXHAUSTED_UNFINISHED`` and ``OLDEST_UNFINISHED`` (seconds, 0 when nothing is unfinished)
    from the database (SPEC §12).

    Raises:
        whatever the database raises (the ``/metrics`` handler decides what to do with it).
    """
    snapshot = await status_snapshot(engine, config, recent=0)
    for stage, counts in snapshot["rows"].items():
        for status, n in counts.items():
            metrics.STATE_ROWS.labels(stage=stage, status=status).set(n)
    metrics.RETRY_COUNT_ROWS.clear()
    for retry_count, n in snapshot["retry_distribution"].items():
        metrics.RETRY_COUNT_ROWS.labels(retry_count=str(retry_count)).set(n)
    metrics.EXHAUSTED_UNFINISHED.set(snapshot["exhausted_unfinished"])
    metrics.OLDEST_UNFINISHED.set(max(0.0, snapshot["oldest_unfinished_seconds"] or 0.0))
