"""The ``llm`` judge: any OpenAI-compatible chat-completions endpoint (SPEC §8).

Protocol: ``POST {PINLOG_LLM_BASE_URL}/chat/completions`` with ``Authorization: Bearer
{PINLOG_LLM_API_KEY}`` and ``response_format`` = JSON schema
``{"selected":[{"keywordId":int,"confidence":number}],"unmatchedConcepts":[string]}``.

Attempts and the fallback chain (SPEC §6, §8): one judgement gets ``model_attempts`` attempts
in total, shared by the ordered chain ``PINLOG_LLM_CHAIN``. **Attempt i uses
``chain[min(i, len(chain) - 1)]``**: every failed attempt moves on to the next model, and the
last model gets whatever attempts remain. (Chosen over "stay on a model until it fails N
times" because the usual failure — a rate-limited or overloaded model — is better answered by
another model at once, and it keeps the total cost bounded by ``model_attempts`` whatever the
chain length.) Between attempts: capped exponential backoff with full jitter
(:func:`pinlog.ai.errors.backoff_delay`), through an injectable ``sleep``.

Classification: timeouts, connection errors, 429, 5xx and answers that fail the schema are
transient while attempts remain; other 4xx/3xx (401!) are permanent at once; a schema-invalid
answer on the last attempt is permanent. Error messages keep only the status and the
structured error type/code of a provider's body (its free text may echo the note or a key);
the context text and the API key are never logged.

Voting (``PINLOG_LLM_VOTES`` = odd N > 1): N judgements run concurrently; a keyword is kept
when a strict majority of the N votes picked it, with the mean confidence of those votes.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import httpx

from pinlog.ai.calibration import Calibration
from pinlog.ai.candidates import map_picks
from pinlog.ai.errors import (
    ModelError,
    PermanentModelError,
    TransientModelError,
    backoff_delay,
    classify_http_status,
    provider_error_detail,
)
from pinlog.ai.judges.base import JudgeConfig
from pinlog.ai.ports import Candidate, EmbeddingProvider, Judge, JudgeAnswer, Pick
from pinlog.settings import LlmEndpoint, RetryPolicy, Settings, reveal

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
    "Answer with JSON only, matching the schema."
)

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
    text = content.strip()
    if text.startswith("```"):  # some endpoints wrap JSON in a code fence
        text = text.strip("`").removeprefix("json").strip()
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
        timeout: ``PINLOG_LLM_TIMEOUT``, seconds per call.
        retries: attempts and backoff (``PINLOG_MODEL_ATTEMPTS``, ``PINLOG_BACKOFF_*``).
    """

    judge: Literal["llm"] = "llm"
    endpoint: LlmEndpoint
    chain: tuple[str, ...]
    votes: int
    timeout: float
    retries: RetryPolicy
    settings_prefix: ClassVar[str] = "PINLOG_LLM_"

    @classmethod
    def settings_values(cls, settings: Settings) -> dict[str, Any]:
        return {"endpoint": settings.llm_endpoint(), "chain": tuple(settings.llm_chain),
                "votes": settings.llm_votes, "timeout": settings.llm_timeout,
                "retries": settings.retries}

    def build(self, provider: EmbeddingProvider, calibration: Calibration, **kwargs: Any) -> Judge:
        """Args: ``kwargs`` (``sleep``, ``client``, ``rng``) are passed to :class:`LlmJudge`."""
        return LlmJudge(base_url=self.endpoint.base_url, api_key=reveal(self.endpoint.api_key),
                        chain=self.chain, attempts=self.retries.attempts, timeout=self.timeout,
                        votes=self.votes, backoff_base=self.retries.backoff_base,
                        backoff_cap=self.retries.backoff_cap, **kwargs)


