"""The batch path (``pinlog.ai.batch.BatchRunner``, SPEC §5.4) on the real PostgreSQL with fake
models: the same rules as the single-context job, for every context of a batch.

Cancellation wins for every row (a context deleted or edited while its batch is in flight is
never stored), partial resume, failure classification per row (one bad text fails only itself),
events per row, a batch larger than the provider's input cap, a crash between claim and write,
two batches at once. Concurrent events are ordered by the fakes' gates, never by sleeps.
"""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from pinlog.ai.batch import BatchRunner
from pinlog.ai.errors import PermanentModelError, ThrottledError, TransientModelError
from pinlog.ai.pipeline import Pipeline
from pinlog.ai.ports import EMBED_GROUP
from pinlog.ai.providers import MicroBatcher
from tests.conftest import config_of
from tests.integration.ai.support import (FRIENDS_TEXT, PROFILE, QUIET_TEXT, ai_settings_for,
                                          analysis_row, basis,
                                          core_cancel, embedding_rows, events, insert_embedding,
                                          insert_state, keyword_rows, read_state, request,
                                          statuses)

TEXTS = [QUIET_TEXT, FRIENDS_TEXT, "한적한 골목 카페", "야경이 예쁜 루프탑", "비 오는 날 국밥",
         "부모님 모시고 간 한정식"]
#: texts whose vectors have candidates (the judge is called for each)
JUDGED = [QUIET_TEXT, FRIENDS_TEXT, QUIET_TEXT]


@pytest.fixture
async def batcher(provider):
    """The fake provider behind the micro-batcher the runtime always uses (input cap 4)."""
    wrapped = MicroBatcher(provider, batch_size=4, wait_ms=0)
    yield wrapped
    await wrapped.aclose(close_provider=False)


@pytest.fixture
def runner(ai_settings, engine, batcher, judge, presets, sleeps) -> BatchRunner:
    return BatchRunner(Pipeline(engine, config_of(ai_settings).ai.pipeline, batcher, judge,
                                sleep=sleeps))


def _requests(ids, texts=TEXTS):
    return [request(cid, texts[i % len(texts)], record_id=70 + cid) for i, cid in enumerate(ids)]


def _picture(sync_conn, cid: int) -> tuple:
    lexical = sync_conn.execute(  # the ai side's lexical terms (SPEC §10, issue 28)
        "SELECT tsvector_to_array(note_terms), tsvector_to_array(place_terms) "
        "FROM ai.context_lexical WHERE context_id = %s", (cid,)).fetchall()
    return (statuses(sync_conn, cid), events(sync_conn, cid), embedding_rows(sync_conn, cid),
            [(k, float(c), v) for k, c, v in keyword_rows(sync_conn, cid)],
            analysis_row(sync_conn, cid), lexical)


async def test_a_batch_gives_every_context_what_the_single_job_gives_it(
        runner, ai_settings, engine, provider, judge, sync_conn):
    """Contexts 1..6 by the single job, 101..106 (same texts) as one batch: identical statuses,
    events, embedding, keyword and analysis rows; the batch's texts go to the model in calls of
    at most its cap (4)."""
    single = Pipeline(engine, config_of(ai_settings).ai.pipeline, provider, judge)
    for cid in [*range(1, 7), *range(101, 107)]:
        insert_state(sync_conn, cid)
    for req in _requests(range(1, 7)):
        assert (await single.run(req)).keyword == "completed"
    calls = len(provider.batches)
    results = await runner.run(_requests(range(101, 107)))
    assert [(r.embedding, r.keyword, r.stopped) for r in results] == \
        [("completed", "completed", None)] * 6
    for cid in range(1, 7):
        assert _picture(sync_conn, cid) == _picture(sync_conn, cid + 100)
        assert _picture(sync_conn, cid)[-1]  # the lexical terms are written on both paths
    assert sorted(provider.batches[calls:]) == [2, 4]  # 6 texts, input cap 4


async def test_a_batch_larger_than_the_providers_cap_is_embedded_in_calls_within_the_cap(
        runner, provider, sync_conn):
    for cid in range(1, 12):
        insert_state(sync_conn, cid)
    results = await runner.run(_requests(range(1, 12)))
    assert all(r.embedding == "completed" for r in results)
    assert sorted(provider.batches) == [3, 4, 4] and len(provider.texts) == 11


