"""The ``llm`` judge: any OpenAI-compatible chat-completions endpoint (SPEC §8).

Protocol: ``POST {PINLOG_LLM_BASE_URL}/chat/completions`` with ``Authorization: Bearer
{PINLOG_LLM_API_KEY}`` (Azure OpenAI: ``api-key`` and ``?api-version=``,
:class:`pinlog.settings.LlmEndpoint`) and ``response_format`` = JSON schema
``{"selected":[{"keywordId":int,"confidence":number}],"unmatchedConcepts":[string]}``.

What real endpoints answer (issue 23; README "Tested providers"):

* **response_format.** An endpoint that refuses ``json_schema`` (DeepSeek: 400 "This
  response_format type is unavailable now") is asked again at once with ``json_object``, then
  with no ``response_format`` (the prompt states the JSON shape either way); the format that
  worked is remembered per model for the process, and the renegotiation spends no attempt.
* **Reasoning models** (DeepSeek-R1, Qwen3 via vLLM/Ollama) write ``<think>…</think>`` before the
  JSON and often wrap it in a markdown fence: both are stripped before parsing
  (:func:`answer_text`).
* **A model that is gone** (404 / ``model_not_found``) or refuses the request (any other 4xx but
  401/403) moves the judgement to the next model of the chain at once, in order, without
  spending an attempt; a model that is gone is skipped for the rest of the process (until every
  model of the chain is gone: then all are tried again). 401/403 stay permanent at once (the key
  is wrong for every model).
* **Throttling.** A 429/503 with ``Retry-After`` is waited out on the same model without
  spending an attempt, while the wait ends inside the judge's budget (``timeout × attempts +
  backoff``, the SPEC §6 budget the pipeline also enforces); an
  :class:`~pinlog.ai.limits.AdaptiveLimit` (``PINLOG_LLM_MAX_CONCURRENT``) gives a throttling
  endpoint fewer calls in flight.
* **Every call is bounded as a whole** (``PINLOG_LLM_TIMEOUT`` for connect, send and every read
  together): an endpoint that trickles its answer still times out.

Attempts and the fallback chain (SPEC §6, §8): one judgement gets ``model_attempts`` attempts
in total, shared by the ordered chain ``PINLOG_LLM_CHAIN``. **Attempt i uses
``chain[min(i, len(chain) - 1)]``**: every failed attempt moves on to the next model, and the
last model gets whatever attempts remain. (Chosen over "stay on a model until it fails N
times" because the usual failure — a rate-limited or overloaded model — is better answered by
another model at once, and it keeps the total cost bounded by ``model_attempts`` whatever the
chain length.) Between attempts: capped exponential backoff with full jitter
(:func:`pinlog.ai.errors.backoff_delay`), through an injectable ``sleep``.

Classification: timeouts, connection errors, 429, 5xx and answers that fail the schema are
transient while attempts remain; 401/403 and 3xx are permanent at once, other 4xx move to the
next model (permanent when no model is left); a schema-invalid answer on the last attempt is
permanent. Picks are capped at ``max_picks`` by the pipeline, for every judge (SPEC §8).
Error messages keep only the status and the structured error type/code of a provider's body
(its free text may echo the note or a key); the context text and the API key are never logged.

Voting (``PINLOG_LLM_VOTES`` = odd N > 1): N judgements run concurrently; a keyword is kept
when a strict majority of the N votes picked it, with the mean confidence of those votes.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import re
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import httpx

from pinlog.ai.calibration import Calibration
from pinlog.ai.candidates import map_picks
from pinlog import metrics
from pinlog.ai.errors import (
    BudgetExceeded,
    ModelError,
    ModelRefused,
    ModelTimeout,
    PermanentModelError,
    ThrottledError,
    TransientModelError,
    backoff_delay,
    http_error,
    refuses_response_format,
    throttle_wait,
)
from pinlog.ai.judges.base import JudgeConfig
from pinlog.ai.limits import AdaptiveLimit
from pinlog.ai.ports import Candidate, EmbeddingProvider, Judge, JudgeAnswer, Pick
from pinlog.settings import LlmEndpoint, RetryPolicy, Settings

log = logging.getLogger(__name__)

#: JSON schema of the judge's answer (sent as ``response_format``; SPEC §8).
ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["selected", "unmatchedConcepts"],
    "properties": {
        "selected": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["keywordId", "confidence"],
                "properties": {
                    "keywordId": {"type": "integer"},
                    "confidence": {"type": "number"},
                },
            },
        },
        "unmatchedConcepts": {"type": "array", "items": {"type": "string"}},
    },
}

SYSTEM_PROMPT = (
    "You tag short personal notes about places with keywords from a fixed list. "
    "You receive the note and candidate keywords (id, name, category, description, examples, "
    "cues: words that state the keyword outright). "
    "Select only candidates that the note's own words clearly support: there must be textual "
    "evidence in the note, not a guess about what such a place is usually like. "
    "Typically select 0 to 3 keywords; select none when nothing fits. "
    "Never invent ids: use only the candidate ids given. "
    "confidence is a number from 0 to 1. "
    "unmatchedConcepts lists short concepts in the note that no candidate covers "
    "(e.g. parking, price, service); it may be empty. "
    "Answer with JSON only, one object of the form "
    '{"selected": [{"keywordId": <candidate id>, "confidence": <number 0..1>}], '
    '"unmatchedConcepts": [<string>]}.'
)

#: ``response_format`` modes, tried in this order per model (issue 23): the JSON schema, plain
#: JSON mode, none (the prompt states the shape).
RESPONSE_FORMATS = ("json_schema", "json_object", "none")

Sleep = Callable[[float], Awaitable[None]]


class AnswerSchemaError(ValueError):
    """The model's answer is not JSON of the expected shape (transient while attempts remain)."""


