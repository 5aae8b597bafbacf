"""SPEC §7.3, last paragraph (issue 14): a backend that keeps the reference's rescan refreshes
``updated_at`` when it re-sends (``retry_count = retry_count + 1, updated_at = now()``), so a
crashed PROCESSING stage is never re-claimed by age. The guarded start records the row's
``retry_count`` when a stage starts and re-claims a PROCESSING stage whose ``retry_count`` rose
since — proved here with the backend's own claim statement."""

from __future__ import annotations

from datetime import timedelta

import pytest

from pinlog.ai import state
from pinlog.states import Stage, Status
from tests.integration.ai.support import events, insert_state, read_state, statuses

EXPIRY = timedelta(minutes=10)
#: The reference backend's rescan claim, verbatim in its effect (issue 14).
BACKEND_CLAIM = ("UPDATE ai.context_ai_state SET retry_count = retry_count + 1, updated_at = now() "
                 "WHERE context_id = %s")
RETRY_REASON = "reclaimed: retry_count rose since the stage started"


async def _start(engine, cid, stage):
    """The guarded start's previous status (None: 0 rows)."""
    async with engine.begin() as conn:
        claim = await state.start_stage(conn, cid, stage, EXPIRY)
    return claim.previous if claim is not None else None


def _start_retry(conn, cid, stage: Stage):
    return conn.execute(f"SELECT {stage.label}_start_retry FROM ai.context_ai_state "
                        "WHERE context_id = %s", (cid,)).fetchone()[0]


@pytest.mark.parametrize("stage", list(Stage))
async def test_backend_claim_after_a_crash_lets_the_resend_reclaim(engine, sync_conn, stage):
    embedding = "COMPLETED" if stage is Stage.KEYWORD else "PENDING"
    insert_state(sync_conn, 1, embedding=embedding)
    assert await _start(engine, 1, stage) is Status.PENDING       # the attempt that crashes
    assert _start_retry(sync_conn, 1, stage) == 0                 # the start recorded it
    # a duplicate re-send without a claim is still a live PROCESSING stage: refused
    assert await _start(engine, 1, stage) is None
    sync_conn.execute(BACKEND_CLAIM, (1,))                        # the backend gives it up
    before = read_state(sync_conn, 1).updated_at
    assert await _start(engine, 1, stage) is Status.PROCESSING    # the re-send re-claims
    row = read_state(sync_conn, 1)
    assert row.updated_at > before and row.retry_count == 1
    assert _start_retry(sync_conn, 1, stage) == 1                 # recorded again
    assert events(sync_conn, 1)[-1] == (stage.label, "PROCESSING", "PROCESSING", "ai",
                                        RETRY_REASON)
    # the same re-send delivered twice re-claims once
    assert await _start(engine, 1, stage) is None


async def test_retry_count_of_the_other_stage_start_does_not_count(engine, sync_conn):
    """Each stage compares with its own recorded start."""
    insert_state(sync_conn, 1, embedding="COMPLETED")
    sync_conn.execute(BACKEND_CLAIM, (1,))
    assert await _start(engine, 1, Stage.KEYWORD) is Status.PENDING   # started at retry 1
    assert await _start(engine, 1, Stage.KEYWORD) is None
    sync_conn.execute(BACKEND_CLAIM, (1,))
    assert await _start(engine, 1, Stage.KEYWORD) is Status.PROCESSING


async def test_unrecorded_start_is_reclaimed_by_age_only(engine, sync_conn):
    """NULL start retry (nothing recorded): the retry rule does not apply, the expiry does."""
    insert_state(sync_conn, 1, embedding="PROCESSING")
    sync_conn.execute("UPDATE ai.context_ai_state SET retry_count = 2 WHERE context_id = 1")
    assert await _start(engine, 1, Stage.EMBEDDING) is None
    insert_state(sync_conn, 2, embedding="PROCESSING", age_seconds=EXPIRY.total_seconds() + 5)
    assert await _start(engine, 2, Stage.EMBEDDING) is Status.PROCESSING
    assert events(sync_conn, 2)[-1][4] == "reclaimed after processing expiry"


@pytest.mark.parametrize("status", ["COMPLETED", "FAILED", "CANCELLED"])
async def test_a_higher_retry_count_never_revives_a_finished_stage(engine, sync_conn, status):
    insert_state(sync_conn, 1)
    assert await _start(engine, 1, Stage.EMBEDDING) is Status.PENDING
    sync_conn.execute("UPDATE ai.context_ai_state SET embedding_status = %s WHERE context_id = 1",
                      (status,))
    sync_conn.execute(BACKEND_CLAIM, (1,))
    assert await _start(engine, 1, Stage.EMBEDDING) is None
    assert statuses(sync_conn, 1) == (status, "PENDING")
