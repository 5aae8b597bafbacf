"""The SPEC §5.2 job on the real PostgreSQL with fake model providers (counting calls, gated).

Scenario tests are named after SPEC §11; the delete/edit of core is plain SQL over a separate
connection (``core_cancel``), interleaved with model calls through the fakes' gates.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging

import pytest

from pinlog import metrics
from pinlog.ai.errors import PermanentModelError, TransientModelError
from pinlog.ai.pipeline import NO_CANDIDATES_PROFILE, Pipeline
from pinlog.ai.ports import JudgeAnswer, Pick
from tests.fakes import FakeEmbeddingProvider, FakeJudge
from tests.integration.ai.support import (
    BLOCKED_TEXT,
    FRIENDS_TEXT,
    NOMATCH_TEXT,
    PROFILE,
    QUIET_TEXT,
    analysis_row,
    basis,
    core_cancel,
    embedding_rows,
    events,
    insert_embedding,
    insert_state,
    keyword_rows,
    read_state,
    request,
    statuses,
)
from tests.conftest import config_of


async def delete_while_held(pipeline, sync_conn, gate, context_id: int = 1):
    """Run the job of ``context_id``; while ``gate`` holds its model call, core deletes the
    context (both stages CANCELLED, embedding ``is_deleted``); then the model answers.
    Returns the job's result."""
    job = asyncio.create_task(pipeline.run(request(context_id)))
    await gate.wait_entered()
    core_cancel(sync_conn, context_id)
    gate.open()
    return await job


def _metric(counter, **labels) -> float:
    return counter.labels(**labels)._value.get() if labels else counter._value.get()


# --- the happy path -------------------------------------------------------------------------------
async def test_job_completes_both_stages(pipeline, sync_conn, provider, judge):
    insert_state(sync_conn, 1)
    result = await pipeline.run(request(1, QUIET_TEXT))
    assert (result.embedding, result.keyword) == ("completed", "completed")
    assert statuses(sync_conn, 1) == ("COMPLETED", "COMPLETED")
    [(profile, deleted, dims, sha)] = embedding_rows(sync_conn, 1)
    assert (profile, deleted, dims) == (PROFILE, False, 8)
    assert bytes(sha) == hashlib.sha256(QUIET_TEXT.encode()).digest()
    assert [k for k, *_ in keyword_rows(sync_conn, 1)] == [301]  # the best candidate
    assert analysis_row(sync_conn, 1)[2] == "fake-judge-v1"
    assert provider.calls == 1 and provider.kinds == ["passage"] and judge.calls == 1
    # the judge only saw candidates above the floor, best first
    assert judge.seen == [(QUIET_TEXT, (301, 302))]
    assert [(e[0], e[1], e[2]) for e in events(sync_conn, 1)] == [
        ("embedding", "PENDING", "PROCESSING"), ("embedding", "PROCESSING", "COMPLETED"),
        ("keyword", "PENDING", "PROCESSING"), ("keyword", "PROCESSING", "COMPLETED")]


async def test_missing_row_stops_without_model_calls(pipeline, provider, judge):
    result = await pipeline.run(request(42))
    assert result.stopped == "missing" and provider.calls == 0 and judge.calls == 0


# --- SPEC §11 scenarios ------------------------------------------------------------------------
async def test_scenario_02_old_context_result_after_edit_is_not_saved(pipeline, sync_conn,
                                                                      provider, judge):
    """The edit (core) lands while the old context's embedding is computed: the late result is
    discarded, nothing is stored, nothing becomes COMPLETED; the new context is independent."""
    insert_state(sync_conn, 1)
    gate = provider.hold()
    job = asyncio.create_task(pipeline.run(request(1, QUIET_TEXT)))
    await gate.wait_entered()
    # edit: new context 2 PENDING first, then old context 1 invalidated
    insert_state(sync_conn, 2)
    core_cancel(sync_conn, 1)
    gate.open()
    result = await job
    assert result.embedding == "discarded" and result.keyword == "skipped"
    assert statuses(sync_conn, 1) == ("CANCELLED", "CANCELLED")
    assert embedding_rows(sync_conn, 1) == [] and keyword_rows(sync_conn, 1) == []
    assert all(e[2] != "COMPLETED" for e in events(sync_conn, 1))
    assert judge.calls == 0
    provider.gate = None
    new = await pipeline.run(request(2, FRIENDS_TEXT))
    assert (new.embedding, new.keyword) == ("completed", "completed")
    assert statuses(sync_conn, 1) == ("CANCELLED", "CANCELLED")


