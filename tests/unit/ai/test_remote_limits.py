"""What remote model servers say about themselves (issue 23, SPEC §6): ``Retry-After`` in
seconds or as an HTTP date, throttles, "too many inputs" in each server's words, context-length
refusals, per-model refusals; the retry loop that waits a throttle out without spending an
attempt but never past its deadline; and the adaptive (AIMD) limit on calls in flight.

The error bodies are the real servers' (cited in ``tests/support/fake_openai.py``: Azure OpenAI
400 "Too many inputs. The max number of inputs is 16" — microsoft/semantic-kernel#2099; TEI 413
"batch size 64 > maximum allowed batch size 32" — text-embeddings-inference
router/src/http/server.rs; vLLM 400 "This model's maximum context length is 512 tokens" —
vllm-project/vllm#19798; DeepSeek 400 "This response_format type is unavailable now" —
bytedance/deer-flow#545). Timing is a fake clock advanced by the fake sleep: no wall clock.
"""

from __future__ import annotations

import asyncio
import email.utils
import json

import pytest

from pinlog import metrics
from pinlog.ai.errors import (
    BudgetExceeded,
    ModelRefused,
    PermanentModelError,
    ThrottledError,
    TooManyInputs,
    TransientModelError,
    http_error,
    parse_retry_after,
    refuses_response_format,
    with_retries,
)
from pinlog.ai.limits import AdaptiveLimit
from tests.support.fake_openai import PROFILES, openai_error, tei_error, vllm_error