async def test_a_context_deleted_while_its_batch_is_embedded_is_never_stored(
        runner, provider, judge, sync_conn):
    for cid in (1, 2, 3):
        insert_state(sync_conn, cid)
    gate = provider.hold()
    job = asyncio.create_task(runner.run(_requests([1, 2, 3], JUDGED)))
    await gate.wait_entered()
    core_cancel(sync_conn, 2)  # core's delete lands while the batch's model call runs
    gate.open()
    results = await job
    assert [(r.embedding, r.keyword) for r in results] == [
        ("completed", "completed"), ("discarded", "skipped"), ("completed", "completed")]
    assert statuses(sync_conn, 2) == ("CANCELLED", "CANCELLED")
    assert embedding_rows(sync_conn, 2) == [] and keyword_rows(sync_conn, 2) == []
    assert analysis_row(sync_conn, 2) is None
    assert _picture(sync_conn, 2)[-1] == []  # nor its lexical terms (SPEC §10, the same guard)
    assert all(e[2] != "COMPLETED" for e in events(sync_conn, 2))
    assert [seen[0] for seen in judge.seen] == [JUDGED[0], JUDGED[2]]  # no judge call for it
    for cid in (1, 3):
        assert statuses(sync_conn, cid) == ("COMPLETED", "COMPLETED")


async def test_a_context_edited_while_its_batch_is_judged_gets_no_keywords(
        runner, judge, sync_conn):
    for cid in (1, 2, 3):
        insert_state(sync_conn, cid)
    gate = judge.hold()
    job = asyncio.create_task(runner.run(_requests([1, 2, 3], JUDGED)))
    await gate.wait_entered()
    insert_state(sync_conn, 4)  # the edit: the new context first, then the old one invalidated
    core_cancel(sync_conn, 2)
    gate.open()
    results = await job
    assert [(r.embedding, r.keyword) for r in results] == [
        ("completed", "completed"), ("completed", "discarded"), ("completed", "completed")]
    assert statuses(sync_conn, 2) == ("CANCELLED", "CANCELLED")
    assert keyword_rows(sync_conn, 2) == [] and analysis_row(sync_conn, 2) is None
    assert [row[:2] for row in embedding_rows(sync_conn, 2)] == [(PROFILE, True)]  # core's mark
    assert statuses(sync_conn, 4) == ("PENDING", "PENDING")  # the new context: its own job
    assert keyword_rows(sync_conn, 1) and keyword_rows(sync_conn, 3)


async def test_a_degenerate_vector_in_a_batch_fails_only_its_context(runner, provider,
                                                                    sync_conn):
    provider.vectors["poison"] = np.zeros(8, dtype=np.float32)  # a zero vector (never stored)
    for cid in (1, 2, 3):
        insert_state(sync_conn, cid)
    results = await runner.run(_requests([1, 2, 3], [QUIET_TEXT, "poison", FRIENDS_TEXT]))
    assert [(r.embedding, r.keyword) for r in results] == [
        ("completed", "completed"), ("permanent", "skipped"), ("completed", "completed")]
    row = read_state(sync_conn, 2)
    assert (row.embedding_status, row.keyword_status) == ("FAILED", "PENDING")
    assert row.last_error.startswith("embedding permanent: degenerate embedding")
    assert embedding_rows(sync_conn, 2) == []
    assert [e[:3] for e in events(sync_conn, 2)] == [("embedding", "PENDING", "PROCESSING"),
                                                     ("embedding", "PROCESSING", "FAILED")]


async def test_a_text_the_model_refuses_fails_only_its_context(runner, provider, sync_conn):
    """The endpoint refuses every call that contains the bad text (e.g. a 400 for it): the
    batch is retried text by text and only that context fails."""

    def refuse(texts, kind):
        if "poison" in texts:
            raise PermanentModelError("upstream 400: input refused")

    provider.on_call = refuse
    for cid in (1, 2, 3):
        insert_state(sync_conn, cid)
    results = await runner.run(_requests([1, 2, 3], [QUIET_TEXT, "poison", FRIENDS_TEXT]))
    assert [r.embedding for r in results] == ["completed", "permanent", "completed"]
    assert read_state(sync_conn, 2).last_error == "embedding permanent: upstream 400: input refused"
    assert statuses(sync_conn, 1) == statuses(sync_conn, 3) == ("COMPLETED", "COMPLETED")


