"""The ai side of the retention job (issue 31): hard-deletes, past their retention, the AI data
of dead contexts and old history rows. SQL: ``ai/retention.sql`` (names no ``core.`` table).

A context is dead when both stages of its state row are CANCELLED (only core writes CANCELLED —
delete, edit, record delete, withdrawal — and nothing leaves it, SPEC §3). :meth:`AiPurge.purge`,
in batches of ``PINLOG_RETENTION_BATCH_SIZE`` (one short transaction each):

1. **contexts** — the state rows cancelled longer ago than ``PINLOG_RETENTION_DELETED`` *and*
   the late-result window (``cancelled_past_window``), oldest first, ``FOR UPDATE SKIP LOCKED``;
   for them every per-context table (:func:`context_tables`: the vectors, keyword rows,
   analysis, …), then the state rows themselves.
2. **events** — ``ai.context_ai_event`` rows older than ``PINLOG_RETENTION_EVENTS``.

:meth:`AiPurge.erase_contexts` is the erasure (``pinlog purge --member``): the data of given
contexts *now*, when their state is CANCELLED (or they have none); their state rows (ids and
statuses, no personal data) stay like every CANCELLED row, past the retention and the
late-result window, so a late result is still refused (SPEC §4/§5); the regular purge removes
them then.

Safe with any number of replicas: the batches are picked ``FOR UPDATE SKIP LOCKED`` and every
delete repeats its guard; a save in flight holds the state row's lock, so its context is skipped
(or, for the erasure, waited for and then found CANCELLED).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cache
from typing import Any, Self

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from pinlog.db.retention import BatchHook, PurgeReport, RetentionConfig, keyset_batches
from pinlog.db.sql import Queries
from pinlog.settings import Settings

Q = Queries("pinlog.ai", "retention.sql")

#: Statements named ``context_rows_<table>`` purge one ai table keyed by ``context_id``.
CONTEXT_ROWS_PREFIX = "context_rows_"
STATE_TABLE = "ai.context_ai_state"
EVENT_TABLE = "ai.context_ai_event"



@cache
def context_tables() -> tuple[tuple[str, str], ...]:
    """``(statement name, "ai.<table>")`` of every per-context table, in ``retention.sql``
    order: each ai table keyed by ``context_id`` that holds a context's derived data has one
    ``context_rows_<table>`` statement, so adding a table is adding its statement."""
    return tuple((name, "ai." + name.removeprefix(CONTEXT_ROWS_PREFIX))
                 for name in Q.names() if name.startswith(CONTEXT_ROWS_PREFIX))


@dataclass(frozen=True)
class AiRetentionConfig(RetentionConfig):
    """What the ai part of the retention job reads (issue 31): the shared
    :class:`~pinlog.db.retention.RetentionConfig` (``deleted``: how long a dead context's AI
    data is kept) and

    Attributes:
        events: ``PINLOG_RETENTION_EVENTS``, how long history rows are kept.
        late_result_window: how long a CANCELLED state row must stay after its cancellation
            (``Settings.late_result_window``: processing expiry + the longest stage budget).
    """

    events: timedelta
    late_result_window: timedelta

    @classmethod
    def from_settings(cls, settings: Settings) -> Self:
        return cls(**cls._shared(settings), events=settings.retention_events,
                   late_result_window=settings.late_result_window())


async def _count(conn: AsyncConnection, name: str, params: dict[str, Any]) -> int:
    return int((await conn.execute(Q(name), params)).scalar_one())


class AiPurge:
    """The ai part of the retention job (a :class:`pinlog.db.retention.PurgePart`).

    Args:
        engine: async engine on the shared database.
        config: retention settings.
        on_batch: optional :data:`~pinlog.db.retention.BatchHook` (tests), called with the step
            ``contexts``, ``events`` or ``erase``.
    """

    name = "ai"

    def __init__(self, engine: AsyncEngine, config: AiRetentionConfig, *,
                 on_batch: BatchHook | None = None) -> None:
        self.engine, self.config, self.on_batch = engine, config, on_batch

    async def purge(self, *, dry_run: bool = False,
                    stop: asyncio.Event | None = None) -> PurgeReport:
        """Purge (or, ``dry_run``, count) what is due; batches until nothing is left or ``stop``
        is set. Returns rows per table (``ai.<table>``: the per-context tables, then
        ``ai.context_ai_state`` and ``ai.context_ai_event``)."""
        report = PurgeReport(dry_run=dry_run)
        await self._purge_contexts(report, dry_run, stop)
        await self._purge_events(report, dry_run, stop)
        return report

    async def _hook(self, step: str, ids: Sequence[int]) -> None:
        if self.on_batch is not None:
            await self.on_batch(step, ids)

    async def _purge_contexts(self, report: PurgeReport, dry_run: bool,
                              stop: asyncio.Event | None) -> None:
        config = self.config
        window = {"retention": config.deleted, "late_result_window": config.late_result_window}
        after: tuple[datetime | None, int] = (None, 0)
        for table in (*(t for _, t in context_tables()), STATE_TABLE):
            report.add(table, 0)
        while stop is None or not stop.is_set():
            async with self.engine.connect() as conn:
                transaction = await conn.begin()
                rows = (await conn.execute(Q("pick_cancelled_contexts"), {
                    **window, "after_at": after[0], "after_id": after[1],
                    "batch_size": config.batch_size})).all()
                ids = [int(r.context_id) for r in rows]
                if ids:
                    await self._hook("contexts", ids)
                    params = {"context_ids": ids, "apply": not dry_run}
                    for name, table in context_tables():
                        report.add(table, await _count(conn, name, params))
                    report.add(STATE_TABLE, await _count(conn, "delete_cancelled_states",
                                                         {**params, **window}))
                await (transaction.rollback() if dry_run else transaction.commit())
            if len(rows) < config.batch_size:
                return
            after = (rows[-1].updated_at, int(rows[-1].context_id))

    async def _purge_events(self, report: PurgeReport, dry_run: bool,
                            stop: asyncio.Event | None) -> None:
        report.add(EVENT_TABLE, await keyset_batches(
            self.engine, Q("purge_old_events"), {"retention": self.config.events},
            batch_size=self.config.batch_size, dry_run=dry_run, stop=stop, step="events",
            on_batch=self.on_batch))

    async def erase_contexts(self, context_ids: Sequence[int], *,
                             dry_run: bool = False) -> PurgeReport:
        """Erase the AI data of ``context_ids`` now (``pinlog purge --member``), in one
        transaction per batch: contexts whose state row is CANCELLED on both stages (locked,
        waiting for a save in flight) or that have no state row. Their state rows stay (the
        regular purge removes them, past the retention and the late-result window: they refuse
        a late result meanwhile). Contexts whose state is not
        CANCELLED are left alone and counted in ``report.kept["ai: not cancelled"]``."""
        report = PurgeReport(dry_run=dry_run)
        for _, table in context_tables():
            report.add(table, 0)
        ids = sorted({int(i) for i in context_ids})
        for start in range(0, len(ids), self.config.batch_size):
            batch = ids[start:start + self.config.batch_size]
            async with self.engine.connect() as conn:
                transaction = await conn.begin()
                params: dict[str, Any] = {"context_ids": batch}
                cancelled = {int(i) for i in
                             (await conn.execute(Q("lock_erasable_states"), params)).scalars()}
                with_state = {int(i) for i in
                              (await conn.execute(Q("state_rows_of"), params)).scalars()}
                erasable = sorted(cancelled | (set(batch) - with_state))
                report.keep("ai: not cancelled", len(batch) - len(erasable))
                if erasable:
                    await self._hook("erase", erasable)
                    for name, table in context_tables():
                        report.add(table, await _count(conn, name, {
                            "context_ids": erasable, "apply": not dry_run}))
                await (transaction.rollback() if dry_run else transaction.commit())
        return report

    async def oldest_retained(self) -> dict[str, float | None]:
        """Age in seconds of the oldest CANCELLED state row still retained
        (``ai.context_ai_state``; None when there is none)."""
        async with self.engine.connect() as conn:
            age = (await conn.execute(Q("oldest_cancelled"))).scalar()
        return {STATE_TABLE: None if age is None else float(age)}
