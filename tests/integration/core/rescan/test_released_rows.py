"""SPEC §7.3.1 in core's rescan, against the real PostgreSQL: a row whose recorded owner is gone
(its heartbeat lease ended — a crash, or a clean stop handing its work back) is claimed at once,
before its expiry; a live owner's rows and rows of an unknown owner wait for the expiry; the
claimer records itself as the new owner; retries stay bounded and the finalizer keeps the
expiry. The outlook (``next_expiry``) agrees with the claim, and wakes the loop when a live
owner's lease would run out.

Leases and row clocks are moved with the database clock (``tests/support/owners.py``), never
waited for.
"""

from __future__ import annotations

import pytest

from pinlog.core.rescan import RescanLoop, expiry_outlook
from tests.conftest import config_of
from tests.integration.core.rescan.factory import make_context, state
from tests.support.owners import LIVE_LEASE_S, add_process, end_lease, owner_of, set_owner

OLD = 10_000
#: (embedding, keyword) pairs whose work the rescan can send, and the ones it never sends
SENDABLE = [("PENDING", "PENDING"), ("PROCESSING", "PENDING"), ("COMPLETED", "PENDING"),
            ("COMPLETED", "PROCESSING")]
NEVER = [("COMPLETED", "COMPLETED"), ("FAILED", "PENDING"), ("COMPLETED", "FAILED"),
         ("CANCELLED", "CANCELLED"), ("PENDING", "CANCELLED"), ("FAILED", "FAILED")]


def _owned(sync_conn, owner: str | None, **row: object) -> int:
    cid = make_context(sync_conn, **row)  # type: ignore[arg-type]
    set_owner(sync_conn, cid, owner)
    return cid


@pytest.mark.parametrize(("emb", "kw"), SENDABLE)
async def test_the_rows_of_a_gone_owner_are_claimed_before_their_expiry(
        sync_conn, engine, make_rescan_config, client, emb, kw):
    """Owner dead → claimed at once (the row is seconds old; expiries 300/600 s)."""
    crashed = add_process(sync_conn)
    me = add_process(sync_conn)
    cid = _owned(sync_conn, crashed, emb=emb, kw=kw, age_s=5)
    loop = RescanLoop(engine, make_rescan_config(), client, owner=me)
    assert await loop.claim() == []            # its owner is live: left alone
    end_lease(sync_conn, crashed)
    assert await loop.claim() == [cid]
    row = state(sync_conn, cid)
    assert row["retry_count"] == 1 and (row["embedding_status"], row["keyword_status"]) == (emb, kw)
    owner, owned_at = owner_of(sync_conn, cid)
    assert owner == me and owned_at == row["rescanned_at"]  # the claimer owns the re-send
    assert await loop.claim() == []            # claimed once: its claimer is live


@pytest.mark.parametrize(("emb", "kw"), SENDABLE)
async def test_a_live_owners_rows_wait_for_the_expiry(sync_conn, engine, make_rescan_config,
                                                       client, emb, kw):
    """Owner alive but slow → not claimed before the expiry; after it, the backstop claims."""
    slow = add_process(sync_conn)
    config = make_rescan_config()
    young = _owned(sync_conn, slow, emb=emb, kw=kw, age_s=5)
    old = _owned(sync_conn, slow, emb=emb, kw=kw, age_s=OLD)
    assert await RescanLoop(engine, config, client).claim() == [old]
    assert state(sync_conn, young)["retry_count"] == 0


async def test_an_unknown_owner_leaves_the_row_to_the_expiry(sync_conn, engine,
                                                            make_rescan_config, client):
    """No owner (rows claimed before the upgrade, by an older version or the reference
    backend), or a record that no longer counts (the row changed or was claimed since, by a
    process that records none): a gone owner releases nothing."""
    gone = add_process(sync_conn, live=False)
    unowned = make_context(sync_conn, emb="PROCESSING", age_s=5)
    restarted = _owned(sync_conn, gone, emb="PROCESSING", age_s=60)
    sync_conn.execute("UPDATE ai.context_ai_state SET updated_at = now() WHERE context_id = %s",
                      (restarted,))
    reclaimed = _owned(sync_conn, gone, age_s=60)
    sync_conn.execute("UPDATE ai.context_ai_state SET rescanned_at = now() WHERE context_id = %s",
                      (reclaimed,))
    counted = _owned(sync_conn, gone, emb="PROCESSING", age_s=5)
    assert await RescanLoop(engine, make_rescan_config(), client).claim() == [counted]
    assert [state(sync_conn, c)["retry_count"] for c in (unowned, restarted, reclaimed)] == [0] * 3


@pytest.mark.parametrize(("emb", "kw"), NEVER)
async def test_a_gone_owner_never_releases_finished_cancelled_or_dead_end_rows(
        sync_conn, engine, make_rescan_config, client, emb, kw):
    gone = add_process(sync_conn, live=False)
    cid = _owned(sync_conn, gone, emb=emb, kw=kw, age_s=5)
    assert await RescanLoop(engine, make_rescan_config(), client).claim() == []
    assert state(sync_conn, cid)["retry_count"] == 0