async def test_answers_that_arrive_while_a_save_runs_are_saved_together(
        ai_settings, engine, provider, judge, presets, sleeps, sync_conn, monkeypatch):
    """Group commit (issue 25): with a model that answers one text per call, the batch saves
    one answer at once and holds the answers that arrive meanwhile for ONE next save (one
    transaction: one ``now()`` in their completion events), never a transaction each."""
    from pinlog.ai import state

    batcher = MicroBatcher(provider, batch_size=1, wait_ms=0)  # one text per model call
    runner = BatchRunner(Pipeline(engine, config_of(ai_settings).ai.pipeline, batcher, judge,
                                  sleep=sleeps))
    real, sizes = state.save_embeddings_batch, []
    entered, release = asyncio.Event(), asyncio.Event()

    async def held_first(conn, rows, **kwargs):
        sizes.append(len(rows))
        if len(sizes) == 1:
            entered.set()
            await release.wait()  # the first save holds its transaction open
        return await real(conn, rows, **kwargs)

    async def after_the_first_save_began(texts, kind):
        if provider.calls > 1:  # the model's 2nd-4th answers come once the first save runs
            await entered.wait()

    monkeypatch.setattr(state, "save_embeddings_batch", held_first)
    provider.on_call = after_the_first_save_began
    for cid in (1, 2, 3, 4):
        insert_state(sync_conn, cid)
    job = asyncio.create_task(runner.run(_requests([1, 2, 3, 4])))
    await asyncio.wait_for(entered.wait(), 10)
    while provider.calls < 4 or batcher.in_flight("passage") or batcher.pending("passage"):
        await asyncio.sleep(0)  # the other three answers arrive (ordering: no time passes)
    for _ in range(20):
        await asyncio.sleep(0)  # and reach the batch's wait loop
    release.set()
    results = await asyncio.wait_for(job, 10)
    await batcher.aclose(close_provider=False)
    assert [(r.embedding, r.keyword) for r in results] == [("completed", "completed")] * 4
    assert sizes == [1, 3]
    saved = sync_conn.execute(
        "SELECT count(DISTINCT at) FROM ai.context_ai_event WHERE context_id = ANY(%s) "
        "AND stage = 'embedding' AND to_status = 'COMPLETED'", ([2, 3, 4],)).fetchone()[0]
    assert saved == 1


# --- the first attempt in the batch's calls, the rest as the single job's (SPEC §6, issue 25) --
async def test_a_transient_failure_of_a_batch_call_is_retried_for_each_of_its_texts(
        runner, provider, sleeps, sync_conn):
    """The batch's one model call fails transiently (a 503): each of its texts goes on with the
    single job's attempts — that call counted as its first, one backoff before the next — and
    every context completes."""
    for cid in (1, 2, 3):
        insert_state(sync_conn, cid)
    provider.fail_next(TransientModelError, message="upstream 503")
    results = await runner.run(_requests([1, 2, 3]))
    assert [(r.embedding, r.keyword) for r in results] == [("completed", "completed")] * 3
    assert provider.batches[0] == 3  # the first attempt: the batch's texts in one call
    assert sorted(provider.texts[3:]) == sorted(TEXTS[:3])  # each text once more
    assert len(sleeps.delays) == 3  # one backoff per text, as between the single job's attempts
    for cid in (1, 2, 3):
        assert statuses(sync_conn, cid) == ("COMPLETED", "COMPLETED")
        assert read_state(sync_conn, cid).last_error is None


async def test_a_batch_text_that_keeps_failing_gets_the_single_jobs_attempts_and_no_more(
        runner, provider, sleeps, sync_conn, ai_settings):
    """The batch's call was the first attempt: a text failing transiently every time is called
    exactly ``PINLOG_MODEL_ATTEMPTS`` times in all (as the single job), then left PROCESSING
    for the rescan with the error recorded."""
    insert_state(sync_conn, 1)
    provider.fail_next(TransientModelError, times=10, message="upstream 503")
    [result] = await runner.run(_requests([1]))
    assert (result.embedding, result.keyword) == ("transient", "skipped")
    assert provider.calls == ai_settings.model_attempts == 3
    assert len(sleeps.delays) == 2  # backoff between attempts only
    row = read_state(sync_conn, 1)
    assert (row.embedding_status, row.keyword_status) == ("PROCESSING", "PENDING")
    assert row.last_error == "embedding transient: upstream 503"
    assert embedding_rows(sync_conn, 1) == []


