"""Issue 31 + SPEC §4/§5: a CANCELLED state row is what refuses a late result, so it stays for
the late-result window (processing expiry + the longest stage budget, ``Settings.
late_result_window``) after its cancellation, whatever ``PINLOG_RETENTION_DELETED`` says; past
that window it goes, and a late result for the purged context is refused all the same — tested
through the ai job's own save path (the fakes hold the model call while core deletes and the
purge runs)."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from pinlog.ai.retention import AiPurge
from pinlog.composition import erase_member, retention_parts
from pinlog.contracts import ProcessRequest
from pinlog.db.retention import purge_all
from tests.conftest import config_of
from tests.integration.ai.support import ai_settings_for
from tests.integration.retention.support import (
    AI_DATA,
    Note,
    count_rows,
    place,
    rows_of,
    set_back,
)

DAY = 86400.0


def window_seconds(config) -> float:
    return config.ai.retention.late_result_window.total_seconds()


def test_the_window_is_the_processing_expiry_plus_the_longest_stage_budget(config):
    # ai_settings_for: 5 s timeouts, 3 attempts, backoff 0.5 then 1 s; expiry 600 s
    assert config.ai.retention.late_result_window == timedelta(seconds=600 + 5 * 3 + 1.5)


async def test_a_cancelled_row_stays_for_the_late_result_window_whatever_the_retention(
        tmp_path, db_url, engine, core, pipeline, sync_conn):
    """PINLOG_RETENTION_DELETED of one second: a cancellation past it but inside the window
    keeps its state row and its data; past the window both go."""
    config = config_of(ai_settings_for(tmp_path, db_url, retention_deleted=1,
                                       retention_batch_size=3))
    window = window_seconds(config)
    member = await core.create_member()
    record, first = await core.create_record(member, place(), "첫 메모")
    inside = await core.add_context(member, record, "창 안쪽 메모")
    outside = await core.add_context(member, record, "창 바깥 메모")
    for cid, text in ((inside, "창 안쪽 메모"), (outside, "창 바깥 메모")):
        await pipeline.run(ProcessRequest(context_id=cid, user_id=member, record_id=record,
                                          text=text))
        await core.delete_context(member, cid)
    set_back(sync_conn, window / 2, context_ids=[inside])    # far past the retention (1 s)
    set_back(sync_conn, window + 600, context_ids=[outside])
    ai_rows = ("ai.context_ai_state", *AI_DATA)
    before = {t: r for t, r in rows_of(sync_conn, [inside]).items() if t in ai_rows}
    assert all(before.values())

    report = await purge_all(retention_parts(config, engine))

    # the CANCELLED state row and the AI data are kept inside the window
    assert {t: r for t, r in rows_of(sync_conn, [inside]).items() if t in ai_rows} == before
    assert count_rows(sync_conn, "ai.context_ai_state", [outside]) == 0
    assert all(count_rows(sync_conn, t, [outside]) == 0 for t in AI_DATA)
    # core's text has no late result to wait for: it goes at the retention (here 1 s)
    assert count_rows(sync_conn, "core.context", [inside, outside]) == 0
    assert report.removed["ai.context_ai_state"] == 1


async def _hold_embedding_then(pipeline, provider, request, act):
    """Run the job of ``request``; while its embedding call is held, ``await act()``; then let
    the model answer. Returns the job's result."""
    gate = provider.hold()
    job = asyncio.create_task(pipeline.run(request))
    await gate.wait_entered()
    await act()
    gate.open()
    return await job


async def _note(core) -> tuple[int, Note]:
    member = await core.create_member()
    record, first = await core.create_record(member, place(), "남는 메모")
    context = await core.add_context(member, record, "늦은 결과가 올 메모")
    return member, Note(context, record, member, "늦은 결과가 올 메모")


async def test_a_late_embedding_for_a_purged_context_is_refused(
        engine, config, core, pipeline, provider, judge, sync_conn):
    member, note = await _note(core)

    async def delete_and_purge() -> None:
        await core.delete_context(member, note.context_id)
        set_back(sync_conn, 31 * DAY, context_ids=[note.context_id])
        report = await AiPurge(engine, config.ai.retention).purge()
        assert report.removed["ai.context_ai_state"] == 1   # the row is gone before the answer

    result = await _hold_embedding_then(pipeline, provider, ProcessRequest(
        context_id=note.context_id, user_id=member, record_id=note.record_id, text=note.text),
        delete_and_purge)

    assert result.embedding == "discarded" and result.keyword == "skipped"
    assert {t: r for t, r in rows_of(sync_conn, [note.context_id]).items()
            if t != "core.context" and t != "ai.context_ai_event"} == {
        "ai.context_ai_state": [], "ai.context_embedding": [], "ai.context_keyword": [],
        "ai.context_keyword_analysis": []}
    assert judge.calls == 0


async def test_a_late_keyword_answer_for_a_purged_context_is_refused(
        engine, config, core, pipeline, judge, sync_conn):
    member, note = await _note(core)
    gate = judge.hold()
    job = asyncio.create_task(pipeline.run(ProcessRequest(
        context_id=note.context_id, user_id=member, record_id=note.record_id, text=note.text)))
    await gate.wait_entered()           # the embedding is saved, the keywords are being judged
    assert count_rows(sync_conn, "ai.context_embedding", [note.context_id]) == 1
    await core.delete_context(member, note.context_id)
    set_back(sync_conn, 31 * DAY, context_ids=[note.context_id])
    await AiPurge(engine, config.ai.retention).purge()
    gate.open()
    result = await job

    assert result.keyword == "discarded"
    assert all(count_rows(sync_conn, t, [note.context_id]) == 0
               for t in ("ai.context_ai_state", *AI_DATA))


async def test_a_late_result_after_an_erasure_meets_the_cancelled_row_and_is_refused(
        engine, config, core, pipeline, provider, sync_conn):
    member, note = await _note(core)

    async def withdraw_and_erase() -> None:
        await core.withdraw_member(member)
        await erase_member(config, engine, f"id:{member}")

    result = await _hold_embedding_then(pipeline, provider, ProcessRequest(
        context_id=note.context_id, user_id=member, record_id=note.record_id, text=note.text),
        withdraw_and_erase)

    assert result.embedding == "discarded"
    # the erasure kept the CANCELLED row (inside the window): it refused the save
    assert rows_of(sync_conn, [note.context_id])["ai.context_ai_state"] != []
    assert sync_conn.execute("SELECT embedding_status, keyword_status FROM ai.context_ai_state "
                             "WHERE context_id = %s", (note.context_id,)).fetchone() == \
        ("CANCELLED", "CANCELLED")
    assert all(count_rows(sync_conn, t, [note.context_id]) == 0
               for t in ("core.context", *AI_DATA))


async def test_a_request_for_a_purged_context_stops_without_a_model_call(
        engine, config, core, pipeline, provider, judge, sync_conn):
    member, note = await _note(core)
    await core.delete_context(member, note.context_id)
    set_back(sync_conn, 31 * DAY, context_ids=[note.context_id])
    await purge_all(retention_parts(config, engine))
    calls = provider.calls

    result = await pipeline.run(ProcessRequest(
        context_id=note.context_id, user_id=member, record_id=note.record_id, text=note.text))

    assert result.stopped == "missing" and provider.calls == calls and judge.calls == 0
    assert all(count_rows(sync_conn, t, [note.context_id]) == 0
               for t in ("ai.context_ai_state", *AI_DATA))
