"""The shared vocabulary of the state machine (SPEC §3): stages and statuses.

Both core and ai use these; neither owns them. ``Stage.value`` is the column name and is the
only thing ever interpolated into SQL.
"""

from __future__ import annotations

from enum import Enum


class Status(str, Enum):
    """Status of one stage of one context (SPEC §3)."""

    PENDING = "PENDING"
    PROCESSING = "PROCESSING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"

    @property
    def unfinished(self) -> bool:
        """PENDING or PROCESSING: work the rescan may still recover."""
        return self in (Status.PENDING, Status.PROCESSING)


class Stage(str, Enum):
    """A stage of the AI pipeline; the value is the status column of ``ai.context_ai_state``."""

    EMBEDDING = "embedding_status"
    KEYWORD = "keyword_status"

    @property
    def label(self) -> str:
        """Short name used in events, metrics and ``last_error`` (``embedding``/``keyword``)."""
        return "embedding" if self is Stage.EMBEDDING else "keyword"

    @property
    def other(self) -> Stage:
        return Stage.KEYWORD if self is Stage.EMBEDDING else Stage.EMBEDDING


class Actor(str, Enum):
    """Who wrote a status change (``ai.context_ai_event.actor``)."""

    CORE = "core"
    AI = "ai"
    RESCAN = "rescan"
    FINALIZER = "finalizer"