async def test_a_throttle_of_a_batch_call_is_waited_out_without_spending_an_attempt(
        runner, provider, sleeps, sync_conn):
    """SPEC §6: the batch's call is throttled (429, Retry-After 0.05 s); the wait is honoured
    and spends no attempt: two transient failures after it still leave the third attempt."""
    insert_state(sync_conn, 1)
    provider.fail_next(ThrottledError("upstream 429", status=429, retry_after=0.05))
    provider.fail_next(TransientModelError, times=2, message="upstream 503")
    [result] = await runner.run(_requests([1]))
    assert result.embedding == "completed"
    assert provider.calls == 4  # the throttled call + 3 attempts
    assert sleeps.delays[0] == 0.05 and len(sleeps.delays) == 3


async def test_a_batch_text_still_waiting_when_the_stage_budget_ends_fails_transiently(
        tmp_path, db_url, engine, batcher, judge, presets, sleeps, provider, sync_conn):
    """SPEC §6 budget: the stage's model calls end within ``timeout × attempts + backoff``
    (0.2 s here), below the processing expiry. The model holds the batch's call past it: the
    batch gives its texts up at the budget (the call is still held), records the transient
    failure and stores nothing — even when the held call answers later."""
    settings = ai_settings_for(tmp_path, db_url, embedding_timeout=0.2, model_attempts=1)
    runner = BatchRunner(Pipeline(engine, config_of(settings).ai.pipeline, batcher, judge,
                                  sleep=sleeps))
    for cid in (1, 2):
        insert_state(sync_conn, cid)
    gate = provider.hold()
    # the bound only turns a hang (no budget) into a failure; the budget ends it in 0.2 s
    results = await asyncio.wait_for(runner.run(_requests([1, 2])), 20)
    assert gate.entered.is_set() and batcher.in_flight("passage") == 1  # still held
    assert [r.embedding for r in results] == ["transient"] * 2
    provider.gate = None
    gate.open()
    await batcher.embed(["after"], "passage")  # the held call has answered meanwhile
    for cid in (1, 2):
        assert statuses(sync_conn, cid) == ("PROCESSING", "PENDING")
        assert read_state(sync_conn, cid).last_error == (
            "embedding transient: embedding stage exceeded its budget of 0.2 s")
        assert embedding_rows(sync_conn, cid) == []


async def test_a_crash_between_claim_and_write_is_reclaimed_by_a_later_batch(
        runner, provider, sync_conn):
    """The process dies while its batch's model call runs (the task is cancelled): the claimed
    stages stay PROCESSING with nothing stored; a re-sent batch leaves a live claim alone, and
    once core spent a retry on the rows (the rescan's claim: retry_count + 1, SPEC §7.3) the
    next batch re-claims them and completes."""
    for cid in (1, 2):
        insert_state(sync_conn, cid)
    gate = provider.hold()
    job = asyncio.create_task(runner.run(_requests([1, 2])))
    await gate.wait_entered()
    job.cancel()
    with pytest.raises(asyncio.CancelledError):
        await job
    provider.gate = None
    gate.open()
    for cid in (1, 2):
        assert statuses(sync_conn, cid) == ("PROCESSING", "PENDING")
        assert embedding_rows(sync_conn, cid) == []
    again = await runner.run(_requests([1, 2]))
    assert [(r.embedding, r.keyword) for r in again] == [("skipped", "skipped")] * 2
    sync_conn.execute("UPDATE ai.context_ai_state SET retry_count = retry_count + 1, "
                      "rescanned_at = now()")
    results = await runner.run(_requests([1, 2]))
    assert [(r.embedding, r.keyword) for r in results] == [("completed", "completed")] * 2
    for cid in (1, 2):
        assert statuses(sync_conn, cid) == ("COMPLETED", "COMPLETED")
        assert events(sync_conn, cid)[1][1:3] == ("PROCESSING", "PROCESSING")  # the re-claim
        assert "retry_count rose" in events(sync_conn, cid)[1][4]


