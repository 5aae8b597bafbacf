"""Pacing of a batch's busy items (core/dispatch.py ``send_batch_paced``; docs/ARCHITECTURE.md
"Batch path"): re-sent with a short capped backoff, so a backfill never leaves the ai side idle
for seconds after its queue emptied. The pauses are recorded through the injected ``sleep``
(no wall clock)."""

from __future__ import annotations

from collections.abc import Sequence

from pinlog.contracts import ProcessRequest
from pinlog.core.dispatch import BATCH_BUSY_BACKOFF, send_batch_paced


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
        return [status] * len(requests)


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