async def test_scenario_05_same_context_id_different_text_is_a_contract_violation(
        pipeline, sync_conn, provider, judge, caplog):
    insert_state(sync_conn, 1)
    await pipeline.run(request(1, QUIET_TEXT))
    # keyword stage pending again (e.g. a preset reprocess) — still nothing may be re-judged
    sync_conn.execute("UPDATE ai.context_ai_state SET keyword_status = 'PENDING'")
    before_state = read_state(sync_conn, 1)
    before_rows = (embedding_rows(sync_conn, 1), keyword_rows(sync_conn, 1),
                   len(events(sync_conn, 1)))
    calls = (provider.calls, judge.calls)
    violations = _metric(metrics.CONTRACT_VIOLATIONS)
    with caplog.at_level(logging.WARNING, logger="pinlog.ai.pipeline"):
        result = await pipeline.run(request(1, "완전히 다른 텍스트"))
    assert result.stopped == "contract_violation"
    assert (provider.calls, judge.calls) == calls
    assert read_state(sync_conn, 1) == before_state
    assert (embedding_rows(sync_conn, 1), keyword_rows(sync_conn, 1),
            len(events(sync_conn, 1))) == before_rows
    assert _metric(metrics.CONTRACT_VIOLATIONS) == violations + 1
    warnings = [r for r in caplog.records if "contract violation" in r.getMessage()]
    assert warnings and warnings[0].levelno == logging.WARNING
    assert all("다른" not in r.getMessage() for r in caplog.records)  # never the text


async def test_scenario_05_also_reported_when_both_stages_are_finished(pipeline, sync_conn):
    insert_state(sync_conn, 1)
    await pipeline.run(request(1, QUIET_TEXT))
    violations = _metric(metrics.CONTRACT_VIOLATIONS)
    assert (await pipeline.run(request(1, "other"))).stopped == "contract_violation"
    assert _metric(metrics.CONTRACT_VIOLATIONS) == violations + 1


async def test_scenario_05_same_text_again_is_not_a_violation(pipeline, sync_conn):
    insert_state(sync_conn, 1)
    await pipeline.run(request(1, QUIET_TEXT))
    assert (await pipeline.run(request(1, QUIET_TEXT))).stopped == "finished"


async def test_scenario_06_request_for_cancelled_context_stops_immediately(pipeline, sync_conn,
                                                                           provider, judge):
    insert_state(sync_conn, 1, "CANCELLED", "CANCELLED")
    result = await pipeline.run(request(1))
    assert result.stopped == "finished"
    assert provider.calls == 0 and judge.calls == 0
    assert statuses(sync_conn, 1) == ("CANCELLED", "CANCELLED") and events(sync_conn, 1) == []


async def test_scenario_07_only_the_keyword_stage_reruns(pipeline, sync_conn, provider, judge):
    """Embedding done, keyword failed earlier (transient: left PROCESSING). After the expiry
    the re-sent request reruns the keyword stage only: 0 embedding calls."""
    insert_state(sync_conn, 1)
    judge.fail_next(TransientModelError, message="upstream 503")
    first = await pipeline.run(request(1))
    assert (first.embedding, first.keyword) == ("completed", "transient")
    assert statuses(sync_conn, 1) == ("COMPLETED", "PROCESSING")
    assert provider.calls == 1
    # time passes beyond the processing expiry
    sync_conn.execute("UPDATE ai.context_ai_state SET updated_at = now() - interval '1 hour'")
    second = await pipeline.run(request(1))
    assert (second.embedding, second.keyword) == ("reused", "completed")
    assert provider.calls == 1  # no embedding call the second time
    assert judge.calls == 2
    assert statuses(sync_conn, 1) == ("COMPLETED", "COMPLETED")
    assert [k for k, *_ in keyword_rows(sync_conn, 1)] == [301]


