"""Rescan loop and FAILED finalizer (SPEC §7).

One round (:meth:`RescanLoop.run_round`), in this order (SPEC §7.2):

1. **finalize** — own transaction: half-cancelled rows (one stage CANCELLED, the other
   unfinished — an anomaly) end CANCELLED; dead-end keyword stages (keyword PENDING while the
   embedding FAILED) end FAILED whatever their retry count; then expired rows whose retries are exhausted
   (``retry_count >= max``) have their PENDING/PROCESSING stages set FAILED (whitelist).
2. **claim** — own transaction: expired rows with retries left — and *released* ones, whose
   recorded owner process is gone (its heartbeat lease ended: SPEC §7.3.1), whatever their age —
   get ``retry_count + 1`` and ``rescanned_at = now()`` (never ``updated_at``: SPEC §7.3), this
   process as their owner, then commit.
3. **re-send** — for each claimed row, outside any transaction and holding no lock: re-read the
   context from core (deleted/superseded → no call, WARN if its state is not CANCELLED), then send
   a normal :class:`~pinlog.contracts.ProcessRequest` through the process client, with bounded
   concurrency (``RescanConfig.concurrency``); one failure never stops the round.

The predicates use the database clock and live in ``rescan.sql``; the expiry predicate is written
once there and shared by the claim and the finalizer. Any number of loops may run against one
database (``FOR UPDATE SKIP LOCKED``, SPEC §7.4).

Scheduling (SPEC §7.1 fixed delay + §7.2 "Recovery speed"): the first round runs at start-up;
after a round the loop waits **at most** ``rescan_interval`` (a fixed delay after the round
ended), and less when

* the round claimed (or finalized) a full batch — the next round starts at once; it cannot flood
  the ai side because a round ends only when the ai side has *accepted* its re-sends: a busy
  answer (503, its queue is full) is retried within the round with capped backoff
  (up to ``PINLOG_RESCAN_BUSY_WAIT`` seconds per re-send), so back-to-back rounds are paced by the ai side's queue;
* an unfinished row expires before the interval is over (``next_expiry`` in ``rescan.sql``;
  a known owner's lease end counts as one) — the loop wakes :data:`WAKE_SLACK_SECONDS` after it;
* ``PINLOG_HEARTBEAT_TIMEOUT`` is shorter: another process may die or stop at any moment and
  release rows this loop has not seen, so it looks at least once per timeout (SPEC §7.3.1).

So a crash backlog is re-sent within seconds of its owner's lease ending (or, owner unknown, of
its expiry), whatever the interval.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from functools import cache

from sqlalchemy import RowMapping
from sqlalchemy.ext.asyncio import AsyncEngine

from pinlog import metrics
from pinlog.contracts import BatchProcessClient, ProcessClient, ProcessRequest
from pinlog.core.dispatch import BulkSends, send_batch_paced, send_paced
from pinlog.core.services import place_meta
from pinlog.db.background import stop_task
from pinlog.db.sql import SqlStatements
from pinlog.logs import log_context
from pinlog.settings import Settings

log = logging.getLogger(__name__)

#: Seconds ``stop()`` lets a running round finish before it is cancelled.
STOP_GRACE_SECONDS = 10.0
#: Seconds the loop waits after the first expiry it sleeps towards (the DB and app clocks differ
#: by the time the query took; the slack makes the woken round find the row expired).
WAKE_SLACK_SECONDS = 1.0
#: Shortest wait between two rounds that were not back-to-back (no busy loop on a clock skew).
MIN_WAKE_SECONDS = 0.5
#: Wait after a round that failed (database unavailable): retried soon, not one interval later.
FAILED_ROUND_RETRY_SECONDS = 10.0


@cache
def statements() -> SqlStatements:
    """The statements of ``pinlog/core/rescan.sql`` (loaded once)."""
    return SqlStatements("pinlog.core", "rescan.sql",
                         fragments_from=("pinlog.db:process_settings.sql",))


@dataclass(frozen=True)
class RescanConfig(BulkSends):
    """The SPEC §7.1 parameters (``PINLOG_RESCAN_*``, ``PINLOG_*_EXPIRY``,
    ``PINLOG_MAX_RETRIES``; the settings check them once, when they load).

    Attributes:
        enabled: a running core runs the rescan loop (``PINLOG_RESCAN_ENABLED``).
        interval: longest wait between rounds (fixed delay).
        pending_expiry, processing_expiry: how long a stage may stay PENDING / PROCESSING.
        max_retries: retries a row gets before its unfinished stages end FAILED.
        batch_size: rows one round claims (and finalizes) at most.
        concurrency: re-sends in flight at once.
        heartbeat_timeout: ``PINLOG_HEARTBEAT_TIMEOUT``, seconds: the longest wait between two
            rounds while anything is unfinished or may become so (SPEC §7.3.1: a live replica
            notices the work a dead or stopped process released within about one timeout).
        dispatch_batch, busy_wait: :class:`~pinlog.core.dispatch.BulkSends` (the re-sends').
    """

    enabled: bool
    interval: timedelta
    pending_expiry: timedelta
    processing_expiry: timedelta
    max_retries: int
    batch_size: int
    concurrency: int
    heartbeat_timeout: float = 30.0

    @classmethod
    def from_settings(cls, settings: Settings) -> RescanConfig:
        return cls(enabled=settings.rescan_enabled, interval=settings.rescan_interval,
                   pending_expiry=settings.pending_expiry,
                   processing_expiry=settings.processing_expiry,
                   max_retries=settings.max_retries, batch_size=settings.rescan_batch_size,
                   concurrency=settings.rescan_concurrency,
                   heartbeat_timeout=settings.heartbeat_timeout, **cls.bulk_settings(settings))


@dataclass
class DispatchReport:
    """What happened to the re-sends of one batch of context ids.

    ``dispatched``: the ai side accepted (HTTP 202); ``skipped_deleted``: context deleted,
    superseded or missing → no call; ``skipped_finished``: both stages already finished when
    re-read → no call; ``failed_calls``: any other answer (401/422/503/5xx, 0 = no answer) or an
    exception from the client.
    """

    dispatched: list[int] = field(default_factory=list)
    skipped_deleted: list[int] = field(default_factory=list)
    skipped_finished: list[int] = field(default_factory=list)
    failed_calls: list[int] = field(default_factory=list)

    def merge(self, other: DispatchReport) -> None:
        self.dispatched += other.dispatched
        self.skipped_deleted += other.skipped_deleted
        self.skipped_finished += other.skipped_finished
        self.failed_calls += other.failed_calls


@dataclass
class RoundReport:
    """Outcome of one rescan round (SPEC §7.2). Counts; the ``*_ids`` lists name the contexts.

    ``finalized``: rows whose exhausted unfinished stages became FAILED; ``dead_ends``: keyword
    stages ended FAILED because the embedding failed; ``half_cancelled``: anomalous rows whose
    unfinished stage was ended CANCELLED because the other stage was CANCELLED; ``claimed``: rows whose retry was spent;
    ``dispatched`` / ``skipped_deleted`` / ``failed_calls``: see :class:`DispatchReport`.
    After the round (:class:`ExpiryOutlook`): ``waiting`` unfinished rows not yet expired,
    ``expired_left`` expired rows left for the next round (beyond the batch, or locked), and
    ``first_expires_in`` seconds until the first waiting row expires (None: none waiting).
    """

    finalized: int = 0
    dead_ends: int = 0
    half_cancelled: int = 0
    claimed: int = 0
    dispatched: int = 0
    skipped_deleted: int = 0
    skipped_finished: int = 0
    failed_calls: int = 0
    seconds: float = 0.0
    waiting: int = 0
    expired_left: int = 0
    first_expires_in: float | None = None
    finalized_ids: list[int] = field(default_factory=list)
    dead_end_ids: list[int] = field(default_factory=list)
    half_cancelled_ids: list[int] = field(default_factory=list)
    claimed_ids: list[int] = field(default_factory=list)
    dispatched_ids: list[int] = field(default_factory=list)
    skipped_deleted_ids: list[int] = field(default_factory=list)
    failed_call_ids: list[int] = field(default_factory=list)


_UNFINISHED = ("PENDING", "PROCESSING")


@dataclass(frozen=True)
class ExpiryOutlook:
    """Unfinished rows the rescan will act on later (SPEC §7.3 clock, ``next_expiry`` in SQL).

    ``waiting``: rows not expired yet; ``expired``: rows already expired (claimable now);
    ``first_expires_in``: seconds until the first waiting row expires, None when none waits.
    Rows that never expire (a CANCELLED stage, a dead-end keyword stage) are not counted.
    """

    waiting: int
    expired: int
    first_expires_in: float | None


async def expiry_outlook(engine: AsyncEngine, config: RescanConfig) -> ExpiryOutlook:
    """Read the :class:`ExpiryOutlook` (one short read-only query, database clock)."""
    async with engine.connect() as conn:
        row = (await conn.execute(statements()("next_expiry"), {
            "pending_expiry": config.pending_expiry,
            "processing_expiry": config.processing_expiry,
            "max_retries": config.max_retries})).mappings().one()
    first = row["first_expires_in"]
    return ExpiryOutlook(int(row["waiting"]), int(row["expired"]),
                         float(first) if first is not None else None)


def next_delay(config: RescanConfig, report: RoundReport | None,
               outlook: ExpiryOutlook | None) -> float:
    """Seconds the loop waits before its next round (SPEC §7.1, §7.2 "Recovery speed", §7.3.1).

    0 after a round that claimed or finalized a full batch (more is waiting; the round already
    waited for the ai side to accept its re-sends). Otherwise ``rescan_interval``, shortened to
    the first expiry + :data:`WAKE_SLACK_SECONDS` (at least :data:`MIN_WAKE_SECONDS`; an owner's
    lease end counts as an expiry, ``next_expiry``) and to ``heartbeat_timeout`` — another
    process may die or stop at any moment and release work this loop has not seen yet, so it
    looks at least once per heartbeat timeout (SPEC §7.3.1); with expired rows still left
    (locked by another loop) :data:`MIN_WAKE_SECONDS`. ``report`` None (the round failed, e.g.
    the database was unavailable) → :data:`FAILED_ROUND_RETRY_SECONDS` (at most the interval).
    Pure: reads ``config.interval``, ``config.heartbeat_timeout`` and ``config.batch_size``.
    """
    interval = config.interval.total_seconds()
    if report is None:
        return min(interval, FAILED_ROUND_RETRY_SECONDS)
    batch = config.batch_size
    if (report.claimed >= batch or report.finalized >= batch or report.dead_ends >= batch
            or report.half_cancelled >= batch):
        return 0.0
    longest = min(interval, config.heartbeat_timeout)
    if outlook is None:
        return longest
    if outlook.expired:
        return min(longest, MIN_WAKE_SECONDS)
    if outlook.first_expires_in is not None:
        return min(longest, max(MIN_WAKE_SECONDS, outlook.first_expires_in + WAKE_SLACK_SECONDS))
    return longest


async def resend(
    engine: AsyncEngine,
    client: ProcessClient,
    context_ids: Iterable[int],
    *,
    concurrency: int,
    actor: str = "rescan",
    busy_wait: float = 0.0,
    batch_size: int = 1,
) -> DispatchReport:
    """Re-read each context from core and send a normal process request (SPEC §7.2 step 3).

    Each id is handled on its own: a short read on a pooled connection (released before the
    call — no DB connection or lock is held while calling the ai side), then
    ``client.send(ProcessRequest(contextId, userId=member_id, recordId, text=body))``. At most
    ``concurrency`` ids are in flight. Never raises for a single id's failure.

    With ``batch_size`` > 1 and a client that can send batches
    (:class:`pinlog.contracts.BatchProcessClient`), ids go ``batch_size`` at a time instead: one
    read of the batch (``reread_contexts``) and one ``send_batch`` call for the contexts still
    to process (the batch path, docs/ARCHITECTURE.md "Batch path"); at most ``concurrency``
    batches in flight. Every id keeps its own outcome.

    Args:
        context_ids: state row ids (= ``core.context.id``) to re-send.
        concurrency: parallel re-sends (>= 1).
        actor: ``rescan`` or ``reprocess`` (log and metric label only).
        busy_wait: seconds one id keeps being re-sent (capped exponential backoff from
            :data:`BUSY_BACKOFF`) while the ai side answers 503 (its queue is full); 0 → once.
        batch_size: contexts per process-batch call (``PINLOG_PROCESS_BATCH_SIZE``); 1 → one
            call per context.
    """
    if batch_size > 1 and isinstance(client, BatchProcessClient):
        return await _resend_batches(engine, client, list(context_ids), concurrency=concurrency,
                                     actor=actor, busy_wait=busy_wait, batch_size=batch_size)
    semaphore = asyncio.Semaphore(max(1, concurrency))
    q = statements()

    async def one(context_id: int) -> tuple[str, int]:
        async with semaphore:
            try:
                async with engine.connect() as conn:
                    row = (await conn.execute(q("reread_contexts"),
                                              {"context_ids": [context_id]})).mappings().first()
                outcome, request = _request_or_skip(context_id, row, actor)
                if request is None:
                    return outcome, context_id
                with log_context(request_id=f"{actor}-{uuid.uuid4().hex[:16]}"):  # X-Request-Id
                    # busy (503: the ai side's queue is full) → wait and re-send, so the rescan
                    # is paced by that queue instead of flooding it (SPEC §7.2 "Recovery speed")
                    status = await send_paced(client, request, busy_wait=busy_wait)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - one failure never stops the round
                log.warning("re-send failed", extra={
                    "context_id": context_id, "outcome": "error",
                    "error_class": type(exc).__name__})
                metrics.RESCAN_DISPATCHED.labels(outcome="error").inc()
                return "failed", context_id
            if status == 202:
                metrics.RESCAN_DISPATCHED.labels(outcome="accepted").inc()
                return "dispatched", context_id
            log.warning("re-send not accepted", extra={
                "context_id": context_id, "http_status": status, "outcome": "not_accepted"})
            metrics.RESCAN_DISPATCHED.labels(outcome="not_accepted").inc()
            return "failed", context_id

    return _report(await asyncio.gather(*(one(cid) for cid in context_ids)))


def _report(results: Iterable[tuple[str, int]]) -> DispatchReport:
    report = DispatchReport()
    buckets = {"dispatched": report.dispatched, "skipped_deleted": report.skipped_deleted,
               "skipped_finished": report.skipped_finished, "failed": report.failed_calls}
    for outcome, cid in results:
        buckets[outcome].append(cid)
    return report


def _request_or_skip(context_id: int, row: RowMapping | None,
                     actor: str) -> tuple[str, ProcessRequest | None]:
    """What a re-read row means for its re-send (SPEC §7.2 step 3): ``("skipped_deleted", None)``
    when the context is deleted, superseded or missing (a WARN when its state is not CANCELLED:
    an invalidation was missed), ``("skipped_finished", None)`` when both stages are finished,
    else ``("send", request)`` with the text (and the saved place as ``placeMeta``, SPEC §10)
    re-read from core. Counts the skips."""
    if row is None or row["context_id"] is None or not row["active"]:
        statuses = (str(row["embedding_status"]), str(row["keyword_status"])) if row else ()
        if row is not None and any(s != "CANCELLED" for s in statuses):
            log.warning(
                "re-send skipped: context deleted or missing but its state is not "
                "CANCELLED (an invalidation was missed)",
                extra={"context_id": context_id, "status": "/".join(statuses),
                       "outcome": "skipped_deleted", "reason": actor},
            )
        else:
            log.info("re-send skipped: context deleted",
                     extra={"context_id": context_id, "outcome": "skipped_deleted"})
        metrics.RESCAN_DISPATCHED.labels(outcome="skipped_deleted").inc()
        return "skipped_deleted", None
    if row["embedding_status"] not in _UNFINISHED and row["keyword_status"] not in _UNFINISHED:
        metrics.RESCAN_DISPATCHED.labels(outcome="skipped_finished").inc()
        return "skipped_finished", None
    return "send", ProcessRequest(
        context_id=row["context_id"], user_id=row["member_id"], record_id=row["record_id"],
        text=row["body"],
        place_meta=place_meta(row) if row["external_place_id"] is not None else None)


async def _resend_batches(engine: AsyncEngine, client: BatchProcessClient, context_ids: list[int],
                          *, concurrency: int, actor: str, busy_wait: float,
                          batch_size: int) -> DispatchReport:
    """:func:`resend` by batches of ``batch_size`` ids (see there)."""
    semaphore = asyncio.Semaphore(max(1, concurrency))
    q = statements()

    async def one(chunk: list[int]) -> list[tuple[str, int]]:
        async with semaphore:
            try:
                async with engine.connect() as conn:
                    rows = {int(r["state_id"]): r for r in (await conn.execute(
                        q("reread_contexts"), {"context_ids": chunk})).mappings()}
                outcomes: list[tuple[str, int]] = []
                requests: list[ProcessRequest] = []
                for context_id in chunk:
                    outcome, request = _request_or_skip(context_id, rows.get(context_id), actor)
                    if request is None:
                        outcomes.append((outcome, context_id))
                    else:
                        requests.append(request)
                if not requests:
                    return outcomes
                with log_context(request_id=f"{actor}-{uuid.uuid4().hex[:16]}"):  # X-Request-Id
                    statuses = dict(zip((r.context_id for r in requests), await send_batch_paced(
                        client, requests, busy_wait=busy_wait), strict=True))
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - one failure never stops the round
                log.warning("batch re-send failed", extra={
                    "context_id": chunk[0], "count": len(chunk), "outcome": "error",
                    "error_class": type(exc).__name__})
                metrics.RESCAN_DISPATCHED.labels(outcome="error").inc(len(chunk))
                return [("failed", cid) for cid in chunk]
            refused = [cid for cid, status in statuses.items() if status != 202]
            metrics.RESCAN_DISPATCHED.labels(outcome="accepted").inc(len(statuses) - len(refused))
            if refused:
                log.warning("re-send not accepted", extra={
                    "context_id": refused[0], "count": len(refused),
                    "http_status": statuses[refused[0]], "outcome": "not_accepted"})
                metrics.RESCAN_DISPATCHED.labels(outcome="not_accepted").inc(len(refused))
            return outcomes + [("dispatched" if statuses[r.context_id] == 202 else "failed",
                                r.context_id) for r in requests]

    chunks = [context_ids[i:i + batch_size] for i in range(0, len(context_ids), batch_size)]
    return _report(pair for done in await asyncio.gather(*(one(c) for c in chunks))
                   for pair in done)


def expiry_params(config: RescanConfig, owner: str | None = None) -> dict[str, object]:
    """Bound parameters of the shared expiry predicate, the retry ceiling (SPEC §7.1) and the
    claimer recorded as the owner (``owner``: a process id, SPEC §7.3.1; None = unknown)."""
    return {
        "pending_expiry": config.pending_expiry,
        "processing_expiry": config.processing_expiry,
        "max_retries": config.max_retries,
        "batch_size": config.batch_size,
        "owner": owner,
    }


class RescanLoop:
    """The rescan + finalizer of SPEC §7, as a fixed-delay background loop or single rounds.

    Args:
        config: interval, expiries, max retries, batch size, concurrency (SPEC §7.1, §13).
        engine: async engine on the shared database.
        client: the process client (HTTP or in-process adapter) used for re-sends.
        owner: this process's id (``ProcessRegistry.process_id``): the claim records it as the
            owner of the rows it re-sends (SPEC §7.3.1); None → no owner (expiry backstop).
    """

    def __init__(self, engine: AsyncEngine, config: RescanConfig, client: ProcessClient, *,
                 owner: str | None = None) -> None:
        self.config = config
        self.engine = engine
        self.client = client
        self.owner = owner
        self._task: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()
        self._in_round = False
        self.rounds = 0
        self.outlook: ExpiryOutlook | None = None
        self.last_half_cancelled: list[int] = []

    # --- the three steps (public so tests can interleave events between them) --------------
    async def finalize(self) -> tuple[list[int], list[int]]:
        """Step 1, one transaction: half-cancelled rows (→ CANCELLED, kept in
        :attr:`last_half_cancelled`), dead-end keyword stages, then exhausted expired rows.

        Returns:
            (dead-end context ids, finalized context ids).
        """
        q = statements()
        params = expiry_params(self.config)
        async with self.engine.begin() as conn:
            half = (await conn.execute(q("finalize_half_cancelled"),
                                       {"batch_size": params["batch_size"]})).mappings().all()
            dead = (await conn.execute(q("finalize_dead_ends"),
                                       {"batch_size": params["batch_size"]})).scalars().all()
            finalized = (await conn.execute(q("finalize_exhausted"), params)).mappings().all()
        self.last_half_cancelled = [row["context_id"] for row in half]
        for row in half:
            log.warning("anomaly: half-cancelled row ended CANCELLED (an invalidation wins)", extra={
                "context_id": row["context_id"], "outcome": "half_cancelled",
                "previous_status": f"{row['embedding_before']}/{row['keyword_before']}"})
        for cid in dead:
            log.warning("dead-end keyword stage finalized FAILED (embedding failed)",
                        extra={"context_id": cid, "stage": "keyword", "outcome": "dead_end"})
        for row in finalized:
            log.warning("retries exhausted: unfinished stages finalized FAILED", extra={
                "context_id": row["context_id"], "outcome": "finalized",
                "count": row["retry_count"],
                "previous_status": f"{row['embedding_before']}/{row['keyword_before']}"})
        return list(dead), [row["context_id"] for row in finalized]

    async def claim(self) -> list[int]:
        """Step 2, one transaction: spend one retry of each expired or released (owner gone,
        SPEC §7.3.1) row with retries left; this process becomes the rows' owner.

        Returns:
            claimed context ids (committed before this returns).
        """
        async with self.engine.begin() as conn:
            rows = (await conn.execute(statements()("claim"),
                                       expiry_params(self.config, self.owner))).mappings().all()
        for row in rows:
            log.info("rescan claimed", extra={
                "context_id": row["context_id"], "attempt": row["retry_count"],
                "status": f"{row['embedding_status']}/{row['keyword_status']}"})
        return [row["context_id"] for row in rows]

    async def dispatch(self, context_ids: Sequence[int]) -> DispatchReport:
        """Step 3: re-read and re-send each claimed id (no transaction, bounded concurrency)."""
        return await resend(self.engine, self.client, context_ids,
                            concurrency=self.config.concurrency,
                            busy_wait=self.config.busy_wait,
                            batch_size=self.config.dispatch_batch)

    async def run_round(self) -> RoundReport:
        """One full round: finalize → claim → re-send (SPEC §7.2). Updates RESCAN_* metrics.
        Every line of the round carries its ``round_id`` (16 hex digits; logging context).

        Raises:
            whatever the database raises in steps 1–2 (the loop logs it and tries again next
            interval); step 3 never raises for a single context.
        """
        with log_context(round_id=uuid.uuid4().hex[:16]):  # the round's edge
            return await self._round()

    async def _round(self) -> RoundReport:
        started = time.monotonic()
        report = RoundReport()
        try:
            dead, finalized = await self.finalize()
            report.dead_end_ids, report.finalized_ids = dead, finalized
            report.dead_ends, report.finalized = len(dead), len(finalized)
            report.half_cancelled_ids = self.last_half_cancelled
            report.half_cancelled = len(report.half_cancelled_ids)
            metrics.RESCAN_FINALIZED.set(report.finalized + report.dead_ends)
            claimed = await self.claim()
            report.claimed_ids, report.claimed = claimed, len(claimed)
            metrics.RESCAN_CANDIDATES.set(report.claimed)
            sent = await self.dispatch(claimed)
        except asyncio.CancelledError:
            metrics.RESCAN_ROUNDS.labels(outcome="cancelled").inc()
            raise
        except Exception:
            metrics.RESCAN_ROUNDS.labels(outcome="error").inc()
            raise
        report.dispatched_ids = sent.dispatched
        report.skipped_deleted_ids = sent.skipped_deleted
        report.failed_call_ids = sent.failed_calls
        report.dispatched = len(sent.dispatched)
        report.skipped_deleted = len(sent.skipped_deleted)
        report.skipped_finished = len(sent.skipped_finished)
        report.failed_calls = len(sent.failed_calls)
        report.seconds = time.monotonic() - started
        try:
            outlook = await expiry_outlook(self.engine, self.config)
        except asyncio.CancelledError:
            raise
        except Exception:  # noqa: BLE001 - the round is done; only the outlook is missing
            outlook = None
        self.outlook = outlook
        if outlook is not None:
            report.waiting, report.expired_left = outlook.waiting, outlook.expired
            report.first_expires_in = outlook.first_expires_in
        metrics.RESCAN_ROUNDS.labels(outcome="ok").inc()
        self.rounds += 1
        level = logging.INFO if (report.claimed or report.finalized or report.dead_ends
                                 or report.half_cancelled) else logging.DEBUG
        log.log(level, "rescan round", extra={
            "claimed": report.claimed, "finalized": report.finalized + report.dead_ends,
            "dispatched": report.dispatched, "count": report.failed_calls,
            "seconds": round(report.seconds, 3)})
        return report

    # --- the loop ----------------------------------------------------------------------------
    async def start(self) -> None:
        """Start the loop as a background task (first round immediately; delays between rounds
        from :func:`next_delay`)."""
        if self._task is not None and not self._task.done():
            return
        self._stopping = asyncio.Event()
        self._task = asyncio.create_task(self._loop(), name="pinlog-rescan")

    async def stop(self, grace: float = STOP_GRACE_SECONDS) -> None:
        """Stop the loop. A sleeping loop stops at once; a running round gets ``grace``
        seconds to finish, then is cancelled (its transactions roll back; a claim already
        committed is simply recovered by a later round). Safe to call twice or when not started.
        """
        task, self._task = self._task, None
        await stop_task(task, self._stopping, grace)

    async def run_forever(self) -> None:
        """Run the loop in the foreground until cancelled or :meth:`stop` is called."""
        self._stopping = asyncio.Event()
        await self._loop()

    async def _loop(self) -> None:
        while not self._stopping.is_set():
            report: RoundReport | None = None
            try:
                report = await self.run_round()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - the loop must survive a bad round
                log.error("rescan round failed", extra={"error_class": type(exc).__name__})
            delay = next_delay(self.config, report, self.outlook if report else None)
            if delay <= 0:
                await asyncio.sleep(0)  # back-to-back: let other tasks run, then go on
                continue
            try:
                # at most a fixed delay: the next round starts `delay` after this one ended
                async with asyncio.timeout(delay):
                    await self._stopping.wait()
            except (TimeoutError, asyncio.TimeoutError):
                pass
