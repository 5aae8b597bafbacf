"""One rescan round against a real PostgreSQL (SPEC §7, §11 #16–#18 and the rescan cases).

Time is simulated by moving updated_at / rescanned_at into the past. The ai side is a recording
ProcessClient at the contract.
"""

from __future__ import annotations

import asyncio
import logging

import psycopg
import pytest
from sqlalchemy.engine import make_url

from pinlog.contracts import ProcessRequest
from pinlog.core.rescan import RescanLoop
from pinlog.db.engine import create_engine
from pinlog.logs import current_log_context
from tests.integration.core.rescan.conftest import run_round_in_thread
from tests.integration.core.rescan.factory import (
    RecordingClient,
    delete_context,
    events,
    make_context,
    state,
)
from tests.conftest import config_of

OLD = 10_000  # seconds: older than every default expiry
FINISHED = [("COMPLETED", "COMPLETED"), ("FAILED", "FAILED"), ("CANCELLED", "CANCELLED"),
            ("COMPLETED", "FAILED"), ("COMPLETED", "CANCELLED"), ("FAILED", "CANCELLED"),
            ("CANCELLED", "COMPLETED"), ("FAILED", "COMPLETED")]


async def test_stale_pending_row_is_resent_and_spends_one_retry(
        sync_conn, engine, make_rescan_config, client):
    cid = make_context(sync_conn, body="비 오는 날 가기 좋은 카페", age_s=OLD)
    before = state(sync_conn, cid)

    report = await RescanLoop(engine, make_rescan_config(), client).run_round()

    assert report.claimed_ids == [cid] and report.dispatched_ids == [cid]
    after = state(sync_conn, cid)
    assert after["retry_count"] == 1
    assert after["rescanned_at"] is not None
    assert after["updated_at"] == before["updated_at"]  # SPEC §7.3: never refreshed by the rescan
    assert (after["embedding_status"], after["keyword_status"]) == ("PENDING", "PENDING")
    member_id, record_id, external_id, name = sync_conn.execute(
        "SELECT c.member_id, c.record_id, p.external_place_id, p.name FROM core.context c "
        "JOIN core.record r ON r.id = c.record_id JOIN core.place p ON p.id = r.place_id "
        "WHERE c.id = %s", (cid,)).fetchone()
    # the saved place goes with the re-sent request too (SPEC §10: the ai side's lexical terms)
    assert client.requests == [ProcessRequest(context_id=cid, user_id=member_id,
                                              record_id=record_id, text="비 오는 날 가기 좋은 카페",
                                              place_meta={"externalPlaceId": external_id,
                                                          "name": name})]
    assert events(sync_conn, cid) == [
        ("embedding", "PENDING", "PENDING", "rescan", "rescan re-send, attempt 1 of 3")]


@pytest.mark.parametrize("failure", [RecordingClient(status=503), RecordingClient(status=0),
                                     RecordingClient(error=RuntimeError("boom"))],
                         ids=["503", "no-answer", "raises"])
async def test_retry_budget_is_spent_even_when_the_call_fails(
        sync_conn, engine, make_rescan_config, failure):
    ids = [make_context(sync_conn, age_s=OLD) for _ in range(3)]

    # busy_wait 0: a 503 is not retried within the round (that pacing is tested separately)
    report = await RescanLoop(engine, make_rescan_config(rescan_busy_wait=0),
                              failure).run_round()

    assert sorted(report.failed_call_ids) == ids and report.dispatched == 0
    assert sorted(failure.ids) == ids  # one failure never stopped the round
    assert all(state(sync_conn, i)["retry_count"] == 1 for i in ids)


async def test_one_failing_call_does_not_stop_the_others(sync_conn, engine, make_rescan_config):
    ids = [make_context(sync_conn, age_s=OLD) for _ in range(4)]

    class Flaky(RecordingClient):
        async def send(self, request):
            await super().send(request)
            if request.context_id == ids[1]:
                raise ConnectionError("down")
            return 202

    flaky = Flaky()
    report = await RescanLoop(engine, make_rescan_config(), flaky).run_round()
    assert report.failed_call_ids == [ids[1]]
    assert sorted(report.dispatched_ids) == [ids[0], ids[2], ids[3]]