@pytest.mark.parametrize("finished", ["COMPLETED", "FAILED"])
async def test_a_finished_keyword_stage_is_never_restarted_by_the_job(pipeline, sync_conn,
                                                                      provider, judge, finished):
    """SPEC §3: the ai side never changes a COMPLETED stage and never moves FAILED → PROCESSING.
    A row whose embedding still has work (e.g. an adopted database) runs its embedding stage; the
    keyword start refuses the finished keyword stage: no judge call, no keyword event."""
    insert_state(sync_conn, 1, "PENDING", finished)
    await pipeline.run(request(1, QUIET_TEXT))
    assert statuses(sync_conn, 1) == ("COMPLETED", finished)
    assert provider.calls == 1 and judge.calls == 0
    assert keyword_rows(sync_conn, 1) == []
    assert [e[0] for e in events(sync_conn, 1)] == ["embedding", "embedding"]


async def test_scenario_07_keyword_rerun_after_reprocess_reuses_embedding(pipeline, sync_conn,
                                                                          provider, judge):
    insert_state(sync_conn, 1, "COMPLETED", "PENDING")
    insert_embedding(sync_conn, 1, basis(0), text=FRIENDS_TEXT)
    result = await pipeline.run(request(1, FRIENDS_TEXT))
    assert (result.embedding, result.keyword) == ("reused", "completed")
    assert provider.calls == 0 and judge.calls == 1
    assert [k for k, *_ in keyword_rows(sync_conn, 1)] == [101]


@pytest.mark.parametrize("hold", ["embedding", "judge"])
async def test_scenario_09_duplicate_concurrent_requests(pipeline, sync_conn, provider, judge, hold):
    """Two concurrent requests for one PENDING context: one model call per stage, one embedding
    row, keyword rows not doubled. The second arrives while the first holds the model call of
    the embedding stage, or of the judge."""
    insert_state(sync_conn, 1)
    gate = provider.hold() if hold == "embedding" else judge.hold()
    first = asyncio.create_task(pipeline.run(request(1)))
    await gate.wait_entered()
    second = await pipeline.run(request(1))  # runs to its end while the first is held
    gate.open()
    first_result = await first
    assert (first_result.embedding, first_result.keyword) == ("completed", "completed")
    assert second.keyword == "skipped"
    assert second.embedding == ("skipped" if hold == "embedding" else "reused")
    assert provider.calls == 1 and judge.calls == 1
    assert len(embedding_rows(sync_conn, 1)) == 1
    assert len(keyword_rows(sync_conn, 1)) == 1
    assert statuses(sync_conn, 1) == ("COMPLETED", "COMPLETED")


async def test_scenario_09_duplicates_started_at_the_same_time(pipeline, sync_conn, provider,
                                                               judge):
    insert_state(sync_conn, 1)
    results = await asyncio.gather(*(pipeline.run(request(1)) for _ in range(4)))
    assert sorted(r.embedding for r in results).count("completed") == 1
    assert sum(r.keyword == "completed" for r in results) == 1
    assert provider.calls == 1 and judge.calls == 1
    assert len(embedding_rows(sync_conn, 1)) == 1 and len(keyword_rows(sync_conn, 1)) == 1


async def test_scenario_10_delete_while_embedding_is_computed(pipeline, sync_conn, provider,
                                                              judge):
    """Delete lands during the model call; the context had an embedding row from an earlier
    profile (reprocess). Not saved, the old row stays deleted, CANCELLED not FAILED."""
    insert_state(sync_conn, 1)
    insert_embedding(sync_conn, 1, basis(5), profile="old-profile", text=QUIET_TEXT)
    result = await delete_while_held(pipeline, sync_conn, provider.hold())
    assert result.embedding == "discarded"
    assert statuses(sync_conn, 1) == ("CANCELLED", "CANCELLED")
    assert embedding_rows(sync_conn, 1)[0][:2] == ("old-profile", True)
    assert read_state(sync_conn, 1).last_error is None
    assert judge.calls == 0


async def test_scenario_11_delete_while_keywords_are_judged(pipeline, sync_conn, judge):
    insert_state(sync_conn, 1)
    result = await delete_while_held(pipeline, sync_conn, judge.hold())
    assert (result.embedding, result.keyword) == ("completed", "discarded")
    assert statuses(sync_conn, 1) == ("CANCELLED", "CANCELLED")
    assert keyword_rows(sync_conn, 1) == [] and analysis_row(sync_conn, 1) is None
    assert embedding_rows(sync_conn, 1)[0][1] is True  # core marked it deleted


