"""SPEC §7.3.1 on the ai side, against the real PostgreSQL: the guarded start records the live
process that claims a stage; a PROCESSING stage whose owner is gone is re-claimed at once (not
after the expiry); a live owner, however slow, and an unknown owner (a row claimed before the
upgrade, or by a process that records no owner) are left to the expiry; a job whose claim was
taken over writes nothing — save, fail and error record alike.

Leases are moved with the database clock (``tests/support/owners.py``), never waited for.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import numpy as np
import pytest

from pinlog.ai import state
from pinlog.states import Stage, Status
from tests.integration.ai.support import (basis, embedding_rows, events, insert_state,
                                          keyword_rows, save_claimed_embedding, seed_presets,
                                          statuses)
from tests.support.owners import add_process, end_lease, owner_of

EXPIRY = timedelta(minutes=10)
GONE_REASON = "reclaimed: its owner is gone (no heartbeat)"


def _row(stage: Stage, status: str) -> dict[str, str]:
    """Statuses with ``stage`` at ``status`` (the keyword stage behind a COMPLETED embedding)."""
    if stage is Stage.EMBEDDING:
        return {"embedding": status}
    return {"embedding": "COMPLETED", "keyword": status}


async def _start(engine, cid: int, stage: Stage, owner: str | None) -> state.Claim | None:
    async with engine.begin() as conn:
        return await state.start_stage(conn, cid, stage, EXPIRY, owner)


@pytest.mark.parametrize("stage", list(Stage))
async def test_the_start_records_the_live_process_as_owner_and_returns_the_claim(
        engine, sync_conn, stage):
    me = add_process(sync_conn)
    insert_state(sync_conn, 1, **_row(stage, "PENDING"))
    claim = await _start(engine, 1, stage, me)
    assert claim is not None and claim.previous is Status.PENDING and claim.owner == me
    owner, owned_at = owner_of(sync_conn, 1)
    updated_at = sync_conn.execute(
        "SELECT updated_at FROM ai.context_ai_state WHERE context_id = 1").fetchone()[0]
    assert owner == me and owned_at == updated_at == claim.claimed_at


async def test_a_process_that_is_not_live_is_never_recorded(engine, sync_conn):
    """Unregistered (a one-shot command) or already gone: the owner is recorded as unknown, so
    nothing looks released at once — the expiry stays the backstop."""
    gone = add_process(sync_conn, live=False)
    for cid, owner in ((1, None), (2, "never-registered"), (3, gone)):
        insert_state(sync_conn, cid)
        claim = await _start(engine, cid, Stage.EMBEDDING, owner)
        assert claim is not None and claim.owner is None
        assert owner_of(sync_conn, cid)[0] is None


@pytest.mark.parametrize("stage", list(Stage))
async def test_a_stage_whose_owner_is_gone_is_reclaimed_at_once(engine, sync_conn, stage):
    """Owner dead → re-claimed before the expiry (the stage started a moment ago)."""
    crashed, me = add_process(sync_conn), add_process(sync_conn)
    insert_state(sync_conn, 1, **_row(stage, "PENDING"))
    assert await _start(engine, 1, stage, crashed) is not None
    assert await _start(engine, 1, stage, me) is None  # its owner is live: not re-claimed
    end_lease(sync_conn, crashed)                        # no heartbeat for the timeout
    claim = await _start(engine, 1, stage, me)
    assert claim is not None and claim.previous is Status.PROCESSING and claim.owner == me
    assert events(sync_conn, 1)[-1] == (stage.label, "PROCESSING", "PROCESSING", "ai",
                                        GONE_REASON)
    assert await _start(engine, 1, stage, crashed) is None  # the new owner is live


@pytest.mark.parametrize("stage", list(Stage))
async def test_a_live_but_slow_owner_keeps_its_stage_until_the_expiry(engine, sync_conn, stage):
    """Owner alive but slow → not re-claimed; only the expiry (the backstop) re-claims."""
    slow, other = add_process(sync_conn), add_process(sync_conn)
    insert_state(sync_conn, 1, **_row(stage, "PROCESSING"),
                 age_seconds=EXPIRY.total_seconds() - 30, owner=slow)
    assert await _start(engine, 1, stage, other) is None
    assert statuses(sync_conn, 1) == tuple(_row(stage, "PROCESSING").get(k, "PENDING")
                                           for k in ("embedding", "keyword"))
    sync_conn.execute("UPDATE ai.context_ai_state SET updated_at = updated_at - interval '60 s', "
                      "owned_at = owned_at - interval '60 s'")
    claim = await _start(engine, 1, stage, other)
    assert claim is not None and claim.previous is Status.PROCESSING
    assert events(sync_conn, 1)[-1][4] == "reclaimed after processing expiry"


async def test_an_unknown_owner_is_left_to_the_expiry(engine, sync_conn):
    """No owner recorded (a row claimed before the upgrade), or a record that no longer counts
    (a later status change or claim by a process that records none): the gone owner does not
    release the stage."""
    gone = add_process(sync_conn, live=False)
    insert_state(sync_conn, 1, embedding="PROCESSING")              # claimed before the upgrade
    insert_state(sync_conn, 2, embedding="PROCESSING", owner=gone)   # then re-started by an
    sync_conn.execute("UPDATE ai.context_ai_state SET updated_at = now() WHERE context_id = 2")
    insert_state(sync_conn, 3, embedding="PROCESSING", owner=gone)   # older version; claimed by
    sync_conn.execute("UPDATE ai.context_ai_state SET rescanned_at = now() WHERE context_id = 3")
    insert_state(sync_conn, 4, embedding="PROCESSING", owner=gone)   # … and one that counts
    me = add_process(sync_conn)
    got = {cid: await _start(engine, cid, Stage.EMBEDDING, me) for cid in (1, 2, 3, 4)}
    assert [cid for cid, claim in got.items() if claim is not None] == [4]


@pytest.mark.parametrize("status", ["COMPLETED", "FAILED", "CANCELLED"])
async def test_a_gone_owner_never_revives_a_finished_stage(engine, sync_conn, status):
    gone = add_process(sync_conn, live=False)
    insert_state(sync_conn, 1, embedding=status, owner=gone)
    assert await _start(engine, 1, Stage.EMBEDDING, add_process(sync_conn)) is None
    assert statuses(sync_conn, 1) == (status, "PENDING")


# --- a taken-over claim writes nothing (owns_claim in every write) --------------------------------
async def _take_over(engine, sync_conn, stage: Stage) -> tuple[state.Claim, state.Claim]:
    """Process A starts ``stage``, A's lease ends, B re-claims it: (A's claim, B's claim)."""
    a, b = add_process(sync_conn), add_process(sync_conn)
    insert_state(sync_conn, 1, **_row(stage, "PENDING"))
    first = await _start(engine, 1, stage, a)
    end_lease(sync_conn, a)
    second = await _start(engine, 1, stage, b)
    assert first is not None and second is not None
    return first, second