def build_messages(text: str, candidates: Sequence[Candidate]) -> list[dict[str, str]]:
    """Chat messages for one judgement: the note and, per candidate, id, name, category,
    description, examples and cues (SPEC §8; cues are words that state the preset outright)."""
    payload = {
        "note": text,
        "candidates": [
            {
                "id": c.preset.id,
                "name": c.preset.display_name,
                "category": c.preset.category,
                "description": c.preset.description,
                "examples": list(c.preset.examples),
                "cues": list(c.preset.cues),
            }
            for c in candidates
        ],
    }
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": json.dumps(payload, ensure_ascii=False)},
    ]


_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"```[ \t]*(?:json|JSON)?[ \t]*\n?(.*?)```", re.DOTALL)


def answer_text(content: str) -> str:
    """The JSON text of a model's answer: reasoning blocks (``<think>…</think>``, also one whose
    opening tag was in the prompt template, as Qwen3's is) and a markdown fence removed, then, if
    prose surrounds the JSON, the outermost ``{…}`` (issue 23)."""
    text = _THINK.sub("", content)
    closing = text.lower().rfind("</think>")
    if closing >= 0:  # the opening tag was part of the prompt
        text = text[closing + len("</think>"):]
    fence = _FENCE.search(text)
    if fence:
        text = fence.group(1)
    text = text.strip()
    if not text.startswith("{") and "{" in text and "}" in text:
        text = text[text.find("{"):text.rfind("}") + 1]
    return text