async def test_scenario_11_judge_failure_after_delete_never_overwrites_cancelled(
        pipeline, sync_conn, judge):
    insert_state(sync_conn, 1)
    gate = judge.hold()
    judge.fail_next(PermanentModelError, message="upstream 400")
    assert (await delete_while_held(pipeline, sync_conn, gate)).keyword == "permanent"
    assert statuses(sync_conn, 1) == ("CANCELLED", "CANCELLED")
    assert read_state(sync_conn, 1).last_error is None


async def test_scenario_12_cancelled_alone_blocks_the_late_insert(pipeline, sync_conn, provider):
    """Delete before any embedding row exists: core's is_deleted update touches 0 rows, so
    only CANCELLED blocks the late insert — and it does."""
    insert_state(sync_conn, 1)
    # core's embedding UPDATE affects 0 rows (no row yet)
    assert (await delete_while_held(pipeline, sync_conn, provider.hold())).embedding == "discarded"
    assert embedding_rows(sync_conn, 1) == []
    assert statuses(sync_conn, 1) == ("CANCELLED", "CANCELLED")


async def test_scenario_13_stored_profile_differs_from_presets_profile(pipeline, sync_conn,
                                                                       provider, judge):
    insert_state(sync_conn, 1, "COMPLETED", "PENDING")
    insert_embedding(sync_conn, 1, basis(2), profile="other-profile-v0", text=QUIET_TEXT)
    result = await pipeline.run(request(1))
    assert (result.embedding, result.keyword) == ("skipped", "permanent")
    assert provider.calls == 0 and judge.calls == 0
    row = read_state(sync_conn, 1)
    assert (row.embedding_status, row.keyword_status) == ("COMPLETED", "FAILED")
    assert row.last_error.startswith("keyword permanent:") and "profile" in row.last_error
    assert keyword_rows(sync_conn, 1) == []


async def test_keyword_stage_without_stored_vector_fails_permanently(pipeline, sync_conn, judge):
    insert_state(sync_conn, 1, "COMPLETED", "PENDING")  # no embedding row at all
    assert (await pipeline.run(request(1))).keyword == "permanent"
    assert statuses(sync_conn, 1) == ("COMPLETED", "FAILED") and judge.calls == 0


async def test_scenario_14_no_keyword_matches(pipeline, sync_conn, judge):
    insert_state(sync_conn, 1)
    result = await pipeline.run(request(1, NOMATCH_TEXT))
    assert result.keyword == "completed"
    assert judge.calls == 0  # zero candidates → no judge call
    assert statuses(sync_conn, 1) == ("COMPLETED", "COMPLETED")
    assert keyword_rows(sync_conn, 1) == []
    version, unmatched, model_profile = analysis_row(sync_conn, 1)
    assert (version, unmatched, model_profile) == (1, [], NO_CANDIDATES_PROFILE)


async def test_scenario_14_judge_picks_nothing(ai_settings, engine, provider, presets, sync_conn):
    judge = FakeJudge(JudgeAnswer(picks=(), unmatched_concepts=("독서",), model_profile="j"))
    pipeline = Pipeline(engine, config_of(ai_settings).ai.pipeline, provider, judge)
    insert_state(sync_conn, 1)
    assert (await pipeline.run(request(1))).keyword == "completed"
    assert judge.calls == 1 and keyword_rows(sync_conn, 1) == []
    assert analysis_row(sync_conn, 1) == (1, ["독서"], "j")


async def test_scenario_15_blocked_preset_is_never_a_candidate(ai_settings, engine, provider,
                                                               presets, sync_conn):
    """The text is identical to the BLOCKED preset's vector; a judge that tries to pick it
    anyway is ignored. It never reaches the judge nor a keyword row."""
    judge = FakeJudge(lambda text, cands: JudgeAnswer(
        picks=(Pick(401, 1.0),) + tuple(Pick(c.preset.id, 0.6) for c in cands), model_profile="j"))
    pipeline = Pipeline(engine, config_of(ai_settings).ai.pipeline, provider, judge)
    insert_state(sync_conn, 1)
    await pipeline.run(request(1, BLOCKED_TEXT))
    assert all(401 not in ids for _, ids in judge.seen)
    assert 401 not in [k for k, *_ in keyword_rows(sync_conn, 1)]
    assert statuses(sync_conn, 1) == ("COMPLETED", "COMPLETED")


