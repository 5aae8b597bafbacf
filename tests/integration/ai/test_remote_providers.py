"""The SPEC §5.2 job and ``pinlog presets load`` against remote model servers that throttle,
cap their inputs and refuse over-long inputs (issue 23; SPEC §6), on the real PostgreSQL.

The servers are the local fake_openai with behaviour profiles (``tests/support/fake_openai.py``,
which cites each real server's documented answers); the providers are the real HTTP ones,
behind the real micro-batcher. The budget tests run real waits of a few hundred milliseconds
(``retry-after-ms``, as Azure OpenAI sends it) far below the processing expiry they are
compared with.
"""

from __future__ import annotations

import asyncio

import pytest

from pinlog import metrics
from pinlog.ai.pipeline import Pipeline
from pinlog.ai.presets import load_preset_file, load_presets
from pinlog.ai.providers import build_batched_provider
from pinlog.ai.ports import JudgeAnswer, Pick
from pinlog.ai.runtime import AiRuntime
from tests.conftest import config_of
from tests.fakes import FakeJudge
from tests.integration.ai.support import (
    PROFILE,
    ai_settings_for,
    insert_state,
    keyword_rows,
    read_state,
    request,
    statuses,
)
from tests.support.fake_openai import PROFILES, FakeOpenAI, Profile



def remote_settings(tmp_path, db_url, fake_openai: FakeOpenAI, **overrides):
    env = {k.removeprefix("PINLOG_").lower(): v for k, v in fake_openai.env(PROFILE, judge=False).items()}
    return ai_settings_for(tmp_path, db_url, **{**env, **overrides})


async def pipeline_at(engine, settings, judge):
    config = config_of(settings).ai
    batched = build_batched_provider(config.embedding, config.batching)
    return Pipeline(engine, config.pipeline, batched, judge), batched


def waited(kind: str) -> float:
    return metrics.MODEL_THROTTLE_WAIT.labels(kind=kind)._value.get()


# --- throttling: Retry-After within the stage budget (SPEC §6) -----------------------------
async def test_a_throttled_embedding_waits_out_retry_after_without_spending_attempts(
        tmp_path, db_url, engine, fake_openai, judge, presets, sync_conn):
    """4 throttles with a Retry-After, 3 attempts: all 4 waits are honoured and the stage
    completes (before issue 23 the 3 attempts were spent in ~1.5 s and the note waited for
    the processing expiry)."""
    settings = remote_settings(tmp_path, db_url, fake_openai, embedding_timeout=2.0, backoff_base=0.05,
                               backoff_cap=0.1, processing_expiry=60)
    pipeline, batched = await pipeline_at(engine, settings, judge)
    fake_openai.throttle_next(4, {"retry-after-ms": "150", "Retry-After": "1"})
    before = waited("embedding")
    insert_state(sync_conn, 1)
    try:
        result = await pipeline.run(request(1))
    finally:
        await batched.aclose()
    assert result.embedding == "completed" and statuses(sync_conn, 1)[0] == "COMPLETED"
    assert fake_openai.throttled == 4 and fake_openai.embedding_calls == [1]  # 5 requests, 1 answered
    assert settings.model_attempts == 3
    assert waited("embedding") - before == pytest.approx(4 * 0.15)


async def test_the_budget_rule_holds_under_a_throttle_that_never_ends(
        tmp_path, db_url, engine, fake_openai, judge, presets, sync_conn):
    """Every request throttled with a short Retry-After: the stage waits (spending no attempt)
    until the next wait would end past its budget (timeout × attempts + backoff), then gives
    up transient — well before the processing expiry, so the rescan never duplicates it."""
    settings = remote_settings(tmp_path, db_url, fake_openai, embedding_timeout=0.5, backoff_base=0.05,
                               backoff_cap=0.1, processing_expiry=30)
    pipeline, batched = await pipeline_at(engine, settings, judge)
    budget = pipeline.embedding_budget
    assert budget == pytest.approx(0.5 * 3 + 0.15) and budget < 30
    fake_openai.throttle_next(1000, {"retry-after-ms": "200"})
    insert_state(sync_conn, 1)
    loop = asyncio.get_running_loop()
    started = loop.time()
    try:
        result = await pipeline.run(request(1))
    finally:
        await batched.aclose()
    elapsed = loop.time() - started
    assert result.embedding == "transient"
    assert fake_openai.throttled > settings.model_attempts  # the waits spent no attempt
    assert elapsed < settings.processing_expiry.total_seconds()
    row = read_state(sync_conn, 1)
    assert row.embedding_status == "PROCESSING" and "budget" in row.last_error


