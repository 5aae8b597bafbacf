"""SPEC §7.2 anomaly: a row with one stage CANCELLED and the other PENDING/PROCESSING is ended
CANCELLED by the next round (an invalidation always wins), whatever its age or retry count,
with an event row; `status_snapshot(anomalies=True)` counts it until then. Real PostgreSQL."""

from __future__ import annotations

import pytest

from pinlog.core.rescan import RescanLoop
from pinlog.core.status import status_snapshot
from tests.integration.core.rescan.factory import events, make_context, state
from tests.conftest import config_of

PAIRS = [("CANCELLED", "PENDING"), ("CANCELLED", "PROCESSING"),
         ("PENDING", "CANCELLED"), ("PROCESSING", "CANCELLED"), ("COMPLETED", "CANCELLED")]


@pytest.mark.parametrize(("emb", "kw"), PAIRS, ids=["/".join(p) for p in PAIRS])
@pytest.mark.parametrize("retry", [0, 3])
async def test_the_next_round_ends_a_half_cancelled_row_cancelled(
        sync_conn, engine, make_rescan_config, client, emb, kw, retry):
    cid = make_context(sync_conn, emb=emb, kw=kw, retry=retry, age_s=1)  # young: no expiry wait
    unfinished = emb in ("PENDING", "PROCESSING") or kw in ("PENDING", "PROCESSING")

    report = await RescanLoop(engine, make_rescan_config(), client).run_round()

    row = state(sync_conn, cid)
    if not unfinished:  # COMPLETED/CANCELLED is finished and normal: untouched
        assert (row["embedding_status"], row["keyword_status"]) == (emb, kw)
        assert report.half_cancelled_ids == [] and events(sync_conn, cid) == []
        return
    assert (row["embedding_status"], row["keyword_status"]) == ("CANCELLED", "CANCELLED")
    assert row["retry_count"] == retry  # no retry spent, nothing re-sent
    assert report.half_cancelled_ids == [cid] and client.ids == []
    stage = "embedding" if emb != "CANCELLED" else "keyword"
    before = emb if emb != "CANCELLED" else kw
    [(ev_stage, ev_from, ev_to, actor, reason)] = events(sync_conn, cid)
    assert (ev_stage, ev_from, ev_to, actor) == (stage, before, "CANCELLED", "finalizer")
    assert reason.startswith("anomaly: half-cancelled")


async def test_a_cancelled_row_is_left_alone_and_a_later_round_changes_nothing(
        sync_conn, engine, make_rescan_config, client):
    half = make_context(sync_conn, emb="CANCELLED", kw="PENDING")
    normal = make_context(sync_conn, emb="CANCELLED", kw="CANCELLED")
    loop = RescanLoop(engine, make_rescan_config(), client)
    await loop.run_round()
    second = await loop.run_round()
    assert second.half_cancelled_ids == []
    assert len(events(sync_conn, half)) == 1 and events(sync_conn, normal) == []


async def test_status_lists_anomalies_by_kind(sync_conn, engine, make_rescan_settings, client):
    settings = make_rescan_settings()
    make_context(sync_conn, emb="CANCELLED", kw="PROCESSING")
    make_context(sync_conn, emb="FAILED", kw="PENDING")
    make_context(sync_conn, emb="PENDING", kw="COMPLETED")
    deleted = make_context(sync_conn)
    sync_conn.execute("UPDATE core.context SET deleted_at = now() WHERE id = %s", (deleted,))
    make_context(sync_conn, emb="COMPLETED", kw="COMPLETED")

    snap = await status_snapshot(engine, config_of(settings).core.status, anomalies=True)
    assert snap["anomalies"] == {"half_cancelled": 1, "dead_end_keyword": 1,
                                 "keyword_ahead_of_embedding": 1, "deleted_not_cancelled": 1,
                                 "state_without_context": 0}

    await RescanLoop(engine, config_of(settings).core.rescan, client).run_round()
    after = await status_snapshot(engine, config_of(settings).core.status, anomalies=True)
    assert after["anomalies"]["half_cancelled"] == 0  # ended by the round
    assert after["anomalies"]["dead_end_keyword"] == 0


@pytest.mark.parametrize("retry", [0, 3])
@pytest.mark.parametrize(("emb", "kw"), [("PENDING", "CANCELLED"), ("PROCESSING", "CANCELLED"),
                                         ("CANCELLED", "PROCESSING")])
async def test_a_half_cancelled_row_beyond_the_batch_waits_and_is_never_claimed_or_failed(
        sync_conn, engine, make_rescan_config, client, retry, emb, kw):
    """`expired` keeps excluding CANCELLED: a half-cancelled row the anomaly step did not reach
    this round (batch size) is neither re-sent nor FAILED — the next round cancels it."""
    first = make_context(sync_conn, emb="CANCELLED", kw="PENDING", age_s=20_000)
    second = make_context(sync_conn, emb=emb, kw=kw, retry=retry, age_s=10_000)
    loop = RescanLoop(engine, make_rescan_config(rescan_batch_size=1), client)

    report = await loop.run_round()

    assert report.half_cancelled_ids == [first]
    assert report.claimed_ids == [] and report.finalized_ids == [] and client.ids == []
    row = state(sync_conn, second)
    assert (row["embedding_status"], row["keyword_status"], row["retry_count"]) == (
        emb, kw, retry)
    assert (await loop.run_round()).half_cancelled_ids == [second]
