"""The state-machine picture: Prometheus gauges and the ``pinlog status`` snapshot (SPEC §12).

Queries in ``status.sql`` (read-only but for the compaction of the maintained counts).
``refresh_gauges`` is called when ``/metrics`` is scraped (by ``CoreRuntime.refresh_gauges``);
``status_snapshot`` feeds the ``pinlog status`` command and the operator console. The state rows
per stage × status come from counts the database maintains (migration ``0008_operator_console``:
triggers append deltas, :func:`compact_state_counts` folds them in), so no read scans the table.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from pinlog import metrics
from pinlog.db.process_settings import all_differences, live_processes
from pinlog.db.sql import SqlStatements
from pinlog.settings import Settings
from pinlog.states import Stage, Status

_q = SqlStatements("pinlog.core", "status.sql", fragments_from=("rescan.sql",))
log = logging.getLogger(__name__)

#: Seconds between two background compactions of the maintained state counts.
COMPACT_SECONDS = 30.0


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
    async with engine.connect() as conn:
        rows = await state_counts(conn)
        retry = {int(r["retry_count"]): int(r["n"])
                 for r in (await conn.execute(_q("unfinished_by_retry_count"))).mappings()}
        summary = await unfinished_summary(conn, config)
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


async def unfinished_summary(conn: AsyncConnection, config: StatusConfig) -> dict[str, Any]:
    """``{"exhausted_unfinished", "dead_ends", "unfinished", "oldest_unfinished_seconds"}`` of
    the unfinished rows (``unfinished_summary``: the partial rescan index, O(unfinished rows))."""
    return dict((await conn.execute(_q("unfinished_summary"),
                                    {"max_retries": config.max_retries})).mappings().one())


def format_age(seconds: float | None) -> str:
    """An age for people: ``"42 s"``, ``"3.5 min"``, ``"2.1 h"``; ``"-"`` for None."""
    if seconds is None:
        return "-"
    seconds = max(0.0, seconds)
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def snapshot_json(snap: dict[str, Any]) -> dict[str, Any]:
    """A :func:`status_snapshot` as JSON-ready values (``pinlog status --json``, the operator
    API's ``/ops/v1/status``): the same keys; ``retry_distribution`` keyed by the count as a
    string; times ISO-8601; ``processes`` as ``{"label", "host", "pid", "components",
    "version", "started_at", "settings"}``; ``setting_differences`` as one sentence each."""
    def iso(value: Any) -> Any:
        return value.isoformat(timespec="seconds") if value is not None else None

    return {
        **{k: snap[k] for k in ("rows", "exhausted_unfinished", "dead_ends", "unfinished",
                                "oldest_unfinished_seconds", "max_retries", "anomalies")},
        "retry_distribution": {str(k): n for k, n in sorted(snap["retry_distribution"].items())},
        "recent_failures": [{**f, "at": iso(f["at"])} for f in snap["recent_failures"]],
        "processes": [{"label": p.label, "host": p.host, "pid": p.pid, "components": p.components,
                       "version": p.version, "started_at": iso(p.started_at),
                       "settings": dict(sorted(p.settings.items()))} for p in snap["processes"]],
        "setting_differences": [d.describe() for d in snap["setting_differences"]],
    }


async def state_counts(conn: AsyncConnection) -> dict[str, dict[str, int]]:
    """State rows per stage × status (SPEC §12): ``{"embedding": {status: n, …all 5 statuses},
    "keyword": {…}}``, zeros included.

    Read from the counts migration ``0008_operator_console`` maintains (``state_counts``:
    O(changes since the last :func:`compact_state_counts`), not O(table)); on a database
    without them (an adopted one) by one pass over the table (``rows_per_stage_status``).
    """
    rows: dict[str, dict[str, int]] = {
        stage.label: {status.value: 0 for status in Status} for stage in Stage}
    maintained = (await conn.execute(_q("state_counts_maintained"))).scalar()
    statement = "state_counts" if maintained else "rows_per_stage_status"
    for r in (await conn.execute(_q(statement))).mappings():
        if r["stage"] in rows and r["status"] in rows[r["stage"]]:
            rows[r["stage"]][r["status"]] = int(r["n"])
    return rows


async def compact_state_counts(engine: AsyncEngine) -> bool:
    """Fold the appended deltas into the maintained counts (``compact_state_counts``), so
    reading them stays cheap. One compaction at a time: returns False when another process
    was compacting (or the counts are not maintained); the counts are right either way.

    Raises:
        whatever the database raises.
    """
    async with engine.begin() as conn:
        if not (await conn.execute(_q("state_counts_maintained"))).scalar():
            return False
        if not (await conn.execute(_q("compact_state_counts_lock"))).scalar():
            return False
        await conn.execute(_q("compact_state_counts"))
    return True


class CountCompactor:
    """Compacts the maintained state counts every ``interval`` seconds in the background
    (started by :class:`pinlog.core.runtime.CoreRuntime`), so the deltas between two reads stay
    few even when nobody reads them (no console open, no ``/metrics`` scrape). A failure is
    logged (WARNING, class only) and retried at the next tick."""

    def __init__(self, engine: AsyncEngine, interval: float = COMPACT_SECONDS) -> None:
        self.engine, self.interval = engine, interval
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="state-count-compactor")

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                await compact_state_counts(self.engine)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - try again at the next tick
                log.warning("state count compaction failed",
                            extra={"error_class": type(exc).__name__})

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None


async def refresh_gauges(engine: AsyncEngine, config: StatusConfig) -> None:
    """Fill ``STATE_ROWS`` (stage × status, every combination, zeros included),
    ``RETRY_COUNT_ROWS`` (unfinished rows per retry_count; stale labels removed),
    ``EXHAUSTED_UNFINISHED`` and ``OLDEST_UNFINISHED`` (seconds, 0 when nothing is unfinished)
    from the database (SPEC §12).

    Raises:
        whatever the database raises (the ``/metrics`` handler decides what to do with it).
    """
    await compact_state_counts(engine)
    snapshot = await status_snapshot(engine, config, recent=0)
    for stage, counts in snapshot["rows"].items():
        for status, n in counts.items():
            metrics.STATE_ROWS.labels(stage=stage, status=status).set(n)
    metrics.RETRY_COUNT_ROWS.clear()
    for retry_count, n in snapshot["retry_distribution"].items():
        metrics.RETRY_COUNT_ROWS.labels(retry_count=str(retry_count)).set(n)
    metrics.EXHAUSTED_UNFINISHED.set(snapshot["exhausted_unfinished"])
    metrics.OLDEST_UNFINISHED.set(max(0.0, snapshot["oldest_unfinished_seconds"] or 0.0))
