"""The micro-batcher (SPEC §5.4): coalescing, flush at size, flush after the wait, error
isolation, wrong shapes, metrics. Ordered with the fake's gate, never with sleeps."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from pinlog import metrics
from pinlog.ai.errors import PermanentModelError, TransientModelError
from pinlog.ai.ports import EMBED_GROUP, EmbeddingProvider
from pinlog.ai.providers.batching import MicroBatcher
from pinlog.logs import current_log_context, log_context
from tests.fakes import FakeEmbeddingProvider, fake_vector


async def test_is_an_embedding_provider():
    batcher = MicroBatcher(FakeEmbeddingProvider())
    assert isinstance(batcher, EmbeddingProvider)
    assert (batcher.profile, batcher.dimension) == ("fake-profile-v1", 8)


async def test_concurrent_calls_are_coalesced_and_rows_go_back_to_their_callers():
    fake = FakeEmbeddingProvider()
    batcher = MicroBatcher(fake, batch_size=32, wait_ms=1)
    gate = fake.hold()
    first = asyncio.create_task(batcher.embed(["t0"], "passage"))
    await gate.wait_entered()  # the model is busy: the next requests accumulate
    rest = [asyncio.create_task(batcher.embed([f"t{i}"], "passage")) for i in range(1, 11)]
    await asyncio.sleep(0)  # let them enqueue (ordering, not timing: they are all ready)
    fake.gate = None
    gate.open()
    results = await asyncio.gather(first, *rest)
    assert fake.batches == [1, 10]
    for i, out in enumerate(results):
        assert out.shape == (1, 8) and np.allclose(out[0], fake_vector(f"t{i}"))
    await batcher.aclose()


async def test_flush_at_batch_size():
    fake = FakeEmbeddingProvider()
    batcher = MicroBatcher(fake, batch_size=4, wait_ms=1000)  # the wait never decides here
    gate = fake.hold()
    first = asyncio.create_task(batcher.embed(["a", "b", "c", "d"], "passage"))
    await gate.wait_entered()
    fake.gate = None
    rest = [asyncio.create_task(batcher.embed([f"x{i}"], "passage")) for i in range(8)]
    await asyncio.sleep(0)
    gate.open()
    await asyncio.gather(first, *rest)
    assert fake.batches == [4, 4, 4]
    await batcher.aclose()


async def test_a_lone_request_is_flushed_after_the_wait():
    fake = FakeEmbeddingProvider()
    batcher = MicroBatcher(fake, batch_size=32, wait_ms=2)
    out = await asyncio.wait_for(batcher.embed(["alone"], "query"), 5)
    assert out.shape == (1, 8) and fake.batches == [1] and fake.kinds == ["query"]
    await batcher.aclose()


async def _behind_a_held_call(fake, batcher, first, others, *, before_queueing=None):
    """Embed ``first`` (a ``(text, kind)`` pair) and hold its provider call; run
    ``before_queueing()``; queue ``others`` behind it; release; return every outcome (results
    or exceptions) in order."""
    gate = fake.hold()
    head = asyncio.create_task(batcher.embed([first[0]], first[1]))
    await gate.wait_entered()
    fake.gate = None
    if before_queueing is not None:
        before_queueing()
    tail = [asyncio.create_task(batcher.embed([text], kind)) for text, kind in others]
    await asyncio.sleep(0)  # let the queued calls reach the batcher (ordering, not timing)
    gate.open()
    return await asyncio.gather(head, *tail, return_exceptions=True)


async def test_kinds_are_never_mixed_in_one_call():
    fake = FakeEmbeddingProvider()
    batcher = MicroBatcher(fake, batch_size=32, wait_ms=1)
    results = await _behind_a_held_call(fake, batcher, ("p0", "passage"),
                                        [("p1", "passage"), ("q1", "query")])
    assert not any(isinstance(r, BaseException) for r in results)
    # each call carries one kind; the query has its own lane and does not wait for the
    # passage batch behind the busy one (issue 16: search has priority)
    assert fake.kinds == ["passage", "query", "passage"] and fake.batches == [1, 1, 1]
    await batcher.aclose()


def _calls(fake) -> list[list[str]]:
    """The texts of each provider call, in order (from the fake's flat record)."""
    out, at = [], 0
    for size in fake.batches:
        out.append(fake.texts[at:at + size])
        at += size
    return out


async def test_a_call_is_filled_with_its_head_requests_batch_before_shorter_others():
    """Issue 25: two batches of the batch path (EMBED_GROUP) queue interleaved behind a busy
    call, the second's texts shorter: each call carries one batch whole (the head's batch fills
    it before other batches), so each answer is saved in one transaction; single jobs'
    requests (no batch) still fill by shortness, and ride along before any batch's texts."""
    fake = FakeEmbeddingProvider()
    batcher = MicroBatcher(fake, batch_size=3, wait_ms=0)

    async def calls_behind_a_busy_call(submissions: list[tuple[str, object | None]]):
        """Queue ``(text, group)`` requests in order behind a held call; release it; the
        texts of each call that followed."""
        fake.texts.clear()
        fake.batches.clear()
        gate = fake.hold()
        busy = asyncio.create_task(batcher.embed(["busy"], "passage"))
        await gate.wait_entered()
        fake.gate = None
        tasks = []
        for text, group in submissions:
            token = EMBED_GROUP.set(group)
            try:
                tasks.append(asyncio.create_task(batcher.embed([text], "passage")))
            finally:
                EMBED_GROUP.reset(token)
        await asyncio.sleep(0)  # let them enqueue (ordering, not timing: they are all ready)
        assert batcher.pending() == len(submissions)
        gate.open()
        await asyncio.gather(busy, *tasks)
        return _calls(fake)[1:]

    first, second = object(), object()
    long = [f"long note of the first batch {i}" for i in range(3)]
    assert await calls_behind_a_busy_call(
        [(text, group) for i in range(3) for text, group in ((long[i], first), (f"b{i}", second))]
    ) == [long, [f"b{i}" for i in range(3)]]
    # outside any batch: the oldest, then the shortest others (the fair fill is unchanged)
    assert await calls_behind_a_busy_call(
        [(text, None) for text in ("a long note 0", "s0", "a long note 1", "s1")]
    ) == [["a long note 0", "s0", "s1"], ["a long note 1"]]
    # a single job's note still rides along with the next call: before the head's batch, and
    # before shorter texts of another batch
    assert await calls_behind_a_busy_call(
        [(long[0], first), ("x", second), ("a single job's note", None), (long[1], first)]
    ) == [[long[0], "a single job's note", long[1]], ["x"]]
    await batcher.aclose()


async def test_transient_error_reaches_every_waiter_of_the_batch():
    fake = FakeEmbeddingProvider()
    batcher = MicroBatcher(fake, batch_size=32, wait_ms=1)
    results = await _behind_a_held_call(  # fails the held call, then the coalesced batch
        fake, batcher, ("a", "passage"), [("b", "passage"), ("c", "passage")],
        before_queueing=lambda: fake.fail_next(TransientModelError, times=2))
    assert fake.batches == [1, 2]
    assert all(isinstance(r, TransientModelError) for r in results)
    await batcher.aclose()


async def test_permanent_error_of_a_batch_is_isolated_to_the_bad_request():
    class Picky(FakeEmbeddingProvider):
        async def embed(self, texts, kind):
            if "bad" in texts:
                self.calls += 1
                self.batches.append(len(texts))
                raise PermanentModelError("input too long")
            return await super().embed(texts, kind)

    fake = Picky()
    batcher = MicroBatcher(fake, batch_size=32, wait_ms=1)
    gate = fake.hold()
    first = asyncio.create_task(batcher.embed(["a"], "passage"))
    await gate.wait_entered()
    fake.gate = None
    group = [asyncio.create_task(batcher.embed([t], "passage")) for t in ("b", "bad", "c")]
    await asyncio.sleep(0)
    gate.open()
    await first
    b, bad, c = await asyncio.gather(*group, return_exceptions=True)
    assert isinstance(bad, PermanentModelError)
    assert np.allclose(b[0], fake_vector("b")) and np.allclose(c[0], fake_vector("c"))
    await batcher.aclose()


async def test_wrong_shape_is_permanent():
    batcher = MicroBatcher(FakeEmbeddingProvider(wrong_dimension=3), wait_ms=1)
    with pytest.raises(PermanentModelError, match="wrong vector length"):
        await batcher.embed(["a"], "passage")
    await batcher.aclose()


async def test_metrics_record_batch_sizes_and_latency():
    count = metrics.BATCH_SIZE._sum.get()
    latency = metrics.MODEL_LATENCY.labels(kind="embedding")._sum.get()
    batcher = MicroBatcher(FakeEmbeddingProvider(), wait_ms=1)
    await batcher.embed(["a", "b", "c"], "passage")
    assert metrics.BATCH_SIZE._sum.get() == count + 3
    assert metrics.MODEL_LATENCY.labels(kind="embedding")._sum.get() > latency
    await batcher.aclose()


async def test_closed_batcher_refuses():
    batcher = MicroBatcher(FakeEmbeddingProvider(), wait_ms=1)
    await batcher.embed(["a"], "passage")
    await batcher.aclose()
    with pytest.raises(RuntimeError):
        await batcher.embed(["a"], "passage")


async def test_a_batch_never_runs_in_the_logging_context_of_the_job_that_started_the_batcher():
    """The batcher's loop tasks are shared by every job: they start with an empty logging
    context (pinlog.logs), so a batch's lines never carry the first caller's ids."""
    seen: list[dict] = []

    class Recording(FakeEmbeddingProvider):
        async def embed(self, texts, kind):
            seen.append(dict(current_log_context()))
            return await super().embed(texts, kind)

    batcher = MicroBatcher(Recording(), batch_size=32, wait_ms=1)
    with log_context(request_id="rid-first", context_id=1):
        await asyncio.wait_for(batcher.embed(["a"], "passage"), 5)
    with log_context(request_id="rid-second", context_id=2):
        await asyncio.wait_for(batcher.embed(["b"], "query"), 5)
    await batcher.aclose()
    assert seen == [{}, {}]


async def test_aclose_returns_when_a_request_arrived_in_the_tick_before_it():
    """Shutdown never hangs on the batching loop: a request submitted just before ``aclose``
    wakes the loop while it waits for more texts (the linger of a passage batch) in the same
    tick as the cancel. On Python 3.11 ``asyncio.wait_for`` returned the event's result there
    and dropped the cancel, so the loop ran on and ``aclose`` waited for it forever. Ordered
    by event-loop steps, never by time; the 10 s only bounds a regression."""
    fake = FakeEmbeddingProvider()
    batcher = MicroBatcher(fake, batch_size=8, wait_ms=60_000)
    first = asyncio.create_task(batcher.embed(["a"], "passage"))
    for _ in range(10):  # the loop takes "a" and lingers for more (the batch is not full)
        await asyncio.sleep(0)
    assert batcher.pending() == 1 and fake.calls == 0
    second = asyncio.create_task(batcher.embed(["bb"], "passage"))
    await asyncio.sleep(0)  # "bb" is queued and sets the loop's wake-up event
    assert batcher.pending() == 2
    closing = asyncio.ensure_future(batcher.aclose())  # cancels the loops in this tick
    done, _ = await asyncio.wait({closing}, timeout=10)
    assert closing in done, "aclose waited for a batching loop that lost its cancel"
    assert all(task.done() for task in (first, second))
    for task in (first, second):  # the waiting requests fail: the batcher is closed
        with pytest.raises(RuntimeError, match="closed"):
            task.result()
    assert fake.calls == 0


# --- embed_each: the batch path's texts queued at once, one future per text (issue 25) --------
async def test_embed_each_queues_every_text_as_its_own_request_in_one_call():
    """Each text is one request (a future of its own ``(1, dim)`` row), all queued in one step:
    a batch of them fills one call within the cap, rows go back to their own futures, and the
    futures carry the current batch group (the fair fill's origin)."""
    fake = FakeEmbeddingProvider()
    batcher = MicroBatcher(fake, batch_size=4, wait_ms=1000)  # flushed by size, not the wait
    group = object()
    token = EMBED_GROUP.set(group)
    try:
        futures = batcher.embed_each([f"t{i}" for i in range(6)], "passage")
    finally:
        EMBED_GROUP.reset(token)
    assert batcher.pending("passage") == 6
    assert {r.group for r in batcher._pending["passage"]} == {group}
    fake_rows = await asyncio.wait_for(asyncio.gather(*futures[:4]), 5)  # one full call
    assert fake.batches == [4]
    for i, row in enumerate(fake_rows):
        assert row.shape == (1, 8) and np.allclose(row[0], fake_vector(f"t{i}"))
    for future in futures[4:]:
        future.cancel()  # withdrawn before they are sent: never sent
    await batcher.aclose()
    assert fake.texts == [f"t{i}" for i in range(4)]


async def test_embed_each_fails_only_the_future_of_a_degenerate_or_refused_text():
    fake = FakeEmbeddingProvider()
    fake.vectors["zero"] = np.zeros(8, dtype=np.float32)  # a zero vector (never stored)
    batcher = MicroBatcher(fake, batch_size=8, wait_ms=0)
    futures = batcher.embed_each(["a", "zero", "b"], "passage")
    done = await asyncio.wait_for(asyncio.gather(*futures, return_exceptions=True), 5)
    assert isinstance(done[1], PermanentModelError) and "degenerate" in str(done[1])
    assert np.allclose(done[0][0], fake_vector("a")) and np.allclose(done[2][0], fake_vector("b"))

    def refuse(texts, kind):
        if "bad" in texts:
            raise PermanentModelError("upstream 400")

    fake.on_call = refuse
    futures = batcher.embed_each(["c", "bad", "d"], "passage")
    done = await asyncio.wait_for(asyncio.gather(*futures, return_exceptions=True), 5)
    assert [type(d).__name__ for d in done] == ["ndarray", "PermanentModelError", "ndarray"]
    await batcher.aclose()
    with pytest.raises(RuntimeError):
        batcher.embed_each(["e"], "passage")