def parse_answer(body: object) -> tuple[list[tuple[object, object]], tuple[str, ...]]:
    """Extract ``(raw picks, unmatched concepts)`` from a chat-completions response body.

    Only the *shape* is validated here (object with a ``selected`` list of objects carrying
    ``keywordId`` and ``confidence``; ``unmatchedConcepts`` a list, non-strings ignored); the
    values are judged by :func:`pinlog.ai.candidates.map_picks` (SPEC §8 mapping).

    Raises:
        AnswerSchemaError: anything else (no choices, no content, invalid JSON, wrong shape).
    """
    try:
        content = body["choices"][0]["message"]["content"]  # type: ignore[index]
    except (KeyError, IndexError, TypeError):
        raise AnswerSchemaError("no message content in the response") from None
    if not isinstance(content, str):
        raise AnswerSchemaError("message content is not a string")
    text = answer_text(content)  # reasoning blocks and code fences removed
    try:
        answer = json.loads(text)
    except json.JSONDecodeError:
        raise AnswerSchemaError("answer is not valid JSON") from None
    if not isinstance(answer, dict) or not isinstance(answer.get("selected"), list):
        raise AnswerSchemaError("answer has no 'selected' list")
    raw: list[tuple[object, object]] = []
    for item in answer["selected"]:
        if not isinstance(item, dict) or "keywordId" not in item or "confidence" not in item:
            raise AnswerSchemaError("'selected' items need keywordId and confidence")
        raw.append((item["keywordId"], item["confidence"]))
    unmatched = answer.get("unmatchedConcepts", [])
    if not isinstance(unmatched, list):
        raise AnswerSchemaError("'unmatchedConcepts' is not a list")
    return raw, clean_concepts(unmatched)


#: Analysis-only data: at most this many concepts of at most this many characters are kept.
MAX_CONCEPTS, MAX_CONCEPT_CHARS = 20, 100


def clean_concepts(values: list[object]) -> tuple[str, ...]:
    """Unmatched concepts as storable text: strings only, stripped, deduplicated, without NUL or
    lone surrogates (PostgreSQL rejects them), capped in number and length. A bad concept must
    never fail an otherwise valid keyword result."""
    concepts: list[str] = []
    for value in values:
        if not isinstance(value, str):
            continue
        cleaned = value.replace("\x00", "").encode("utf-8", "ignore").decode("utf-8").strip()
        cleaned = cleaned[:MAX_CONCEPT_CHARS]
        if cleaned and cleaned not in concepts:
            concepts.append(cleaned)
        if len(concepts) == MAX_CONCEPTS:
            break
    return tuple(concepts)


@dataclass(frozen=True)
class _Vote:
    picks: tuple[Pick, ...]
    unmatched: tuple[str, ...]
    model: str


class LlmJudgeConfig(JudgeConfig):
    """``PINLOG_JUDGE=llm``: any OpenAI-compatible chat-completions endpoint.

    Attributes:
        endpoint: ``PINLOG_LLM_BASE_URL`` / ``PINLOG_LLM_API_KEY`` (the settings refuse an llm
            judge without a base URL, :meth:`pinlog.settings.Settings.llm_endpoint`).
        chain: ``PINLOG_LLM_CHAIN``, models in fallback order (at least one when built).
        votes: ``PINLOG_LLM_VOTES`` (odd).
        timeout: ``PINLOG_LLM_TIMEOUT``, seconds for a whole call.
        max_concurrent: ``PINLOG_LLM_MAX_CONCURRENT``, calls in flight at most (adaptive).
        retries: attempts and backoff (``PINLOG_MODEL_ATTEMPTS``, ``PINLOG_BACKOFF_*``).
    """

    judge: Literal["llm"] = "llm"
    endpoint: LlmEndpoint
    chain: tuple[str, ...]
    votes: int
    timeout: float
    max_concurrent: int = 8
    retries: RetryPolicy
    settings_prefix: ClassVar[str] = "PINLOG_LLM_"

    @classmethod
    def settings_values(cls, settings: Settings) -> dict[str, Any]:
        return {"endpoint": settings.llm_endpoint(), "chain": tuple(settings.llm_chain),
                "votes": settings.llm_votes, "timeout": settings.llm_timeout,
                "max_concurrent": settings.llm_max_concurrent, "retries": settings.retries}

    def build(self, provider: EmbeddingProvider, calibration: Calibration, **kwargs: Any) -> Judge:
        """Args: ``kwargs`` (``sleep``, ``client``, ``rng``) are passed to :class:`LlmJudge`."""
        return LlmJudge(endpoint=self.endpoint, chain=self.chain,
                        attempts=self.retries.attempts, timeout=self.timeout, votes=self.votes,
                        backoff_base=self.retries.backoff_base,
                        backoff_cap=self.retries.backoff_cap,
                        max_concurrent=self.max_concurrent, **kwargs)


