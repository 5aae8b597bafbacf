"""The ``llm`` judge against the answers of real endpoints (issue 23), through the local fake_openai
server's behaviour profiles (``tests/support/fake_openai.py``; each profile cites its source):

* DeepSeek refuses ``json_schema`` with 400 "This response_format type is unavailable now"
  (bytedance/deer-flow#545): the judge asks again with ``json_object``, then none, and
  remembers the format per model;
* reasoning models write ``<think>…</think>`` and fence the JSON: stripped before parsing;
* a model that is gone (OpenAI 404 ``model_not_found``, vLLM 404 NotFoundError, Ollama 404
  "model … not found, try pulling it first") moves to the next model of the chain, in order,
  and is skipped from then on; another per-model 4xx moves on without being forgotten;
* a 429 with ``Retry-After`` is waited out without spending an attempt, never past the budget;
* a trickling answer times out as a whole; Azure OpenAI gets ``api-key`` and ``api-version``.
"""

from __future__ import annotations

import json

import pytest
from pydantic import SecretStr

from pinlog.ai.errors import BudgetExceeded, ModelTimeout, PermanentModelError
from pinlog.ai.judges.llm import LlmJudge, answer_text, parse_answer
from pinlog.ai.ports import Pick
from pinlog.settings import LlmEndpoint
from tests.support.fake_openai import API_KEY, FakeOpenAI, Profile
from tests.unit.ai.judges.conftest import Sleeps, make_candidates, ok, status

TEXT = "비 오는 날 창가에서 커피 마시기 좋은 조용한 카페"
CANDIDATES = make_candidates((301, 0.93), (404, 0.92), (201, 0.90))



def judge_at(fake_openai: FakeOpenAI, chain=("m",), **kwargs) -> tuple[LlmJudge, Sleeps]:
    sleeps = Sleeps()
    kwargs.setdefault("timeout", 5)
    return LlmJudge(base_url=fake_openai.base_url, api_key=fake_openai.api_key, chain=list(chain),
                    sleep=sleeps, **kwargs), sleeps


# --- answers of reasoning models ------------------------------------------------------------
def body(content: str) -> dict:
    return {"choices": [{"message": {"role": "assistant", "content": content}}]}


ANSWER = {"selected": [{"keywordId": 301, "confidence": 0.8}], "unmatchedConcepts": ["주차"]}


@pytest.mark.parametrize("content", [
    "<think>\nThe note says {quiet}. Maybe 301?\n</think>\n\n" + json.dumps(ANSWER),
    "<think>reasoning</think>\n```json\n" + json.dumps(ANSWER) + "\n```",
    "Okay, the user wants tags.\n</think>\n" + json.dumps(ANSWER),   # Qwen3: <think> in the prompt
    "```\n" + json.dumps(ANSWER) + "\n```",
    "Sure! Here is the JSON: " + json.dumps(ANSWER) + " Hope it helps.",
], ids=["think", "think-fence", "closing-tag-only", "bare-fence", "prose"])
def test_reasoning_blocks_fences_and_prose_are_stripped_before_parsing(content):
    raw, unmatched = parse_answer(body(content))
    assert raw == [(301, 0.8)] and unmatched == ("주차",)
    assert json.loads(answer_text(content)) == ANSWER


def test_an_unfinished_reasoning_block_is_a_schema_error_not_a_pick():
    from pinlog.ai.judges.llm import AnswerSchemaError

    with pytest.raises(AnswerSchemaError):
        parse_answer(body("<think>\nlet me consider 301 and"))


@pytest.mark.parametrize("fake_openai", [{"profile": "reasoning"}], indirect=True)
async def test_json_schema_refused_falls_back_to_json_object_remembered_per_model(fake_openai):
    judge, sleeps = judge_at(fake_openai, chain=("deepseek-r1",))
    first = await judge.judge(TEXT, CANDIDATES)
    second = await judge.judge(TEXT, CANDIDATES)
    await judge.aclose()
    assert first.picks == (Pick(301, 0.9),) and second.picks == (Pick(301, 0.9),)
    assert fake_openai.chat_requests == [("deepseek-r1", "json_schema"), ("deepseek-r1", "json_object"),
                                  ("deepseek-r1", "json_object")]
    assert sleeps.delays == []  # renegotiating the format spends no attempt
    assert judge.response_format("deepseek-r1") == "json_object"


NO_JSON_MODES = Profile("no-json-modes", json_schema=False, json_object=False, think=True)


@pytest.mark.parametrize("fake_openai", [{"profile": NO_JSON_MODES}], indirect=True)
async def test_an_endpoint_with_no_json_mode_gets_no_response_format(fake_openai):
    judge, _ = judge_at(fake_openai, chain=("qwen3",))
    result = await judge.judge(TEXT, CANDIDATES)
    await judge.aclose()
    assert result.picks == (Pick(301, 0.9),)
    assert [kind for _, kind in fake_openai.chat_requests] == ["json_schema", "json_object", "none"]


