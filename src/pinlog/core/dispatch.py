"""Dispatch of committed contexts to the ai side (SPEC §4 "Dispatch").

* :class:`HttpProcessClient` — ``POST /internal/v1/context/process`` with ``X-Internal-Secret`` and
  ``X-Request-Id``, short timeouts (connect 1 s, read 3 s by default).
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
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

import httpx
from pydantic import SecretStr

from pinlog import metrics
from pinlog.contracts import PROCESS_PATH, REQUEST_ID_HEADER, SECRET_HEADER, ProcessClient, ProcessRequest
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
    extra = {"context_id": context_id, "outcome": outcome, "http_status": http_status}
    if outcome == ACCEPTED:
        log.debug("process request accepted", extra=extra)
    elif outcome == UNAUTHORIZED:
        log.error("process request rejected by the ai side: internal secret not accepted "
                  "(check PINLOG_INTERNAL_SECRETS on both sides)", extra=extra)
    elif outcome in (CLIENT_ERROR, ERROR):
        log.error("process request failed; the rescan will retry", extra=extra)
    else:
        log.warning("process request not delivered; the rescan will retry", extra=extra)


@dataclass(frozen=True)
class DispatchConfig:
    """Where and how core reaches the ai side (SPEC §4, §13).

    Attributes:
        ai_base_url: ``PINLOG_AI_BASE_URL``; None → the ai side runs in this process.
        secret: the internal secret core sends (the first of ``PINLOG_INTERNAL_SECRETS``).
        connect_timeout, read_timeout: ``PINLOG_DISPATCH_CONNECT_TIMEOUT`` /
            ``PINLOG_DISPATCH_READ_TIMEOUT``, seconds.
        queue_size, workers: ``PINLOG_DISPATCH_QUEUE_SIZE`` / ``PINLOG_DISPATCH_WORKERS``.
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
                   queue_size=settings.dispatch_queue_size, workers=settings.dispatch_workers)

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

    ``send`` returns that status, or 0 when ``submit`` raised (logged at ERROR, counted); it never
    raises (except ``asyncio.CancelledError``).
    """

    def __init__(self, submit: Callable[[ProcessRequest], Awaitable[int]]) -> None:
        self._submit = submit

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

    async def aclose(self) -> None:
        """Nothing to close."""


class Dispatcher:
    """Bounded queue of process requests drained by ``workers`` tasks (SPEC §4).

    Args:
        client: any :class:`pinlog.contracts.ProcessClient`.
        queue_size: capacity of the waiting queue (``PINLOG_DISPATCH_QUEUE_SIZE``, default 100);
            requests being sent by a worker are not counted.
        workers: concurrent senders (``PINLOG_DISPATCH_WORKERS``).

    Only call :meth:`enqueue` with ids whose transaction has **committed**. A full queue drops
    the request (counted as outcome ``dropped``); the rescan recovers it.
    """

    def __init__(self, client: ProcessClient, queue_size: int = 100, workers: int = 4) -> None:
        if queue_size < 1 or workers < 1:
            raise ValueError("queue_size and workers must be >= 1")
        self.client = client
        self.queue_size = queue_size
        self.workers = workers
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
        """Let the workers finish the queue for up to ``drain_timeout`` seconds, then cancel
        them. Requests still queued are abandoned (their rows are PENDING; the rescan recovers)."""
        if not self._tasks:
            return
        with contextlib.suppress(TimeoutError, asyncio.TimeoutError):
            await asyncio.wait_for(self.queue.join(), timeout=drain_timeout)
        left = self.queue.qsize()
        if left:
            log.warning("dispatcher stopped with requests queued; the rescan will recover them",
                        extra={"count": left})
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []

    async def _work(self) -> None:
        queue = self.queue
        while True:
            request, ids = await queue.get()
            metrics.DISPATCH_QUEUE_DEPTH.set(queue.qsize())
            # sent in the context it was enqueued in (not the worker task's own)
            with log_context(ids):
                try:
                    await self.client.send(request)
                except Exception:  # noqa: BLE001 - a client bug must not kill the worker
                    log.exception("process client raised",
                                  extra={"context_id": request.context_id})
                    metrics.DISPATCH_OUTCOMES.labels(ERROR).inc()
                finally:
                    queue.task_done()
