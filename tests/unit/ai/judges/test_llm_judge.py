"""The ``llm`` judge against a real local OpenAI-compatible HTTP server (SPEC §6, §8)."""

from __future__ import annotations

import json
import logging

import pytest

from pinlog import metrics
from pinlog.ai.errors import PermanentModelError, TransientModelError
from pinlog.ai.judges import LlmJudge, build_judge
from pinlog.ai.ports import Pick
from tests.fakes import FakeEmbeddingProvider
from tests.unit.ai.judges.conftest import Sleeps, content, hang, make_candidates, ok, status

TEXT = "비 오는 날 창가에서 커피 마시기 좋은 조용한 카페"
KEY = "sk-test-secret-key-123456"
CANDIDATES = make_candidates((301, 0.93), (404, 0.92), (201, 0.90))


def judge_for(server, chain=("model-a",), votes=1, attempts=3) -> tuple[LlmJudge, Sleeps]:
    sleeps = Sleeps()
    return LlmJudge(base_url=server.url, api_key=KEY, chain=list(chain), attempts=attempts,
                    timeout=5, votes=votes, sleep=sleeps), sleeps


def answer(*picks: tuple[object, object], unmatched=()) -> dict:
    return {"selected": [{"keywordId": k, "confidence": c} for k, c in picks],
            "unmatchedConcepts": list(unmatched)}


def dropped(reason: str) -> float:
    return metrics.JUDGE_DROPPED_PICKS.labels(reason=reason)._value.get()


async def test_valid_answer_is_mapped_and_the_request_follows_the_protocol(chat_server):
    chat_server.script(ok(answer((301, 0.9), (404, 0.75), unmatched=["커피"])))
    judge, sleeps = judge_for(chat_server)
    result = await judge.judge(TEXT, CANDIDATES)
    await judge.aclose()
    assert result.picks == (Pick(301, 0.9), Pick(404, 0.75))
    assert result.unmatched_concepts == ("커피",)
    assert result.model_profile == "llm:model-a"
    assert sleeps.delays == []
    [request] = chat_server.requests
    assert request["path"] == "/v1/chat/completions"
    assert request["headers"]["Authorization"] == f"Bearer {KEY}"
    body = request["body"]
    assert body["model"] == "model-a"
    schema = body["response_format"]["json_schema"]["schema"]
    assert body["response_format"]["type"] == "json_schema"
    assert schema["properties"]["selected"]["items"]["properties"]["keywordId"]["type"] == "integer"
    user = body["messages"][-1]["content"]
    # the prompt carries the text and, per candidate, id, name, category, description,
    # examples and cues
    assert TEXT in user
    payload = json.loads(user)
    for c, sent in zip(CANDIDATES, payload["candidates"], strict=True):
        p = c.preset
        for part in (f'"id": {p.id}', p.display_name, p.category, p.description, *p.examples,
                     *p.cues):
            assert part in user
        assert sent["description"] == p.description and sent["cues"] == list(p.cues)
    assert any(sent["cues"] for sent in payload["candidates"])
    assert "evidence" in body["messages"][0]["content"]


async def test_invalid_json_then_valid_answer_retries_with_backoff(chat_server):
    chat_server.script(content("I think QUIET fits {"), ok(answer((301, 0.8))))
    judge, sleeps = judge_for(chat_server)
    result = await judge.judge(TEXT, CANDIDATES)
    await judge.aclose()
    assert result.picks == (Pick(301, 0.8),)
    assert len(chat_server.requests) == 2 and len(sleeps.delays) == 1
    assert 0 <= sleeps.delays[0] <= 0.5


async def fails_after_three_attempts(chat_server, error: type, match: str) -> None:
    """The judge raises ``error`` (message matching ``match``) after three requests with a
    backoff sleep between each two."""
    judge, sleeps = judge_for(chat_server)
    with pytest.raises(error, match=match):
        await judge.judge(TEXT, CANDIDATES)
    await judge.aclose()
    assert len(chat_server.requests) == 3 and len(sleeps.delays) == 2


async def test_schema_invalid_on_every_attempt_is_permanent_after_the_last(chat_server):
    chat_server.script(content('{"picked": []}'), content("not json"), content('{"selected": 3}'))
    await fails_after_three_attempts(chat_server, PermanentModelError,
                                     "schema validation on the last attempt")


async def test_429_then_valid_answer(chat_server):
    chat_server.script(status(429), ok(answer((404, 0.7))))
    judge, sleeps = judge_for(chat_server)
    result = await judge.judge(TEXT, CANDIDATES)
    await judge.aclose()
    assert result.picks == (Pick(404, 0.7),) and len(chat_server.requests) == 2
    assert len(sleeps.delays) == 1


async def test_transient_errors_on_every_attempt_stay_transient(chat_server):
    chat_server.script(status(503), status(429), status(500))
    await fails_after_three_attempts(chat_server, TransientModelError, "upstream 500")


async def test_non_candidate_ids_and_bad_confidences_are_dropped_duplicates_keep_max(chat_server):
    chat_server.script(ok(answer((999, 0.9), (301, 0.4), (301, 0.7), (404, 1.5), (201, "high"),
                                 (201, -0.1))))
    judge, _ = judge_for(chat_server)
    before_nc, before_bc = dropped("not_candidate"), dropped("bad_confidence")
    result = await judge.judge(TEXT, CANDIDATES)
    await judge.aclose()
    assert result.picks == (Pick(301, 0.7),)
    assert dropped("not_candidate") - before_nc == 1
    assert dropped("bad_confidence") - before_bc == 3


