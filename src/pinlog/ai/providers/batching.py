"""Micro-batching of embedding calls (SPEC §5.4).

The model, not the database, is the bottleneck, and it is faster per text when run batched.
:class:`MicroBatcher` wraps any provider and is itself an
:class:`~pinlog.ai.ports.EmbeddingProvider`: concurrent ``embed`` calls (one per job) are queued
and coalesced into one provider call when ``batch_size`` texts are waiting, or ``wait_ms``
milliseconds after the first one arrived. While the model is busy with a batch, new requests
accumulate, so under load batches fill up without waiting.

Every provider call is measured (``pinlog_model_call_seconds{kind="embedding"}``) and its size
recorded (``pinlog_embedding_batch_size``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from pinlog import metrics
from pinlog.ai.errors import PermanentModelError
from pinlog.ai.ports import EmbeddingProvider, EmbedKind, close_resource
from pinlog.ai.vectors import check_embeddings

log = logging.getLogger(__name__)


@dataclass
class _Request:
    texts: list[str]
    kind: EmbedKind
    future: asyncio.Future[np.ndarray] = field(repr=False)


class MicroBatcher:
    """Coalesces concurrent ``embed`` calls into batched provider calls.

    Args:
        provider: the real provider (its ``profile``/``dimension`` are exposed unchanged).
        batch_size: flush as soon as this many texts are waiting (a single request larger than
            this is sent alone, never split).
        wait_ms: otherwise flush this many milliseconds after the first waiting request.
        max_concurrent: provider calls in flight at once (1 for a local CPU model; more for a
            remote endpoint).

    ``embed`` returns ``(len(texts), dimension)`` float32 and raises what the provider raised for
    its batch; a result of the wrong shape is a :class:`PermanentModelError` (never stored), and
