"""Micro-batching of embedding calls (SPEC §5.4), bounded by work, with a query lane.

The model, not the database, is the bottleneck, and it is faster per text when run batched.
:class:`MicroBatcher` wraps any provider and is itself an
:class:`~pinlog.ai.ports.EmbeddingProvider`: concurrent ``embed`` calls (one per job) wait in a
pending list and are coalesced into one provider call.

Rules (issue "long notes starve short ones", "search waits behind the backlog"):

* **Work-bounded batches.** A batch holds at most ``batch_size`` texts **and** at most
  ``max_chars`` characters of text: a burst of long notes never forms a call that cannot finish.
  A request larger than that is cut into chunks that each fit.
* **Fair fill.** Each passage batch starts with the oldest waiting request (so nothing starves)
  and is filled with the shortest other waiting requests that still fit, so short notes ride
  along with the next call instead of waiting behind the whole long backlog. The fill goes by
  origin first (:data:`~pinlog.ai.ports.EMBED_GROUP`): the single jobs' requests (no batch),
  then those of the head's own batch, then other batches' — so a single job still rides along
  with the next call, and a batch path's texts are not spread over other batches' calls: a
  batch of n texts goes out in ⌈n / cap⌉ calls and is saved in as many transactions, not in a
  fragment per call of every batch queued beside it (issue 25).
* **Timeout scaled to the work.** A call carrying ``c`` characters gets
  ``timeout × max(MIN_TIMEOUT_SHARE, c / max_chars)`` seconds (``timeout`` is the limit for a full
  batch). A call that times out is **split in halves and each half retried** (never the whole
  batch again); a single text that times out fails alone (transient) and is remembered, so when
  it is re-sent it runs alone and never joins — or sinks — a batch that could finish.
* **Query lane.** ``query`` requests (search) have their own pending list and their own provider
  slot: they never wait behind background passage batches in this queue, and are taken first.
* **Input cap** (issue 23). No call carries more than ``max_inputs`` texts (the provider's
  ``PINLOG_EMBEDDING_MAX_INPUTS``). A server that refuses a call for carrying too many
  (:class:`~pinlog.ai.errors.TooManyInputs`: TEI's 413, Azure's 400) lowers the cap for the
  process — to the maximum it named, else half the call — and the refused call is sent again in
  calls under the new cap (no attempt spent: the texts were never the problem).
* **Adaptive concurrency** (SPEC §6). Passage calls in flight are bounded by an
  :class:`~pinlog.ai.limits.AdaptiveLimit` (at most ``max_concurrent``): a 429/503 halves it and
  a ``Retry-After`` holds new calls until it has passed; successes raise it again. The throttle
  itself is delivered to the waiting callers, whose retry loop waits out the ``Retry-After``
  within their stage budget (:func:`pinlog.ai.errors.with_retries`).

Every provider call is measured (``pinlog_model_call_seconds{kind="embedding"}``) and its size
recorded (``pinlog_embedding_batch_size``).
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import logging
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from pinlog import metrics
from pinlog.ai.errors import (ModelTimeout, PermanentModelError, ThrottledError, TooManyInputs,
                              TransientModelError)
from pinlog.ai.limits import AdaptiveLimit
from pinlog.ai.ports import EMBED_GROUP, EmbeddingProvider, EmbedKind, close_resource
from pinlog.ai.vectors import check_embeddings, degenerate_rows
from pinlog.logs import neutral_context
from pinlog.settings import Settings

log = logging.getLogger(__name__)

#: Smallest share of the full-batch timeout any call gets (a tiny call still has time to be
#: scheduled on a busy machine).
MIN_TIMEOUT_SHARE = 0.25

#: Texts remembered as having timed out alone (they are then always sent alone).
SUSPECT_MEMORY = 1024


@dataclass
class _Request:
    texts: list[str]
    kind: EmbedKind
    future: asyncio.Future[np.ndarray] = field(repr=False)
    chars: int = 0
    alone: bool = False
    seq: int = 0
    arrived: float = 0.0
    #: the batch it was submitted for (:data:`~pinlog.ai.ports.EMBED_GROUP`; None: none)
    group: object | None = None


@dataclass(frozen=True)
class BatchConfig:
    """The micro-batcher's bounds (SPEC §5.4): ``PINLOG_EMBEDDING_BATCH_SIZE`` texts,
    ``PINLOG_EMBEDDING_BATCH_MAX_CHARS`` characters, ``PINLOG_EMBEDDING_BATCH_WAIT_MS``
    milliseconds, and ``PINLOG_EMBEDDING_TIMEOUT`` seconds for a full call."""

    batch_size: int
    max_chars: int
    wait_ms: float
    timeout: float

    @classmethod
    def from_settings(cls, settings: Settings) -> BatchConfig:
        return cls(batch_size=settings.embedding_batch_size,
                   max_chars=settings.embedding_batch_max_chars,
                   wait_ms=settings.embedding_batch_wait_ms, timeout=settings.embedding_timeout)


class MicroBatcher:
    """Coalesces concurrent ``embed`` calls into work-bounded provider calls.

    Args:
        provider: the real provider (its ``profile``/``dimension`` are exposed unchanged).
        batch_size: most texts in one call.
        wait_ms: a passage batch that is not full is sent this many milliseconds after its
            first request arrived (queries go at once).
        max_concurrent: passage calls in flight at most (1 for a local CPU model; more for a
            remote endpoint), lowered while the server throttles. Queries have one more slot of
            their own.
        max_chars: most characters of text in one call (the work bound).
        timeout: seconds allowed for a call carrying ``max_chars`` characters; smaller calls
            get a proportional share (at least :data:`MIN_TIMEOUT_SHARE`). None: no timeout
            here (the caller bounds the wait).
        max_inputs: most texts in one call (None: ``batch_size``); lowered for the process when
            the server refuses a call for carrying too many.

    ``embed`` returns ``(len(texts), dimension)`` float32 and raises what the provider raised
    for its call; a result of the wrong shape is a :class:`PermanentModelError` (never stored),
    a degenerate row (zero / near-zero norm, non-finite) fails only the request it belongs to,
    and a timeout is a :class:`TransientModelError` of the texts that could not finish even
    after splitting. When a batch of several requests fails permanently, each request is retried
    alone once, so one bad input cannot fail its batch-mates.
    """

    #: The pipeline relies on this batcher for per-call timeouts (it bounds only the whole stage).
    enforces_timeouts = True

    def __init__(self, provider: EmbeddingProvider, *, batch_size: int = 32,
                 wait_ms: float = 5.0, max_concurrent: int = 1, max_chars: int = 8000,
                 timeout: float | None = None, max_inputs: int | None = None) -> None:
        if batch_size < 1 or max_concurrent < 1 or wait_ms < 0 or max_chars < 1 or (
                max_inputs is not None and max_inputs < 1):
            raise ValueError("batch_size, max_chars, max_inputs and max_concurrent must be >= 1, "
                             "wait_ms >= 0")
        if timeout is not None and timeout <= 0:
            raise ValueError("timeout must be positive")
        self.provider = provider
        self.profile = provider.profile
        self.dimension = provider.dimension
        self.on_this_cpu = bool(getattr(provider, "on_this_cpu", False))  # EmbeddingProvider
        self.batch_size = batch_size
        self.wait = wait_ms / 1000.0
        self.max_concurrent = max_concurrent
        self.max_chars = max_chars
        self.timeout = timeout
        #: the cap on texts per call in force (``max_inputs``, lowered by a server's refusal)
        self.max_inputs = min(batch_size, max_inputs) if max_inputs is not None else batch_size
        metrics.EMBEDDING_MAX_INPUTS.set(self.max_inputs)
        #: calls in flight to the provider, adaptive (SPEC §6); shared by both lanes' feedback
        self.limit = AdaptiveLimit(max_concurrent, kind="embedding")
        self._pending: dict[str, list[_Request]] = {"passage": [], "query": []}
        self._wakeup: dict[str, asyncio.Event] = {}
        self._loop_tasks: list[asyncio.Task[None]] = []
        self._slots: dict[str, AdaptiveLimit] = {}
        self._running: set[asyncio.Task[None]] = set()
        self._in_flight = {"passage": 0, "query": 0}
        self._suspects: OrderedDict[bytes, None] = OrderedDict()
        self._seq = 0
        self._closed = False

    # --- public -----------------------------------------------------------------------------
    async def embed(self, texts: Sequence[str], kind: EmbedKind) -> np.ndarray:
        """Queue ``texts`` and wait for their rows (``(n, dimension)`` float32). Requests larger
        than one batch's bounds are cut into chunks that each fit."""
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        self._accept(kind)
        chunks = self._chunks(texts)
        if len(chunks) == 1:
            return await self._submit(chunks[0], kind)
        parts = await asyncio.gather(*(self._submit(c, kind) for c in chunks))
        return np.concatenate(parts, axis=0)

    def embed_each(self, texts: Sequence[str],
                   kind: EmbedKind = "passage") -> list[asyncio.Future[np.ndarray]]:
        """Queue every text of ``texts`` as its own request, at once (the batch path, issue 25:
        no coroutine, task or timeout per text), and return one future per text, in order.
        Each future resolves to that text's ``(1, dimension)`` float32 row — already checked
        (wrong shape, non-finite or near-zero norm: :class:`PermanentModelError` of that text
        alone) — or to the exception ``embed([text], kind)`` would raise, so one bad text fails
        only its own future. The requests are batched and filled like ``embed``'s (the current
        :data:`~pinlog.ai.ports.EMBED_GROUP` included). Cancelling a future withdraws its text if
        it is not sent yet. Call from the running event loop; the caller bounds the waiting.

        Raises:
            RuntimeError: the batcher is closed.
            PermanentModelError: an unknown ``kind``.
        """
        self._accept(kind)
        now, group = asyncio.get_running_loop().time(), EMBED_GROUP.get()
        futures = [self._enqueue([text], kind, now, group) for text in texts]
        if futures:
            self._wakeup[kind].set()
        return futures

    def timeout_for(self, chars: int) -> float | None:
        """Seconds allowed for one provider call carrying ``chars`` characters (None: none)."""
        if self.timeout is None:
            return None
        return self.timeout * max(MIN_TIMEOUT_SHARE, chars / self.max_chars)

    def pending(self, kind: EmbedKind = "passage") -> int:
        """Requests of ``kind`` waiting for a batch (not yet sent)."""
        return len(self._pending[kind])

    def in_flight(self, kind: EmbedKind = "passage") -> int:
        """Provider calls of ``kind`` running now."""
        return self._in_flight[kind]

    async def aclose(self, *, close_provider: bool = True) -> None:
        """Stop the batching loops; waiting requests fail with RuntimeError; closes the wrapped
        provider too unless ``close_provider`` is False (it belongs to someone else)."""
        self._closed = True
        for task in self._loop_tasks:
            task.cancel()
        for task in self._loop_tasks:
            try:
                await task
            except asyncio.CancelledError:
                pass
        self._loop_tasks = []
        for task in list(self._running):
            task.cancel()
        if self._running:
            await asyncio.gather(*self._running, return_exceptions=True)
        for kind in self._pending:
            for request in self._pending[kind]:
                if not request.future.done():
                    request.future.set_exception(RuntimeError("MicroBatcher closed"))
            self._pending[kind] = []
        if not close_provider:
            return
        await close_resource(self.provider)

    # --- internals --------------------------------------------------------------------------
    def _chunks(self, texts: list[str]) -> list[list[str]]:
        chunks: list[list[str]] = [[]]
        chars = 0
        for text in texts:
            current = chunks[-1]
            if current and (len(current) >= self.max_inputs or chars + len(text) > self.max_chars):
                chunks.append([])
                chars = 0
            chunks[-1].append(text)
            chars += len(text)
        return chunks

    def _accept(self, kind: EmbedKind) -> None:
        """Refuse a request when closed (RuntimeError) or of an unknown ``kind``
        (PermanentModelError); start the batching loops if they are not running."""
        if self._closed:
            raise RuntimeError("MicroBatcher is closed")
        if kind not in self._pending:
            raise PermanentModelError(f"unknown embedding kind {kind!r}")
        self._ensure_started()

    def _enqueue(self, texts: list[str], kind: EmbedKind, now: float,
                 group: object | None) -> asyncio.Future[np.ndarray]:
        """Append one request of ``texts`` to ``kind``'s pending list (the caller wakes the
        loop); returns its future."""
        future: asyncio.Future[np.ndarray] = asyncio.get_running_loop().create_future()
        self._seq += 1
        alone = len(texts) == 1 and bool(self._suspects) and _key(texts[0]) in self._suspects
        self._pending[kind].append(_Request(texts, kind, future, sum(map(len, texts)), alone,
                                            self._seq, now, group))
        return future

    async def _submit(self, texts: list[str], kind: EmbedKind) -> np.ndarray:
        future = self._enqueue(texts, kind, asyncio.get_running_loop().time(), EMBED_GROUP.get())
        self._wakeup[kind].set()
        return await future

    def _ensure_started(self) -> None:
        alive = [t for t in self._loop_tasks if not t.done()]
        loop = asyncio.get_running_loop()
        if len(alive) == 2 and all(t.get_loop() is loop for t in alive):
            return
        for task in alive:
            task.cancel()
        self._wakeup = {"passage": asyncio.Event(), "query": asyncio.Event()}
        if self.limit.in_flight:  # calls of a previous event loop were cut off
            self.limit = AdaptiveLimit(self.max_concurrent, kind="embedding")
        self._slots = {"passage": self.limit,
                       "query": AdaptiveLimit(1, kind="embedding_query")}
        # shared by every job: started without the logging context of the job that happened to
        # start them, so a batch's lines never carry that job's ids — nor its batch's group
        self._loop_tasks = [
            asyncio.create_task(self._loop("query"), name="embedding-query-lane",
                                context=_loop_context()),
            asyncio.create_task(self._loop("passage"), name="embedding-micro-batcher",
                                context=_loop_context()),
        ]

    async def _loop(self, kind: EmbedKind) -> None:
        loop = asyncio.get_running_loop()
        pending = self._pending[kind]
        slots = self._slots[kind]
        wakeup = self._wakeup[kind]
        while True:
            # Wait for a free provider slot first: while all slots are busy, requests accumulate.
            await slots.acquire()
            try:
                while True:
                    pending[:] = [r for r in pending if not r.future.done()]  # waiter left
                    if pending:
                        break
                    wakeup.clear()
                    await wakeup.wait()
                if kind == "passage":  # queries go at once
                    deadline = min(r.arrived for r in pending) + self.wait
                    while not self._full(pending) and loop.time() < deadline:
                        wakeup.clear()
                        # asyncio.timeout, not wait_for: on Python 3.11 wait_for returns the
                        # inner result when a cancel arrives in the tick the event was set
                        # (a request submitted just before aclose), so the cancel is lost and
                        # aclose waits for this loop forever
                        try:
                            async with asyncio.timeout(deadline - loop.time()):
                                await wakeup.wait()
                        except TimeoutError:
                            break
                batch = self._take(pending)
            except BaseException:
                slots.release()
                raise
            self._in_flight[kind] += 1
            task = asyncio.create_task(self._run_batch(batch, kind, slots))
            self._running.add(task)
            task.add_done_callback(self._running.discard)

    def _full(self, pending: list[_Request]) -> bool:
        """Whether ``pending`` fills a call (texts or characters), looking no further than
        needed to tell."""
        texts = chars = 0
        for r in pending:
            texts += len(r.texts)
            chars += r.chars
            if texts >= self.max_inputs or chars >= self.max_chars:
                return True
        return False

    def _take(self, pending: list[_Request]) -> list[_Request]:
        """The next batch: the oldest request, then the shortest others that still fit — the
        single jobs' (``group`` None) first, then the head's batch's, then other batches' (a
        suspect request — one that timed out alone before — always goes alone)."""
        head = min(pending, key=lambda r: r.seq)
        batch, count, chars = [head], len(head.texts), head.chars

        def origin(request: _Request) -> int:
            return 0 if request.group is None else 1 if request.group is head.group else 2

        if not head.alone and count < self.max_inputs:  # room left beside the head
            for request in sorted(pending, key=lambda r: (origin(r), r.chars, r.seq)):
                if request is head or request.alone:
                    continue
                if (count + len(request.texts) > self.max_inputs
                        or chars + request.chars > self.max_chars):
                    continue
                batch.append(request)
                count += len(request.texts)
                chars += request.chars
        taken = {id(r) for r in batch}
        pending[:] = [r for r in pending if id(r) not in taken]
        return batch

    async def _run_batch(self, batch: list[_Request], kind: EmbedKind,
                         slots: AdaptiveLimit) -> None:
        try:
            batch = [r for r in batch if not r.future.done()]  # drop requests whose waiter left
            if batch:
                await self._run_group(batch, kind)
        finally:
            self._in_flight[kind] -= 1
            slots.release()

    async def _call(self, texts: list[str], kind: EmbedKind) -> np.ndarray:
        """One provider call under the timeout scaled to its work; its outcome feeds the
        adaptive limit (a throttle halves it, a success raises it).

        Raises:
            TimeoutError: the call did not finish in :meth:`timeout_for` seconds (or the
                provider's own total deadline passed: :class:`~pinlog.ai.errors.ModelTimeout`).
        """
        started = time.perf_counter()
        begun = self.limit.now()
        try:
            limit = self.timeout_for(sum(map(len, texts)))
            async with asyncio.timeout(limit):  # None: no limit (not wait_for: see _loop)
                out = await self.provider.embed(texts, kind)
        except ModelTimeout:
            raise TimeoutError from None
        except ThrottledError as exc:
            self.limit.throttled(begun, exc.retry_after)
            raise
        else:
            self.limit.succeeded()
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
        if len(texts) > self.max_inputs:  # formed before the server lowered the cap
            await self._run_within_cap(group, kind)
            return
        try:
            out = await self._call(texts, kind)
        except TimeoutError:
            await self._split_after_timeout(group, kind)
            return
        except TooManyInputs as exc:
            if len(texts) <= 1:
                for request in group:
                    _set_exception(request, exc)
                return
            self._lower_cap(exc, len(texts))
            await self._run_within_cap(group, kind)
            return
        except PermanentModelError as exc:
            if len(group) == 1:
                _set_exception(group[0], exc)
                return
            log.warning("embedding batch failed permanently; retrying its requests one by one",
                        extra={"batch": len(texts), "error_class": "permanent"})
            for request in group:
                try:
                    _set_result(request, self._checked(
                        await self._call(request.texts, kind), request))
                except TimeoutError:
                    _set_exception(request, self._timed_out(request))
                except Exception as single:  # noqa: BLE001 - delivered to the waiter
                    _set_exception(request, single)
            return
        except Exception as exc:  # noqa: BLE001 - delivered to every waiter of the batch
            for request in group:
                _set_exception(request, exc)
            return
        offset = 0
        bad = degenerate_rows(out)  # the whole answer at once (its shape is checked in _call)
        for request in group:
            n = len(request.texts)
            rows = out[offset:offset + n]
            if bad and any(offset <= i < offset + n for i in bad):
                try:
                    # a degenerate row fails its own request only (SPEC §9: never stored)
                    _set_result(request, self._checked(rows, request))
                except PermanentModelError as exc:
                    _set_exception(request, exc)
            else:
                _set_result(request, rows)
            offset += n

    def _lower_cap(self, exc: TooManyInputs, sent: int) -> None:
        """The server refused ``sent`` texts in one call: from now on (this process) at most the
        maximum it named, else half of ``sent``."""
        new = exc.limit if exc.limit is not None and 1 <= exc.limit < sent else max(1, sent // 2)
        if new < self.max_inputs:
            self.max_inputs = new
            metrics.EMBEDDING_MAX_INPUTS.set(new)
            log.warning("embedding server refused a call for too many inputs; at most %d per "
                        "call from now on (PINLOG_EMBEDDING_MAX_INPUTS)", new,
                        extra={"batch": sent, "count": new, "error_class": "permanent"})

    async def _run_within_cap(self, group: list[_Request], kind: EmbedKind) -> None:
        """Send ``group`` again in calls of at most :attr:`max_inputs` texts: whole requests
        together while they fit, a request larger than the cap in consecutive parts."""
        batch: list[_Request] = []
        count = 0
        for request in group:
            if request.future.done():
                continue
            if len(request.texts) > self.max_inputs:
                try:
                    out = await self._call_in_parts(request.texts, kind)
                    _set_result(request, self._checked(out, request))
                except TimeoutError:
                    _set_exception(request, self._timed_out(request))
                except Exception as exc:  # noqa: BLE001 - delivered to the waiter
                    _set_exception(request, exc)
                continue
            if batch and count + len(request.texts) > self.max_inputs:
                await self._run_group(batch, kind)
                batch, count = [], 0
            batch.append(request)
            count += len(request.texts)
        if batch:
            await self._run_group(batch, kind)

    async def _call_in_parts(self, texts: list[str], kind: EmbedKind) -> np.ndarray:
        """``texts`` in consecutive calls of at most :attr:`max_inputs` (lowered again if the
        server still refuses), rows concatenated in order."""
        parts: list[np.ndarray] = []
        done = 0
        while done < len(texts):
            part = texts[done:done + self.max_inputs]
            try:
                parts.append(await self._call(part, kind))
            except TooManyInputs as exc:
                if len(part) <= 1:
                    raise
                self._lower_cap(exc, len(part))
                continue
            done += len(part)
        return np.concatenate(parts, axis=0)

    async def _split_after_timeout(self, group: list[_Request], kind: EmbedKind) -> None:
        """A call that timed out is never retried whole: halves are retried (each under its own
        scaled timeout); a lone request of several texts is split by text; a lone text fails."""
        group = [r for r in group if not r.future.done()]
        if not group:
            return
        if len(group) > 1:
            log.warning("embedding batch timed out; retrying it in halves",
                        extra={"batch": sum(len(r.texts) for r in group),
                               "error_class": "transient"})
            middle = len(group) // 2
            for half in (group[:middle], group[middle:]):
                await self._run_group(half, kind)
            return
        request = group[0]
        if len(request.texts) == 1:
            _set_exception(request, self._timed_out(request))
            return
        try:
            out = await self._split_texts(request.texts, kind)
            _set_result(request, self._checked(out, request))
        except Exception as exc:  # noqa: BLE001 - delivered to the waiter
            _set_exception(request, exc)

    async def _split_texts(self, texts: list[str], kind: EmbedKind) -> np.ndarray:
        middle = len(texts) // 2
        parts = []
        for half in (texts[:middle], texts[middle:]):
            try:
                parts.append(await self._call(half, kind))
            except TimeoutError:
                if len(half) == 1:
                    self._remember(half[0])
                    raise TransientModelError(
                        f"embedding timeout after {self.timeout_for(len(half[0])):g} s") from None
                parts.append(await self._split_texts(half, kind))
        return np.concatenate(parts, axis=0)

    def _timed_out(self, request: _Request) -> TransientModelError:
        if len(request.texts) == 1:
            self._remember(request.texts[0])
        return TransientModelError(
            f"embedding timeout after {self.timeout_for(request.chars):g} s")

    def _remember(self, text: str) -> None:
        self._suspects[_key(text)] = None
        self._suspects.move_to_end(_key(text))
        while len(self._suspects) > SUSPECT_MEMORY:
            self._suspects.popitem(last=False)

    def _checked(self, rows: np.ndarray, request: _Request) -> np.ndarray:
        return check_embeddings(rows, len(request.texts), self.dimension)


def _loop_context() -> contextvars.Context:
    """The context of a batching loop (:func:`pinlog.logs.neutral_context`: no job's logging
    context) without the batch group of the job that started it (``EMBED_GROUP`` None)."""
    context = neutral_context()
    context.run(EMBED_GROUP.set, None)
    return context


def _key(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()[:16]


def _set_result(request: _Request, value: np.ndarray) -> None:
    if not request.future.done():
        request.future.set_result(value)


def _set_exception(request: _Request, exc: BaseException) -> None:
    if not request.future.done():
        request.future.set_exception(exc)
