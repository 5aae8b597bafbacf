"""Dispatch of committed contexts to the ai side (SPEC §4 "Dispatch").

* :class:`HttpProcessClient` — ``POST /internal/v1/context/process`` with ``X-Internal-Secret`` and
  ``X-Request-Id``, short timeouts (connect 1 s, read 3 s by default); ``send_batch`` posts many
  contexts to ``POST /internal/v1/context/process-batch`` (docs/ARCHITECTURE.md "Batch path").
* :class:`InProcessClient` — the same contract when core and ai run in one process.
* :class:`Dispatcher` — a bounded in-memory queue (capacity 100 by default) drained by a few
  workers. When full, a request is **dropped** and counted: its PENDING state row is already
  committed and the rescan recovers it (SPEC §7).

The ``X-Request-Id`` sent is the ``request_id`` of the logging context (:mod:`pinlog.logs`: the
public request, the rescan's re-send, or the one the dispatcher gave the request), or a new one.

No client ever raises into the caller: every outcome is logged by class and counted in
``pinlog_dispatch_outcomes_total`` (401/403 and other 4xx at ERROR — a wrong secret must be loud;
503 busy, 5xx, timeouts and connection errors at WARNING).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import httpx
from pydantic import SecretStr

from pinlog import metrics
from pinlog.contracts import (PROCESS_BATCH_PATH, PROCESS_PATH, REQUEST_ID_HEADER, SECRET_HEADER,
                              BatchProcessClient, ProcessBatchResponse, ProcessClient,
                              ProcessRequest)
from pinlog.logs import log_context, request_id_or_new
from pinlog.settings import Settings, reveal

log = logging.getLogger(__name__)

#: Outcome label for a status code returned by the ai side.
ACCEPTED, DROPPED, UNAUTHORIZED, CLIENT_ERROR, SERVER_ERROR, BUSY, TIMEOUT, CONNECTION = (
    "accepted", "dropped", "unauthorized", "client_error", "server_error", "busy", "timeout",
    "connection",
)
#: A bug on our side (an unexpected exception inside a client); still never raised.
ERROR = "error"
#: No ai side configured at all (no base URL, no in-process adapter).
UNCONFIGURED = "unconfigured"


def outcome_for_status(status: int) -> str:
    """Outcome class of an HTTP status answered by the ai side (0 = no answer → ``connection``)."""
    if 200 <= status < 300:
        return ACCEPTED
    if status in (401, 403):
        return UNAUTHORIZED
    if status == 503:
        return BUSY
    if 500 <= status < 600:
        return SERVER_ERROR
    if status == 0:
        return CONNECTION
    return CLIENT_ERROR


def record_outcome(outcome: str, *, context_id: int, http_status: int | None = None) -> None:
    """Count ``outcome`` and log it at the level its class deserves (ids only, never text; the
    request id comes from the logging context)."""
    metrics.DISPATCH_OUTCOMES.labels(outcome).inc()
    _log_outcome("process request", outcome,
                 {"context_id": context_id, "outcome": outcome, "http_status": http_status})


#: True while :func:`send_paced` sends: its busy (503) answers are logged at DEBUG, and it logs
#: one WARNING itself if the ai side is still busy when it gives up (not one per re-send).
_PACED: ContextVar[bool] = ContextVar("pinlog_dispatch_paced", default=False)


def _log_outcome(what: str, outcome: str, extra: dict[str, object]) -> None:
    """The one log line of a dispatch outcome, at the level its class deserves: accepted at
    DEBUG, a refused secret and other 4xx/bugs at ERROR, the rest (busy, 5xx, no answer) at
    WARNING — but busy at DEBUG inside a paced send (:data:`_PACED`)."""
    if outcome == ACCEPTED:
        log.debug(f"{what} accepted", extra=extra)
    elif outcome == BUSY and _PACED.get():
        log.debug(f"{what} not delivered: the ai side is busy (503), sending it again",
                  extra=extra)
    elif outcome == UNAUTHORIZED:
        log.error(f"{what} rejected by the ai side: internal secret not accepted "
                  "(check PINLOG_INTERNAL_SECRETS on both sides)", extra=extra)
    elif outcome in (CLIENT_ERROR, ERROR):
        log.error(f"{what} failed; the rescan will retry", extra=extra)
    else:
        log.warning(f"{what} not delivered; the rescan will retry", extra=extra)


def record_batch_outcomes(requests: Sequence[ProcessRequest], statuses: Sequence[int]) -> None:
    """Count each request of a batch by the outcome of its status (as :func:`record_outcome`),
    but log one line per outcome class for the whole batch (``count``, the first context id):
    a busy ai side answering a backfill must not log a line per context."""
    outcomes: Counter[str] = Counter()
    first: dict[str, int] = {}
    for request, status in zip(requests, statuses, strict=True):
        outcome = outcome_for_status(status)
        outcomes[outcome] += 1
        first.setdefault(outcome, request.context_id)
    for outcome, count in outcomes.items():
        metrics.DISPATCH_OUTCOMES.labels(outcome).inc(count)
    for outcome, count in outcomes.items():
        _log_outcome("process batch", outcome,
                     {"context_id": first[outcome], "outcome": outcome, "count": count})


@dataclass(frozen=True, kw_only=True)
class BulkSends:
    """How bulk sends to the ai side go — the same two settings for the dispatch's batch path,
    the rescan's re-sends and reprocessing (docs/ARCHITECTURE.md "Batch path"); the configs of
    those three extend it (its fields are keyword-only, after each config's own).

    Attributes:
        dispatch_batch: contexts per process-batch call (``PINLOG_PROCESS_BATCH_SIZE``; 1 → one
            call per context).
        busy_wait: seconds a send keeps being retried while the ai side answers 503
            (``PINLOG_RESCAN_BUSY_WAIT``).
    """

    dispatch_batch: int = 1
    busy_wait: float = 0.0

    @staticmethod
    def bulk_settings(settings: Settings) -> dict[str, Any]:
        """``{"dispatch_batch": …, "busy_wait": …}`` from ``settings``, for ``cls(**…)``."""
        return {"dispatch_batch": settings.process_batch_size, "busy_wait": settings.rescan_busy_wait}


@dataclass(frozen=True)
class DispatchConfig(BulkSends):
    """Where and how core reaches the ai side (SPEC §4, §13).

    Attributes:
        ai_base_url: ``PINLOG_AI_BASE_URL``; None → the ai side runs in this process.
        secret: the internal secret core sends (the first of ``PINLOG_INTERNAL_SECRETS``).
        connect_timeout, read_timeout: ``PINLOG_DISPATCH_CONNECT_TIMEOUT`` /
            ``PINLOG_DISPATCH_READ_TIMEOUT``, seconds.
        queue_size, workers: ``PINLOG_DISPATCH_QUEUE_SIZE`` / ``PINLOG_DISPATCH_WORKERS``.
        dispatch_batch, busy_wait: :class:`BulkSends` (bulk work's :class:`BatchCollector`).
    """

    ai_base_url: str | None
    secret: SecretStr | None
    connect_timeout: float
    read_timeout: float
    queue_size: int
    workers: int

    @classmethod
    def from_settings(cls, settings: Settings) -> DispatchConfig:
        return cls(ai_base_url=settings.ai_base_url,
                   secret=next(iter(settings.internal_secrets), None),
                   connect_timeout=settings.dispatch_connect_timeout,
                   read_timeout=settings.dispatch_read_timeout,
                   queue_size=settings.dispatch_queue_size, workers=settings.dispatch_workers,
                   **cls.bulk_settings(settings))

    def endpoint(self) -> tuple[str, str]:
        """``(ai base URL, secret value)`` for an HTTP client of the ai side (never log them).

        Raises:
            ValueError: ``PINLOG_AI_BASE_URL`` is unset or no internal secret is configured.
        """
        secret = reveal(self.secret)
        if not self.ai_base_url or not secret:
            raise ValueError("PINLOG_AI_BASE_URL and PINLOG_INTERNAL_SECRETS are required")
        return self.ai_base_url, secret


class HttpProcessClient:
    """:class:`pinlog.contracts.ProcessClient` over HTTP (SPEC §4, §5.1).

    Args:
        base_url: the ai service, e.g. ``http://ai:8000`` (``PINLOG_AI_BASE_URL``).
        secret: the internal secret to send (the first of ``PINLOG_INTERNAL_SECRETS``).
        connect_timeout: seconds to establish the connection (default 1).
        read_timeout: seconds to wait for the answer (default 3).
        transport: optional httpx transport (tests).

    ``send`` returns the HTTP status, or 0 when there was no answer (timeout, refused
    connection, hang-up); it never raises (except ``asyncio.CancelledError``).
    """

    def __init__(self, base_url: str, secret: str, connect_timeout: float = 1.0,
                 read_timeout: float = 3.0, *, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self._secret = secret
        self._batch_route = True  # until the ai side answers 404/405 to a process-batch call
        self._client = httpx.AsyncClient(
            base_url=base_url.rstrip("/"),
            timeout=httpx.Timeout(connect=connect_timeout, read=read_timeout,
                                  write=read_timeout, pool=connect_timeout),
            transport=transport,
            follow_redirects=False,
        )

    @classmethod
    def from_config(cls, config: DispatchConfig) -> HttpProcessClient:
        """Client for ``config.ai_base_url`` sending the first internal secret.

        Raises:
            ValueError: ``ai_base_url`` is unset or no internal secret is configured.
        """
        base_url, secret = config.endpoint()
        return cls(base_url, secret, config.connect_timeout, config.read_timeout)

    async def send(self, request: ProcessRequest) -> int:
        """POST ``request`` with the logging context's request id (``X-Request-Id``); returns
        the status (0 = no answer). Logged and counted, never raises."""
        with log_context(request_id=request_id_or_new()) as ids:
            return await self._post(request, str(ids["request_id"]))

    async def _post(self, request: ProcessRequest, request_id: str) -> int:
        headers = {SECRET_HEADER: self._secret, REQUEST_ID_HEADER: request_id}
        try:
            response = await self._client.post(
                PROCESS_PATH, json=request.model_dump(mode="json", by_alias=True), headers=headers)
        except httpx.TimeoutException:
            record_outcome(TIMEOUT, context_id=request.context_id)
            return 0
        except httpx.TransportError:
            record_outcome(CONNECTION, context_id=request.context_id)
            return 0
        except Exception:  # noqa: BLE001 - a dispatch failure must never reach the user request
            log.exception("unexpected error while sending a process request",
                          extra={"context_id": request.context_id})
            metrics.DISPATCH_OUTCOMES.labels(ERROR).inc()
            return 0
        status = response.status_code
        record_outcome(outcome_for_status(status), context_id=request.context_id,
                       http_status=status)
        return status

    async def send_batch(self, requests: Sequence[ProcessRequest]) -> list[int]:
        """POST ``requests`` as one ``process-batch`` call (docs/ARCHITECTURE.md "Batch path")
        with the logging context's request id; returns one status per request (the item's
        status from the answer; the call's status for every item when the answer has none:
        401, 5xx, 0 = no answer). An ai side without the batch route (404/405: an older
        version; or a 202 without one status per context: not this contract) gets one
        ``process`` call per request instead, from then on. A batch the ai side finds too
        large (413: its ``Settings.batch_body_limit``) is sent again as two halves, down to one
        ``process`` call for a single context. Counted per request, logged once per outcome
        class; never raises."""
        if not requests:
            return []
        with log_context(request_id=request_id_or_new()) as ids:
            return await self._send_batch(requests, str(ids["request_id"]))

    async def _send_batch(self, requests: Sequence[ProcessRequest],
                          request_id: str) -> list[int]:
        if not self._batch_route:
            return [await self._post(r, request_id) for r in requests]
        statuses = await self._post_batch(requests, request_id)
        if statuses is None:  # no batch route on this ai side
            self._batch_route = False
            log.warning("the ai side has no process-batch route (an older version): "
                        "sending one request per context")
            return [await self._post(r, request_id) for r in requests]
        if all(status == 413 for status in statuses):  # the body passed the route's limit
            if len(requests) == 1:
                return [await self._post(requests[0], request_id)]
            half = len(requests) // 2
            return (await self._send_batch(requests[:half], request_id)
                    + await self._send_batch(requests[half:], request_id))
        record_batch_outcomes(requests, statuses)
        return statuses

    async def _post_batch(self, requests: Sequence[ProcessRequest],
                          request_id: str) -> list[int] | None:
        headers = {SECRET_HEADER: self._secret, REQUEST_ID_HEADER: request_id}
        body = {"contexts": [r.model_dump(mode="json", by_alias=True) for r in requests]}
        try:
            response = await self._client.post(PROCESS_BATCH_PATH, json=body, headers=headers)
        except httpx.TransportError:  # timeouts included: no answer for any of them
            return [0] * len(requests)
        except Exception:  # noqa: BLE001 - a dispatch failure must never reach the caller
            log.exception("unexpected error while sending a process batch",
                          extra={"context_id": requests[0].context_id, "count": len(requests)})
            return [0] * len(requests)
        if response.status_code in (404, 405):
            return None
        if response.status_code in (202, 503):
            try:
                # a 503 carries the error envelope besides the statuses: read only those
                statuses = ProcessBatchResponse.model_validate(
                    {"statuses": response.json()["statuses"]}).statuses
            except (ValueError, KeyError, TypeError):
                statuses = []
            if len(statuses) == len(requests):
                return statuses
            if response.status_code == 202:
                return None  # accepted without saying what: not the batch contract (re-sending
                # each context is safe: the ai side's guarded start lets one job own a stage)
        return [response.status_code] * len(requests)

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._client.aclose()


class InProcessClient:
    """:class:`pinlog.contracts.ProcessClient` calling the ai runtime directly (SPEC §1).

    Args:
        submit: ``async submit(request: ProcessRequest) -> int`` — the ai runtime's in-process
            adapter, answering like the HTTP route (202 accepted, 422, 503 queue full). It runs
            in the logging context with a ``request_id`` (the current one, or a new one), as
            the HTTP route would.
        submit_batch: ``async submit_batch(requests) -> list[int]`` — the adapter of the
            process-batch route (one status per request); None → ``send_batch`` calls
            ``submit`` for each request.

    ``send`` returns that status, or 0 when ``submit`` raised (logged at ERROR, counted); it never
    raises (except ``asyncio.CancelledError``). ``send_batch`` likewise, per request.
    """

    def __init__(self, submit: Callable[[ProcessRequest], Awaitable[int]],
                 submit_batch: Callable[[Sequence[ProcessRequest]], Awaitable[list[int]]]
                 | None = None) -> None:
        self._submit = submit
        self._submit_batch = submit_batch

    async def send_batch(self, requests: Sequence[ProcessRequest]) -> list[int]:
        """Hand ``requests`` to the ai runtime at once; one status per request (0 for all when
        it raised). Counted per request, logged once per outcome class."""
        if not requests:
            return []
        if self._submit_batch is None:
            return [await self.send(r) for r in requests]
        with log_context(request_id=request_id_or_new()):
            try:
                statuses = [int(s) for s in await self._submit_batch(requests)]
            except Exception:  # noqa: BLE001 - never into the caller
                log.exception("in-process submit_batch failed",
                              extra={"context_id": requests[0].context_id,
                                     "count": len(requests)})
                statuses = [0] * len(requests)
            if len(statuses) != len(requests):
                statuses = [0] * len(requests)
            record_batch_outcomes(requests, statuses)
            return statuses

    async def send(self, request: ProcessRequest) -> int:
        """Hand ``request`` to the ai runtime; returns its status (0 when it raised)."""
        with log_context(request_id=request_id_or_new()):
            try:
                status = int(await self._submit(request))
            except Exception:  # noqa: BLE001 - never into the caller
                log.exception("in-process submit failed", extra={"context_id": request.context_id})
                metrics.DISPATCH_OUTCOMES.labels(ERROR).inc()
                return 0
            record_outcome(outcome_for_status(status), context_id=request.context_id,
                           http_status=status)
            return status

    async def aclose(self) -> None:
        """Nothing to close."""


class UnconfiguredClient:
    """The client used when neither ``PINLOG_AI_BASE_URL`` nor an in-process ai runtime exists.

    ``send`` logs a WARNING, counts outcome ``unconfigured`` and returns 0: the state rows stay
    PENDING until an ai side is reachable and the rescan re-sends them.
    """

    async def send(self, request: ProcessRequest) -> int:
        metrics.DISPATCH_OUTCOMES.labels(UNCONFIGURED).inc()
        log.warning("no ai side configured (PINLOG_AI_BASE_URL unset and no in-process ai)",
                    extra={"context_id": request.context_id})
        return 0

    async def send_batch(self, requests: Sequence[ProcessRequest]) -> list[int]:
        """As :meth:`send` for each request, with one log line."""
        if not requests:
            return []
        metrics.DISPATCH_OUTCOMES.labels(UNCONFIGURED).inc(len(requests))
        log.warning("no ai side configured (PINLOG_AI_BASE_URL unset and no in-process ai)",
                    extra={"context_id": requests[0].context_id, "count": len(requests)})
        return [0] * len(requests)

    async def aclose(self) -> None:
        """Nothing to close."""


#: First and longest pause between re-sends of one busy (503) context, seconds (the live
#: dispatch and the rescan's one-request-per-context path).
BUSY_BACKOFF = (0.05, 2.0)
#: First and longest pause (seconds) before the busy (503) items of a batch are sent again: a batch
#: re-send is one call for many contexts, and the ai side empties its queue in well under a
#: second at backfill speed, so a long pause only leaves it idle (issue 25: with
#: :data:`BUSY_BACKOFF` a 4,000-context backfill spent half its time waiting).
BATCH_BUSY_BACKOFF = (0.02, 0.25)


def _pauses(backoff: tuple[float, float], busy_wait: float,
            clock: Callable[[], float]) -> Iterator[float]:
    """The pauses (seconds) between the re-sends of one paced send: ``backoff[0]`` doubling up
    to ``backoff[1]``, for as long as the next pause still ends within ``busy_wait`` seconds of
    the first ``next()`` (taken just after the first send). The caller stops early when nothing
    is busy any more (SPEC §7.2 "Recovery speed")."""
    deadline = clock() + busy_wait
    pause = backoff[0]
    while clock() + pause < deadline:
        yield pause
        pause = min(backoff[1], pause * 2)


async def send_paced(client: ProcessClient, request: ProcessRequest, *, busy_wait: float,
                     sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
                     clock: Callable[[], float] = time.monotonic,
                     stopping: Callable[[], bool] = lambda: False) -> int:
    """``client.send(request)``, sent again while the ai side answers 503 (its work queue is
    full) with capped exponential backoff (:data:`BUSY_BACKOFF`) for up to ``busy_wait``
    seconds (0 → once), so a context is processed as soon as that queue has room instead of
    waiting for the rescan's PENDING expiry, and the senders are paced by the queue instead of
    flooding it (SPEC §5.1, §7.2 "Recovery speed"). ``stopping()`` true (a shutdown) ends the
    re-sends at the next pause. The busy answers of the re-sends are logged at DEBUG; one
    WARNING when the last answer is still busy. Returns the last status; never raises for an
    ai-side failure."""
    if busy_wait <= 0:
        return await client.send(request)
    token = _PACED.set(True)
    try:
        status = await client.send(request)
        for pause in _pauses(BUSY_BACKOFF, busy_wait, clock):
            if status != 503 or stopping():
                break
            await sleep(pause)
            status = await client.send(request)
    finally:
        _PACED.reset(token)
    if status == 503:
        log.warning("process request not delivered: the ai side stayed busy (503) through the "
                    "busy wait; the rescan will retry",
                    extra={"context_id": request.context_id, "outcome": BUSY})
    return status


async def send_batch_paced(client: BatchProcessClient, requests: Sequence[ProcessRequest], *,
                           busy_wait: float,
                           sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
                           clock: Callable[[], float] = time.monotonic) -> list[int]:
    """``client.send_batch(requests)``, then the requests answered 503 (the ai side's queue is
    full) again with capped exponential backoff (:data:`BATCH_BUSY_BACKOFF`) for up to ``busy_wait``
    seconds, so bulk work is paced by that queue instead of flooding it (SPEC §7.2 "Recovery
    speed"). As :func:`send_paced`, the busy answers of a paced send are logged at DEBUG (they
    are sent again, not left for the rescan), and one WARNING names the requests still busy
    when the busy wait ends. Returns the last status of each request, in order; never raises
    for an ai-side failure."""
    if busy_wait <= 0:
        return list(await client.send_batch(requests))
    token = _PACED.set(True)
    try:
        statuses = list(await client.send_batch(requests))
        busy = [i for i, status in enumerate(statuses) if status == 503]
        for pause in _pauses(BATCH_BUSY_BACKOFF, busy_wait, clock):
            if not busy:
                break
            await sleep(pause)
            again = await client.send_batch([requests[i] for i in busy])
            for i, status in zip(busy, again, strict=True):
                statuses[i] = status
            busy = [i for i in busy if statuses[i] == 503]
    finally:
        _PACED.reset(token)
    if busy:
        log.warning("process batch not delivered: the ai side stayed busy (503) through the "
                    "busy wait; the rescan will retry",
                    extra={"context_id": requests[busy[0]].context_id, "count": len(busy),
                           "outcome": BUSY})
    return statuses


class BatchCollector:
    """A :class:`pinlog.core.services.DispatchQueue` for bulk work (``pinlog import``): requests
    of committed contexts are collected and sent ``batch_size`` at a time with
    :func:`send_batch_paced` when :meth:`flush` is awaited (the batch path, docs/ARCHITECTURE.md
    "Batch path"). A request the ai side does not accept stays PENDING for the rescan.

    Args:
        client: a :class:`pinlog.contracts.BatchProcessClient`.
        batch_size: most requests per call (>= 1).
        busy_wait: seconds a batch keeps being re-sent while the ai side answers 503.
    """

    def __init__(self, client: BatchProcessClient, batch_size: int, busy_wait: float) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        self.client, self.batch_size, self.busy_wait = client, batch_size, busy_wait
        self._pending: list[ProcessRequest] = []

    @property
    def pending(self) -> int:
        """Requests collected and not sent yet."""
        return len(self._pending)

    def enqueue(self, request: ProcessRequest) -> bool:
        """Collect ``request`` (never blocks; always True)."""
        self._pending.append(request)
        return True

    async def flush(self) -> list[int]:
        """Send everything collected, ``batch_size`` per call; returns the statuses in order."""
        statuses: list[int] = []
        while self._pending:
            chunk, self._pending = (self._pending[:self.batch_size],
                                    self._pending[self.batch_size:])
            statuses += await send_batch_paced(self.client, chunk, busy_wait=self.busy_wait)
        return statuses


class Dispatcher:
    """Bounded queue of process requests drained by ``workers`` tasks (SPEC §4).

    Args:
        client: any :class:`pinlog.contracts.ProcessClient`.
        queue_size: capacity of the waiting queue (``PINLOG_DISPATCH_QUEUE_SIZE``, default 100);
            requests being sent by a worker are not counted.
        workers: concurrent senders (``PINLOG_DISPATCH_WORKERS``).
        busy_wait: seconds a worker keeps re-sending a request the ai side answers 503 (its
            work queue is full) — :func:`send_paced` (``PINLOG_RESCAN_BUSY_WAIT``; 0 → once).
            Once a request stayed busy through the whole wait (the ai side is not just full:
            stopped, or serving another profile, SPEC §9.1), the next ones are sent once each
            until one is accepted again, so the queue is not held up a busy wait per request.
        sleep, clock: the pause between those re-sends and the clock of the wait (tests pass
            hooks).

    Only call :meth:`enqueue` with ids whose transaction has **committed**. A full queue drops
    the request (counted as outcome ``dropped``); the rescan recovers it. A request still busy
    after ``busy_wait`` stays PENDING for the rescan too. :meth:`stop` ends the re-sends.
    """

    def __init__(self, client: ProcessClient, queue_size: int = 100, workers: int = 4, *,
                 busy_wait: float = 0.0,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if queue_size < 1 or workers < 1 or busy_wait < 0:
            raise ValueError("queue_size and workers must be >= 1, busy_wait >= 0")
        self.client = client
        self.queue_size = queue_size
        self.workers = workers
        self.busy_wait, self._sleep, self._clock = busy_wait, sleep, clock
        #: a request stayed busy through the whole wait: send once until one is accepted
        self.busy_gave_up = False
        self._stopping = False
        self._queue: asyncio.Queue[tuple[ProcessRequest, Mapping[str, object]]] | None = None
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def queue(self) -> asyncio.Queue[tuple[ProcessRequest, Mapping[str, object]]]:
        if self._queue is None:  # created lazily inside the running event loop
            self._queue = asyncio.Queue(maxsize=self.queue_size)
        return self._queue

    @property
    def depth(self) -> int:
        """Requests waiting (not counting those being sent)."""
        return self.queue.qsize()

    def start(self) -> None:
        """Start the worker tasks (idempotent). Must be called inside the event loop."""
        if self._tasks:
            return
        self._tasks = [asyncio.create_task(self._work(), name=f"pinlog-dispatch-{i}")
                       for i in range(self.workers)]

    def enqueue(self, request: ProcessRequest) -> bool:
        """Queue ``request`` without blocking, with the caller's logging context and its
        ``request_id`` (a new one when it has none): the worker sends it in that context.

        Returns:
            True when queued; False when the queue was full (dropped: logged at WARNING and
            counted as ``dropped`` — the committed PENDING row is recovered by the rescan).
        """
        with log_context(request_id=request_id_or_new()) as ids:
            try:
                self.queue.put_nowait((request, ids))
            except asyncio.QueueFull:
                metrics.DISPATCH_OUTCOMES.labels(DROPPED).inc()
                log.warning("dispatch queue full: request dropped, the rescan will recover it",
                            extra={"context_id": request.context_id, "queue": self.queue_size})
                return False
        metrics.DISPATCH_QUEUE_DEPTH.set(self.queue.qsize())
        return True

    async def join(self) -> None:
        """Wait until every queued request has been sent (tests, shutdown)."""
        await self.queue.join()

    async def stop(self, drain_timeout: float = 5.0) -> None:
        """Let the workers finish the queue for up to ``drain_timeout`` seconds — each request
        sent once from now on (a busy one is not re-sent: the shutdown does not wait out busy
        waits) — then cancel them. Requests still queued are abandoned (their rows are PENDING;
        the rescan recovers)."""
        self._stopping = True
        if not self._tasks:
            return
        with contextlib.suppress(TimeoutError, asyncio.TimeoutError):
            async with asyncio.timeout(drain_timeout):
                await self.queue.join()
        left = self.queue.qsize()
        if left:
            log.warning("dispatcher stopped with requests queued; the rescan will recover them",
                        extra={"count": left})
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []

    async def _send(self, request: ProcessRequest) -> None:
        """One request through :func:`send_paced` (busy wait, or once: see the class)."""
        wait = 0.0 if self.busy_gave_up or self._stopping else self.busy_wait
        status = await send_paced(self.client, request, busy_wait=wait, sleep=self._sleep,
                                  clock=self._clock, stopping=lambda: self._stopping)
        if status == 503 and wait > 0 and not self._stopping:
            self.busy_gave_up = True
        elif 200 <= status < 300:
            self.busy_gave_up = False

    async def _work(self) -> None:
        queue = self.queue
        while True:
            request, ids = await queue.get()
            metrics.DISPATCH_QUEUE_DEPTH.set(queue.qsize())
            # sent in the context it was enqueued in (not the worker task's own)
            with log_context(ids):
                try:
                    await self._send(request)
                except Exception:  # noqa: BLE001 - a client bug must not kill the worker
                    log.exception("process client raised",
                                  extra={"context_id": request.context_id})
                    metrics.DISPATCH_OUTCOMES.labels(ERROR).inc()
                finally:
                    queue.task_done()