async def _save_keywords(engine, claim: state.Claim) -> bool:
    async with engine.connect() as conn:
        transaction = await conn.begin()
        saved = await state.save_keywords(conn, 1, picks=[(301, 0.9)], preset_version=2,
                                          unmatched_concepts=[], model_profile="m", claim=claim)
        await (transaction.commit() if saved else transaction.rollback())
    return saved


async def test_a_taken_over_embedding_save_is_refused_and_the_new_owner_saves(engine, sync_conn):
    late, current = await _take_over(engine, sync_conn, Stage.EMBEDDING)
    assert await save_claimed_embedding(engine, late) is False   # the late save: nothing written
    assert embedding_rows(sync_conn, 1) == [] and statuses(sync_conn, 1)[0] == "PROCESSING"
    assert await save_claimed_embedding(engine, current) is True
    assert statuses(sync_conn, 1) == ("COMPLETED", "PENDING")
    assert await save_claimed_embedding(engine, late) is False   # never a late overwrite


async def test_a_taken_over_keyword_save_is_refused(engine, sync_conn):
    seed_presets(sync_conn)
    late, current = await _take_over(engine, sync_conn, Stage.KEYWORD)
    assert await _save_keywords(engine, late) is False
    assert keyword_rows(sync_conn, 1) == []
    assert await _save_keywords(engine, current) is True
    assert statuses(sync_conn, 1) == ("COMPLETED", "COMPLETED")


@pytest.mark.parametrize("stage", list(Stage))
async def test_a_taken_over_job_can_neither_fail_the_stage_nor_record_its_error(
        engine, sync_conn, stage):
    late, current = await _take_over(engine, sync_conn, stage)
    async with engine.begin() as conn:
        assert not await state.fail_stage(conn, 1, stage, f"{stage.label} permanent: x", late)
        assert not await state.record_error(conn, 1, stage, f"{stage.label} transient: y", late)
    row = sync_conn.execute("SELECT last_error FROM ai.context_ai_state").fetchone()
    assert row[0] is None and "FAILED" not in statuses(sync_conn, 1)
    async with engine.begin() as conn:
        assert await state.record_error(conn, 1, stage, f"{stage.label} transient: y", current)
        assert await state.fail_stage(conn, 1, stage, f"{stage.label} permanent: x", current)