async def test_released_rows_keep_bounded_retries_and_the_finalizer_keeps_the_expiry(
        sync_conn, engine, make_rescan_config, client):
    """retry_count stays core's and bounded: an exhausted row of a gone owner is neither
    re-sent nor finalized before its expiry (the finalizer's rule is unchanged)."""
    gone = add_process(sync_conn, live=False)
    exhausted = _owned(sync_conn, gone, emb="PROCESSING", retry=3, age_s=5)
    report = await RescanLoop(engine, make_rescan_config(), client).run_round()
    assert report.claimed_ids == [] and report.finalized_ids == []
    assert state(sync_conn, exhausted)["embedding_status"] == "PROCESSING"
    sync_conn.execute("UPDATE ai.context_ai_state SET updated_at = updated_at - interval '1 day',"
                      " owned_at = owned_at - interval '1 day'")
    report = await RescanLoop(engine, make_rescan_config(), client).run_round()
    assert report.finalized_ids == [exhausted]


async def test_a_claimed_release_is_released_again_when_its_claimer_dies(
        sync_conn, engine, make_rescan_config, client):
    """The claimer owns the re-send: if it dies before the work starts, the next loop claims
    the row again at once (one more retry spent), not after the expiry."""
    crashed, claimer, third = (add_process(sync_conn) for _ in range(3))
    cid = _owned(sync_conn, crashed, age_s=5)
    end_lease(sync_conn, crashed)
    assert await RescanLoop(engine, make_rescan_config(), client, owner=claimer).claim() == [cid]
    end_lease(sync_conn, claimer)
    assert await RescanLoop(engine, make_rescan_config(), client, owner=third).claim() == [cid]
    assert state(sync_conn, cid)["retry_count"] == 2 and owner_of(sync_conn, cid)[0] == third


async def test_released_rows_are_claimed_oldest_first_with_the_expired_ones_in_one_batch(
        sync_conn, engine, make_rescan_config, client):
    gone = add_process(sync_conn, live=False)
    expired = [make_context(sync_conn, age_s=OLD - i) for i in range(3)]
    released = [_owned(sync_conn, gone, age_s=100 - i) for i in range(3)]
    loop = RescanLoop(engine, make_rescan_config(rescan_batch_size=4), client)
    assert sorted(await loop.claim()) == sorted(expired + released[:1])
    assert sorted(await loop.claim()) == sorted(released[1:])


# --- the outlook ----------------------------------------------------------------------------------
OWNERS = ("none", "live", "gone")


async def test_the_outlook_agrees_with_the_round_for_every_status_pair_and_owner(
        sync_conn, engine, make_rescan_settings, client):
    """Rows count as due now in the outlook exactly when the next round claims or finalizes
    them: for every status pair, the rows of every owner (none, live, gone) × retries left or
    not × young or old."""
    settings = make_rescan_settings(pending_expiry=100, processing_expiry=200)
    config = config_of(settings).core.rescan
    statuses = ("PENDING", "PROCESSING", "COMPLETED", "FAILED", "CANCELLED")
    live, gone = add_process(sync_conn), add_process(sync_conn, live=False)
    owners = {"none": None, "live": live, "gone": gone}
    for emb in statuses:
        for kw in statuses:
            sync_conn.execute("TRUNCATE ai.context_ai_state, ai.context_ai_event")
            for who in OWNERS:
                for retry in (0, config.max_retries):
                    for age in (5, 250):
                        _owned(sync_conn, owners[who], emb=emb, kw=kw, age_s=age, retry=retry)
            outlook = await expiry_outlook(engine, config)
            loop = RescanLoop(engine, config, client)
            finalized = (await loop.finalize())[1]
            claimed = await loop.claim()
            assert outlook.expired == len(claimed) + len(finalized), (emb, kw)


async def test_the_outlook_wakes_the_loop_when_a_live_owners_lease_would_end(
        sync_conn, engine, make_rescan_settings):
    """A loop notices a crashed process within one heartbeat timeout: the row of a live owner
    is due when that owner's lease runs out, if that comes before the row's expiry."""
    settings = make_rescan_settings(pending_expiry=7200, processing_expiry=7200)
    owner = add_process(sync_conn)  # lease: an hour
    _owned(sync_conn, owner, emb="PROCESSING", age_s=5)
    outlook = await expiry_outlook(engine, config_of(settings).core.rescan)
    assert (outlook.waiting, outlook.expired) == (1, 0)
    assert outlook.first_expires_in is not None
    assert LIVE_LEASE_S - 600 < outlook.first_expires_in <= LIVE_LEASE_S  # the lease, not 2 h
    end_lease(sync_conn, owner)
    outlook = await expiry_outlook(engine, config_of(settings).core.rescan)
    assert (outlook.waiting, outlook.expired) == (0, 1)


async def test_the_process_that_creates_a_row_owns_its_pending_work(sync_conn, engine,
                                                                   make_rescan_config, client):
    """core records itself as the sender of a new row's PENDING work: when it dies before the
    work starts (a SIGKILL with notes queued in memory), the row is released at once."""
    from pinlog.core.services import CoreService, PlaceInput, ServiceConfig

    creator = add_process(sync_conn)
    service = CoreService(engine, None, ServiceConfig(max_text_chars=2000), owner=creator)
    member = await service.create_member()
    _, cid = await service.create_record(
        member, PlaceInput(external_place_id="p-own", name="카페", lat=37.5, lng=127.0),
        "창가 자리가 조용한 카페")
    assert owner_of(sync_conn, cid)[0] == creator
    loop = RescanLoop(engine, make_rescan_config(), client)
    assert await loop.claim() == []
    end_lease(sync_conn, creator)
    assert await loop.claim() == [cid]