async def test_only_candidates_are_stored_even_if_a_judge_returns_others(ai_settings, engine,
                                                                         provider, presets,
                                                                         sync_conn):
    judge = FakeJudge(JudgeAnswer(picks=(Pick(301, 0.8), Pick(101, 0.9), Pick(302, 0.4)),
                                  model_profile="j"))
    pipeline = Pipeline(engine, config_of(ai_settings).ai.pipeline, provider, judge)
    insert_state(sync_conn, 1)
    await pipeline.run(request(1, QUIET_TEXT))  # candidates: 301, 302
    assert [(k, float(c)) for k, c, _ in keyword_rows(sync_conn, 1)] == [(301, 0.8), (302, 0.4)]


# --- errors per stage (SPEC §5.5, §6) --------------------------------------------------------------
async def test_embedding_transient_error_leaves_processing(pipeline, sync_conn, provider, judge,
                                                           sleeps, ai_settings, caplog):
    insert_state(sync_conn, 1)
    provider.fail_next(TransientModelError, times=3, message="upstream 503 sk-secretsecret123")
    with caplog.at_level(logging.WARNING, logger="pinlog.ai.pipeline"):
        result = await pipeline.run(request(1))
    assert (result.embedding, result.keyword) == ("transient", "skipped")
    assert provider.calls == ai_settings.model_attempts == 3
    assert len(sleeps.delays) == 2  # backoff between attempts only
    row = read_state(sync_conn, 1)
    assert (row.embedding_status, row.keyword_status) == ("PROCESSING", "PENDING")
    assert row.last_error == "embedding transient: upstream 503 sk-***"
    assert events(sync_conn, 1)[-1] == ("embedding", None, None, "ai", row.last_error)
    assert embedding_rows(sync_conn, 1) == [] and judge.calls == 0
    assert any(r.levelno == logging.WARNING and getattr(r, "error_class", "") == "transient"
               for r in caplog.records)
    assert "secretsecret" not in caplog.text


async def test_a_keyword_stage_that_failed_before_it_started_is_not_said_to_be_processing(
        pipeline, sync_conn, provider, judge, caplog, monkeypatch):
    """Issue 27 #11: the keyword stage's guarded start itself failed (the database went away
    for a moment): the stage is still PENDING, so the log line must not say "left
    PROCESSING"; nothing is written for it. A failure of a PROCESSING stage still says so."""
    from pinlog.ai import state

    async def start_fails(*args, **kwargs):
        raise TransientModelError("connection lost")

    insert_state(sync_conn, 1)
    monkeypatch.setattr(state, "start_keyword_and_read", start_fails)
    with caplog.at_level(logging.WARNING, logger="pinlog.ai.pipeline"):
        result = await pipeline.run(request(1))
    assert (result.embedding, result.keyword) == ("completed", "transient")
    row = read_state(sync_conn, 1)
    assert (row.embedding_status, row.keyword_status) == ("COMPLETED", "PENDING")
    assert row.last_error is None and judge.calls == 0
    [line] = [r.getMessage() for r in caplog.records if getattr(r, "stage", "") == "keyword"]
    assert "PROCESSING for the rescan" not in line and "was not PROCESSING" in line
    caplog.clear()
    insert_state(sync_conn, 2)
    provider.fail_next(TransientModelError, times=3)
    with caplog.at_level(logging.WARNING, logger="pinlog.ai.pipeline"):
        await pipeline.run(request(2))
    assert any("left PROCESSING for the rescan" in r.getMessage() for r in caplog.records)


async def test_embedding_transient_then_success_within_one_call(pipeline, sync_conn, provider):
    insert_state(sync_conn, 1)
    provider.fail_next(TransientModelError, times=2)
    assert (await pipeline.run(request(1))).embedding == "completed"
    assert provider.calls == 3
    assert read_state(sync_conn, 1).last_error is None


async def test_embedding_permanent_error_fails_only_that_stage(pipeline, sync_conn, provider,
                                                               judge, caplog):
    insert_state(sync_conn, 1)
    provider.fail_next(PermanentModelError, message="upstream 400: api_key=abc123 bad")
    with caplog.at_level(logging.ERROR, logger="pinlog.ai.pipeline"):
        result = await pipeline.run(request(1))
    assert (result.embedding, result.keyword) == ("permanent", "skipped")
    assert provider.calls == 1  # never retried
    row = read_state(sync_conn, 1)
    assert (row.embedding_status, row.keyword_status) == ("FAILED", "PENDING")
    assert row.last_error == "embedding permanent: upstream 400: api_key=*** bad"
    assert events(sync_conn, 1)[-1][:3] == ("embedding", "PROCESSING", "FAILED")
    assert any(r.levelno == logging.ERROR for r in caplog.records)


