"""SPEC §7.2 "Recovery speed": the loop wakes at the first expiry instead of waiting the whole
interval, runs back-to-back while a round claims a full batch, and is paced by the ai side's
queue (a busy 503 is re-sent within the round, never dropped). Real PostgreSQL; the process
client is the recording fake at the contract; ordering by the client's own events."""

from __future__ import annotations

import asyncio

from pinlog.core.rescan import RescanLoop, expiry_outlook
from tests.integration.core.rescan.factory import RecordingClient, make_context, state
from tests.conftest import config_of

OLD = 10_000


class NotifyingClient(RecordingClient):
    """Sets ``reached`` once ``want`` distinct contexts were accepted."""

    def __init__(self, want: int, busy_first: int = 0) -> None:
        super().__init__()
        self.want = want
        self.reached = asyncio.Event()
        self.busy_left = busy_first
        self.accepted: set[int] = set()

    async def send(self, request):
        await super().send(request)
        if self.busy_left > 0:
            self.busy_left -= 1
            return 503
        self.accepted.add(request.context_id)
        if len(self.accepted) >= self.want:
            self.reached.set()
        return 202


async def run_loop_until_reached(loop: RescanLoop, client: NotifyingClient) -> RescanLoop:
    """Start the loop, wait (30 s at most) until ``client`` accepted what it wants, stop it."""
    await loop.start()
    try:
        await asyncio.wait_for(client.reached.wait(), timeout=30)
    finally:
        await loop.stop()
    return loop


async def test_outlook_counts_rows_not_expired_yet_and_when_the_first_expires(
        sync_conn, engine, make_rescan_settings):
    settings = make_rescan_settings()  # PENDING 300 s, PROCESSING 600 s
    make_context(sync_conn, age_s=100)                       # PENDING: expires in ~200 s
    make_context(sync_conn, emb="PROCESSING", age_s=100)     # PROCESSING: ~500 s
    make_context(sync_conn, emb="COMPLETED", kw="PENDING", age_s=250)  # keyword PENDING: ~50 s
    make_context(sync_conn, age_s=OLD)                       # already expired
    make_context(sync_conn, emb="FAILED", kw="PENDING")      # dead end: never expires
    make_context(sync_conn, emb="COMPLETED", kw="COMPLETED")  # finished

    outlook = await expiry_outlook(engine, config_of(settings).core.rescan)

    assert (outlook.waiting, outlook.expired) == (3, 1)
    # ~50 s (the keyword PENDING row), less the seconds this test took: no lower margin
    assert outlook.first_expires_in is not None and 0 < outlook.first_expires_in <= 50


async def test_full_batches_run_back_to_back_not_one_per_interval(
        sync_conn, engine, make_rescan_settings):
    ids = [make_context(sync_conn, age_s=OLD + i) for i in range(7)]
    settings = make_rescan_settings(rescan_batch_size=2, rescan_interval=3600)
    client = NotifyingClient(want=len(ids))
    # four rounds (2+2+2+1) inside one interval of an hour
    loop = await run_loop_until_reached(RescanLoop(engine, config_of(settings).core.rescan, client), client)
    assert sorted(client.accepted) == sorted(ids)
    assert all(state(sync_conn, i)["retry_count"] == 1 for i in ids)  # each claimed once
    assert loop.rounds >= 4


async def test_the_loop_wakes_at_the_first_expiry_not_after_the_interval(
        sync_conn, engine, make_rescan_settings):
    # PENDING expiry 2 s, interval an hour. The row is created by a hook right after the
    # start-up round's claim (so that round certainly found nothing, however slow the machine);
    # that round's outlook sees it waiting, and the loop wakes at its expiry.
    settings = make_rescan_settings(pending_expiry=2, processing_expiry=30,
                                    rescan_interval=3600)
    created: list[int] = []

    class CreatesAfterTheFirstClaim(RescanLoop):
        async def claim(self) -> list[int]:
            claimed = await super().claim()
            if not created:
                assert claimed == []
                created.append(make_context(sync_conn, age_s=0))
            return claimed

    client = NotifyingClient(want=1)
    loop = await run_loop_until_reached(
        CreatesAfterTheFirstClaim(engine, config_of(settings).core.rescan, client), client)
    assert client.ids == created
    assert loop.rounds >= 2  # the start-up round (nothing expired) and the woken one


async def test_a_busy_ai_side_paces_the_round_instead_of_losing_the_resend(
        sync_conn, engine, make_rescan_config):
    cid = make_context(sync_conn, age_s=OLD)
    client = NotifyingClient(want=1, busy_first=3)  # 503, 503, 503, then 202
    report = await RescanLoop(engine, make_rescan_config(rescan_busy_wait=30),
                              client).run_round()
    assert report.dispatched_ids == [cid] and report.failed_calls == 0
    assert client.ids == [cid] * 4
    assert state(sync_conn, cid)["retry_count"] == 1  # one retry spent, not four


PAIRS = [(e, k) for e in ("PENDING", "PROCESSING", "COMPLETED", "FAILED", "CANCELLED")
         for k in ("PENDING", "PROCESSING", "COMPLETED", "FAILED", "CANCELLED")]


async def test_the_outlook_agrees_with_the_expired_predicate_for_every_status_pair(
        sync_conn, engine, make_rescan_settings):
    """`next_expiry` mirrors rescan.sql's `expired`: a row counts as expired by the outlook
    exactly when the claim would take it (ages on both sides of both expiries)."""
    settings = make_rescan_settings(pending_expiry=100, processing_expiry=200)
    for emb, kw in PAIRS:
        for age in (50, 150, 250):
            sync_conn.execute("TRUNCATE ai.context_ai_state, ai.context_ai_event")
            make_context(sync_conn, emb=emb, kw=kw, age_s=age)
            outlook = await expiry_outlook(engine, config_of(settings).core.rescan)
            (claimable,) = sync_conn.execute(
                "SELECT count(*) FROM ai.context_ai_state WHERE "
                + expired_sql().replace(":pending_expiry", "'100 seconds'")
                .replace(":processing_expiry", "'200 seconds'")).fetchone()
            assert outlook.expired == claimable, (emb, kw, age)


def expired_sql() -> str:
    """rescan.sql's `expired` fragment, spliced."""
    from pinlog.core.rescan import statements

    return statements().sql("expired")
