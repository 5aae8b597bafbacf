"""The in-process work queue of the ai side (SPEC §5.1, §5.4).

Accepted process requests wait in a bounded queue (``PINLOG_WORK_QUEUE_SIZE``); a bounded number
of jobs run at once (``PINLOG_WORKER_CONCURRENCY``). Jobs spend most of their time waiting for a
model and hold no connection then; their short DB steps are bounded separately by
:func:`db_slots` so they never need more connections than the pool has (minus a reserve for the
API). When the queue is full, :meth:`WorkQueue.offer` refuses (→ 503 +
``Retry-After``): the state row stays PENDING and the rescan recovers it. Nothing here is durable
by design (SPEC §1: the state rows are the queue).

Batches (SPEC §5.4, docs/ARCHITECTURE.md "Batch path"): with a ``batch_handler``, a worker that
finds more jobs waiting than the one it took runs up to ``batch_size`` of them together through
the batch path (one claim and one write transaction per stage for all of them) — under load
(a burst, an import, a rescan or reprocess re-send) the per-context database work is shared; a
lone job runs the single-context job as before. The rules are the same either way.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
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
        batch_handler: ``async (jobs) -> object`` for several jobs at once (each :class:`Job`
            carries the logging context its per-context lines must use); it runs in an empty
            logging context (a batch's own lines carry no job's ids). None: one job at a time.
        batch_size: most jobs one worker takes at once for ``batch_handler`` (>= 1).
    """

    def __init__(self, handler: Callable[[ProcessRequest], Awaitable[object]], *,
                 capacity: int, concurrency: int,
                 batch_handler: Callable[[Sequence[Job]], Awaitable[object]] | None = None,
                 batch_size: int = 1) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        self._handler = handler
        self._batch_handler = batch_handler
        self.batch_size = batch_size if batch_handler is not None else 1
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
        """Stop: refuse new jobs, drop the queued ones (their rows stay PENDING), give running
        jobs up to ``grace`` seconds (``PINLOG_SHUTDOWN_GRACE``) to finish, then cancel them (a
        cancelled stage stays PROCESSING). Both are this process's work: when its process
        registry ends its lease, after the components stopped, the rescan of any live process
        (or of this one restarted) re-sends them at once (SPEC §7.3.1); without a registry they
        wait for their expiry. Logs what it dropped, what it waits for and what it cancelled."""
        queue, self._queue = self._queue, None  # offer() refuses from now on
        dropped = 0
        if queue is not None:
            while not queue.empty():
                queue.get_nowait()
                queue.task_done()
                dropped += 1
        if dropped:
            log.warning("work queue stopped with jobs waiting (rows stay PENDING); they are "
                        "handed back with this process's work at stop and re-sent by the rescan",
                        extra={"count": dropped, "outcome": "dropped"})
        if self._tasks and queue is not None and grace > 0 and self._running_jobs:
            log.info("shutdown: waiting for running jobs to finish",
                     extra={"count": self._running_jobs, "seconds": grace})
            waiter = asyncio.create_task(queue.join())
            done, _ = await asyncio.wait({waiter}, timeout=grace)
            if not done:
                waiter.cancel()
        if self._running_jobs:
            log.warning("shutdown grace over: running jobs cancelled (their stages stay "
                        "PROCESSING; handed back with this process's work at stop and re-sent "
                        "by the rescan)",
                        extra={"count": self._running_jobs, "outcome": "cancelled"})
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        metrics.WORK_QUEUE_DEPTH.set(0)

    def free(self) -> int:
        """Jobs :meth:`offer` would accept now (0 when stopped)."""
        return self.capacity - self._queue.qsize() if self._queue is not None else 0

    async def _work(self) -> None:
        queue = self._queue
        assert queue is not None
        while True:
            job = await queue.get()
            jobs = [job]
            while len(jobs) < self.batch_size and not queue.empty():  # others waiting: a batch
                jobs.append(queue.get_nowait())
            metrics.WORK_QUEUE_DEPTH.set(queue.qsize())
            if len(jobs) > 1:
                await self._run_batch(jobs, queue)
                continue
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

    async def _run_batch(self, jobs: list[Job], queue: asyncio.Queue[Job]) -> None:
        """Run several jobs through the batch handler, in an empty logging context (its
        per-context lines use each job's own context); a failure never stops the worker."""
        assert self._batch_handler is not None
        self._running_jobs += len(jobs)
        with log_context({}):
            try:
                await self._batch_handler(jobs)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - a batch never kills its worker
                log.error("batch crashed", extra={"error_class": type(exc).__name__,
                                                  "batch": len(jobs)})
            finally:
                self._running_jobs -= len(jobs)
                for _ in jobs:
                    queue.task_done()