async def test_completed_embedding_with_a_stale_keyword_stage_is_a_candidate(
        sync_conn, engine, make_rescan_config, client):
    pending = make_context(sync_conn, emb="COMPLETED", kw="PENDING", age_s=400)
    processing = make_context(sync_conn, emb="COMPLETED", kw="PROCESSING", age_s=700)

    report = await RescanLoop(engine, make_rescan_config(), client).run_round()

    assert sorted(report.claimed_ids) == [pending, processing]
    assert events(sync_conn, pending)[-1][:3] == ("keyword", "PENDING", "PENDING")


async def test_finished_rows_are_never_candidates(sync_conn, engine, make_rescan_config, client):
    ids = [make_context(sync_conn, emb=emb, kw=kw, age_s=OLD, retry=r)
           for r in (0, 3) for emb, kw in FINISHED]
    before = {i: state(sync_conn, i) for i in ids}

    report = await RescanLoop(engine, make_rescan_config(), client).run_round()

    assert (report.claimed, report.finalized, report.dead_ends) == (0, 0, 0)
    assert client.requests == []
    assert {i: state(sync_conn, i) for i in ids} == before


async def test_pending_and_processing_expiries_differ_and_come_from_settings(
        sync_conn, engine, make_rescan_settings):
    rows = {
        "pending_150": make_context(sync_conn, emb="PENDING", age_s=150),
        "processing_150": make_context(sync_conn, emb="PROCESSING", age_s=150),
        "processing_1100": make_context(sync_conn, emb="PROCESSING", age_s=1100),
        "pending_50": make_context(sync_conn, emb="PENDING", age_s=50),
        "kw_processing_150": make_context(sync_conn, emb="COMPLETED", kw="PROCESSING", age_s=150),
        "kw_processing_1100": make_context(sync_conn, emb="COMPLETED", kw="PROCESSING", age_s=1100),
        "kw_pending_150": make_context(sync_conn, emb="COMPLETED", kw="PENDING", age_s=150),
    }
    short_pending = make_rescan_settings(pending_expiry=100, processing_expiry=1000)
    report = await RescanLoop(engine, config_of(short_pending).core.rescan, RecordingClient()).run_round()
    names = {v: k for k, v in rows.items()}
    # processing_150 is embedding PROCESSING + keyword PENDING: the keyword waits for a live
    # embedding, so the embedding's PROCESSING expiry governs
    assert sorted(names[i] for i in report.claimed_ids) == [
        "kw_pending_150", "kw_processing_1100", "pending_150", "processing_1100"]

    # The other way round: the values come from settings, not from constants.
    sync_conn.execute("UPDATE ai.context_ai_state SET retry_count = 0, rescanned_at = NULL")
    short_processing = make_rescan_settings(pending_expiry=1000, processing_expiry=100)
    report = await RescanLoop(engine, config_of(short_processing).core.rescan, RecordingClient()).run_round()
    assert sorted(names[i] for i in report.claimed_ids) == [
        "kw_processing_1100", "kw_processing_150", "processing_1100", "processing_150"]


async def test_rescanned_at_restarts_the_expiry_clock(sync_conn, engine, make_rescan_config,
                                                      client):
    fresh_rescan = make_context(sync_conn, age_s=OLD, rescanned_age_s=10, retry=1)
    old_rescan = make_context(sync_conn, age_s=OLD, rescanned_age_s=400, retry=1)
    report = await RescanLoop(engine, make_rescan_config(), client).run_round()
    assert report.claimed_ids == [old_rescan]
    assert state(sync_conn, fresh_rescan)["retry_count"] == 1


async def test_the_last_retry_goes_out_and_is_not_finalized_in_the_same_round(
        sync_conn, engine, make_rescan_config, client):
    cid = make_context(sync_conn, emb="PROCESSING", age_s=OLD, retry=2,
                       last_error="embedding transient: upstream 503")
    loop = RescanLoop(engine, make_rescan_config(), client)

    first = await loop.run_round()
    assert first.claimed_ids == [cid] and first.dispatched_ids == [cid]
    assert first.finalized == 0
    assert state(sync_conn, cid)["retry_count"] == 3
    assert state(sync_conn, cid)["embedding_status"] == "PROCESSING"

    second = await loop.run_round()  # immediately: the last retry has a full expiry to work
    assert (second.claimed, second.finalized) == (0, 0)
    assert state(sync_conn, cid)["embedding_status"] == "PROCESSING"

    # one PROCESSING expiry after the last retry → finalized, without another call
    sync_conn.execute("UPDATE ai.context_ai_state SET rescanned_at = now() - interval '601 s'")
    third = await loop.run_round()
    assert third.finalized_ids == [cid] and third.claimed == 0
    assert len(client.requests) == 1
    row = state(sync_conn, cid)
    assert (row["embedding_status"], row["keyword_status"]) == ("FAILED", "FAILED")
    assert row["last_error"] == (
        "retries exhausted after 3 attempts; last: embedding transient: upstream 503")


