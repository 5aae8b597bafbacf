"""An adaptive limit on the calls in flight to one remote model (SPEC §6: "a throttled provider
gets fewer calls in flight"; issue 23).

:class:`AdaptiveLimit` is AIMD, as TCP's congestion window: every call that succeeds raises the
limit by ``1 / limit`` (about one more call in flight per round of calls), every throttle (429,
503) halves it — at most once per round: calls that started before the last decrease do not
decrease it again, so one burst of 429s is one halving — never below ``minimum`` nor above
``maximum``. A throttle that names a ``Retry-After`` also holds every new call until it has
passed (the server said when to come back; nobody of this process asks sooner).

Used by the micro-batcher (embedding calls: ``PINLOG_EMBEDDING_MAX_CONCURRENT`` is the maximum)
and the llm judge (``PINLOG_LLM_MAX_CONCURRENT``). Metrics: ``pinlog_model_throttled_total``
and ``pinlog_model_concurrency_limit`` by ``kind``.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable

from pinlog import metrics
from pinlog.ai.errors import BudgetExceeded


class AdaptiveLimit:
    """At most ``allowed`` calls in flight; ``allowed`` follows the server's throttling (AIMD).

    Args:
        maximum: the ceiling (and the start value), ≥ 1.
        kind: metric label (``embedding``, ``judge``).
        minimum: the floor, ≥ 1.
        clock: monotonic seconds (tests may inject one).
        sleep: awaited while a ``Retry-After`` holds new calls.

    Use: ``await limit.acquire()`` before a call, ``limit.release()`` after it (always, in a
    ``finally``), and report the call's outcome with :meth:`succeeded` or :meth:`throttled`.
    """

    def __init__(self, maximum: int, *, kind: str, minimum: int = 1,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        if maximum < 1 or not 1 <= minimum <= maximum:
            raise ValueError("an adaptive limit needs 1 <= minimum <= maximum")
        self.maximum, self.minimum, self.kind = maximum, minimum, kind
        self.limit = float(maximum)
        self.in_flight = 0
        #: ``clock()`` before which no new call starts (the server's Retry-After).
        self.blocked_until = 0.0
        self._last_decrease = -math.inf
        self._clock, self._sleep = clock, sleep
        self._waiters: list[asyncio.Future[None]] = []
        self._publish()

    @property
    def allowed(self) -> int:
        """Calls that may be in flight now (``floor(limit)``, within the bounds)."""
        return max(self.minimum, min(self.maximum, int(self.limit)))

    async def acquire(self, deadline: float | None = None) -> None:
        """Wait until a call may start: no ``Retry-After`` pending and fewer than
        :attr:`allowed` calls in flight. Cancellation while waiting takes nothing.

        Args:
            deadline: a :meth:`now` value the caller must be done by (its budget).

        Raises:
            BudgetExceeded: the server's ``Retry-After`` holds calls until past ``deadline``
                (waiting for it would outlive the caller's budget: give up now).
        """
        loop = asyncio.get_running_loop()
        while True:
            now = self._clock()
            if deadline is not None and self.blocked_until >= deadline:
                raise BudgetExceeded("the server's Retry-After holds calls past the budget")
            if now < self.blocked_until:
                await self._sleep(self.blocked_until - now)
                continue
            if self.in_flight < self.allowed:
                self.in_flight += 1
                return
            waiter: asyncio.Future[None] = loop.create_future()
            self._waiters.append(waiter)
            try:
                await waiter
            finally:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)

    def release(self) -> None:
        """A call ended (whatever its outcome); wake the waiting callers."""
        self.in_flight = max(0, self.in_flight - 1)
        self._wake()

    def succeeded(self) -> None:
        """Additive increase: ``limit += 1 / limit`` up to :attr:`maximum`."""
        if self.limit < self.maximum:
            self.limit = min(float(self.maximum), self.limit + 1.0 / self.limit)
            self._publish()
            self._wake()

    def throttled(self, started: float, retry_after: float | None = None) -> None:
        """Multiplicative decrease for a call (started at ``started``, a ``clock()`` value) the
        server throttled: halve the limit unless a decrease already happened after that call
        started; hold new calls for ``retry_after`` seconds when given."""
        metrics.MODEL_THROTTLED.labels(kind=self.kind).inc()
        now = self._clock()
        if started >= self._last_decrease:
            self.limit = max(float(self.minimum), self.limit / 2.0)
            self._last_decrease = now
            self._publish()
        if retry_after is not None and retry_after > 0:
            self.blocked_until = max(self.blocked_until, now + retry_after)

    def now(self) -> float:
        """The limit's clock (what :meth:`throttled` expects as ``started``)."""
        return self._clock()

    def _wake(self) -> None:
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)

    def _publish(self) -> None:
        metrics.MODEL_CONCURRENCY_LIMIT.labels(kind=self.kind).set(self.allowed)