async def test_a_retry_after_longer_than_the_budget_gives_up_at_once(
        tmp_path, db_url, engine, fake_openai, judge, presets, sync_conn):
    settings = remote_settings(tmp_path, db_url, fake_openai, embedding_timeout=1.0, backoff_base=0.05,
                               backoff_cap=0.1, processing_expiry=30)
    pipeline, batched = await pipeline_at(engine, settings, judge)
    fake_openai.throttle_next(1, {"Retry-After": "600"})
    insert_state(sync_conn, 1)
    try:
        result = await pipeline.run(request(1))
    finally:
        await batched.aclose()
    assert result.embedding == "transient" and fake_openai.throttled == 1 and fake_openai.embedding_calls == []
    assert "past the stage budget" in read_state(sync_conn, 1).last_error


# --- input caps (presets load, notes) ------------------------------------------------------
GATEWAY_16 = Profile("gateway-16", max_inputs=16, too_many=PROFILES["azure-openai"].too_many)


@pytest.mark.parametrize("fake_openai", [{"profile": GATEWAY_16}], indirect=True)
async def test_presets_load_succeeds_against_a_16_input_cap_and_serve_can_start(
        tmp_path, db_url, engine, fake_openai, sync_conn):
    """The packaged presets are 112 texts; an endpoint capped at 16 inputs answers 400 "Too
    many inputs. The max number of inputs is 16" (Azure's words) to the first call of 32: the
    load lowers its cap and succeeds, and the ai side then starts (issue 23 #1: it used to exit
    1 and serve refused "no usable keyword presets")."""
    settings = remote_settings(tmp_path, db_url, fake_openai)
    config = config_of(settings).ai
    assert config.embedding.max_inputs == 32  # the openai provider's default
    presets = load_preset_file()
    report = await load_presets(engine, presets, config.embedding, config.batching,
                                config.pipeline.retries)
    assert sorted(report.embedded) == sorted(p.id for p in presets)
    assert fake_openai.refused["too_many"] >= 1 and max(fake_openai.embedding_calls) <= 16
    assert sum(fake_openai.embedding_calls) > len(presets)  # several passages per preset, all embedded
    stored = sync_conn.execute("SELECT count(*) FROM ai.keyword_preset_embedding "
                               "WHERE embedding_profile = %s", (PROFILE,)).fetchone()[0]
    assert stored == len(presets)
    runtime = AiRuntime(engine, config)
    await runtime.start()
    try:
        assert await runtime.ready()
    finally:
        await runtime.stop()


@pytest.mark.parametrize("fake_openai", [{"profile": "vllm"}], indirect=True)
async def test_a_note_over_the_context_length_fails_alone_and_its_batch_mates_complete(
        tmp_path, db_url, engine, fake_openai, judge, presets, sync_conn):
    """vLLM refuses the whole call with 400 "This model's maximum context length is 512
    tokens" (vllm-project/vllm#19798): the long note's embedding stage ends FAILED as an input
    over the model limit, the short notes sent with it are COMPLETED."""
    settings = remote_settings(tmp_path, db_url, fake_openai, embedding_batch_wait_ms=200)
    pipeline, batched = await pipeline_at(engine, settings, judge)
    texts = {1: "조용한 카페", 2: "가" * 600, 3: "친구랑 맥주", 4: "비 오는 날 창가"}
    for cid in texts:
        insert_state(sync_conn, cid)
    try:
        results = await asyncio.gather(*(pipeline.run(request(cid, text))
                                         for cid, text in texts.items()))
    finally:
        await batched.aclose()
    assert [r.embedding for r in results] == ["completed", "permanent", "completed", "completed"]
    assert fake_openai.refused["too_long"] >= 1
    row = read_state(sync_conn, 2)
    assert row.embedding_status == "FAILED" and "input over the model limit" in row.last_error
    assert "가가가" not in row.last_error  # never the text


# --- picks capped for every judge (SPEC §8) -------------------------------------------------
async def test_a_judge_that_selects_every_candidate_stores_at_most_max_picks(
        tmp_path, db_url, engine, provider, presets, sync_conn):
    """A judge (the llm judge's answer, here at its Protocol) that selects all four
    candidates: only the three with the highest confidence are stored (PINLOG_JUDGE_MAX_PICKS
    applies to every judge, not only the similarity judge)."""
    settings = ai_settings_for(tmp_path, db_url, candidate_floor=-1.0, judge_max_picks=3)
    everything = FakeJudge(lambda text, candidates: JudgeAnswer(
        picks=tuple(Pick(c.preset.id, round(0.5 + 0.1 * i, 3)) for i, c in enumerate(candidates)),
        model_profile="llm:greedy"))
    pipeline = Pipeline(engine, config_of(settings).ai.pipeline, provider, everything)
    dropped = metrics.JUDGE_DROPPED_PICKS.labels(reason="max_picks")._value.get()
    insert_state(sync_conn, 1)
    await pipeline.run(request(1))
    [(_, offered)] = everything.seen
    assert len(offered) == 4
    rows = keyword_rows(sync_conn, 1)
    assert len(rows) == 3
    assert sorted(float(c) for _, c, _ in rows) == [0.6, 0.7, 0.8]  # the lowest one dropped
    assert metrics.JUDGE_DROPPED_PICKS.labels(reason="max_picks")._value.get() - dropped == 1
