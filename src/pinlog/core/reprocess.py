"""Operational reprocessing (SPEC §7.5): the only COMPLETED → PENDING path.

``--profile`` moves embedding stages COMPLETED with another embedding profile (and their keyword
stage, when COMPLETED) back to PENDING; ``--presets`` moves keyword stages COMPLETED against an
older preset version back to PENDING (embedding untouched, its vector is reused). Batches walk the
primary key; each batch is one transaction of guarded UPDATEs (only COMPLETED rows move) with
``retry_count = 0``, ``rescanned_at = NULL``, ``updated_at = now()`` and event rows (actor core).
Old embedding/keyword rows are not deleted: each is replaced inside the save transaction of its
new result. After each batch the moved ids are dispatched through the process client (bounded
concurrency); the rescan would pick them up anyway after the PENDING expiry.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from typing import Literal

from sqlalchemy.ext.asyncio import AsyncEngine

from pinlog.contracts import ProcessClient
from pinlog.core.dispatch import BulkSends
from pinlog.core.rescan import DispatchReport, resend
from pinlog.db.sql import SqlStatements
from pinlog.errors import PinlogError
from pinlog.settings import Settings

log = logging.getLogger(__name__)

Mode = Literal["profile", "presets"]
DEFAULT_BATCH_SIZE = 500


@dataclass(frozen=True)
class ReprocessConfig(BulkSends):
    """What reprocessing reads.

    Attributes:
        profile: the embedding profile in force (SPEC §9; the ai side's provider config, given
            by the composition root).
        concurrency: dispatches in flight at once (``PINLOG_RESCAN_CONCURRENCY``).
        dispatch_batch, busy_wait: :class:`~pinlog.core.dispatch.BulkSends`.
    """

    profile: str
    concurrency: int

    @classmethod
    def from_settings(cls, settings: Settings, *, profile: str) -> ReprocessConfig:
        return cls(profile=profile, concurrency=settings.rescan_concurrency,
                   **cls.bulk_settings(settings))


class ReprocessError(PinlogError, RuntimeError):
    """Reprocessing cannot run (e.g. ``--presets`` with no preset loaded for the profile)."""


@cache
def statements() -> SqlStatements:
    """The statements of ``pinlog/core/reprocess.sql`` (loaded once)."""
    return SqlStatements("pinlog.core", "reprocess.sql")


@dataclass
class ReprocessReport:
    """What a reprocess run did. ``moved``: stages moved back to PENDING (row count);
    ``batches``: transactions committed; ``dispatch``: outcome of the sends (None: not sent)."""

    mode: Mode
    target: str  # the current profile (--profile) or preset version (--presets)
    candidates: int = 0
    moved: int = 0
    batches: int = 0
    moved_ids: list[int] = field(default_factory=list)
    dispatch: DispatchReport = field(default_factory=DispatchReport)


async def _params(engine: AsyncEngine, config: ReprocessConfig, mode: Mode) -> dict[str, object]:
    """The statements' parameters: the profile in force (the database's active one, SPEC §9.1,
    else ``config.profile``) or the current preset version of that profile."""
    async with engine.connect() as conn:
        profile = (await conn.execute(statements()("active_profile"),
                                      {"profile": config.profile})).scalar_one()
        if mode == "profile":
            return {"profile": profile}
        version = (await conn.execute(statements()("current_preset_version"),
                                      {"profile": profile})).scalar()
    if version is None:
        raise ReprocessError(
            f"no presets are loaded for the embedding profile {profile!r}: "
            "run `pinlog presets load` first")
    return {"preset_version": int(version)}


async def count_candidates(engine: AsyncEngine, config: ReprocessConfig, mode: Mode) -> int:
    """How many rows ``reprocess(mode)`` would move now (``--dry-run``; changes nothing).

    Raises:
        ReprocessError: ``presets`` mode with no preset loaded for the current profile.
    """
    params = await _params(engine, config, mode)
    async with engine.connect() as conn:
        return int((await conn.execute(statements()(f"count_{mode}"), params)).scalar_one())


async def reprocess(
    engine: AsyncEngine,
    config: ReprocessConfig,
    mode: Mode,
    *,
    client: ProcessClient | None = None,
    batch_size: int = DEFAULT_BATCH_SIZE,
    on_batch: Callable[[int, int], None] | None = None,
) -> ReprocessReport:
    """Move the chosen COMPLETED stages back to PENDING, batch by batch (SPEC §7.5).

    Args:
        mode: ``"profile"`` (both stages; embeddings of another profile than
            ``config.profile``) or ``"presets"`` (keyword stage; analysis older than the
            current preset version of ``config.profile``).
        client: when given, the moved ids of each batch are dispatched after its commit
            (``config.concurrency`` at once); otherwise the rescan picks them up.
        batch_size: rows per transaction (>= 1).
        on_batch: progress callback ``(examined_in_batch, moved_in_batch)`` after each commit.

    Raises:
        ReprocessError: ``presets`` mode with no preset loaded for the current profile.
        ValueError: ``batch_size`` < 1.
    """
    if batch_size < 1:
        raise ValueError("batch size must be >= 1")
    params = await _params(engine, config, mode)
    report = ReprocessReport(mode=mode, target=str(next(iter(params.values()))))
    report.candidates = await count_candidates(engine, config, mode)
    statement = statements()(f"reprocess_{mode}_batch")
    after = 0
    while True:
        async with engine.begin() as conn:
            rows = (await conn.execute(statement, {**params, "after": after,
                                                   "batch_size": batch_size})).all()
        if not rows:
            break
        after = rows[-1][0]
        moved = [cid for cid, did_move in rows if did_move]
        report.batches += 1
        report.moved += len(moved)
        report.moved_ids += moved
        log.info("reprocess batch committed", extra={
            "reason": f"reprocess --{mode}", "batch": report.batches, "count": len(moved)})
        if client is not None and moved:
            report.dispatch.merge(await resend(engine, client, moved,
                                               concurrency=config.concurrency,
                                               actor="reprocess",
                                               busy_wait=config.busy_wait,
                                               batch_size=config.dispatch_batch))
        if on_batch is not None:
            on_batch(len(rows), len(moved))
    return report
