"""Failure classification, retries and redaction (SPEC §5.5, §6).

Transient errors leave a stage PROCESSING (the rescan re-sends after the expiry); permanent
errors make that stage FAILED. Messages that may contain provider text are redacted before
they reach an exception, a log line or ``last_error``.

What a remote model server says about itself is read here, once, for every caller (issue 23):

* :func:`http_error` turns a non-200 answer into the classified error: a 429 or 503 is a
  :class:`ThrottledError` carrying the server's ``Retry-After`` (seconds or an HTTP date,
  RFC 9110 §10.2.3; Azure's ``retry-after-ms`` too); a 413, or a 400/422 that says the request
  had too many inputs, is :class:`TooManyInputs` with the maximum the server named; a
  per-model refusal (404 ``model_not_found``, any 4xx but 401/403) is :class:`ModelRefused`.
* :func:`with_retries` waits out a ``Retry-After`` without spending an attempt, but only while
  the wait ends before the caller's deadline (the SPEC §6 budget): a throttled stage never
  outlives its budget, and never burns its attempts in the first second of a throttle either.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import random
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TypeVar

from pinlog.errors import PinlogError
from pinlog.redaction import provider_error_detail, redact  # noqa: F401 - re-exported

T = TypeVar("T")

#: SQLSTATE classes/codes that are transient (SPEC §6).
TRANSIENT_SQLSTATE_CLASSES = ("08", "40", "53", "57", "58")
TRANSIENT_SQLSTATES = ("55P03",)


class ModelError(PinlogError):
    """A classified model/provider failure. ``str(err)`` is already redacted."""

    transient: bool = False

    def __init__(self, message: str) -> None:
        super().__init__(redact(message))


class TransientModelError(ModelError):
    """Timeout, connection/DNS error, HTTP 429 or 5xx, schema-invalid judge answer with attempts left."""

    transient = True


class PermanentModelError(ModelError):
    """Other 4xx/3xx, malformed response, wrong vector length, profile mismatch, input too long."""

    transient = False


class ModelTimeout(TransientModelError):
    """A remote call did not finish within its total deadline (connect + send + every read:
    SPEC §6 "every remote call is bounded as a whole, not per read")."""


class ThrottledError(TransientModelError):
    """HTTP 429 or 503: the server asks for fewer calls (SPEC §6).

    Attributes:
        status: 429 or 503.
        retry_after: seconds the server asked to wait (``Retry-After`` / ``retry-after-ms``),
            None when it named no time.
    """

    def __init__(self, message: str, *, status: int, retry_after: float | None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


class TooManyInputs(PermanentModelError):
    """The server refused the request for carrying too many inputs (TEI's 413 above
    ``--max-client-batch-size``, Azure OpenAI's 400 "Too many inputs. The max number of inputs
    is 16"). Permanent for that request, never for its texts: the micro-batcher halves the batch
    (or takes ``limit``) and remembers the cap for the process.

    Attributes:
        limit: the maximum the server named, or None.
    """

    def __init__(self, message: str, *, limit: int | None) -> None:
        super().__init__(message)
        self.limit = limit


class ModelRefused(PermanentModelError):
    """A 4xx other than 401/403/413/429 for one model (SPEC §6: a per-model "not found" moves to
    the next model of the chain).

    Attributes:
        status: the HTTP status.
        gone: True for 404 / ``model_not_found`` (the model does not exist on this endpoint).
    """

    def __init__(self, message: str, *, status: int, gone: bool) -> None:
        super().__init__(message)
        self.status = status
        self.gone = gone


class SearchTimeout(TransientModelError):
    """A search did not finish within ``PINLOG_SEARCH_TIMEOUT`` (→ 503 with Retry-After)."""


class DegenerateVectorError(PermanentModelError):
    """The provider answered with a vector that cannot be used: wrong length, non-finite values
    or a zero / near-zero norm (SPEC §6, §9). Never stored; a search query → 503."""


def classify_http_status(status: int, detail: str = "", *,
                         retry_after: float | None = None) -> ModelError:
    """HTTP status → error class (SPEC §6): 429 is checked before the 4xx rule; 429 and 503 are
    :class:`ThrottledError` (with the server's ``retry_after``, seconds)."""
    message = f"upstream {status}" + (f": {detail}" if detail else "")
    if status in (429, 503):
        return ThrottledError(message, status=status, retry_after=retry_after)
    if status >= 500:
        return TransientModelError(message)
    return PermanentModelError(message)


#: The longest ``Retry-After`` believed (seconds); a larger value is treated as this (it is then
#: longer than any stage budget anyway, so the stage gives up at once and the rescan retries).
MAX_RETRY_AFTER = 3600.0


def parse_retry_after(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds a throttling server asked to wait, or None.

    Reads ``retry-after-ms`` (milliseconds; Azure OpenAI and openai-python's clients send and
    read it) first, then ``Retry-After`` as delay-seconds or an HTTP date (RFC 9110 §10.2.3),
    measured against ``now`` (Unix seconds, default the current time). Negative or unparsable
    values are None; the result is capped at :data:`MAX_RETRY_AFTER`.

    Args:
        headers: response headers (case-insensitive lookup is the caller's mapping's: httpx's
            ``Headers`` is; a plain dict is looked up in lower case too).
    """
    def header(name: str) -> str | None:
        value = headers.get(name)
        if value is None:
            value = headers.get(name.lower())
        return value.strip() if isinstance(value, str) and value.strip() else None

    millis = header("retry-after-ms")
    if millis is not None:
        try:
            value = float(millis) / 1000.0
        except ValueError:
            value = -1.0
        if value >= 0:
            return min(value, MAX_RETRY_AFTER)
    raw = header("Retry-After")
    if raw is None:
        return None
    try:
        seconds = float(raw)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(raw)
        except (TypeError, ValueError, IndexError):
            return None
        if when is None:
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
        seconds = max(0.0, seconds)
    if seconds != seconds or seconds < 0:  # NaN or negative
        return None
    return min(seconds, MAX_RETRY_AFTER)


#: "too many inputs" in the words of Azure OpenAI ("Too many inputs. The max number of inputs
#: is 16"), TEI ("batch size 64 > maximum allowed batch size 32") and gateways ("batch size is
#: invalid, it should not be larger than 10").
_TOO_MANY = re.compile(r"(?i)too many inputs|max(?:imum)? number of inputs|"
                       r"(?:maximum allowed|max) batch size|batch size \d+ > |"
                       r"batch size is invalid")
_STATED_MAX = re.compile(r"(?i)(?:max(?:imum)? number of inputs is|maximum allowed batch size|"
                         r"max(?:imum)? batch size(?: is)?|should not be larger than)"
                         r"\s*:?\s*(\d+)")
_TOO_LONG = re.compile(r"(?i)context length|too many tokens|less than \d+ tokens|"
                       r"maximum (?:input|sequence) length|input is too long|tokens? exceed")
_RESPONSE_FORMAT = re.compile(r"(?i)response_format|json_schema|json_object|structured output")


def _message(body: str) -> str:
    """The error text of a provider body (``error.message``, ``message``, ``error``, ``detail``);
    the raw body when it is not JSON. Read only to classify, never logged or stored."""
    try:
        data = json.loads(body)
    except ValueError:
        return body[:2000]
    parts: list[str] = []

    def take(value: object) -> None:
        if isinstance(value, str):
            parts.append(value)
        elif isinstance(value, dict):
            for key in ("message", "error", "detail", "code", "type"):
                take(value.get(key))

    take(data)
    return " ".join(parts)[:2000]


def http_error(status: int, body: str, headers: Mapping[str, str], *, what: str,
               inputs: int = 1) -> ModelError:
    """The classified error of a non-200 answer of a remote model server (SPEC §6).

    Args:
        status: the HTTP status (not 200).
        body: the response body; only its structured ``type``/``code`` reach the message
            (:func:`provider_error_detail`: the free text may echo a note or a key).
        headers: the response headers (``Retry-After``).
        what: prefix of the message (``embedding``, ``judge gpt-4o-mini``).
        inputs: how many inputs the request carried (a bare 413 of a multi-input request is
            taken as "too many inputs").

    Returns:
        :class:`ThrottledError` (429, 503), :class:`TooManyInputs` (413 or a 400/422 saying so,
        for a request of several inputs), :class:`PermanentModelError` "input over the model
        limit" (a context-length refusal), :class:`ModelRefused` (another 4xx but 401/403),
        else what :func:`classify_http_status` says.
    """
    detail = provider_error_detail(body)
    text = _message(body)
    prefix = f"{what}: " if what else ""
    if status in (429, 503):
        return ThrottledError(f"{prefix}upstream {status} (throttled)" + (
            f": {detail}" if detail else ""), status=status,
            retry_after=parse_retry_after(headers))
    too_long = bool(_TOO_LONG.search(text))
    says_too_many = bool(_TOO_MANY.search(text))
    if inputs > 1 and (says_too_many or (status == 413 and not too_long)) \
            and status in (400, 413, 422):
        stated = _STATED_MAX.search(text)
        limit = int(stated.group(1)) if stated else None
        return TooManyInputs(f"{prefix}upstream {status}: too many inputs in one request "
                             f"({inputs}" + (f", the server's maximum is {limit})" if limit
                                             else ")"), limit=limit)
    if too_long and status in (400, 413, 422):
        return PermanentModelError(f"{prefix}upstream {status}: input over the model limit"
                                   + (f" ({detail})" if detail else ""))
    if 400 <= status < 500 and status not in (401, 403):
        gone = status == 404 or "model_not_found" in text or bool(
            re.search(r"(?i)model\b.*\b(?:not found|(?:does )?not exist)", text))
        return ModelRefused(f"{prefix}upstream {status}" + (f": {detail}" if detail else ""),
                            status=status, gone=gone)
    error = classify_http_status(status, detail)
    return type(error)(f"{prefix}{error}")


def refuses_response_format(status: int, body: str) -> bool:
    """True when a chat endpoint refused the request's ``response_format`` (DeepSeek: 400 "This
    response_format type is unavailable now"; 422 "response_format.type `json_schema` is
    unavailable now"): the judge then asks again with a simpler format (issue 23)."""
    return status in (400, 422) and bool(_RESPONSE_FORMAT.search(_message(body)))


def is_transient_sqlstate(sqlstate: str | None) -> bool:
    """True for DB connection loss, serialization failure, lock timeout, too many connections…"""
    if not sqlstate:
        return False
    return sqlstate[:2] in TRANSIENT_SQLSTATE_CLASSES or sqlstate in TRANSIENT_SQLSTATES


def backoff_delay(attempt: int, base: float, cap: float, rng: random.Random | None = None) -> float:
    """Capped exponential backoff with full jitter before attempt ``attempt + 1`` (seconds).

    The ceiling for attempt 0 is ``base`` (0.5 s by default), then ``2 × base`` … up to ``cap``.
    """
    ceiling = min(cap, base * 2**attempt)
    return (rng or random).uniform(0, ceiling)


#: Shortest wait honoured for a ``Retry-After`` (seconds): ``Retry-After: 0`` never makes a
#: busy loop.
MIN_THROTTLE_WAIT = 0.05


def throttle_wait(exc: BaseException) -> float | None:
    """Seconds to wait before the next call when ``exc`` is a throttle that named a time, else
    None (then the normal backoff applies and an attempt is spent)."""
    if isinstance(exc, ThrottledError) and exc.retry_after is not None:
        return max(exc.retry_after, MIN_THROTTLE_WAIT)
    return None


class BudgetExceeded(TransientModelError):
    """A throttle asked for a wait that would end after the caller's deadline (SPEC §6 budget):
    the call gives up now, the stage stays PROCESSING and the rescan retries later."""


async def with_retries(
    call: Callable[[], Awaitable[T]],
    *,
    attempts: int,
    base: float,
    cap: float,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    deadline: float | None = None,
    clock: Callable[[], float] = time.monotonic,
    on_wait: Callable[[float], None] | None = None,
) -> T:
    """Run ``call`` up to ``attempts`` times, retrying only :class:`TransientModelError`.

    A :class:`ThrottledError` that names a ``Retry-After`` is waited out instead of backing off
    and does **not** spend an attempt (SPEC §6) — as long as the wait ends before ``deadline``
    (a ``clock()`` value: the stage's budget); without a deadline it spends one like any other
    transient error. A backoff that would end past the deadline is not slept either.

    Args:
        on_wait: called with the seconds of each throttle wait (metrics).

    Raises:
        PermanentModelError: at once.
        TransientModelError: the last transient error when all attempts are spent;
            :class:`BudgetExceeded` when the server's wait (or the backoff) would end past
            ``deadline``.
    """
    attempt = 0
    while True:
        try:
            return await call()
        except TransientModelError as exc:
            wait = throttle_wait(exc)
            if wait is not None and deadline is not None:
                if clock() + wait >= deadline:
                    raise BudgetExceeded(f"{exc}; Retry-After {wait:g} s ends past the stage "
                                         "budget") from None
                if on_wait is not None:
                    on_wait(wait)
                await sleep(wait)
                continue
            attempt += 1
            if attempt >= attempts:
                raise
            delay = wait if wait is not None else backoff_delay(attempt - 1, base, cap)
            if deadline is not None and clock() + delay >= deadline:
                raise BudgetExceeded(f"{exc}; no time left in the stage budget") from None
            await sleep(delay)
