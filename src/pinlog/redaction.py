"""Redaction of secrets before text reaches an exception, a log line or ``last_error`` (SPEC §6).

Pattern-based redaction catches key *shapes* (``sk-…``, bearer tokens, ``api_key=…``, passwords
in URLs); :func:`register_secret` adds the literal values this process is configured with (API
keys of any shape, internal/JWT secrets, the database password), so a provider echoing a key
back is redacted whatever the key looks like. Settings register their secrets when loaded.
"""

from __future__ import annotations

import re
import threading

_PATTERNS = (
    (re.compile(r"sk-[A-Za-z0-9_\-]{6,}"), "sk-***"),
    (re.compile(r"(?i)bearer\s+[A-Za-z0-9._\-~+/=]+"), "Bearer ***"),
    (re.compile(r"(?i)(api[_-]?key|apikey|access[_-]?token|token|secret|password)"
                r"(\"?\s*[:=]\s*\"?)[^\s\"&,;}]+"), r"\1\2***"),
    (re.compile(r"(?i)(postgres(?:ql)?(?:\+\w+)?://)[^\s]*"), r"\1***"),
    (re.compile(r"(?i)(https?://)[^/\s:@]+:[^/\s@]+@"), r"\1***@"),
)
#: Shorter values are not registered: redacting them would mangle ordinary words.
MIN_SECRET_CHARS = 6

_lock = threading.Lock()
_secrets: frozenset[str] = frozenset()


def register_secret(value: str | None) -> None:
    """Redact this literal value from now on (configured keys and secrets)."""
    global _secrets
    if value and len(value) >= MIN_SECRET_CHARS:
        with _lock:
            _secrets = _secrets | {value}


def redact(message: str, limit: int = 400) -> str:
    """Remove registered secrets, keys, bearer tokens, ``api_key=…``, passwords in URLs; cut to
    ``limit`` characters."""
    for secret in sorted(_secrets, key=len, reverse=True):
        if secret in message:
            message = message.replace(secret, "***")
    for pattern, repl in _PATTERNS:
        message = pattern.sub(repl, message)
    return message if len(message) <= limit else message[: limit - 1] + "…"


_ERROR_TOKEN = re.compile(r"^[A-Za-z0-9_.\-]{1,64}$")


def provider_error_detail(body: str) -> str:
    """What may be kept of a provider's error body: its structured ``error.type`` and
    ``error.code`` (OpenAI-compatible shape) when they are short tokens — never the free-text
    message, which may echo the input (a member's note is personal data, SPEC §6) or a key.

    Returns:
        e.g. ``"type=invalid_request_error code=context_length_exceeded"``, or ``""``.
    """
    import json

    try:
        error = json.loads(body).get("error")
    except (ValueError, AttributeError):
        return ""
    if not isinstance(error, dict):
        return ""
    parts = [f"{key}={error[key]}" for key in ("type", "code")
             if isinstance(error.get(key), str) and _ERROR_TOKEN.match(error[key])]
    return " ".join(parts)
