"""Failure classification, retries and redaction (SPEC §5.5, §6).

Transient errors leave a stage PROCESSING (the rescan re-sends after the expiry); permanent
errors make that stage FAILED. Messages that may contain provider text are redacted before
they reach an exception, a log line or ``last_error``.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
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


class SearchTimeout(TransientModelError):
    """A search did not finish within ``PINLOG_SEARCH_TIMEOUT`` (→ 503 with Retry-After)."""


class DegenerateVectorError(PermanentModelError):
    """The provider answered with a vector that cannot be used: wrong length, non-finite values
    or a zero / near-zero norm (SPEC §6, §9). Never stored; a search query → 503."""


def classify_http_status(status: int, detail: str = "") -> ModelError:
    """HTTP status → error class (SPEC §6): 429 is checked before the 4xx rule."""
    message = f"upstream {status}" + (f": {detail}" if detail else "")
    if status == 429 or status >= 500:
        return TransientModelError(message)
    return PermanentModelError(message)


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


async def with_retries(
    call: Callable[[], Awaitable[T]],
    *,
    attempts: int,
    base: float,
    cap: float,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> T:
    """Run ``call`` up to ``attempts`` times, retrying only :class:`TransientModelError`.

    Raises:
        PermanentModelError: at once.
        TransientModelError: the last transient error when all attempts are spent.
    """
    for attempt in range(attempts):
        try:
            return await call()
        except TransientModelError:
            if attempt == attempts - 1:
                raise
            await sleep(backoff_delay(attempt, base, cap))
    raise AssertionError("unreachable")
