"""Pacing of a batch's busy items (core/dispatch.py ``send_batch_paced``; docs/ARCHITECTURE.md
"Batch path"): re-sent with a short capped backoff, so a backfill never leaves the ai side idle
for seconds after its queue emptied. The pauses are recorded through the injected ``sleep``
(no wall clock)."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from pinlog.contracts import ProcessRequest
from pinlog.core.dispatch import BATCH_BUSY_BACKOFF, record_batch_outcomes, send_batch_paced


class BusyClient:
    """Answers 503 for every item ``busy_calls`` times, then 202."""

    def __init__(self, busy_calls: int) -> None:
        self.busy_calls = busy_calls
        self.calls: list[int] = []

    async def send(self, request: ProcessRequest) -> int:  # pragma: no cover - not used
        raise AssertionError("a batch client gets send_batch calls")

    async def send_batch(self, requests: Sequence[ProcessRequest]) -> list[int]:
        self.calls.append(len(requests))
        status = 503 if len(self.calls) <= self.busy_calls else 202
        statuses = [status] * len(requests)
        record_batch_outcomes(requests, statuses)  # as the HTTP and in-process clients do
        return statuses


async def test_busy_items_are_re_sent_with_pauses_capped_well_under_a_second():
    pauses: list[float] = []

    async def sleep(seconds: float) -> None:
        pauses.append(seconds)

    client = BusyClient(busy_calls=12)
    requests = [ProcessRequest(context_id=i, user_id=1, record_id=i, text="조용한 카페")
                for i in range(1, 4)]
    got = await send_batch_paced(client, requests, busy_wait=3600.0, sleep=sleep)
    assert got == [202, 202, 202] and client.calls == [3] * 13
    assert pauses[0] == BATCH_BUSY_BACKOFF[0] and pauses[1] == 2 * pauses[0]  # doubling
    assert max(pauses) == BATCH_BUSY_BACKOFF[1] <= 0.25  # capped: never seconds of idle


def _requests(n: int) -> list[ProcessRequest]:
    return [ProcessRequest(context_id=i, user_id=1, record_id=i, text="조용한 카페")
            for i in range(1, n + 1)]


async def _no_sleep(seconds: float) -> None:
    pass


async def test_busy_answers_that_are_sent_again_log_no_warning(caplog):
    """A backfill meets a full queue all the time: each busy answer it sends again is DEBUG (a
    WARNING "the rescan will retry" per batch would be false and flood the log)."""
    caplog.set_level(logging.DEBUG, logger="pinlog")
    got = await send_batch_paced(BusyClient(busy_calls=3), _requests(2), busy_wait=3600.0,
                                 sleep=_no_sleep)
    assert got == [202, 202]
    assert [r.levelno for r in caplog.records if "not delivered" in r.getMessage()] == \
        [logging.DEBUG] * 3
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


async def test_items_still_busy_when_the_busy_wait_ends_log_one_warning(caplog):
    caplog.set_level(logging.DEBUG, logger="pinlog")
    now = [0.0]

    async def sleep(seconds: float) -> None:
        now[0] += seconds

    got = await send_batch_paced(BusyClient(busy_calls=10**6), _requests(3), busy_wait=1.0,
                                 sleep=sleep, clock=lambda: now[0])
    assert got == [503, 503, 503]
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and warnings[0].count == 3 and warnings[0].context_id == 1
    assert "rescan will retry" in warnings[0].getMessage()


async def test_an_unpaced_batch_send_logs_busy_as_not_delivered(caplog):
    """Without a busy wait nothing is sent again: a busy answer is a WARNING (the rescan retries)."""
    caplog.set_level(logging.DEBUG, logger="pinlog")
    got = await send_batch_paced(BusyClient(busy_calls=1), _requests(2), busy_wait=0.0)
    assert got == [503, 503]
    assert [r.levelno for r in caplog.records if "not delivered" in r.getMessage()] == \
        [logging.WARNING]