a degenerate row (zero / near-zero norm, non-finite) fails only the request it belongs to. When
    a batch of several requests fails permanently, each request is retried alone once, so one bad
    input cannot fail its batch-mates.
    """

    def __init__(self, provider: EmbeddingProvider, *, batch_size: int = 32,
                 wait_ms: float = 5.0, max_concurrent: int = 1) -> None:
        if batch_size < 1 or max_concurrent < 1 or wait_ms < 0:
            raise ValueError("batch_size and max_concurrent must be >= 1, wait_ms >= 0")
        self.provider = provider
        self.profile = provider.profile
        self.dimension = provider.dimension
        self.batch_size = batch_size
        self.wait = wait_ms / 1000.0
        self.max_concurrent = max_concurrent
        self._queue: asyncio.Queue[_Request] | None = None
        self._loop_task: asyncio.Task[None] | None = None
        self._slots: asyncio.Semaphore | None = None
        self._carry: _Request | None = None
        self._running: set[asyncio.Task[None]] = set()
        self._closed = False

    # --- public -----------------------------------------------------------------------------
    async def embed(self, texts: Sequence[str], kind: EmbedKind) -> np.ndarray:
        """Queue ``texts`` for the next batch and wait for their rows (``(n, dimension)`` float32)."""
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        if self._closed:
            raise RuntimeError("MicroBatcher is closed")
        self._ensure_started()
        assert self._queue is not None
        future: asyncio.Future[np.ndarray] = asyncio.get_running_loop().create_future()
        await self._queue.put(_Request(texts, kind, future))
        return await future

    async def aclose(self, *, close_provider: bool = True) -> None:
        """Stop the batching loop; waiting requests fail with RuntimeError; closes the wrapped
        provider too unless ``close_provider`` is False (it belongs to someone else)."""
        self._closed = True
        if self._loop_task is not None:
            self._loop_task.cancel()
            try:
                await self._loop_task
            except asyncio.CancelledError:
                pass
        for task in list(self._running):
            task.cancel()
        if self._running:
            await asyncio.gather(*self._running, return_exceptions=True)
        pending = [self._carry] if self._carry else []
        while self._queue is not None and not self._queue.empty():
            pending.append(self._queue.get_nowait())
        for request in pending:
            if not request.future.done():
                request.future.set_exception(RuntimeError("MicroBatcher closed"))
        if not close_provider:
            return
        await close_resource(self.provider)

    # --- internals --------------------------------------------------------------------------
    def _ensure_started(self) -> None:
        task = self._loop_task
        if task is None or task.done() or task.get_loop() is not asyncio.get_running_loop():
            self._queue = asyncio.Queue()
            self._slots = asyncio.Semaphore(self.max_concurrent)
            self._loop_task = asyncio.create_task(self._loop(), name="embedding-micro-batcher")

    async def _loop(self) -> None:
        assert self._queue is not None and self._slots is not None
        loop = asyncio.get_running_loop()
        while True:
            # Wait for a free provider slot first: while all slots are busy, requests accumulate.
            await self._slots.acquire()
            try:
                first = self._carry or await self._queue.get()
                self._carry = None
                batch, count = [first], len(first.texts)
                deadline = loop.time() + self.wait
                while count < self.batch_size:
                    try:
                        request = self._queue.get_nowait()
                    except asyncio.QueueEmpty:
                        remaining = deadline - loop.time()
                        if remaining <= 0:
                            break
                        try:
                            request = await asyncio.wait_for(self._queue.get(), remaining)
                        except TimeoutError:
                            break
                    if count + len(request.texts) > self.batch_size:
                        self._carry = request  # starts the next batch
                        break
                    batch.append(request)
                    count += len(request.texts)
            except BaseException:
                self._slots.release()
                raise
            task = asyncio.create_task(self._run_batch(batch))
            self._running.add(task)
            task.add_done_callback(self._running.discard)

    async def _run_batch(self, batch: list[_Request]) -> None:
        assert self._slots is not None
        try:
            batch = [r for r in batch if not r.future.done()]  # drop requests whose waiter left
            for kind in ("passage", "query"):
                group = [r for r in batch if r.kind == kind]
                if group:
                    await self._run_group(group, kind)
        finally:
            self._slots.release()

    async def _call(self, texts: list[str], kind: EmbedKind) -> np.ndarray:
        started = time.perf_counter()
        try:
            out = await self.provider.embed(texts, kind)
        finally:
            metrics.MODEL_LATENCY.labels(kind="embedding").observe(time.perf_counter() - started)
            metrics.BATCH_SIZE.observe(len(texts))
        out = np.asarray(out, dtype=np.float32)
        if out.shape != (len(texts), self.dimension):
            raise PermanentModelError(
                f"wrong vector length: expected ({len(texts)}, {self.dimension}), got {out.shape}")
        return out

    async def _run_group(self, group: list[_Request], kind: EmbedKind) -> None:
        texts = [t for r in group for t in r.texts]
        try:
            out = await self._call(texts, kind)
        except PermanentModelError as exc:
            if len(group) == 1:
                _set_exception(group[0], exc)
                return
            log.warning("embedding batch failed permanently; retrying its requests one by one",
                        extra={"batch": len(texts), "error_class": "permanent"})
            for request in group:
                try:
                    _set_result(request, await self._call(request.texts, kind))
                except Exception as single:  # noqa: BLE001 - delivered to the waiter
                    _set_exception(request, single)
            return
        except Exception as exc:  # noqa: BLE001 - delivered to every waiter of the batch
            for request in group:
                _set_exception(request, exc)
            return
        offset = 0
        for request in group:
            n = len(request.texts)
            try:
                # a degenerate row fails its own request only (SPEC §9: never stored)
                _set_result(request, check_embeddings(out[offset:offset + n], n, self.dimension))
            except PermanentModelError as exc:
                _set_exception(request, exc)
            offset += n


def _set_result(request: _Request, value: np.ndarray) -> None:
    if not request.future.done():
        request.future.set_result(value)


def _set_exception(request: _Request, exc: BaseException) -> None:
    if not request.future.done():
        request.future.set_exception(exc)