async def test_empty_selection_is_a_normal_answer(chat_server):
    chat_server.script(ok(answer(unmatched=["주차"])))
    judge, _ = judge_for(chat_server)
    result = await judge.judge(TEXT, CANDIDATES)
    await judge.aclose()
    assert result.picks == () and result.unmatched_concepts == ("주차",)


async def test_401_is_permanent_at_once_and_the_key_never_leaks(chat_server, caplog):
    chat_server.script(status(401, f'{{"error": "invalid api key {KEY}", "hint": "Bearer {KEY}"}}'),
                       ok(answer((301, 0.9))))
    judge, sleeps = judge_for(chat_server, chain=("model-a", "model-b"))
    caplog.set_level(logging.DEBUG)
    with pytest.raises(PermanentModelError) as err:
        await judge.judge(TEXT, CANDIDATES)
    await judge.aclose()
    assert "upstream 401" in str(err.value)
    assert KEY not in str(err.value)
    assert len(chat_server.requests) == 1 and sleeps.delays == []  # no retry, no fallback
    assert KEY not in caplog.text and TEXT not in caplog.text


async def test_chain_falls_back_to_the_next_model_sharing_three_attempts(chat_server):
    chat_server.by_model = {"model-a": [status(503)], "model-b": [status(429)],
                            "model-c": [ok(answer((201, 0.6)))]}
    judge, sleeps = judge_for(chat_server, chain=("model-a", "model-b", "model-c"))
    result = await judge.judge(TEXT, CANDIDATES)
    await judge.aclose()
    assert chat_server.models() == ["model-a", "model-b", "model-c"]
    assert result.model_profile == "llm:model-c" and result.picks == (Pick(201, 0.6),)
    assert len(sleeps.delays) == 2


async def test_short_chain_gives_the_last_model_the_remaining_attempts(chat_server):
    chat_server.script(status(500), status(502), status(504), ok(answer()))
    judge, _ = judge_for(chat_server, chain=("model-a", "model-b"))
    with pytest.raises(TransientModelError):
        await judge.judge(TEXT, CANDIDATES)
    await judge.aclose()
    assert chat_server.models() == ["model-a", "model-b", "model-b"]  # 3 attempts, not 4


async def test_timeout_is_transient_and_retried(chat_server):
    chat_server.script(hang(), ok(answer((301, 0.9))))
    sleeps = Sleeps()
    judge = LlmJudge(base_url=chat_server.url, api_key=None, chain=["m"], timeout=0.3,
                     sleep=sleeps)
    result = await judge.judge(TEXT, CANDIDATES)
    await judge.aclose()
    assert result.picks == (Pick(301, 0.9),) and len(sleeps.delays) == 1
    assert "Authorization" not in chat_server.requests[0]["headers"]  # no key → no header


async def test_connection_error_is_transient():
    from tests.helpers import free_port

    judge = LlmJudge(base_url=f"http://127.0.0.1:{free_port()}/v1", api_key=None, chain=["m"],
                     attempts=2, timeout=2, sleep=Sleeps())
    with pytest.raises(TransientModelError, match="connection error"):
        await judge.judge(TEXT, CANDIDATES)
    await judge.aclose()


async def test_voting_keeps_strict_majority_with_mean_confidence(chat_server):
    chat_server.script(ok(answer((301, 0.9), (404, 0.6), unmatched=["커피"])),
                       ok(answer((301, 0.7), unmatched=["커피"])),
                       ok(answer((201, 0.8), (404, 0.4))))
    judge, _ = judge_for(chat_server, votes=3)
    result = await judge.judge(TEXT, CANDIDATES)
    await judge.aclose()
    assert len(chat_server.requests) == 3
    picks = {p.keyword_id: p.confidence for p in result.picks}
    assert picks == {301: pytest.approx(0.8), 404: pytest.approx(0.5)}  # 201: 1 vote of 3
    assert result.unmatched_concepts == ("커피",)
    assert result.model_profile == "llm:model-a"


async def test_voting_survives_one_failed_vote_but_needs_a_majority_to_answer(chat_server):
    # every vote has 1 attempt: one 503, two valid → still a majority of answers
    chat_server.script(status(503), ok(answer((301, 0.9))), ok(answer((301, 0.5))))
    judge, _ = judge_for(chat_server, votes=3, attempts=1)
    result = await judge.judge(TEXT, CANDIDATES)
    assert result.picks == (Pick(301, pytest.approx(0.7)),)
    # two failures → no majority → the error surfaces
    chat_server.script(status(503), status(503), ok(answer((301, 0.9))))
    with pytest.raises(TransientModelError):
        await judge.judge(TEXT, CANDIDATES)
    await judge.aclose()


def test_build_judge_picks_the_configured_judge(tmp_path):
    from tests.conftest import config_of, make_settings

    def build(settings):
        config = config_of(settings)
        return build_judge(config.ai.judge, provider, config.ai.calibration)

    provider = FakeEmbeddingProvider()
    sim = build(make_settings(tmp_path))
    assert type(sim).__name__ == "SimilarityJudge"
    llm = build(make_settings(tmp_path, judge="llm", llm_base_url="http://x/v1",
                              llm_chain="a,b", llm_votes=3))
    assert isinstance(llm, LlmJudge) and llm.chain == ["a", "b"] and llm.votes == 3
    # issue 13: a missing endpoint is now refused when the settings load (one line, exit 2)
    from pinlog.settings import SettingsError

    with pytest.raises(SettingsError, match="PINLOG_LLM_BASE_URL"):
        make_settings(tmp_path, judge="llm", llm_chain="a")
    with pytest.raises(ValueError, match="PINLOG_LLM_CHAIN"):
        build(make_settings(tmp_path, judge="llm", llm_base_url="http://x/v1"))