async def test_a_claim_taken_by_the_rescan_is_no_longer_the_jobs(engine, sync_conn):
    """The rescan claimed the row (it gave the attempt up and re-sends it; it records itself as
    the owner): the old job's save is refused, the re-send's start re-claims."""
    job, rescan = add_process(sync_conn), add_process(sync_conn)
    insert_state(sync_conn, 1)
    claim = await _start(engine, 1, Stage.EMBEDDING, job)
    assert claim is not None
    sync_conn.execute("UPDATE ai.context_ai_state SET retry_count = retry_count + 1, "
                      "rescanned_at = now(), owner = %s, owned_at = now()", (rescan,))
    assert await save_claimed_embedding(engine, claim) is False
    resend = await _start(engine, 1, Stage.EMBEDDING, job)
    assert resend is not None and resend.previous is Status.PROCESSING
    assert await save_claimed_embedding(engine, resend) is True


async def test_a_claim_taken_by_a_start_that_records_no_owner_is_no_longer_the_jobs(
        engine, sync_conn):
    """A process of an older version re-claims by the expiry without recording an owner
    (updated_at moves, owner stays): the job's save is refused all the same."""
    job = add_process(sync_conn)
    insert_state(sync_conn, 1)
    claim = await _start(engine, 1, Stage.EMBEDDING, job)
    assert claim is not None
    sync_conn.execute("UPDATE ai.context_ai_state SET updated_at = now(), "
                      "embedding_start_retry = retry_count WHERE context_id = 1")
    assert await save_claimed_embedding(engine, claim) is False
    assert owner_of(sync_conn, 1)[0] == job  # the stale record …
    end_lease(sync_conn, job)
    # … no longer counts: the other process's live stage is not released by the job's death
    assert await _start(engine, 1, Stage.EMBEDDING, add_process(sync_conn)) is None


async def test_an_unowned_job_still_loses_its_claim_to_a_reclaim(engine, sync_conn):
    """A job of a process that is not live-registered (owner None) is guarded by its claim time:
    an expiry re-claim by another process makes its save a no-op."""
    insert_state(sync_conn, 1)
    claim = await _start(engine, 1, Stage.EMBEDDING, None)
    assert claim is not None and claim.owner is None
    # the start happened an hour ago (the row's and the claim's clock moved back together)
    sync_conn.execute("UPDATE ai.context_ai_state SET updated_at = updated_at - interval '1 hour',"
                      " owned_at = owned_at - interval '1 hour'")
    claim = replace(claim, claimed_at=claim.claimed_at - timedelta(hours=1))
    other = await _start(engine, 1, Stage.EMBEDDING, None)  # expiry re-claim, also unowned
    assert other is not None
    assert await save_claimed_embedding(engine, claim) is False
    assert await save_claimed_embedding(engine, other) is True


# --- the ai side takes over sending what it accepts over HTTP --------------------------------------
async def test_what_an_ai_process_accepted_over_http_is_released_when_it_stops(
        tmp_path, db_url, engine, provider, judge, presets, sync_conn):
    """The sender (a core process) lives on; the ai process that accepted the requests stops
    with one job running and one queued: both rows are released at once (the queued one's
    owner became the ai process when it was accepted), not after the PENDING expiry."""
    from pinlog.contracts import PROCESS_PATH, SECRET_HEADER
    from pinlog.core.rescan import RescanLoop
    from tests.conftest import TEST_SECRET, config_of
    from tests.integration.ai.support import ai_settings_for
    from tests.integration.core.rescan.factory import RecordingClient
    from tests.support.app import running_ai

    sender = add_process(sync_conn)
    for cid in (1, 2):
        insert_state(sync_conn, cid, owner=sender)
    # one job at a time (no batch: the second request must stay queued behind the first)
    settings = ai_settings_for(tmp_path, db_url, worker_concurrency=1, shutdown_grace=0,
                               process_batch_size=1)
    gate = provider.hold()
    async with running_ai(settings, db_url, provider, judge) as (client, ai):
        for cid in (1, 2):
            answer = await client.post(PROCESS_PATH, headers={SECRET_HEADER: TEST_SECRET}, json={
                "contextId": cid, "userId": 7, "recordId": 70, "text": "조용한 카페"})
            assert answer.status_code == 202
        await gate.wait_entered()  # job 1 runs (held in its model call), job 2 is queued
        me = ai.owner
    # stopped: job 2 dropped, job 1 cancelled, the lease ended
    assert statuses(sync_conn, 1)[0] == "PROCESSING" and statuses(sync_conn, 2)[0] == "PENDING"
    assert owner_of(sync_conn, 1)[0] == me and owner_of(sync_conn, 2)[0] == me
    rescan = RescanLoop(engine, config_of(settings).core.rescan, RecordingClient())
    assert sorted(await rescan.claim()) == [1, 2]