class LlmJudge:
    """OpenAI-compatible chat-completions judge (SPEC §8). See the module docstring.

    Args:
        base_url: endpoint root, e.g. ``http://host:port/v1`` (``/chat/completions`` appended).
        api_key: sent as ``Authorization: Bearer …``; None → no header.
        chain: model names in fallback order (at least one).
        attempts: attempts per judgement, shared by the chain (SPEC §6: 3).
        timeout: seconds per HTTP call.
        votes: odd number of concurrent judgements (1 = no voting).
        backoff_base, backoff_cap: seconds (see :func:`pinlog.ai.errors.backoff_delay`).
        sleep: awaited between attempts (tests inject a no-op).
        client: an ``httpx.AsyncClient`` to use (else one is created and owned).
        rng: jitter source (tests may fix it).

    Raises:
        ValueError: empty chain, attempts or votes < 1 (that ``PINLOG_LLM_VOTES`` is odd is a
            rule of the settings).
    """

    def __init__(
        self,
        *,
        base_url: str,
        api_key: str | None,
        chain: Sequence[str],
        attempts: int = 3,
        timeout: float = 90.0,
        votes: int = 1,
        backoff_base: float = 0.5,
        backoff_cap: float = 4.0,
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
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.chain = list(chain)
        self.attempts, self.votes = attempts, votes
        self.backoff_base, self.backoff_cap = backoff_base, backoff_cap
        self._sleep, self._rng = sleep, rng
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._owns_client = client is None
        self._client = client or httpx.AsyncClient(timeout=timeout)
        self._timeout = timeout

    async def aclose(self) -> None:
        """Close the HTTP client if this judge created it."""
        if self._owns_client:
            await self._client.aclose()

    def model_for_attempt(self, attempt: int) -> str:
        """The chain's model for attempt ``attempt`` (0-based): ``chain[min(i, len-1)]``."""
        return self.chain[min(attempt, len(self.chain) - 1)]

    async def _call(self, model: str, messages: list[dict[str, str]]) -> object:
        """One HTTP call; returns the parsed JSON body or raises a classified error."""
        request = {
            "model": model,
            "messages": messages,
            "temperature": 0,
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "keyword_picks", "strict": True, "schema": ANSWER_SCHEMA},
            },
        }
        try:
            response = await self._client.post(self.url, json=request, headers=self._headers,
                                                timeout=self._timeout)
        except httpx.TimeoutException:
            raise TransientModelError(f"judge {model}: timeout after {self._timeout:g} s") from None
        except httpx.TransportError as exc:
            raise TransientModelError(
                f"judge {model}: connection error ({type(exc).__name__})") from None
        if response.status_code != 200:
            error = classify_http_status(response.status_code,
                                         provider_error_detail(response.text))
            raise type(error)(f"judge {model}: {error}")
        try:
            return response.json()
        except ValueError:
            raise AnswerSchemaError("response body is not JSON") from None

    async def _judge_once(self, text: str, candidates: Sequence[Candidate]) -> _Vote:
        """One judgement with the shared attempt budget and the chain (module docstring)."""
        messages = build_messages(text, candidates)
        last: ModelError | None = None
        for attempt in range(self.attempts):
            model = self.model_for_attempt(attempt)
            final = attempt == self.attempts - 1
            try:
                raw, unmatched = parse_answer(await self._call(model, messages))
                return _Vote(map_picks(raw, candidates), unmatched, model)
            except AnswerSchemaError as exc:
                if final:
                    raise PermanentModelError(
                        f"judge {model}: answer failed schema validation on the last attempt "
                        f"({exc})") from None
                last = TransientModelError(f"judge {model}: answer failed schema validation ({exc})")
            except PermanentModelError:
                raise
            except TransientModelError as exc:
                last = exc
                if final:
                    raise
            log.warning("judge attempt %d/%d failed (%s), retrying", attempt + 1, self.attempts,
                        last)
            await self._sleep(backoff_delay(attempt, self.backoff_base, self.backoff_cap,
                                            self._rng))
        raise last or TransientModelError("judge: no attempt made")  # pragma: no cover

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
        if self.votes == 1:
            vote = await self._judge_once(text, candidates)
            return JudgeAnswer(picks=vote.picks, unmatched_concepts=vote.unmatched,
                               model_profile=f"llm:{vote.model}")
        results = await asyncio.gather(
            *(self._judge_once(text, candidates) for _ in range(self.votes)),
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