async def test_wrong_vector_length_is_permanent_and_never_stored(ai_settings, engine, judge,
                                                                 presets, sync_conn):
    provider = FakeEmbeddingProvider(PROFILE, 8, wrong_dimension=5)
    pipeline = Pipeline(engine, config_of(ai_settings).ai.pipeline, provider, judge)
    insert_state(sync_conn, 1)
    assert (await pipeline.run(request(1))).embedding == "permanent"
    assert provider.calls == 1 and embedding_rows(sync_conn, 1) == []
    row = read_state(sync_conn, 1)
    assert row.embedding_status == "FAILED" and "wrong vector length" in row.last_error


@pytest.mark.parametrize("error, message, outcome, keyword_status", [
    (TransientModelError, "upstream 429", "transient", "PROCESSING"),  # kept for the rescan
    (PermanentModelError, "upstream 401", "permanent", "FAILED"),
], ids=["transient_keeps_completed_embedding", "permanent_never_rolls_back_the_embedding"])
async def test_a_keyword_error_leaves_the_completed_embedding(pipeline, sync_conn, judge, error,
                                                              message, outcome, keyword_status):
    """The judge's next call raises ``error(message)``: the embedding stage stays COMPLETED with
    its vector; the keyword stage is PROCESSING (transient) or FAILED (permanent), no keywords."""
    insert_state(sync_conn, 1)
    judge.fail_next(error, message=message)
    result, row = await pipeline.run(request(1)), read_state(sync_conn, 1)
    assert (result.embedding, result.keyword) == ("completed", outcome)
    assert (row.embedding_status, row.keyword_status) == ("COMPLETED", keyword_status)
    assert row.last_error == f"keyword {outcome}: {message}"
    assert len(embedding_rows(sync_conn, 1)) == 1 and keyword_rows(sync_conn, 1) == []
    # permanent: the stage's transition to FAILED; transient: an error event, no transition
    last_event = ("keyword", "PROCESSING", "FAILED") if outcome == "permanent" else \
        ("keyword", None, None)
    assert events(sync_conn, 1)[-1][:3] == last_event


async def test_transient_database_error_in_save_leaves_processing(ai_settings, db_url, provider,
                                                                  judge, presets, sync_conn):
    """A real lock timeout (SQLSTATE 55P03) at the save transaction is transient: the stage
    stays PROCESSING for the rescan; nothing is stored."""
    from pinlog.db.engine import create_engine

    from sqlalchemy import event

    engine = create_engine(db_url, pool_size=3)

    @event.listens_for(engine.sync_engine, "connect")
    def _lock_timeout(dbapi_conn, _record):  # noqa: ANN001
        dbapi_conn.execute("SET lock_timeout = '200ms'")
        dbapi_conn.commit()

    try:
        pipeline = Pipeline(engine, config_of(ai_settings).ai.pipeline, provider, judge)
        insert_state(sync_conn, 1)
        gate = provider.hold()
        job = asyncio.create_task(pipeline.run(request(1)))
        await gate.wait_entered()
        with sync_conn.transaction():
            sync_conn.execute("SELECT 1 FROM ai.context_ai_state WHERE context_id = 1 FOR UPDATE")
            gate.open()
            result = await job
        assert result.embedding == "transient"
        assert statuses(sync_conn, 1) == ("PROCESSING", "PENDING")
        assert embedding_rows(sync_conn, 1) == []
    finally:
        await engine.dispose()