async def test_an_exhausted_row_that_is_not_expired_yet_is_left_alone(
        sync_conn, engine, make_rescan_config, client):
    recent_update = make_context(sync_conn, age_s=100, retry=3)
    recent_rescan = make_context(sync_conn, age_s=OLD, rescanned_age_s=100, retry=3)
    before = {i: state(sync_conn, i) for i in (recent_update, recent_rescan)}

    report = await RescanLoop(engine, make_rescan_config(), client).run_round()

    assert (report.claimed, report.finalized) == (0, 0) and client.requests == []
    assert {i: state(sync_conn, i) for i in before} == before


async def test_scenario_16_finalizer_fails_only_unfinished_stages(
        sync_conn, engine, make_rescan_config, client):
    mixed = make_context(sync_conn, emb="COMPLETED", kw="PROCESSING", age_s=OLD, retry=3,
                         last_error="keyword transient: judge timeout")
    both = make_context(sync_conn, emb="PENDING", kw="PENDING", age_s=OLD, retry=5)
    before = state(sync_conn, mixed)

    report = await RescanLoop(engine, make_rescan_config(), client).run_round()

    assert sorted(report.finalized_ids) == [mixed, both] and client.requests == []
    row = state(sync_conn, mixed)
    assert (row["embedding_status"], row["keyword_status"]) == ("COMPLETED", "FAILED")
    assert row["updated_at"] > before["updated_at"]
    assert row["last_error"] == (
        "retries exhausted after 3 attempts; last: keyword transient: judge timeout")
    assert [e[:4] for e in events(sync_conn, mixed)] == [
        ("keyword", "PROCESSING", "FAILED", "finalizer")]
    row = state(sync_conn, both)
    assert (row["embedding_status"], row["keyword_status"]) == ("FAILED", "FAILED")
    assert row["last_error"] == "retries exhausted after 5 attempts; last: none recorded"
    assert sorted(e[0] for e in events(sync_conn, both)) == ["embedding", "keyword"]


async def test_finalizer_whitelist_keeps_a_finished_keyword_stage(
        sync_conn, engine, make_rescan_config, client):
    """The whitelist from the keyword side (scenario 16 shows the embedding side): an unfinished
    embedding next to a finished keyword stage (e.g. a manual fix or an adopted database) → only
    the embedding becomes FAILED; COMPLETED and FAILED keyword stages are kept, no keyword event."""
    completed_kw = make_context(sync_conn, emb="PROCESSING", kw="COMPLETED", age_s=OLD, retry=3)
    failed_kw = make_context(sync_conn, emb="PENDING", kw="FAILED", age_s=OLD, retry=3)

    report = await RescanLoop(engine, make_rescan_config(), client).run_round()

    assert sorted(report.finalized_ids) == [completed_kw, failed_kw] and client.requests == []
    for cid, kw in ((completed_kw, "COMPLETED"), (failed_kw, "FAILED")):
        row = state(sync_conn, cid)
        assert (row["embedding_status"], row["keyword_status"]) == ("FAILED", kw)
        assert [e[:4] for e in events(sync_conn, cid)] == [
            ("embedding", "PROCESSING" if kw == "COMPLETED" else "PENDING", "FAILED", "finalizer")]


async def test_scenario_17_cancelled_is_never_overwritten_by_failed(
        sync_conn, db_url, make_rescan_settings, client):
    cancelled = make_context(sync_conn, emb="CANCELLED", kw="CANCELLED", age_s=OLD, retry=3)
    half = make_context(sync_conn, emb="CANCELLED", kw="PENDING", age_s=OLD, retry=3)
    deleting = make_context(sync_conn, emb="PROCESSING", age_s=OLD, retry=3)
    other = make_context(sync_conn, emb="PROCESSING", age_s=OLD, retry=3)
    settings = make_rescan_settings()

    # a delete transaction is in flight on `deleting` while the finalizer runs
    with psycopg.connect(db_url) as deleter:
        deleter.execute("UPDATE core.context SET deleted_at = now() WHERE id = %s", (deleting,))
        deleter.execute("UPDATE ai.context_ai_state SET embedding_status = 'CANCELLED', "
                        "keyword_status = 'CANCELLED', updated_at = now() WHERE context_id = %s",
                        (deleting,))
        try:
            report = run_round_in_thread(settings, db_url, client)
        finally:
            deleter.commit()

    assert report.finalized_ids == [other]
    for cid in (cancelled, deleting):
        row = state(sync_conn, cid)
        assert (row["embedding_status"], row["keyword_status"]) == ("CANCELLED", "CANCELLED")
    # never FAILED next to a CANCELLED stage: the half-cancelled anomaly ends CANCELLED
    # (SPEC §7.2, issue 13: it used to stay CANCELLED/PENDING forever)
    assert (state(sync_conn, half)["embedding_status"], state(sync_conn, half)["keyword_status"]) \
        == ("CANCELLED", "CANCELLED")
    assert report.half_cancelled_ids == [half]
    # and once committed, later rounds leave it CANCELLED
    run_round_in_thread(settings, db_url, client)
    assert state(sync_conn, deleting)["embedding_status"] == "CANCELLED"


