"""The project's error tree: every error raised on purpose derives from :class:`PinlogError`.

::

    PinlogError                              code, message (secret-free, no member data)
    ├── StartupError          (RuntimeError) a component refused to start (pinlog.errors)
    ├── SettingsError         (RuntimeError) invalid configuration (pinlog.settings)
    ├── EmbeddedDatabaseError (RuntimeError) embedded server start/stop (pinlog.db.embedded)
    ├── CoreError                            core services, pinlog.core.services:
    │   ├── NotFound, MemberExists, RecordExists
    │   ├── InvalidInput(field=…, problem=…)
    │   └── ForcedDeleteRequired → LastContext, RecordHasContexts
    ├── SearchUnavailable, SearchRejected (RuntimeError)   pinlog.core.search
    ├── ReprocessError        (RuntimeError) pinlog.core.reprocess
    ├── InvalidToken, Unauthorized           pinlog.core.api
    ├── ModelError                           pinlog.ai.errors
    │   ├── TransientModelError → ModelTimeout, ThrottledError (retry_after), BudgetExceeded,
    │   │                         SearchTimeout
    │   └── PermanentModelError → TooManyInputs (limit), ModelRefused (status, gone),
    │                             DegenerateVectorError
    ├── ProfileMismatch       (ValueError)   pinlog.ai.search
    └── PresetFileError       (ValueError)   pinlog.ai.presets

The second base (``RuntimeError``/``ValueError``) is kept where callers relied on it. Each edge
maps errors to its answer in one place: the public routes in
:func:`pinlog.core.api.errors.error_response`, the ai routes in :mod:`pinlog.ai.api` /
:mod:`pinlog.ai.search_api`, the CLI in :func:`pinlog.cli.app.describe_error`
(docs/ARCHITECTURE.md, "Errors").
"""

from __future__ import annotations

from typing import ClassVar


class PinlogError(Exception):
    """Root of the project's errors.

    Attributes:
        code: fixed machine-readable string (the public API's ``error`` field).
        message: fixed human sentence, written for operators or members; never contains a
            secret, the database URL or member data (note text).
    """

    code: ClassVar[str] = "ERROR"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class StartupError(PinlogError, RuntimeError):
    """A component refused to start; the message says what to do (e.g. ``run `pinlog migrate```).

    The message is written for operators and contains no secrets or configuration values.
    """

    code = "STARTUP"