async def test_every_single_write_of_a_taken_over_job_affects_no_row(engine, sync_conn):
    """Each guarded statement on its own (the save groups roll back on any 0-row guard, so every
    one must hold by itself): the taken-over claim upserts no vector and no lexical terms,
    deletes and inserts no keyword, writes no analysis row and completes nothing."""
    seed_presets(sync_conn)
    late, current = await _take_over(engine, sync_conn, Stage.KEYWORD)
    sync_conn.execute("INSERT INTO ai.context_keyword VALUES (1, 101, 0.5, 1)")  # an earlier pick
    async with engine.begin() as conn:
        await state.lock_state(conn, 1)
        assert await state.replace_keywords(conn, 1, [(301, 0.9)], 2, late) == 0
        assert not await state.upsert_keyword_analysis(conn, 1, preset_version=2,
                                                       unmatched_concepts=[], model_profile="m",
                                                       claim=late)
        assert not await state.complete_stage(conn, 1, Stage.KEYWORD, late)
    assert [k for k, *_ in keyword_rows(sync_conn, 1)] == [101]  # not even deleted
    assert sync_conn.execute("SELECT count(*) FROM ai.context_keyword_analysis").fetchone()[0] == 0
    assert statuses(sync_conn, 1) == ("COMPLETED", "PROCESSING")
    # the embedding stage likewise (a fresh row)
    sync_conn.execute("TRUNCATE ai.context_ai_state, ai.context_ai_event, ai.context_keyword")
    late, current = await _take_over(engine, sync_conn, Stage.EMBEDDING)
    async with engine.begin() as conn:
        await state.lock_state(conn, 1)
        assert not await state.upsert_embedding(
            conn, context_id=1, user_id=7, record_id=70,
            vector=np.asarray(basis(0), dtype=np.float32), profile="p",
            text_sha256=b"\x01" * 32, claim=late)
        assert not await state.upsert_lexical(conn, context_id=1, user_id=7, record_id=70,
                                              note_terms=["카페"], place_terms=[], claim=late)
        assert not await state.complete_stage(conn, 1, Stage.EMBEDDING, late)
    assert embedding_rows(sync_conn, 1) == [] and statuses(sync_conn, 1)[0] == "PROCESSING"
    assert sync_conn.execute("SELECT count(*) FROM ai.context_lexical").fetchone()[0] == 0


async def test_the_claim_is_its_owner_and_its_time_together(engine, sync_conn):
    """A claim of the same moment but another owner is not this job's (the owner is checked,
    not only the time)."""
    me = add_process(sync_conn)
    insert_state(sync_conn, 1)
    claim = await _start(engine, 1, Stage.EMBEDDING, me)
    assert claim is not None
    forged = replace(claim, owner=add_process(sync_conn))
    assert await save_claimed_embedding(engine, forged) is False
    assert await save_claimed_embedding(engine, claim) is True


async def test_a_claim_by_an_unregistered_rescan_still_ends_an_unregistered_jobs_claim(
        engine, sync_conn):
    """Neither the job's process nor the claiming one is live-registered (one-shot commands):
    both owners are unknown (NULL), yet the claim moved owned_at — the job's save is refused."""
    insert_state(sync_conn, 1)
    claim = await _start(engine, 1, Stage.EMBEDDING, None)
    assert claim is not None and claim.owner is None
    sync_conn.execute("UPDATE ai.context_ai_state SET retry_count = retry_count + 1, "
                      "rescanned_at = now(), owner = NULL, owned_at = now()")
    assert await save_claimed_embedding(engine, claim) is False


async def test_taking_over_sending_touches_only_pending_work_of_a_live_process(engine, sync_conn):
    """The HTTP take-over never changes the owner of a started stage (another process's live
    claim), of finished, cancelled or dead-end rows — and records nothing for a gone process."""
    me, other = add_process(sync_conn), add_process(sync_conn)
    rows = {1: {"embedding": "PENDING"}, 2: {"embedding": "COMPLETED", "keyword": "PENDING"},
            3: {"embedding": "PROCESSING"}, 4: {"embedding": "COMPLETED", "keyword": "PROCESSING"},
            5: {"embedding": "COMPLETED", "keyword": "COMPLETED"},
            6: {"embedding": "FAILED", "keyword": "PENDING"},
            7: {"embedding": "PENDING", "keyword": "CANCELLED"}}
    for cid, row in rows.items():
        insert_state(sync_conn, cid, owner=other, **row)
    async with engine.begin() as conn:
        assert sorted(await state.take_over_sending(conn, list(rows), me)) == [1, 2]
    assert {cid: owner_of(sync_conn, cid)[0] for cid in rows} == {
        1: me, 2: me, 3: other, 4: other, 5: other, 6: other, 7: other}
    end_lease(sync_conn, me)
    insert_state(sync_conn, 8, owner=other)
    async with engine.begin() as conn:
        assert await state.take_over_sending(conn, [8], me) == []