# --- half-cancelled rows (one stage CANCELLED, the other PENDING/PROCESSING) ------------------
# RULE (SPEC §7.2 anomaly, issue 13; it replaced "any stage CANCELLED → never expired, left as
# it is"): the next round ends the unfinished stage CANCELLED too (an invalidation always wins),
# with one event row — whatever the retry count and age; the row is never claimed (no retry
# spent, no request) nor FAILED, and its retry_count, rescanned_at and last_error are kept.
HALF_CANCELLED = [(emb, kw) for unfinished in ("PENDING", "PROCESSING")
                  for emb, kw in (("CANCELLED", unfinished), (unfinished, "CANCELLED"))]


@pytest.mark.parametrize("retry", [0, 2, 3, 5], ids=lambda r: f"retry{r}")
@pytest.mark.parametrize("emb,kw", HALF_CANCELLED, ids=lambda s: s)
async def test_half_cancelled_rows_end_cancelled_and_are_neither_claimed_nor_failed(
        sync_conn, engine, make_rescan_config, client, emb, kw, retry):
    """Every half-cancelled shape, retries left (0, 2) and used up (3 = max, 5), expired by both
    clocks (updated_at and rescanned_at far past every expiry), through one real round next to
    rows that the same round does claim and finalize (so the round demonstrably ran)."""
    half = make_context(sync_conn, emb=emb, kw=kw, retry=retry, age_s=OLD, rescanned_age_s=OLD,
                        last_error="embedding transient: upstream 503")
    claimable = make_context(sync_conn, emb=emb.replace("CANCELLED", "PENDING"),
                             kw=kw.replace("CANCELLED", "PENDING"), age_s=OLD)
    exhausted = make_context(sync_conn, emb=emb.replace("CANCELLED", "PENDING"),
                             kw=kw.replace("CANCELLED", "PENDING"), age_s=OLD, retry=3)
    before = state(sync_conn, half)

    report = await RescanLoop(engine, make_rescan_config(), client).run_round()

    assert report.claimed_ids == [claimable] and client.ids == [claimable]
    assert report.finalized_ids == [exhausted] and report.dead_ends == 0
    assert report.half_cancelled_ids == [half]
    after = state(sync_conn, half)
    assert (after["embedding_status"], after["keyword_status"]) == ("CANCELLED", "CANCELLED")
    for kept in ("retry_count", "rescanned_at", "last_error"):
        assert after[kept] == before[kept], kept
    unfinished_stage, unfinished = (("embedding", emb) if emb != "CANCELLED" else ("keyword", kw))
    [(stage, from_status, to_status, actor, _reason)] = events(sync_conn, half)
    assert (stage, from_status, to_status, actor) == (unfinished_stage, unfinished, "CANCELLED",
                                                      "finalizer")


async def test_scenario_18_context_deleted_after_the_claim_is_not_called(
        sync_conn, engine, make_rescan_config, client, caplog):
    deleted = make_context(sync_conn, age_s=OLD)
    record_gone = make_context(sync_conn, age_s=OLD)
    kept = make_context(sync_conn, age_s=OLD)
    loop = RescanLoop(engine, make_rescan_config(), client)

    claimed = await loop.claim()
    assert sorted(claimed) == [deleted, record_gone, kept]
    delete_context(sync_conn, deleted)  # lands between the claim and the re-send
    sync_conn.execute("UPDATE core.record SET deleted_at = now() WHERE id = "
                      "(SELECT record_id FROM core.context WHERE id = %s)", (record_gone,))
    sync_conn.execute("UPDATE ai.context_ai_state SET embedding_status = 'CANCELLED', "
                      "keyword_status = 'CANCELLED' WHERE context_id = %s", (record_gone,))
    with caplog.at_level(logging.WARNING, logger="pinlog.core.rescan"):
        report = await loop.dispatch(claimed)

    assert client.ids == [kept]
    assert sorted(report.skipped_deleted) == [deleted, record_gone]
    assert not [r for r in caplog.records if "invalidation was missed" in r.getMessage()]


