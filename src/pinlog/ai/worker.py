"""The in-process work queue of the ai side (SPEC §5.1, §5.4).

Accepted process requests wait in a bounded queue (``PINLOG_WORK_QUEUE_SIZE``); a bounded number
of jobs run at once (``PINLOG_WORKER_CONCURRENCY``). Jobs spend most of their time waiting for a
model and hold no connection then; their short DB steps are bounded separately by
:func:`db_slots` so they never need more connections than the pool has (minus a reserve for the
API). When the queue is full, :meth:`WorkQueue.offer` refuses (→ 503 +
``Retry-After``): the state row stays PENDING and the rescan recovers it. Nothing here is durable
by design (SPEC §1: the state rows are the queue).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from pinlog import metrics
from pinlog.contracts import ProcessRequest
from pinlog.logs import current_log_context, log_context

log = logging.getLogger(__name__)

#: Pool connections kept free for the API, readiness checks and search.
POOL_RESERVE = 2


def db_slots(db_pool_size: int) -> int:
    """DB steps the jobs may run at once: the pool minus :data:`POOL_RESERVE` (at least 1).

    A job holds a connection only for one short step at a time and none while it waits for a
    model, so the number of running jobs may exceed this; their DB steps never exceed what the
    pool can serve.
    """
    return max(1, db_pool_size - POOL_RESERVE)


@dataclass(frozen=True)
class Job:
    """An accepted request and the logging context it was accepted in (its ``request_id``)."""

    request: ProcessRequest
    log_context: Mapping[str, object]


class WorkQueue:
    """Bounded queue + ``concurrency`` worker tasks running ``handler`` for each job.

    Args:
        handler: ``async (request) -> object``; its exceptions are logged (ids only) and never
            stop a worker. It runs in the logging context the job was offered in (its
            ``request_id``) plus the request's ``context_id`` and ``record_id`` — never the
            context of the worker task or of another job.
        capacity: most jobs waiting (not counting running ones).
        concurrency: worker tasks.
    """

    def __init__(self, handler: Callable[[ProcessRequest], Awaitable[object]], *,
                 capacity: int, concurrency: int) -> None:
        self._handler = handler
        self.capacity = capacity
        self.concurrency = concurrency
        self._queue: asyncio.Queue[Job] | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._running_jobs = 0

    @property
    def running(self) -> bool:
        return bool(self._tasks)

    def start(self) -> None:
        """Create the queue and the worker tasks on the running loop."""
        if self._tasks:
            return
        self._queue = asyncio.Queue(maxsize=self.capacity)
        self._tasks = [asyncio.create_task(self._work(), name=f"ai-worker-{i}")
                       for i in range(self.concurrency)]

    def offer(self, request: ProcessRequest) -> bool:
        """Enqueue without waiting, with the caller's logging context. Returns False when full
        (or not started)."""
        if self._queue is None:
            return False
        try:
            self._queue.put_nowait(Job(request, current_log_context()))
        except asyncio.QueueFull:
            return False
        metrics.WORK_QUEUE_DEPTH.set(self._queue.qsize())
        return True

    def depth(self) -> int:
        return self._queue.qsize() if self._queue is not None else 0

    async def join(self) -> None:
        """Wait until every accepted job has finished."""
        if self._queue is not None:
            await self._queue.join()

    @property
    def running_jobs(self) -> int:
        """Jobs a worker is running right now."""
        return self._running_jobs

    async def stop(self, *, grace: float = 5.0) -> None:
        """Stop: refuse new jobs, drop the queued ones (their rows stay PENDING; the rescan
        recovers them), give running jobs up to ``grace`` seconds (``PINLOG_SHUTDOWN_GRACE``)
        to finish, then cancel them (a cancelled stage stays PROCESSING and is re-claimed after
        the processing expiry). Logs what it dropped, what it waits for and what it cancelled."""
        queue, self._queue = self._queue, None  # offer() refuses from now on
        dropped = 0
        if queue is not None:
            while not queue.empty():
                queue.get_nowait()
                queue.task_done()
                dropped += 1
        if dropped:
            log.warning("work queue stopped with jobs waiting (rows stay PENDING); the rescan "
                        "recovers them", extra={"count": dropped, "outcome": "dropped"})
        if self._tasks and queue is not None and grace > 0 and self._running_jobs:
            log.info("shutdown: waiting for running jobs to finish",
                     extra={"count": self._running_jobs, "seconds": grace})
            waiter = asyncio.create_task(queue.join())
            done, _ = await asyncio.wait({waiter}, timeout=grace)
            if not done:
                waiter.cancel()
        if self._running_jobs:
            log.warning("shutdown grace over: running jobs cancelled (their stages stay "
                        "PROCESSING; the rescan re-sends them after the processing expiry)",
                        extra={"count": self._running_jobs, "outcome": "cancelled"})
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        metrics.WORK_QUEUE_DEPTH.set(0)

    async def _work(self) -> None:
        queue = self._queue
        assert queue is not None
        while True:
            job = await queue.get()
            metrics.WORK_QUEUE_DEPTH.set(queue.qsize())
            self._running_jobs += 1
            # the job's edge: its lines carry the request id it was accepted with and its ids
            # (the worker task's own context is replaced, not merged: SPEC §12 ids per job)
            with log_context(job.log_context, context_id=job.request.context_id,
                             record_id=job.request.record_id):
                try:
                    await self._handler(job.request)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # noqa: BLE001 - a job never kills its worker
                    log.error("job crashed", extra={"error_class": type(exc).__name__})
                finally:
                    self._running_jobs -= 1
                    queue.task_done()
