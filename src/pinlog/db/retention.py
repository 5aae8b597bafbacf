"""The retention job's shared parts (issue 31): the report, the part protocol and the loop.

Deleting is soft everywhere (SPEC §4); the retention job hard-deletes what is dead, past its
retention. It has two parts, one per component, neither importing the other:

* **ai** — :class:`pinlog.ai.retention.AiPurge` (``ai/retention.sql``): the AI data and state
  rows of contexts whose two stages are CANCELLED, past ``PINLOG_RETENTION_DELETED`` and the
  late-result window; history rows past ``PINLOG_RETENTION_EVENTS``.
* **core** — :class:`pinlog.core.retention.CorePurge` (``core/retention.sql``): the text of
  deleted and superseded notes, deleted records, withdrawn members, past
  ``PINLOG_RETENTION_DELETED``; off on an adopted database (``core`` is the backend's).

The composition root (:func:`pinlog.composition.retention_parts`) picks the parts a process
runs; :class:`RetentionLoop` runs them every ``PINLOG_RETENTION_INTERVAL`` in ``pinlog serve``,
``pinlog purge`` once. Metrics: ``pinlog_purged_rows_total{table}`` and
``pinlog_retention_oldest_deleted_seconds{table}`` (:mod:`pinlog.metrics`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol, Self

from sqlalchemy import TextClause
from sqlalchemy.ext.asyncio import AsyncEngine

from pinlog import metrics
from pinlog.db.background import stop_task
from pinlog.settings import Settings

log = logging.getLogger(__name__)

#: Longest wait before the first round after start-up (seconds; less when the interval is
#: shorter): soon enough that processes restarted more often than the interval still purge.
FIRST_ROUND_DELAY = 60.0
#: Wait after a round that failed (database unavailable), at most the interval.
FAILED_ROUND_RETRY_SECONDS = 60.0


@dataclass(frozen=True)
class RetentionConfig:
    """What both parts of the retention job read (issue 31); each part's config extends it.

    Attributes:
        enabled: ``PINLOG_RETENTION_ENABLED`` (``pinlog serve`` runs the job).
        interval: ``PINLOG_RETENTION_INTERVAL``, delay between rounds.
        deleted: ``PINLOG_RETENTION_DELETED``, how long dead data is kept (the part says which).
        batch_size: ``PINLOG_RETENTION_BATCH_SIZE``, rows per transaction.
    """

    enabled: bool
    interval: timedelta
    deleted: timedelta
    batch_size: int

    @classmethod
    def from_settings(cls, settings: Settings) -> Self:
        """The config from ``settings``; a part with fields of its own passes them in
        :meth:`_shared` (``cls(**cls._shared(settings), own=...)``)."""
        return cls(**cls._shared(settings))

    @staticmethod
    def _shared(settings: Settings) -> dict[str, Any]:
        return {"enabled": settings.retention_enabled, "interval": settings.retention_interval,
                "deleted": settings.retention_deleted, "batch_size": settings.retention_batch_size}


@dataclass
class PurgeReport:
    """What one purge removed — or, ``dry_run``, would remove — in counts only (no text).

    Attributes:
        removed: ``"schema.table"`` → rows, in the order the parts reached them.
        kept: reason → rows the retention names but leaves (e.g. a deleted note whose AI state
            is not CANCELLED: an invalidation was missed, ``pinlog status`` shows it).
        off: parts that did not run, with why (``core: …adopted database…``).
    """

    dry_run: bool = False
    removed: dict[str, int] = field(default_factory=dict)
    kept: dict[str, int] = field(default_factory=dict)
    off: list[str] = field(default_factory=list)

    def add(self, table: str, rows: int) -> None:
        self.removed[table] = self.removed.get(table, 0) + rows

    def keep(self, reason: str, rows: int) -> None:
        if rows:
            self.kept[reason] = self.kept.get(reason, 0) + rows

    def merge(self, other: PurgeReport) -> None:
        for table, rows in other.removed.items():
            self.add(table, rows)
        for reason, rows in other.kept.items():
            self.keep(reason, rows)
        self.off += other.off

    @property
    def total(self) -> int:
        """All rows removed (or that would be)."""
        return sum(self.removed.values())


class PurgePart(Protocol):
    """One component's part of the retention job."""

    name: str

    async def purge(self, *, dry_run: bool = False,
                    stop: asyncio.Event | None = None) -> PurgeReport:
        """Purge (``dry_run``: count) everything due, in batches, until done or ``stop``."""
        ...

    async def oldest_retained(self) -> dict[str, float | None]:
        """``"schema.table"`` → age in seconds of its oldest deleted row still kept (None:
        none)."""
        ...


#: ``on_batch(step, ids)``: awaited after each batch is picked, before it commits (tests order
#: concurrent purgers with it).
BatchHook = Callable[[str, Sequence[int]], Awaitable[None]]