async def test_deleted_context_whose_state_was_not_cancelled_is_skipped_with_a_warning(
        sync_conn, engine, make_rescan_config, client, caplog):
    cid = make_context(sync_conn, age_s=OLD)
    delete_context(sync_conn, cid, cancel=False)  # a missed invalidation
    with caplog.at_level(logging.WARNING, logger="pinlog.core.rescan"):
        report = await RescanLoop(engine, make_rescan_config(), client).run_round()
    assert report.skipped_deleted_ids == [cid] and client.requests == []
    warnings = [r for r in caplog.records if "invalidation was missed" in r.getMessage()]
    assert len(warnings) == 1 and warnings[0].context_id == cid
    assert "조용한" not in caplog.text  # never the context text


async def test_dead_end_keyword_stage_is_failed_every_round_without_spending_retries(
        sync_conn, engine, make_rescan_config, client):
    fresh = make_context(sync_conn, emb="FAILED", kw="PENDING", age_s=0, retry=0,
                         last_error="embedding permanent: wrong vector length")
    exhausted = make_context(sync_conn, emb="FAILED", kw="PENDING", age_s=OLD, retry=3)

    report = await RescanLoop(engine, make_rescan_config(), client).run_round()

    assert sorted(report.dead_end_ids) == [fresh, exhausted]
    assert report.claimed == 0 and client.requests == []
    row = state(sync_conn, fresh)
    assert (row["embedding_status"], row["keyword_status"], row["retry_count"]) == \
        ("FAILED", "FAILED", 0)
    assert row["last_error"] == "embedding permanent: wrong vector length"  # root cause kept
    assert events(sync_conn, fresh) == [
        ("keyword", "PENDING", "FAILED", "finalizer", "embedding failed")]


async def test_claim_is_oldest_first_and_limited_to_the_batch_size(
        sync_conn, engine, make_rescan_config, client):
    ids = [make_context(sync_conn, age_s=OLD - i) for i in range(5)]  # ids[0] is the oldest
    report = await RescanLoop(engine, make_rescan_config(rescan_batch_size=2), client).run_round()
    assert sorted(report.claimed_ids) == ids[:2]


async def test_skip_locked_a_locked_row_is_skipped_not_waited_for(
        sync_conn, db_url, make_rescan_settings, client):
    locked = make_context(sync_conn, age_s=OLD)
    exhausted_locked = make_context(sync_conn, age_s=OLD, retry=3)
    others = [make_context(sync_conn, age_s=OLD) for _ in range(3)]
    exhausted = make_context(sync_conn, age_s=OLD, retry=3)

    with psycopg.connect(db_url) as holder:
        holder.execute("SELECT 1 FROM ai.context_ai_state WHERE context_id IN (%s, %s) "
                       "FOR UPDATE", (locked, exhausted_locked))
        try:
            report = run_round_in_thread(make_rescan_settings(), db_url, client, timeout=15)
        finally:
            holder.rollback()

    assert sorted(report.claimed_ids) == others
    assert report.finalized_ids == [exhausted]
    assert state(sync_conn, locked)["retry_count"] == 0
    assert state(sync_conn, exhausted_locked)["embedding_status"] == "PENDING"


async def test_two_rescan_loops_claim_every_stale_row_exactly_once(
        sync_conn, db_url, make_rescan_settings):
    from pinlog.db.engine import create_engine

    ids = [make_context(sync_conn, age_s=OLD) for _ in range(150)]
    settings = make_rescan_settings(rescan_batch_size=100)
    engines = [create_engine(db_url, pool_size=4) for _ in range(2)]
    clients = [RecordingClient(), RecordingClient()]
    try:
        reports = await asyncio.gather(*(RescanLoop(e, config_of(settings).core.rescan, c).run_round()
                                         for e, c in zip(engines, clients, strict=True)))
    finally:
        for e in engines:
            await e.dispose()

    a, b = (set(r.claimed_ids) for r in reports)
    assert not a & b
    assert a | b == set(ids)
    assert sorted(clients[0].ids + clients[1].ids) == ids
    counts = sync_conn.execute(
        "SELECT retry_count, count(*) FROM ai.context_ai_state GROUP BY 1").fetchall()
    assert counts == [(1, 150)]