class _FormatRefused(Exception):
    """The endpoint refused this call's ``response_format``; the model's next format is set."""


class LlmJudge:
    """OpenAI-compatible chat-completions judge (SPEC §8). See the module docstring.

    Args:
        endpoint: the chat endpoint (URL, key, Azure's api-version); or, for tests, ``base_url``
            and ``api_key``.
        base_url: endpoint root, e.g. ``http://host:port/v1`` (``/chat/completions`` appended).
        api_key: sent as ``Authorization: Bearer …``; None → no header.
        chain: model names in fallback order (at least one).
        attempts: attempts per judgement, shared by the chain (SPEC §6: 3).
        timeout: seconds for one whole HTTP call (connect, send, every read).
        votes: odd number of concurrent judgements (1 = no voting).
        backoff_base, backoff_cap: seconds (see :func:`pinlog.ai.errors.backoff_delay`).
        max_concurrent: calls in flight at most (adaptive: fewer while the endpoint throttles).
        sleep: awaited between attempts and for a ``Retry-After`` (tests inject a recorder).
        client: an ``httpx.AsyncClient`` to use (else one is created and owned).
        rng: jitter source (tests may fix it).

    Attributes:
        budget: seconds one judgement may take at most (``timeout × attempts + backoff``, the
            SPEC §6 budget): no ``Retry-After`` is waited past it.

    Raises:
        ValueError: empty chain, attempts or votes < 1 (that ``PINLOG_LLM_VOTES`` is odd is a
            rule of the settings), or neither ``endpoint`` nor ``base_url``.
    """

    def __init__(
        self,
        *,
        endpoint: LlmEndpoint | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        chain: Sequence[str],
        attempts: int = 3,
        timeout: float = 90.0,
        votes: int = 1,
        backoff_base: float = 0.5,
        backoff_cap: float = 4.0,
        max_concurrent: int = 8,
        sleep: Sleep = asyncio.sleep,
        client: httpx.AsyncClient | None = None,
        rng: random.Random | None = None,
    ) -> None:
        if not chain:
            raise ValueError("PINLOG_LLM_CHAIN must name at least one model")
        if attempts < 1:
            raise ValueError("attempts must be >= 1")
        if votes < 1:
            raise ValueError("votes must be >= 1")
        if endpoint is None:
            if not base_url:
                raise ValueError("the llm judge needs an endpoint (PINLOG_LLM_BASE_URL)")
            from pydantic import SecretStr

            endpoint = LlmEndpoint(base_url, SecretStr(api_key) if api_key else None)
        self.endpoint = endpoint
        self.url = endpoint.chat_url(chain[0])
        self.chain = list(chain)
        self.attempts, self.votes = attempts, votes
        self.backoff_base, self.backoff_cap = backoff_base, backoff_cap
        self.budget = RetryPolicy(attempts, backoff_base, backoff_cap).budget(timeout)
        self._sleep, self._rng = sleep, rng
        self._headers = endpoint.headers()
        self._owns_client = client is None
        self._client = client or httpx.AsyncClient(timeout=timeout)
        self._timeout = timeout
        self.limit = AdaptiveLimit(max_concurrent, kind="judge")
        #: per model: index into :data:`RESPONSE_FORMATS` that the endpoint accepts
        self._formats: dict[str, int] = {}
        #: models the endpoint said do not exist (skipped while another model is left)
        self._gone: set[str] = set()

    async def aclose(self) -> None:
        """Close the HTTP client if this judge created it."""
        if self._owns_client:
            await self._client.aclose()

    def model_for_attempt(self, attempt: int) -> str:
        """The chain's model for attempt ``attempt`` (0-based): ``chain[min(i, len-1)]``."""
        return self.chain[min(attempt, len(self.chain) - 1)]

    def response_format(self, model: str) -> str:
        """The ``response_format`` mode used for ``model`` now (:data:`RESPONSE_FORMATS`)."""
        return RESPONSE_FORMATS[self._formats.get(model, 0)]

    def _request(self, model: str, messages: list[dict[str, str]]) -> dict[str, Any]:
        request: dict[str, Any] = {"model": model, "messages": messages, "temperature": 0}
        mode = self.response_format(model)
        if mode == "json_schema":
            request["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "keyword_picks", "strict": True, "schema": ANSWER_SCHEMA},
            }
        elif mode == "json_object":
            request["response_format"] = {"type": "json_object"}
        return request

    def _format_refused(self, model: str, mode: str) -> None:
        """``model``'s endpoint refused ``mode``: use the next format from now on (once per
        refusal, however many calls saw it)."""
        index = RESPONSE_FORMATS.index(mode)
        if self._formats.get(model, 0) == index and index + 1 < len(RESPONSE_FORMATS):
            self._formats[model] = index + 1
            log.warning("judge endpoint refused response_format %s for model %s; using %s from "
                        "now on", mode, model, RESPONSE_FORMATS[index + 1],
                        extra={"error_class": "permanent"})

    async def _call(self, model: str, messages: list[dict[str, str]],
                    deadline: float | None = None) -> object:
        """One HTTP call, bounded as a whole; returns the parsed JSON body or raises a
        classified error (:class:`_FormatRefused` when the format must change;
        :class:`~pinlog.ai.errors.BudgetExceeded` when a ``Retry-After`` holds calls past
        ``deadline``, a :meth:`AdaptiveLimit.now` value)."""
        request = self._request(model, messages)
        mode = self.response_format(model)
        await self.limit.acquire(deadline)
        begun = self.limit.now()
        try:
            async with asyncio.timeout(self._timeout):  # the whole call, not each read
                response = await self._client.post(self.endpoint.chat_url(model), json=request,
                                                    headers=self._headers, timeout=self._timeout)
        except (TimeoutError, httpx.TimeoutException):
            raise ModelTimeout(f"judge {model}: timeout after {self._timeout:g} s") from None
        except httpx.TransportError as exc:
            raise TransientModelError(
                f"judge {model}: connection error ({type(exc).__name__})") from None
        finally:
            self.limit.release()
        if response.status_code != 200:
            if mode != "none" and refuses_response_format(response.status_code, response.text):
                self._format_refused(model, mode)
                raise _FormatRefused
            error = http_error(response.status_code, response.text, response.headers,
                               what=f"judge {model}")
            if isinstance(error, ThrottledError):
                self.limit.throttled(begun, error.retry_after)
            raise error
        self.limit.succeeded()
        try:
            return response.json()
        except ValueError:
            raise AnswerSchemaError("response body is not JSON") from None

    def _models(self) -> list[str]:
        """The chain without the models that are gone (all of it when every one is gone)."""
        return [m for m in self.chain if m not in self._gone] or list(self.chain)

    async def _judge_once(self, text: str, candidates: Sequence[Candidate],
                          deadline: float | None = None) -> _Vote:
        """One judgement with the shared attempt budget and the chain (module docstring)."""
        clock = self.limit.now
        if deadline is None:
            deadline = clock() + self.budget
        messages = build_messages(text, candidates)
        models = self._models()
        index, attempt = 0, 0
        last: ModelError | None = None
        while True:
            model = models[index]
            final = attempt == self.attempts - 1
            try:
                raw, unmatched = parse_answer(await self._call(model, messages, deadline))
                return _Vote(map_picks(raw, candidates), unmatched, model)
            except _FormatRefused:
                continue  # the same model again, with the next response_format
            except ModelRefused as exc:
                if exc.gone and model not in self._gone:
                    self._gone.add(model)
                    log.warning("judge model %s is not served by the endpoint (%s); the chain "
                                "goes on without it", model, exc, extra={"error_class": "permanent"})
                index += 1
                if index >= len(models):
                    raise PermanentModelError(
                        f"judge: no model of PINLOG_LLM_CHAIN accepted the request ({exc})") from None
                continue  # the next model at once, no attempt spent
            except AnswerSchemaError as exc:
                if final:
                    raise PermanentModelError(
                        f"judge {model}: answer failed schema validation on the last attempt "
                        f"({exc})") from None
                last = TransientModelError(f"judge {model}: answer failed schema validation ({exc})")
            except PermanentModelError:
                raise
            except TransientModelError as exc:
                wait = throttle_wait(exc)
                if wait is not None:  # Retry-After: wait it out, no attempt spent (SPEC §6)
                    if clock() + wait >= deadline:
                        raise BudgetExceeded(f"{exc}; Retry-After {wait:g} s ends past the judge "
                                             "budget") from None
                    metrics.MODEL_THROTTLE_WAIT.labels(kind="judge").inc(wait)
                    await self._sleep(wait)
                    continue
                last = exc
                if final:
                    raise
            attempt += 1
            index = min(index + 1, len(models) - 1)
            log.warning("judge attempt %d/%d failed (%s), retrying", attempt, self.attempts,
                        last)
            delay = backoff_delay(attempt - 1, self.backoff_base, self.backoff_cap, self._rng)
            if clock() + delay >= deadline:
                raise BudgetExceeded(f"{last}; no time left in the judge budget") from None
            await self._sleep(delay)

    async def judge(self, text: str, candidates: Sequence[Candidate]) -> JudgeAnswer:
        """Pick keywords among ``candidates`` with the LLM (SPEC §8).

        Returns:
            :class:`JudgeAnswer` (picks mapped by :func:`map_picks`; with voting, the
            strict-majority keywords and their mean confidence), ``model_profile``
            ``llm:<model that answered>`` (several models joined by ``+``).

        Raises:
            TransientModelError: all attempts failed transiently (with voting: no majority of
                votes answered and none failed permanently).
            PermanentModelError: a permanent failure (401 …, schema-invalid last attempt).
        """
        if not candidates:
            return JudgeAnswer(picks=(), model_profile=f"llm:{self.chain[0]}")
        deadline = self.limit.now() + self.budget
        if self.votes == 1:
            vote = await self._judge_once(text, candidates, deadline)
            return JudgeAnswer(picks=vote.picks, unmatched_concepts=vote.unmatched,
                               model_profile=f"llm:{vote.model}")
        results = await asyncio.gather(
            *(self._judge_once(text, candidates, deadline) for _ in range(self.votes)),
            return_exceptions=True,
        )
        votes = [r for r in results if isinstance(r, _Vote)]
        errors = [r for r in results if isinstance(r, BaseException)]
        for error in errors:
            if not isinstance(error, ModelError):
                raise error
        majority = self.votes // 2 + 1
        if len(votes) < majority:
            permanent = [e for e in errors if isinstance(e, PermanentModelError)]
            raise permanent[0] if permanent else errors[0]
        return self._combine(votes, majority)

    def _combine(self, votes: list[_Vote], majority: int) -> JudgeAnswer:
        """Strict-majority keywords (of all ``self.votes``), mean confidence of their votes."""
        picked: dict[int, list[float | None]] = {}
        for vote in votes:
            for pick in vote.picks:
                picked.setdefault(pick.keyword_id, []).append(pick.confidence)
        picks = []
        for keyword_id, confidences in picked.items():
            if len(confidences) >= majority:
                known = [c for c in confidences if c is not None]
                mean = round(sum(known) / len(known), 3) if known else None
                picks.append(Pick(keyword_id=keyword_id, confidence=mean))
        counts = Counter(c for vote in votes for c in vote.unmatched)
        unmatched = tuple(c for c, n in counts.items() if n >= majority)
        models = "+".join(dict.fromkeys(v.model for v in votes))
        return JudgeAnswer(picks=tuple(picks), unmatched_concepts=unmatched,
                           model_profile=f"llm:{models}")