async def test_partial_resume_reuses_the_stored_vectors_of_a_batch(runner, provider, judge,
                                                                 sync_conn):
    insert_state(sync_conn, 1, "COMPLETED", "PENDING")
    insert_embedding(sync_conn, 1, basis(2), text=QUIET_TEXT)
    insert_state(sync_conn, 2, "COMPLETED", "FAILED")  # nothing to do
    insert_embedding(sync_conn, 2, basis(0), text=FRIENDS_TEXT)
    insert_state(sync_conn, 3)
    results = await runner.run(_requests([1, 2, 3], [QUIET_TEXT, FRIENDS_TEXT, "야경 맛집"]))
    assert [(r.embedding, r.keyword, r.stopped) for r in results] == [
        ("reused", "completed", None), ("skipped", "skipped", "finished"),
        ("completed", "completed", None)]
    assert provider.texts == ["야경 맛집"]  # 0 embedding calls for the stored one
    assert [k for k, *_ in keyword_rows(sync_conn, 1)] == [301]  # judged from the stored vector
    assert statuses(sync_conn, 2) == ("COMPLETED", "FAILED")


async def test_a_batch_stops_for_missing_finished_cancelled_and_a_contract_violation(
        runner, provider, judge, sync_conn):
    insert_state(sync_conn, 1, "CANCELLED", "CANCELLED")
    insert_state(sync_conn, 2, "COMPLETED", "PENDING")
    insert_embedding(sync_conn, 2, basis(2), text="the text it was embedded from")
    before = events(sync_conn, 2)
    results = await runner.run(_requests([1, 2, 3], ["a", "another text", "b"]))
    assert [r.stopped for r in results] == ["finished", "contract_violation", "missing"]
    assert provider.calls == 0 and judge.calls == 0
    assert statuses(sync_conn, 2) == ("COMPLETED", "PENDING") and events(sync_conn, 2) == before


async def test_a_context_twice_in_one_batch_is_processed_once(runner, provider, sync_conn):
    insert_state(sync_conn, 1)
    results = await runner.run([request(1, QUIET_TEXT), request(1, QUIET_TEXT)])
    assert [(r.embedding, r.keyword) for r in results] == [("completed", "completed"),
                                                            ("skipped", "skipped")]
    assert provider.texts == [QUIET_TEXT]
    assert [e[:3] for e in events(sync_conn, 1)].count(("embedding", "PENDING", "PROCESSING")) == 1


async def test_two_batches_at_once_process_every_context_once(runner, provider, judge,
                                                              sync_conn):
    """Two batches over the same contexts while the model call of the first is held: the second
    claims nothing (every row is the first's), so each text is embedded once, each context has
    one embedding row and one start event per stage."""
    for cid in range(1, 7):
        insert_state(sync_conn, cid)
    gate = provider.hold()
    first = asyncio.create_task(runner.run(_requests(range(1, 7))))
    await gate.wait_entered()
    second = await runner.run(_requests(range(1, 7)))
    gate.open()
    results = await first
    assert all((r.embedding, r.keyword) == ("skipped", "skipped") for r in second)
    assert all((r.embedding, r.keyword) == ("completed", "completed") for r in results)
    assert sorted(provider.texts) == sorted(TEXTS)
    for cid in range(1, 7):
        assert len(embedding_rows(sync_conn, cid)) == 1
        starts = [e[:3] for e in events(sync_conn, cid) if e[2] == "PROCESSING"]
        assert starts == [("embedding", "PENDING", "PROCESSING"),
                          ("keyword", "PENDING", "PROCESSING")]


def _lock_waiters(conn) -> int:
    """Sessions of this database waiting for a row lock (a guarded start behind the blocker)."""
    return conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                        "AND wait_event_type = 'Lock'").fetchone()[0]


async def _run_behind_a_row_lock(runner, db_url, sync_conn, requests, locked: int):
    """Run ``requests`` as one batch while another transaction holds ``locked``'s state row (as
    core's take-over record or a cancellation does): the batch's SKIP LOCKED start passes the
    row over; release the lock once a guarded start waits for it (or the batch ended)."""
    import psycopg

    with psycopg.connect(db_url) as blocker:
        blocker.execute("SELECT 1 FROM ai.context_ai_state WHERE context_id = %s FOR UPDATE",
                        (locked,))
        job = asyncio.create_task(runner.run(requests))
        while not _lock_waiters(sync_conn) and not job.done():
            await asyncio.sleep(0.01)  # polls the database for the order, not a time margin
        blocker.rollback()
        return await job