async def test_sends_run_with_bounded_concurrency_and_hold_no_db_connection(
        sync_conn, db_url, make_rescan_config):
    ids = [make_context(sync_conn, age_s=OLD) for _ in range(10)]
    client = RecordingClient()
    client.gate = asyncio.Event()
    # the round's own engine, named, so only its sessions are counted (the test database is
    # shared by the session: another test's leftover session must not count)
    engine = create_engine(make_url(db_url).update_query_dict(
        {"application_name": "rescan_probe"}).render_as_string(hide_password=False))
    loop = RescanLoop(engine, make_rescan_config(rescan_concurrency=3), client)

    task = asyncio.create_task(loop.run_round())
    async with asyncio.timeout(10):
        while client.in_flight < 3:
            await asyncio.sleep(0.01)
    # three calls are held by the ai side: no connection is checked out meanwhile
    assert engine.pool.checkedout() == 0
    sessions, idle_in_tx = sync_conn.execute(
        "SELECT count(*), count(*) FILTER (WHERE state LIKE 'idle in transaction%%') "
        "FROM pg_stat_activity WHERE datname = current_database() "
        "AND application_name = 'rescan_probe'").fetchone()
    assert sessions >= 1 and idle_in_tx == 0  # the claim's session is seen, and idle
    client.gate.set()
    try:
        report = await asyncio.wait_for(task, 10)
    finally:
        await engine.dispose()
    assert sorted(report.dispatched_ids) == ids
    assert client.max_in_flight == 3


async def test_the_loop_runs_in_the_background_and_stops_cleanly(
        sync_conn, engine, make_rescan_config):
    cid = make_context(sync_conn, age_s=OLD)
    client = RecordingClient()
    client.gate = asyncio.Event()
    loop = RescanLoop(engine, make_rescan_config(rescan_interval=3600), client)
    await loop.start()
    async with asyncio.timeout(10):
        while not client.requests:
            await asyncio.sleep(0.01)
    # a round is in flight (held by the ai side): stop abandons it cleanly after the grace
    await asyncio.wait_for(loop.stop(grace=0.2), 5)
    assert state(sync_conn, cid)["retry_count"] == 1  # the claim was committed
    await loop.stop()  # idempotent

    # a sleeping loop stops at once
    client.gate.set()
    loop2 = RescanLoop(engine, make_rescan_config(rescan_interval=3600), RecordingClient())
    await loop2.start()
    async with asyncio.timeout(10):
        while loop2.rounds < 1:
            await asyncio.sleep(0.01)
    await asyncio.wait_for(loop2.stop(), 2)
    assert loop2.rounds == 1  # fixed delay of an hour: no second round


async def test_every_line_of_a_rescan_round_carries_its_round_id(
        sync_conn, engine, make_rescan_config, caplog):
    """pinlog.logs: the round is its lines' edge — each line of one round carries the same
    ``round_id``, another round another one; each re-send has its own ``rescan-…`` request id
    (what the process client sends as X-Request-Id), passed as no parameter."""
    sent: dict[int, dict] = {}

    class NoAnswer(RecordingClient):
        async def send(self, request):
            sent[request.context_id] = dict(current_log_context())
            return await super().send(request)

    client = NoAnswer(status=0)  # "re-send not accepted": one WARNING per context
    loop = RescanLoop(engine, make_rescan_config(), client)
    first = [make_context(sync_conn, age_s=OLD) for _ in range(2)]
    with caplog.at_level(logging.WARNING, logger="pinlog.core.rescan"):
        await loop.run_round()
        second = make_context(sync_conn, age_s=OLD)
        await loop.run_round()
    lines = {r.context_id: r for r in caplog.records if r.getMessage() == "re-send not accepted"}
    assert sorted(lines) == sorted([*first, second])
    rounds = {cid: lines[cid].round_id for cid in lines}
    assert rounds[first[0]] == rounds[first[1]] != rounds[second]
    assert all(len(r) == 16 for r in rounds.values())
    assert {cid: seen["round_id"] for cid, seen in sent.items()} == rounds
    request_ids = {seen["request_id"] for seen in sent.values()}
    assert len(request_ids) == 3 and all(r.startswith("rescan-") for r in request_ids)