# --- the chain --------------------------------------------------------------------------------
@pytest.mark.parametrize("fake_openai", [
    {"profile": "openai", "models": ("working",)},
    {"profile": "vllm", "models": ("working",)},
    {"profile": "ollama", "models": ("working",)},
], ids=["openai", "vllm", "ollama"], indirect=True)
async def test_a_model_that_is_gone_moves_to_the_next_model_and_is_skipped_from_then_on(fake_openai):
    judge, sleeps = judge_at(fake_openai, chain=("retired-model", "working"))
    first = await judge.judge(TEXT, CANDIDATES)
    second = await judge.judge(TEXT, CANDIDATES)
    await judge.aclose()
    assert first.model_profile == second.model_profile == "llm:working"
    assert fake_openai.chat_models == ["retired-model", "working", "working"]  # in order, then skipped
    assert fake_openai.refused["retired-model"] == 1 and sleeps.delays == []


async def test_another_per_model_4xx_moves_on_in_order_without_forgetting_the_model(chat_server):
    chat_server.by_model = {"a": [status(400), status(422)], "b": [status(400)],
                            "c": [ok(ANSWER), ok(ANSWER)]}
    judge = LlmJudge(base_url=chat_server.url, api_key=None, chain=["a", "b", "c"],
                     sleep=Sleeps(), timeout=5)
    assert (await judge.judge(TEXT, CANDIDATES)).model_profile == "llm:c"
    assert chat_server.models() == ["a", "b", "c"]
    chat_server.requests.clear()
    chat_server.by_model["b"] = [ok(ANSWER)]
    # a 400/422 is about this request, not a missing model: "a" is asked first again
    assert (await judge.judge(TEXT, CANDIDATES)).model_profile == "llm:b"
    assert chat_server.models() == ["a", "b"]
    await judge.aclose()


@pytest.mark.parametrize("fake_openai", [{"profile": "openai", "models": ()}], indirect=True)
async def test_no_model_of_the_chain_served_is_permanent(fake_openai):
    judge, _ = judge_at(fake_openai, chain=("x", "y"))
    with pytest.raises(PermanentModelError, match="no model of PINLOG_LLM_CHAIN"):
        await judge.judge(TEXT, CANDIDATES)
    await judge.aclose()
    assert [m for m, _ in fake_openai.chat_requests] == [] and fake_openai.refused == {"x": 1, "y": 1}


# --- throttling and deadlines -----------------------------------------------------------------
@pytest.mark.parametrize("fake_openai", [{}], indirect=True)
async def test_a_retry_after_is_waited_out_without_spending_an_attempt(fake_openai):
    fake_openai.throttle_next(4, {"retry-after-ms": "50"})  # four throttles, three attempts
    judge, sleeps = judge_at(fake_openai, attempts=3)
    result = await judge.judge(TEXT, CANDIDATES)
    assert result.picks == (Pick(301, 0.9),)
    assert sleeps.delays == [0.05] * 4 and fake_openai.throttled == 4
    assert judge.limit.allowed < 8  # the endpoint throttled: fewer calls in flight
    await judge.aclose()


@pytest.mark.parametrize("fake_openai", [{}], indirect=True)
async def test_a_retry_after_past_the_budget_gives_up_at_once(fake_openai):
    fake_openai.throttle_next(1, {"Retry-After": "600"})
    judge, sleeps = judge_at(fake_openai, attempts=3, timeout=1, backoff_base=0.1, backoff_cap=0.2)
    assert judge.budget < 600
    with pytest.raises(BudgetExceeded) as info:
        await judge.judge(TEXT, CANDIDATES)
    await judge.aclose()
    assert info.value.transient and sleeps.delays == [] and fake_openai.throttled == 1


@pytest.mark.parametrize("fake_openai", [{}], indirect=True)
async def test_an_answer_that_trickles_in_times_out_as_a_whole(fake_openai):
    fake_openai.trickle = 0.05  # headers at once, then a byte every 50 ms (~15 s for the answer)
    judge, _ = judge_at(fake_openai, attempts=1, timeout=0.5)
    with pytest.raises(ModelTimeout, match="timeout after 0.5 s"):
        await judge.judge(TEXT, CANDIDATES)
    await judge.aclose()


@pytest.mark.parametrize("fake_openai", [{"profile": "azure-openai", "api_key": API_KEY,
                                   "models": ("gpt-4o-mini-deployment",)}], indirect=True)
async def test_azure_openai_gets_the_deployment_url_api_version_and_api_key(fake_openai):
    endpoint = LlmEndpoint(f"{fake_openai.root_url}/openai/deployments/{{model}}", SecretStr(API_KEY),
                           "2024-10-21")
    judge = LlmJudge(endpoint=endpoint, chain=["gpt-4o-mini-deployment"], sleep=Sleeps(),
                     timeout=5)
    result = await judge.judge(TEXT, CANDIDATES)
    await judge.aclose()
    assert result.model_profile == "llm:gpt-4o-mini-deployment"
    assert fake_openai.chat_requests == [("gpt-4o-mini-deployment", "json_schema")]
    no_version = LlmJudge(endpoint=LlmEndpoint(endpoint.base_url, SecretStr(API_KEY)),
                          chain=["gpt-4o-mini-deployment"], sleep=Sleeps(), timeout=5)
    with pytest.raises(PermanentModelError):  # Azure without api-version/api-key: refused
        await no_version.judge(TEXT, CANDIDATES)
    await no_version.aclose()