async def test_a_row_a_batch_start_passed_over_for_a_lock_is_still_processed_now(
        runner, db_url, sync_conn):
    """SKIP LOCKED keeps two batches off one row, but an accepted request whose row was only
    locked for a moment (core's take-over record, a concurrent statement) must not wait for the
    rescan: the single job's guarded start waits for the lock and processes it."""
    for cid in (1, 2, 3):
        insert_state(sync_conn, cid)
    results = await _run_behind_a_row_lock(runner, db_url, sync_conn,
                                           _requests([1, 2, 3], JUDGED), locked=2)
    assert [(r.embedding, r.keyword) for r in results] == [("completed", "completed")] * 3
    assert all(statuses(sync_conn, cid) == ("COMPLETED", "COMPLETED") for cid in (1, 2, 3))


async def test_a_keyword_stage_a_batch_start_passed_over_for_a_lock_is_still_processed_now(
        runner, db_url, sync_conn):
    """The same for the keyword stage: contexts whose embedding is already COMPLETED (reused),
    one of them locked while the batch's keyword start runs."""
    for cid in (1, 2):
        insert_state(sync_conn, cid, embedding="COMPLETED")
        insert_embedding(sync_conn, cid, basis(cid), text=JUDGED[cid - 1], user_id=7,
                         record_id=70 + cid)
    results = await _run_behind_a_row_lock(runner, db_url, sync_conn,
                                           _requests([1, 2], JUDGED), locked=2)
    assert [(r.embedding, r.keyword) for r in results] == [("reused", "completed")] * 2
    assert all(statuses(sync_conn, cid) == ("COMPLETED", "COMPLETED") for cid in (1, 2))


async def test_two_batches_queued_together_are_each_embedded_and_saved_whole(
        runner, batcher, provider, sync_conn):
    """Issue 25: two batches (4 contexts each, the input cap) queue interleaved behind a busy
    model call, the second's texts shorter. Each model call carries one batch whole — the fair
    fill takes the head's batch first, not the shortest texts of any batch — so each batch's
    embeddings are saved in ONE transaction (one ``now()`` in its completion events), not in
    fragments of the other's calls."""
    long_texts = [f"{text} — 다시 가고 싶은 곳" for text in TEXTS[:4]]
    short_texts = ["국밥", "카페", "서점", "공원"]
    for cid in [*range(1, 5), *range(11, 15)]:
        insert_state(sync_conn, cid)
    gate = provider.hold()
    busy = asyncio.create_task(batcher.embed(["busy"], "passage"))
    await gate.wait_entered()
    provider.gate = None
    jobs = []
    for ids, texts in ((range(1, 5), long_texts), (range(11, 15), short_texts)):
        jobs.append(asyncio.create_task(runner.run(_requests(ids, texts))))
        while batcher.pending("passage") < 4 * len(jobs):  # the long batch queues first: an
            await asyncio.sleep(0.01)  # order (its head is the oldest request), not a margin
    gate.open()
    await busy
    results = [r for job in jobs for r in await job]
    assert all(r.embedding == "completed" for r in results)
    calls, at = [], 1  # after the busy call
    for size in provider.batches[1:]:
        calls.append(sorted(provider.texts[at:at + size]))
        at += size
    assert calls == [sorted(long_texts), sorted(short_texts)]
    for ids in (range(1, 5), range(11, 15)):
        saved = sync_conn.execute(
            "SELECT count(DISTINCT at) FROM ai.context_ai_event WHERE context_id = ANY(%s) "
            "AND stage = 'embedding' AND to_status = 'COMPLETED'", (list(ids),)).fetchone()[0]
        assert saved == 1
    # the group is the batch's alone: run in this task (as a worker awaits its batches), the
    # batch leaves no group behind for the worker's next single job
    insert_state(sync_conn, 21)
    results = await runner.run(_requests([21], ["혼자 간 국밥집"]))
    assert results[0].embedding == "completed" and EMBED_GROUP.get() is None