class FakeTime:
    """A clock that only the fake sleep advances."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


# --- Retry-After ----------------------------------------------------------------------------
def test_retry_after_in_seconds_as_an_http_date_and_in_milliseconds():
    assert parse_retry_after({"Retry-After": "5"}) == 5.0
    now = 1_700_000_000.0
    date = email.utils.formatdate(now + 7, usegmt=True)  # RFC 9110 §10.2.3 HTTP-date
    assert parse_retry_after({"Retry-After": date}, now=now) == pytest.approx(7.0)
    assert parse_retry_after({"retry-after": "3"}) == 3.0  # lower-case header names too
    # Azure's retry-after-ms is more precise and read first
    assert parse_retry_after({"retry-after-ms": "250", "Retry-After": "1"}) == 0.25
    assert parse_retry_after({"Retry-After": email.utils.formatdate(now - 60, usegmt=True)},
                             now=now) == 0.0  # a date in the past: go now
    for bad in ({}, {"Retry-After": "soon"}, {"Retry-After": "-3"}, {"Retry-After": ""}):
        assert parse_retry_after(bad) is None


@pytest.mark.parametrize("status", [429, 503])
def test_429_and_503_are_throttles_carrying_the_servers_wait(status):
    error = http_error(status, json.dumps(openai_error("Rate limit reached for requests",
                                                       "requests", "rate_limit_exceeded")),
                       {"Retry-After": "2"}, what="embedding")
    assert isinstance(error, ThrottledError) and error.transient
    assert error.retry_after == 2.0 and error.status == status
    assert "Rate limit reached" not in str(error)  # free text is never kept
    assert "code=rate_limit_exceeded" in str(error)


# --- too many inputs, too long, refused models -----------------------------------------------
@pytest.mark.parametrize(("profile", "inputs", "limit"), [
    ("azure-openai", 32, 16), ("tei", 64, 32)])
def test_too_many_inputs_in_each_servers_words_names_the_servers_maximum(profile, inputs, limit):
    status, body = PROFILES[profile].too_many(inputs, limit)
    error = http_error(status, json.dumps(body), {}, what="embedding", inputs=inputs)
    assert isinstance(error, TooManyInputs) and not error.transient
    assert error.limit == limit


def test_a_bare_413_of_several_inputs_is_too_many_inputs_and_of_one_input_is_not():
    assert isinstance(http_error(413, "", {}, what="embedding", inputs=8), TooManyInputs)
    single = http_error(413, "", {}, what="embedding", inputs=1)
    assert not isinstance(single, TooManyInputs) and isinstance(single, PermanentModelError)


@pytest.mark.parametrize("body", [
    json.dumps(vllm_error("This model's maximum context length is 512 tokens. However, you "
                          "requested 600 tokens in the input for embedding generation.",
                          "BadRequestError", 400)),
    json.dumps(tei_error("Input validation error: `inputs` must have less than 512 tokens. "
                         "Given: 514", "validation", 413)),
], ids=["vllm-400", "tei-413"])
def test_an_input_over_the_context_length_is_permanent_and_never_too_many_inputs(body):
    status = json.loads(body)["code"]
    error = http_error(status, body, {}, what="embedding", inputs=4)
    assert not isinstance(error, TooManyInputs)
    assert isinstance(error, PermanentModelError) and "input over the model limit" in str(error)
    assert "600 tokens" not in str(error)


@pytest.mark.parametrize(("profile", "gone"), [
    ("openai", True), ("vllm", True), ("ollama", True), ("azure-openai", True)])
def test_a_model_the_server_does_not_serve_is_a_refusal_of_that_model(profile, gone):
    status, body = PROFILES[profile].model_missing("retired-model")
    error = http_error(status, json.dumps(body), {}, what="judge retired-model")
    assert isinstance(error, ModelRefused) and error.gone is gone
    assert "retired-model" in str(error)  # named by us ("judge <model>"), not by the body


def test_401_and_403_are_permanent_never_a_per_model_refusal():
    for status in (401, 403):
        error = http_error(status, json.dumps(openai_error("Incorrect API key provided: sk-abc",
                                                           "invalid_request_error",
                                                           "invalid_api_key")), {}, what="judge m")
        assert isinstance(error, PermanentModelError) and not isinstance(error, ModelRefused)


def test_a_refused_response_format_is_recognised_in_deepseeks_words():
    status, body = PROFILES["reasoning"].format_refused
    assert refuses_response_format(status, json.dumps(body))
    assert refuses_response_format(422, "Failed to deserialize the JSON body into the target "
                                        "type: response_format.type `json_schema` is unavailable")
    assert not refuses_response_format(400, json.dumps(openai_error(
        "Invalid value for 'temperature'", "invalid_request_error", None)))


# --- the retry loop --------------------------------------------------------------------------
def throttles(*waits: float | None, then: object = "ok"):
    """A call that raises a throttle per wait (None: a throttle without Retry-After), then
    returns ``then``; ``calls`` counts the calls."""
    calls = []

    async def call():
        calls.append(1)
        if len(calls) <= len(waits):
            raise ThrottledError("upstream 429", status=429, retry_after=waits[len(calls) - 1])
        return then

    return call, calls


async def test_a_retry_after_is_waited_out_without_spending_an_attempt():
    clock = FakeTime()
    call, calls = throttles(5, 5, 5, 5)  # four throttles: more than the 3 attempts
    result = await with_retries(call, attempts=3, base=0.5, cap=4, sleep=clock.sleep,
                                deadline=clock() + 60, clock=clock)
    assert result == "ok" and len(calls) == 5
    assert clock.slept == [5, 5, 5, 5]  # the server's waits, not the backoff


async def test_a_retry_after_past_the_deadline_gives_up_at_once_and_never_sleeps_past_it():
    clock = FakeTime()
    call, calls = throttles(5, 30)
    deadline = clock() + 20
    with pytest.raises(BudgetExceeded) as info:
        await with_retries(call, attempts=3, base=0.5, cap=4, sleep=clock.sleep,
                           deadline=deadline, clock=clock)
    assert info.value.transient  # the stage stays PROCESSING: the rescan retries later
    assert len(calls) == 2 and clock.slept == [5] and clock() <= deadline


async def test_a_throttle_without_retry_after_spends_attempts_like_any_transient_error():
    clock = FakeTime()
    call, calls = throttles(None, None, None)
    with pytest.raises(ThrottledError):
        await with_retries(call, attempts=3, base=0.5, cap=4, sleep=clock.sleep,
                           deadline=clock() + 60, clock=clock)
    assert len(calls) == 3 and len(clock.slept) == 2


async def test_without_a_deadline_a_retry_after_spends_an_attempt():
    clock = FakeTime()
    call, calls = throttles(1, 1, 1)
    with pytest.raises(ThrottledError):
        await with_retries(call, attempts=3, base=0.5, cap=4, sleep=clock.sleep, clock=clock)
    assert len(calls) == 3 and clock.slept == [1, 1]


async def test_a_permanent_error_is_never_retried():
    async def call():
        raise PermanentModelError("upstream 400")

    clock = FakeTime()
    with pytest.raises(PermanentModelError):
        await with_retries(call, attempts=3, base=0.5, cap=4, sleep=clock.sleep,
                           deadline=clock() + 60, clock=clock)
    assert clock.slept == []


async def test_a_backoff_past_the_deadline_is_not_slept():
    clock = FakeTime()

    async def call():
        raise TransientModelError("upstream 500")

    with pytest.raises(BudgetExceeded):
        await with_retries(call, attempts=3, base=100, cap=100, sleep=clock.sleep,
                           deadline=clock(), clock=clock)
    assert clock.slept == []


# --- AIMD -----------------------------------------------------------------------------------
def limit_value(kind: str) -> float:
    return metrics.MODEL_CONCURRENCY_LIMIT.labels(kind=kind)._value.get()


async def test_a_throttle_halves_the_limit_once_per_round_and_successes_raise_it_again():
    clock = FakeTime()
    limit = AdaptiveLimit(8, kind="test-aimd", clock=clock, sleep=clock.sleep)
    assert limit.allowed == 8 and limit_value("test-aimd") == 8
    throttled_before = metrics.MODEL_THROTTLED.labels(kind="test-aimd")._value.get()
    started = limit.now()
    clock.now += 1
    limit.throttled(started)
    limit.throttled(started)  # a call of the same round: no second halving
    assert limit.allowed == 4 and limit_value("test-aimd") == 4
    assert metrics.MODEL_THROTTLED.labels(kind="test-aimd")._value.get() - throttled_before == 2
    clock.now += 1
    limit.throttled(limit.now())  # a call started after the decrease: halves again
    assert limit.allowed == 2
    for _ in range(2):
        limit.throttled(limit.now())
    assert limit.allowed == 1  # never below the minimum
    for _ in range(20):
        limit.succeeded()
    assert 1 < limit.allowed <= 8
    for _ in range(500):
        limit.succeeded()
    assert limit.allowed == 8  # never above the maximum


async def test_calls_beyond_the_limit_wait_and_a_retry_after_holds_new_calls():
    clock = FakeTime()
    limit = AdaptiveLimit(2, kind="test-aimd-wait", clock=clock, sleep=clock.sleep)
    await limit.acquire()
    await limit.acquire()
    third = asyncio.create_task(limit.acquire())
    await asyncio.sleep(0)
    assert not third.done() and limit.in_flight == 2
    limit.release()
    await asyncio.wait_for(third, 5)
    assert limit.in_flight == 2
    limit.release()
    limit.release()
    limit.throttled(limit.now(), retry_after=7)
    await limit.acquire()  # waits out the server's Retry-After before starting
    assert clock.slept == [7] and limit.in_flight == 1