async def keyset_batches(engine: AsyncEngine, statement: TextClause, params: Mapping[str, Any],
                         *, batch_size: int, dry_run: bool, stop: asyncio.Event | None = None,
                         step: str = "", on_batch: BatchHook | None = None) -> int:
    """Run a purge statement batch after batch, one transaction each (rolled back when
    ``dry_run``), until a batch comes back short or ``stop`` is set. The statement takes
    ``params`` plus ``:after_at``/``:after_id`` (the key to continue after; NULL/0 at first),
    ``:batch_size`` and ``:apply`` (False when ``dry_run``: count only), and returns one row
    ``(n, last_at, last_id)``: the rows it took and the last key. Returns the sum of ``n``."""
    total = 0
    after: tuple[datetime | None, int] = (None, 0)
    while stop is None or not stop.is_set():
        async with engine.connect() as conn:
            transaction = await conn.begin()
            row = (await conn.execute(statement, {
                **params, "after_at": after[0], "after_id": after[1],
                "batch_size": batch_size, "apply": not dry_run})).one()
            if row.n and on_batch is not None:
                await on_batch(step, [int(row.last_id)])
            total += int(row.n)
            await (transaction.rollback() if dry_run else transaction.commit())
        if row.n < batch_size:
            break
        after = (row.last_at, int(row.last_id))
    return total


def count_purged(report: PurgeReport) -> None:
    """Add a real (not dry-run) purge's rows to ``pinlog_purged_rows_total{table}``."""
    if report.dry_run:
        return
    for table, rows in report.removed.items():
        if rows:
            metrics.PURGED_ROWS.labels(table=table).inc(rows)


async def purge_all(parts: Sequence[PurgePart], *, dry_run: bool = False,
                    stop: asyncio.Event | None = None) -> PurgeReport:
    """Run each part in turn (one round of the job, or ``pinlog purge``); rows counted in the
    metrics unless ``dry_run``."""
    report = PurgeReport(dry_run=dry_run)
    for part in parts:
        report.merge(await part.purge(dry_run=dry_run, stop=stop))
    count_purged(report)
    return report


async def refresh_oldest(parts: Sequence[PurgePart]) -> dict[str, float | None]:
    """Set ``pinlog_retention_oldest_deleted_seconds{table}`` from each part (0 when the
    table keeps no deleted row) and return the ages."""
    ages: dict[str, float | None] = {}
    for part in parts:
        ages.update(await part.oldest_retained())
    for table, age in ages.items():
        metrics.RETENTION_OLDEST_DELETED.labels(table=table).set(max(0.0, age or 0.0))
    return ages


class RetentionLoop:
    """Runs :func:`purge_all` over ``parts`` every ``interval`` (a fixed delay after a round
    ends), the first round :data:`FIRST_ROUND_DELAY` after :meth:`start` (at most the
    interval). Any number of loops may run against one database (the parts' batches are picked
    ``FOR UPDATE SKIP LOCKED``). A failing round is logged and retried sooner; it never stops
    the loop."""

    def __init__(self, parts: Sequence[PurgePart], interval: timedelta) -> None:
        self.parts = list(parts)
        self.interval = interval.total_seconds()
        self._task: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()
        #: Set when a round has ended (successfully or not); ``last_report`` is its report
        #: (None after a failed round).
        self.round_ended = asyncio.Event()
        self.last_report: PurgeReport | None = None

    async def run_round(self) -> PurgeReport:
        """One round: purge, refresh the gauges, log one line with the counts."""
        started = time.monotonic()
        report = await purge_all(self.parts, stop=self._stopping)
        await refresh_oldest(self.parts)
        metrics.RETENTION_ROUNDS.labels(outcome="ok").inc()
        log.info("retention round", extra={
            "count": report.total, "seconds": round(time.monotonic() - started, 3),
            "reason": ", ".join(f"{t}={n}" for t, n in report.removed.items() if n) or "none"})
        return report

    async def start(self) -> None:
        """Start the loop in the background (no round runs before it returns)."""
        if self._task is None:
            self._stopping = asyncio.Event()
            self._task = asyncio.create_task(self._loop(), name="retention")

    async def stop(self, grace: float = 10.0) -> None:
        """Stop the loop: a running round ends after its current batch (``grace`` seconds at
        most, then it is cancelled and its transaction rolls back)."""
        task, self._task = self._task, None
        await stop_task(task, self._stopping, grace)

    async def _wait(self, seconds: float) -> None:
        try:
            async with asyncio.timeout(seconds):
                await self._stopping.wait()
        except (TimeoutError, asyncio.TimeoutError):
            pass

    async def _loop(self) -> None:
        await self._wait(min(self.interval, FIRST_ROUND_DELAY))
        while not self._stopping.is_set():
            delay = self.interval
            self.last_report = None
            try:
                self.last_report = await self.run_round()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - the loop must survive a bad round
                metrics.RETENTION_ROUNDS.labels(outcome="failed").inc()
                log.error("retention round failed", extra={"error_class": type(exc).__name__})
                delay = min(self.interval, FAILED_ROUND_RETRY_SECONDS)
            self.round_ended.set()
            await self._wait(delay)
