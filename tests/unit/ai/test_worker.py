"""The bounded work queue (SPEC §5.1, §5.4)."""

from __future__ import annotations

import asyncio
import logging

from pinlog.ai.worker import WorkQueue
from pinlog.contracts import ProcessRequest
from pinlog.logs import log_context


def req(cid: int) -> ProcessRequest:
    return ProcessRequest(context_id=cid, user_id=1, record_id=1, text="t")


async def test_bounded_queue_refuses_when_full_and_runs_jobs_concurrently_up_to_the_limit():
    release = asyncio.Event()
    running: set[int] = set()
    peak = 0
    two_running = asyncio.Event()

    async def handler(request):
        nonlocal peak
        running.add(request.context_id)
        peak = max(peak, len(running))
        if len(running) == 2:
            two_running.set()
        await release.wait()
        running.discard(request.context_id)

    queue = WorkQueue(handler, capacity=2, concurrency=2)
    assert not queue.offer(req(9))  # not started
    queue.start()
    assert queue.offer(req(1)) and queue.offer(req(2))
    await asyncio.wait_for(two_running.wait(), 5)  # both workers busy, queue empty
    assert queue.offer(req(3)) and queue.offer(req(4))
    assert not queue.offer(req(5))  # capacity 2 reached
    assert queue.depth() == 2
    release.set()
    await queue.join()
    assert peak == 2
    await queue.stop()


async def test_a_crashing_job_never_stops_its_worker():
    seen = []

    async def handler(request):
        seen.append(request.context_id)
        if request.context_id == 1:
            raise ValueError("bug")

    queue = WorkQueue(handler, capacity=5, concurrency=1)
    queue.start()
    queue.offer(req(1))
    queue.offer(req(2))
    await queue.join()
    assert seen == [1, 2]
    await queue.stop()


async def test_stop_drops_queued_jobs_and_refuses_new_ones():
    started = asyncio.Event()
    seen = []

    async def handler(request):
        seen.append(request.context_id)
        started.set()
        await asyncio.Event().wait()  # never finishes by itself

    queue = WorkQueue(handler, capacity=5, concurrency=1)
    queue.start()
    queue.offer(req(1))
    queue.offer(req(2))
    await asyncio.wait_for(started.wait(), 5)
    await queue.stop(grace=0.05)
    assert seen == [1] and not queue.offer(req(3)) and not queue.running


async def test_concurrent_jobs_log_their_own_ids_never_another_jobs_nor_the_workers(caplog):
    """The job runner is the job's edge (pinlog.logs): each job's lines carry the request id it
    was offered with plus its context/record ids — not those of a job running beside it, and
    not the logging context the worker tasks were started in."""
    caplog.set_level(logging.INFO, logger="tests.jobs")
    jobs_log = logging.getLogger("tests.jobs")
    all_running = asyncio.Event()
    second_logged = asyncio.Event()
    running = 0

    async def handler(request):
        nonlocal running
        running += 1
        if running == 3:
            all_running.set()
        await all_running.wait()  # the three jobs are interleaved on the loop
        if request.context_id == 1:
            await second_logged.wait()  # job 1 logs after job 2 did
        jobs_log.info("job line")
        if request.context_id == 2:
            second_logged.set()

    queue = WorkQueue(handler, capacity=5, concurrency=3)
    with log_context(request_id="rid-worker", command="serve"):
        queue.start()  # the worker tasks copy this context
    with log_context(request_id="rid-A"):
        assert queue.offer(req(1))
    with log_context(request_id="rid-B"):
        assert queue.offer(req(2))
    assert queue.offer(req(3))  # offered outside any logging context
    await queue.join()
    await queue.stop()
    seen = [(r.context_id, r.record_id, getattr(r, "request_id", None), getattr(r, "command", None))
            for r in caplog.records if r.name == "tests.jobs"]
    assert seen[-1][0] == 1  # job 1 logged while job 2 had run beside it
    assert sorted(seen, key=lambda s: s[0]) == [(1, 1, "rid-A", None), (2, 1, "rid-B", None),
                                               (3, 1, None, None)]


async def test_waiting_jobs_are_taken_together_up_to_the_batch_size():
    """With a batch handler, a worker that finds other jobs waiting takes up to ``batch_size``
    of them at once (SPEC §5.4 batch path); a job alone goes to the single handler; each job
    keeps its own logging context; every job is counted done."""
    singles: list[int] = []
    batches: list[list[tuple[int, object]]] = []

    async def handler(request):
        singles.append(request.context_id)

    async def batch_handler(jobs):
        batches.append([(job.request.context_id, job.log_context.get("request_id"))
                        for job in jobs])

    queue = WorkQueue(handler, capacity=20, concurrency=2, batch_handler=batch_handler,
                      batch_size=4)
    queue.start()
    for cid in range(1, 11):  # all waiting before any worker runs
        with log_context(request_id=f"r{cid}"):
            assert queue.offer(req(cid))
    await queue.join()
    assert [len(b) for b in batches] == [4, 4, 2] and singles == []
    assert sorted(cid for b in batches for cid, _ in b) == list(range(1, 11))
    assert all(rid == f"r{cid}" for b in batches for cid, rid in b)
    assert queue.offer(req(11))  # alone now: the single handler
    await queue.join()
    assert singles == [11] and queue.running_jobs == 0
    await queue.stop()


async def test_a_crashing_batch_never_stops_its_worker():
    seen: list[int] = []

    async def handler(request):
        seen.append(request.context_id)

    async def batch_handler(jobs):
        raise ValueError("bug")

    queue = WorkQueue(handler, capacity=5, concurrency=1, batch_handler=batch_handler,
                      batch_size=5)
    queue.start()
    queue.offer(req(1))
    queue.offer(req(2))
    await queue.join()  # the batch crashed; its jobs are counted done
    queue.offer(req(3))
    await queue.join()
    assert seen == [3] and queue.running_jobs == 0
    await queue.stop()