# --- budget rule (SPEC §6) -------------------------------------------------------------------------
async def test_retry_timing_respects_the_budget_rule(tmp_path, db_url, engine, judge, presets,
                                                     sync_conn):
    """A model that never answers: the pipeline gives up after attempts × timeout + backoff,
    which the settings keep below the processing expiry — so the rescan never duplicates live
    work. Measured with the pipeline's real timeouts and real backoff sleeps; the expiry (10 s)
    is far above the ~0.6 s budget, so the measured time never races it on a loaded machine
    (the budget itself is compared exactly)."""
    from tests.integration.ai.support import ai_settings_for

    settings = ai_settings_for(tmp_path, db_url, embedding_timeout=0.2, llm_timeout=0.2,
                               backoff_base=0.05, backoff_cap=0.1, processing_expiry=10)
    provider = FakeEmbeddingProvider(PROFILE, 8)
    provider.hold()  # never opened: every attempt times out
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        await asyncio.sleep(seconds)

    pipeline = Pipeline(engine, config_of(settings).ai.pipeline, provider, judge, sleep=sleep)
    insert_state(sync_conn, 1)
    loop = asyncio.get_running_loop()
    started = loop.time()
    result = await pipeline.run(request(1))
    elapsed = loop.time() - started
    assert result.embedding == "transient"
    assert provider.calls == settings.model_attempts
    assert sum(slept) <= settings.retries.total_backoff()
    assert pipeline.embedding_budget < settings.processing_expiry.total_seconds()
    assert elapsed < settings.processing_expiry.total_seconds()
    assert elapsed >= settings.embedding_timeout * settings.model_attempts
    # the stage is still PROCESSING and younger than the expiry: a duplicate cannot re-claim it
    assert statuses(sync_conn, 1) == ("PROCESSING", "PENDING")


async def test_judge_is_bounded_by_its_budget(tmp_path, db_url, engine, provider, presets,
                                              sync_conn):
    from tests.integration.ai.support import ai_settings_for

    settings = ai_settings_for(tmp_path, db_url, llm_timeout=0.1, embedding_timeout=0.1,
                               backoff_base=0.01,
                               backoff_cap=0.01, processing_expiry=1)
    judge = FakeJudge()
    judge.hold()  # never answers
    pipeline = Pipeline(engine, config_of(settings).ai.pipeline, provider, judge)
    insert_state(sync_conn, 1)
    result = await pipeline.run(request(1))
    assert result.keyword == "transient"
    assert pipeline.judge_budget < settings.processing_expiry.total_seconds()
    assert "budget" in read_state(sync_conn, 1).last_error


async def test_scenario_15_preset_blocked_later_is_seen_by_the_next_stage(pipeline, sync_conn,
                                                                          judge):
    """The snapshot cache never hides a preset change: once QUIET is BLOCKED (or retired), the
    next keyword stage no longer offers it."""
    insert_state(sync_conn, 1)
    insert_state(sync_conn, 2)
    insert_state(sync_conn, 3)
    await pipeline.run(request(1, QUIET_TEXT))
    assert judge.seen[-1][1] == (301, 302)
    sync_conn.execute("UPDATE ai.keyword_preset SET visibility = 'BLOCKED' WHERE id = 301")
    await pipeline.run(request(2, QUIET_TEXT))
    assert judge.seen[-1][1] == (302,)
    assert [k for k, *_ in keyword_rows(sync_conn, 2)] == [302]
    sync_conn.execute("UPDATE ai.keyword_preset SET is_active = false WHERE id = 302")
    await pipeline.run(request(3, QUIET_TEXT))
    assert len(judge.seen) == 2  # no candidates left → no judge call
    assert keyword_rows(sync_conn, 3) == []


async def test_the_analysis_row_records_the_judges_evidence(ai_settings, engine, provider,
                                                            presets, sync_conn):
    def answer(text, candidates):
        best = candidates[0].preset
        return JudgeAnswer(picks=(Pick(best.id, 0.8),), model_profile="j", evidence=(
            {"id": best.id, "code": best.code, "picked": True, "score": 1.25,
             "cues": ["맥주"], "reason": "cue", "confidence": 0.8},
            {"id": 999, "code": "NEAR", "picked": False, "score": 3.1, "cues": [],
             "reason": "below floor", "confidence": None}))

    pipeline = Pipeline(engine, config_of(ai_settings).ai.pipeline, provider, FakeJudge(answer))
    insert_state(sync_conn, 1)
    assert (await pipeline.run(request(1))).keyword == "completed"
    [evidence] = sync_conn.execute("SELECT evidence FROM ai.context_keyword_analysis "
                                   "WHERE context_id = 1").fetchone()
    assert [e["reason"] for e in evidence] == ["cue", "below floor"]
    assert evidence[0]["cues"] == ["맥주"] and evidence[0]["score"] == 1.25
    assert evidence[1]["picked"] is False and evidence[1]["confidence"] is None
