"""The ai side's guarded statements (SPEC §3, §5.2, §5.5), one thin function each.

The SQL lives in ``state.sql`` (named, each commented with the rule it enforces); this module only
binds parameters and reads results. Every status write carries its precondition in SQL; a
function returning ``None``/``False`` means "0 rows affected", which is a normal outcome
(SPEC §3), never an error. Callers own the transaction: start/fail/record run on their own short
connection (``engine.begin()``), the save functions run inside one transaction that first calls
:func:`lock_state`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

import numpy as np
from pgvector.sqlalchemy import VECTOR
from sqlalchemy.ext.asyncio import AsyncConnection

from pinlog.db.sql import Queries
from pinlog.states import Stage, Status

Q = Queries("pinlog.ai", "state.sql")

#: ``last_error`` is at most this long (SPEC §2.2, CHECK in the schema).
LAST_ERROR_MAX = 500


def _vector_text(vector: np.ndarray) -> str:
    """pgvector text form of a ``(dim,)`` vector (cast in SQL with ``CAST(:embedding AS vector)``)."""
    return "[" + ",".join(repr(float(x)) for x in np.asarray(vector, dtype=np.float32)) + "]"


def format_error(stage: Stage, error_class: str, reason: str) -> str:
    """``"<stage> <class>: <reason>"`` cut to 500 characters (SPEC §2.2). ``reason`` must already
    be redacted (``ModelError`` messages are)."""
    message = f"{stage.label} {error_class}: {reason}"
    return message if len(message) <= LAST_ERROR_MAX else message[: LAST_ERROR_MAX - 1] + "…"


@dataclass(frozen=True)
class PreCheck:
    """Result of the cheap pre-check (SPEC §5.2 step 1)."""

    embedding_status: Status
    keyword_status: Status
    embedding_profile: str | None
    text_sha256: bytes | None

    @property
    def has_work(self) -> bool:
        """True when at least one stage is PENDING or PROCESSING."""
        return self.embedding_status.unfinished or self.keyword_status.unfinished


@dataclass(frozen=True)
class StoredEmbedding:
    """A stored, not deleted context vector: ``vector`` is ``(dim,)`` float32."""

    vector: np.ndarray
    profile: str
    text_sha256: bytes


async def precheck(conn: AsyncConnection, context_id: int) -> PreCheck | None:
    """Read both statuses and the stored embedding's profile/hash, no lock (SPEC §5.2 step 1).

    Returns:
        None when the state row is missing.
    """
    row = (await conn.execute(Q("precheck"), {"context_id": context_id})).one_or_none()
    if row is None:
        return None
    return PreCheck(Status(row.embedding_status), Status(row.keyword_status),
                    row.embedding_profile,
                    bytes(row.text_sha256) if row.text_sha256 is not None else None)


async def start_stage(conn: AsyncConnection, context_id: int, stage: Stage,
                      expiry: timedelta) -> Status | None:
    """Guarded start of ``stage`` (SPEC §3): PENDING → PROCESSING, or re-claim a PROCESSING stage
    whose ``updated_at`` is older than ``expiry``. The keyword start also requires embedding
    COMPLETED. Writes the event row in the same statement.

    Returns:
        The status before the update (``PENDING`` = fresh start, ``PROCESSING`` = re-claim), or
        None when 0 rows were affected (stage owned, finished, failed, cancelled or missing).
    """
    name = "start_embedding" if stage is Stage.EMBEDDING else "start_keyword"
    row = (await conn.execute(Q(name), {"context_id": context_id, "expiry": expiry})).one_or_none()
    return Status(row.previous_status) if row is not None else None


async def fail_stage(conn: AsyncConnection, context_id: int, stage: Stage, error: str) -> bool:
    """Guarded PROCESSING → FAILED with ``last_error`` = ``error`` (SPEC §3, §5.5 permanent).

    Never overwrites CANCELLED/COMPLETED. Returns True when the row changed (event written).
    """
    row = (await conn.execute(Q("fail_stage", stage), {
        "context_id": context_id, "error": error[:LAST_ERROR_MAX], "stage_label": stage.label,
    })).one_or_none()
    return row is not None


async def record_error(conn: AsyncConnection, context_id: int, stage: Stage, error: str) -> bool:
    """Write ``last_error``/``last_error_at`` (never ``updated_at``) while ``stage`` is PROCESSING,
    plus an event row with null from/to status (SPEC §5.5 transient). Returns True when written."""
    row = (await conn.execute(Q("record_error", stage), {
        "context_id": context_id, "error": error[:LAST_ERROR_MAX], "stage_label": stage.label,
    })).one_or_none()
    return row is not None


async def insert_event(conn: AsyncConnection, context_id: int, stage: Stage, *,
                       from_status: Status | None, to_status: Status | None, reason: str) -> None:
    """Append one ``ai.context_ai_event`` row with actor ``ai`` (SPEC §2.2)."""
    await conn.execute(Q("insert_event"), {
        "context_id": context_id, "stage_label": stage.label,
        "from_status": from_status.value if from_status else None,
        "to_status": to_status.value if to_status else None, "reason": reason[:LAST_ERROR_MAX],
    })


async def lock_state(conn: AsyncConnection, context_id: int) -> tuple[Status, Status] | None:
    """Lock the state row ``FOR UPDATE`` (first statement of every save transaction, SPEC §5.2).

    Returns:
        ``(embedding_status, keyword_status)`` as locked, or None when the row is missing. The
        value is informational: the guarded statements that follow carry the preconditions.
    """
    row = (await conn.execute(Q("lock_state"), {"context_id": context_id})).one_or_none()
    return (Status(row.embedding_status), Status(row.keyword_status)) if row else None


async def upsert_embedding(conn: AsyncConnection, *, context_id: int, user_id: int,
                           record_id: int, vector: np.ndarray, profile: str,
                           text_sha256: bytes) -> bool:
    """Store the ``(dim,)`` vector while embedding is PROCESSING; never touches or revives
    ``is_deleted`` (SPEC §5.2 step 2). Returns False when 0 rows were written (discard the save)."""
    result = await conn.execute(Q("upsert_embedding"), {
        "context_id": context_id, "user_id": user_id, "record_id": record_id,
        "embedding": _vector_text(vector), "profile": profile, "text_sha256": text_sha256,
    })
    return result.rowcount == 1


async def complete_stage(conn: AsyncConnection, context_id: int, stage: Stage,
                         reason: str = "completed") -> bool:
    """Guarded PROCESSING → COMPLETED (keyword: and embedding COMPLETED), with its event row.

    Returns False when 0 rows changed (the caller rolls the save back).
    """
    name = "complete_embedding" if stage is Stage.EMBEDDING else "complete_keyword"
    row = (await conn.execute(Q(name), {"context_id": context_id, "reason": reason})).one_or_none()
    return row is not None


async def replace_keywords(conn: AsyncConnection, context_id: int,
                           picks: Sequence[tuple[int, float | None]], preset_version: int) -> int:
    """Delete this context's keyword rows, then insert ``picks`` (``(keyword_id, confidence)``),
    both guarded by keyword PROCESSING + embedding COMPLETED (SPEC §5.2 step 3).

    Returns:
        Number of keyword rows inserted.
    """
    await conn.execute(Q("delete_keywords"), {"context_id": context_id})
    if not picks:
        return 0
    result = await conn.execute(Q("insert_keywords"), {
        "context_id": context_id, "preset_version": preset_version,
        "keyword_ids": [int(k) for k, _ in picks],
        "confidences": [None if c is None else round(float(c), 3) for _, c in picks],
    })
    return result.rowcount


async def upsert_keyword_analysis(conn: AsyncConnection, context_id: int, *, preset_version: int,
                                  unmatched_concepts: Sequence[str], model_profile: str) -> bool:
    """Upsert the analysis row (guarded like the keyword rows). Returns True when written."""
    result = await conn.execute(Q("upsert_keyword_analysis"), {
        "context_id": context_id, "preset_version": preset_version,
        "unmatched_concepts": json.dumps(list(unmatched_concepts), ensure_ascii=False),
        "model_profile": model_profile,
    })
    return result.rowcount == 1


async def read_embedding(conn: AsyncConnection, context_id: int) -> StoredEmbedding | None:
    """The stored, not deleted vector of ``context_id`` (``(dim,)`` float32) or None."""
    stmt = Q("read_embedding").columns(embedding=VECTOR)
    row = (await conn.execute(stmt, {"context_id": context_id})).one_or_none()
    if row is None:
        return None
    return StoredEmbedding(np.asarray(row.embedding, dtype=np.float32), row.embedding_profile,
                           bytes(row.text_sha256))


async def ai_tables_present(conn: AsyncConnection) -> bool:
    """True when every ``ai.*`` table exists (SPEC §2.2: refuse to start otherwise)."""
    return (await conn.execute(Q("ai_tables_present"))).scalar_one() == 7


async def preset_fingerprint(conn: AsyncConnection, profile: str) -> str:
    """md5 over every preset row and its vector timestamp for ``profile`` (cheap: no vectors
    read); changes whenever anything a snapshot depends on changes."""
    return (await conn.execute(Q("preset_fingerprint"), {"profile": profile})).scalar_one()
