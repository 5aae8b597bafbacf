"""The ai side's guarded statements (SPEC §3, §5.2, §5.5), one thin function each.

The SQL lives in ``state.sql`` (named, each commented with the rule it enforces); this module only
binds parameters and reads results. Every status write carries its precondition in SQL; a
function returning ``None``/``False`` means "0 rows affected", which is a normal outcome
(SPEC §3), never an error. Callers own the transaction: start/fail/record run as single autocommit
statements, the save functions run inside one transaction that first calls :func:`lock_state`.

Execution: connections, pooling and transactions are SQLAlchemy's; the statements themselves are
sent on the connection's psycopg driver connection (same transaction, same session), because the
job is on the hot path next to a CPU-bound model and SQLAlchemy's per-statement overhead was a
measurable share of the pipeline's CPU (SPEC §5.4, ``bench/bench_pipeline.py``). The SQL text is
exactly the named statement of ``state.sql``, with ``:name`` bound parameters turned into
psycopg's ``%(name)s`` form.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import numpy as np
from sqlalchemy.ext.asyncio import AsyncConnection

from pinlog.ai.vectors import Float4Array, parse_pgvector, to_pgvector
from pinlog.db.sql import Queries, driver_connection
from pinlog.states import Stage, Status

#: ``{profile_lock}`` (the key of the profiles' advisory lock) is written once, in profiles.sql;
#: process liveness (``{live_owner}``, ``{gone_owners}``) is the kernel's
#: (``pinlog/db/process_settings.sql``), written once for both components.
Q = Queries("pinlog.ai", "state.sql", fragments_from=("profiles.sql", "pinlog.db:process_settings.sql"))

#: ``last_error`` is at most this long (SPEC §2.2, CHECK in the schema).
LAST_ERROR_MAX = 500


def native_sql(name: str, stage: Stage | None = None) -> str:
    """The statement ``name`` of ``state.sql`` for psycopg (:meth:`pinlog.db.sql.Queries.native`)."""
    return Q.native(name, stage)


async def _execute(conn: AsyncConnection, name: str, params: Mapping[str, Any] | None = None,
                   stage: Stage | None = None) -> Any:
    """Run a named statement on ``conn``'s driver connection (its current transaction or
    autocommit mode) and return the psycopg cursor."""
    cursor = (await driver_connection(conn)).cursor()
    await cursor.execute(native_sql(name, stage), dict(params or {}))
    return cursor


def _embedding_params(context_id: int, user_id: int, record_id: int, vector: np.ndarray,
                      profile: str, text_sha256: bytes) -> dict[str, Any]:
    """Parameters of ``upsert_embedding`` (the ``(dim,)`` vector in pgvector's text form)."""
    return {"context_id": context_id, "user_id": user_id, "record_id": record_id,
            "embedding": to_pgvector(vector), "profile": profile, "text_sha256": text_sha256}


def _lexical_params(context_id: int, user_id: int, record_id: int, note_terms: Sequence[str],
                    place_terms: Sequence[str]) -> dict[str, Any]:
    """Parameters of ``upsert_lexical`` (the terms as text arrays)."""
    return {"context_id": context_id, "user_id": user_id, "record_id": record_id,
            "note_terms": list(note_terms), "place_terms": list(place_terms)}


def _keyword_params(context_id: int, picks: Sequence[tuple[int, float | None]],
                    preset_version: int) -> dict[str, Any]:
    """Parameters of ``insert_keywords``: parallel id / confidence arrays (3 decimals)."""
    return {"context_id": context_id, "preset_version": preset_version,
            "keyword_ids": [int(k) for k, _ in picks],
            "confidences": [None if c is None else round(float(c), 3) for _, c in picks]}


def _analysis_params(context_id: int, preset_version: int, unmatched_concepts: Sequence[str],
                     model_profile: str, evidence: Sequence[Mapping[str, Any]],
                     embedding_profile: str | None = None) -> dict[str, Any]:
    """Parameters of ``upsert_keyword_analysis`` (concepts and evidence as JSON text;
    ``embedding_profile``: the profile whose vector and presets were judged, SPEC §9.1)."""
    return {"context_id": context_id, "preset_version": preset_version,
            "unmatched_concepts": json.dumps(list(unmatched_concepts), ensure_ascii=False),
            "model_profile": model_profile,
            "evidence": json.dumps([dict(e) for e in evidence], ensure_ascii=False),
            "embedding_profile": embedding_profile}


def _completion_params(context_id: int, claim: Claim, reason: str = "completed") -> dict[str, Any]:
    """Parameters of ``complete_stage`` for one context: its claim as the one-row
    ``batch_claims`` (``:context_ids`` / ``:owners`` / ``:claimed_ats``) and the event's
    ``:reason``."""
    return {"context_ids": [context_id], "owners": [claim.owner],
            "claimed_ats": [claim.claimed_at], "reason": reason}


def format_error(stage: Stage, error_class: str, reason: str) -> str:
    """``"<stage> <class>: <reason>"`` cut to 500 characters (SPEC §2.2). ``reason`` must already
    be redacted (``ModelError`` messages are)."""
    message = f"{stage.label} {error_class}: {reason}"
    return message if len(message) <= LAST_ERROR_MAX else message[: LAST_ERROR_MAX - 1] + "…"


@dataclass(frozen=True)
class Claim:
    """What a guarded start took (SPEC §3, §7.3.1): every later write of the job's stage must
    still own it (``state.sql``'s ``owns_claim``), so a job whose claim was taken over writes
    nothing.

    Attributes:
        previous: the stage's status before the start (``PENDING`` = fresh start,
            ``PROCESSING`` = re-claim).
        owner: the owner the start recorded — this process's id while its heartbeat lease runs,
            None when it is not live-registered (then the expiry is the only backstop).
        claimed_at: the start's database time (= the row's ``updated_at`` and ``owned_at``).
    """

    previous: Status
    owner: str | None
    claimed_at: datetime

    def params(self) -> dict[str, Any]:
        """The ``:owner`` / ``:claimed_at`` parameters of ``owns_claim``."""
        return {"owner": self.owner, "claimed_at": self.claimed_at}


def _claim(row: Sequence[Any] | None) -> Claim | None:
    """A start's returned row ``(previous_status, owner, claimed_at)`` as a Claim (None: 0 rows)."""
    if row is None:
        return None
    previous, owner, claimed_at = row
    return Claim(Status(previous), owner, claimed_at)


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
    """A stored, not deleted context vector: ``vector`` is ``(dim,)`` float32.

    ``text_sha256`` is None for a row embedded before an adoption (the reference stored no
    hash): such a vector is trusted for its profile (rule in :mod:`pinlog.ai.pipeline`).
    """

    vector: np.ndarray
    profile: str
    text_sha256: bytes | None


def _hash(value: Any) -> bytes | None:
    """A stored text hash as bytes; None stays None (hash-less rows from before an adoption)."""
    return bytes(value) if value is not None else None


def _stored(row: Sequence[Any] | None) -> StoredEmbedding | None:
    """A ``read_embedding`` row ``(embedding, profile, text_sha256)`` as a StoredEmbedding."""
    if row is None:
        return None
    embedding, profile, sha = row
    return StoredEmbedding(parse_pgvector(embedding), profile, _hash(sha))


async def precheck(conn: AsyncConnection, context_id: int) -> PreCheck | None:
    """Read both statuses and the stored embedding's profile/hash, no lock (SPEC §5.2 step 1).

    Returns:
        None when the state row is missing.
    """
    cursor = await _execute(conn, "precheck", {"context_ids": [int(context_id)]})
    return _prechecks(await cursor.fetchall()).get(int(context_id))


async def start_stage(conn: AsyncConnection, context_id: int, stage: Stage,
                      expiry: timedelta, owner: str | None = None) -> Claim | None:
    """Guarded start of ``stage`` (SPEC §3, §7.3, §7.3.1; ``state.sql``'s ``startable``):
    PENDING → PROCESSING, or re-claim a PROCESSING stage whose ``updated_at`` is older than
    ``expiry``, whose row's ``retry_count`` rose since it started, or whose recorded owner is
    gone. The keyword start also requires embedding COMPLETED. Records ``owner`` (this process's
    id; recorded only while its lease runs) and writes the event row in the same statement.

    Returns:
        The :class:`Claim` (previous status, recorded owner, claimed_at), or None when 0 rows were
        affected (stage owned by a live worker, finished, failed, cancelled or missing).
    """
    cursor = await _execute(conn, "start_stage", {"context_id": context_id, "expiry": expiry,
                                                  "owner": owner}, stage)
    return _claim(await cursor.fetchone())


async def fail_stage(conn: AsyncConnection, context_id: int, stage: Stage, error: str,
                     claim: Claim) -> bool:
    """Guarded PROCESSING → FAILED with ``last_error`` = ``error`` (SPEC §3, §5.5 permanent),
    only while the job owns ``claim`` (§7.3.1).

    Never overwrites CANCELLED/COMPLETED. Returns True when the row changed (event written).
    """
    cursor = await _execute(conn, "fail_stage", {
        "context_id": context_id, "error": error[:LAST_ERROR_MAX], "stage_label": stage.label,
        **claim.params()}, stage)
    return await cursor.fetchone() is not None


async def record_error(conn: AsyncConnection, context_id: int, stage: Stage, error: str,
                       claim: Claim) -> bool:
    """Write ``last_error``/``last_error_at`` (never ``updated_at``) while ``stage`` is PROCESSING
    and the job owns ``claim``, plus an event row with null from/to status (SPEC §5.5 transient).
    Returns True when written."""
    cursor = await _execute(conn, "record_error", {
        "context_id": context_id, "error": error[:LAST_ERROR_MAX], "stage_label": stage.label,
        **claim.params()}, stage)
    return await cursor.fetchone() is not None


async def take_over_sending(conn: AsyncConnection, context_ids: Sequence[int],
                            owner: str) -> list[int]:
    """Record ``owner`` (this live process) as the owner of the PENDING rows it accepted over
    HTTP (SPEC §7.3.1; ``state.sql``'s ``take_over_sending``): if it dies or stops before
    starting them, they are re-sent at once. Never a status change.

    Returns:
        the context ids whose owner changed.
    """
    cursor = await _execute(conn, "take_over_sending",
                            {"context_ids": [int(c) for c in context_ids], "owner": owner})
    return [int(row[0]) for row in await cursor.fetchall()]


async def insert_event(conn: AsyncConnection, context_id: int, stage: Stage, *,
                       from_status: Status | None, to_status: Status | None, reason: str) -> None:
    """Append one ``ai.context_ai_event`` row with actor ``ai`` (SPEC §2.2)."""
    await _execute(conn, "insert_event", {
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
    row = await (await _execute(conn, "lock_state", {"context_id": context_id})).fetchone()
    return (Status(row[0]), Status(row[1])) if row else None


async def upsert_lexical(conn: AsyncConnection, *, context_id: int, user_id: int, record_id: int,
                         note_terms: Sequence[str], place_terms: Sequence[str],
                         claim: Claim) -> bool:
    """Store the context's lexical terms while embedding is PROCESSING, the job owns ``claim``
    (SPEC §7.3.1) and its embedding is not marked deleted (SPEC §10, issue 28). Returns False
    when 0 rows were written."""
    cursor = await _execute(conn, "upsert_lexical", {**_lexical_params(
        context_id, user_id, record_id, note_terms, place_terms), **claim.params()})
    return cursor.rowcount == 1


async def upsert_embedding(conn: AsyncConnection, *, context_id: int, user_id: int,
                           record_id: int, vector: np.ndarray, profile: str,
                           text_sha256: bytes, claim: Claim) -> bool:
    """Store the ``(dim,)`` vector while embedding is PROCESSING and the job owns ``claim``;
    never touches or revives ``is_deleted`` (SPEC §5.2 step 2). Returns False when 0 rows were
    written (discard the save)."""
    cursor = await _execute(conn, "upsert_embedding", {**_embedding_params(
        context_id, user_id, record_id, vector, profile, text_sha256), **claim.params()})
    return cursor.rowcount == 1


async def complete_stage(conn: AsyncConnection, context_id: int, stage: Stage, claim: Claim,
                         reason: str = "completed") -> bool:
    """Guarded PROCESSING → COMPLETED (keyword: and embedding COMPLETED) while the job owns
    ``claim`` (SPEC §7.3.1), with its event row.

    Returns False when 0 rows changed (the caller rolls the save back).
    """
    cursor = await _execute(conn, "complete_stage", _completion_params(context_id, claim, reason),
                            stage)
    return await cursor.fetchone() is not None


async def replace_keywords(conn: AsyncConnection, context_id: int,
                           picks: Sequence[tuple[int, float | None]], preset_version: int,
                           claim: Claim) -> int:
    """Delete this context's keyword rows, then insert ``picks`` (``(keyword_id, confidence)``),
    both guarded by keyword PROCESSING + embedding COMPLETED + ``claim`` (SPEC §5.2 step 3).

    Returns:
        Number of keyword rows inserted.
    """
    await _execute(conn, "delete_keywords", {"context_id": context_id, **claim.params()})
    if not picks:
        return 0
    cursor = await _execute(conn, "insert_keywords",
                            {**_keyword_params(context_id, picks, preset_version),
                             **claim.params()})
    return cursor.rowcount


async def upsert_keyword_analysis(conn: AsyncConnection, context_id: int, *, preset_version: int,
                                  unmatched_concepts: Sequence[str], model_profile: str,
                                  claim: Claim, evidence: Sequence[Mapping[str, Any]] = (),
                                  embedding_profile: str | None = None) -> bool:
    """Upsert the analysis row (guarded like the keyword rows). Returns True when written."""
    cursor = await _execute(conn, "upsert_keyword_analysis", {**_analysis_params(
        context_id, preset_version, unmatched_concepts, model_profile, evidence,
        embedding_profile), **claim.params()})
    return cursor.rowcount == 1


async def read_embedding(conn: AsyncConnection, context_id: int) -> StoredEmbedding | None:
    """The stored, not deleted vector of ``context_id`` (``(dim,)`` float32) or None."""
    row = await (await _execute(conn, "read_embedding", {"context_id": context_id})).fetchone()
    return _stored(row)


async def ai_tables_present(conn: AsyncConnection) -> bool:
    """True when every ``ai.*`` table exists (SPEC §2.2: refuse to start otherwise)."""
    return (await (await _execute(conn, "ai_tables_present")).fetchone())[0] == 9


async def stored_dimensions(conn: AsyncConnection, profile: str,
                            dimension: int) -> tuple[list[int], int | None]:
    """Lengths of the vectors stored for ``profile`` (SPEC §9 start-up check).

    Returns:
        ``(preset vector lengths, sorted; the length of one stored context embedding that is not
        dimension, or None when all match)``.
    """
    rows = await (await _execute(conn, "preset_dimensions", {"profile": profile})).fetchall()
    presets = sorted(int(r[0]) for r in rows)
    other = await (await _execute(conn, "other_embedding_dimension",
                                  {"profile": profile, "dimension": dimension})).fetchone()
    return presets, (int(other[0]) if other is not None else None)


async def preset_fingerprint(conn: AsyncConnection, profile: str) -> str:
    """md5 over every preset row and its vector timestamp for ``profile`` (cheap: no vectors
    read); changes whenever anything a snapshot depends on changes."""
    return (await (await _execute(conn, "preset_fingerprint", {"profile": profile})).fetchone())[0]


# --- round-trip-saving compositions used by the pipeline (SPEC §5.2, §5.4) --------------------
# Each sends the named guarded statements above, in order, in ONE round trip (psycopg pipeline
# mode). The server still runs them one after the other inside the caller's transaction, every
# statement keeps its own guard, and the caller commits only when every guard matched.


async def save_embedding(conn: AsyncConnection, *, context_id: int, user_id: int, record_id: int,
                         vector: np.ndarray, profile: str, text_sha256: bytes,
                         claim: Claim, shadow: Mapping[str, np.ndarray] | None = None,
                         note_terms: Sequence[str] = (), place_terms: Sequence[str] = ()) -> bool:
    """Embedding save (SPEC §5.2 step 2), inside the caller's transaction: the profile lock
    (shared), :func:`lock_state`, :func:`upsert_embedding` (only while ``profile`` is the active
    one, SPEC §9.1), the ``shadow`` vectors (``profile → (dim,) vector``: the building
    profile's, written only while it is building; they never decide the save),
    :func:`upsert_lexical` (the lexical terms of the request's text and placeMeta, SPEC §10),
    then :func:`complete_stage` — each guarded by ``claim`` (§7.3.1). Returns True when every
    guard matched (commit), False when any affected 0 rows (roll back and discard; the caller
    may retry under the new active profile, :class:`pinlog.ai.pipeline.Pipeline`)."""
    driver = await driver_connection(conn)
    owned = claim.params()
    async with driver.pipeline():
        await _execute(conn, "lock_profiles_shared")
        await _execute(conn, "lock_state", {"context_id": context_id})
        upsert = await _execute(conn, "upsert_embedding", {**_embedding_params(
            context_id, user_id, record_id, vector, profile, text_sha256), **owned})
        for other, other_vector in (shadow or {}).items():
            await _execute(conn, "upsert_shadow_embedding", {**_embedding_params(
                context_id, user_id, record_id, other_vector, other, text_sha256), **owned})
        lexical = await _execute(conn, "upsert_lexical", {**_lexical_params(
            context_id, user_id, record_id, note_terms, place_terms), **owned})
        complete = await _execute(conn, "complete_stage",
                                  _completion_params(context_id, claim), Stage.EMBEDDING)
    return (upsert.rowcount == 1 and lexical.rowcount == 1
            and await complete.fetchone() is not None)


async def save_keywords(conn: AsyncConnection, context_id: int, *,
                        picks: Sequence[tuple[int, float | None]], preset_version: int,
                        unmatched_concepts: Sequence[str], model_profile: str, claim: Claim,
                        evidence: Sequence[Mapping[str, Any]] = (),
                        embedding_profile: str | None = None) -> bool:
    """Keyword save (SPEC §5.2 step 3), inside the caller's transaction: :func:`lock_state`,
    delete + insert the keyword rows, upsert the analysis row (with the judge's ``evidence``,
    JSON-able mappings, SPEC §8, and the ``embedding_profile`` judged, SPEC §9.1), guarded
    complete — each guarded by ``claim`` (§7.3.1). Returns True when every guard matched
    (commit), False otherwise (roll back and discard)."""
    driver = await driver_connection(conn)
    owned = claim.params()
    async with driver.pipeline():
        await _execute(conn, "lock_state", {"context_id": context_id})
        await _execute(conn, "delete_keywords", {"context_id": context_id, **owned})
        insert = None
        if picks:
            insert = await _execute(conn, "insert_keywords",
                                    {**_keyword_params(context_id, picks, preset_version),
                                     **owned})
        analysis = await _execute(conn, "upsert_keyword_analysis", {**_analysis_params(
            context_id, preset_version, unmatched_concepts, model_profile, evidence,
            embedding_profile), **owned})
        complete = await _execute(conn, "complete_stage",
                                  _completion_params(context_id, claim), Stage.KEYWORD)
    inserted = insert.rowcount if insert is not None else 0
    return (inserted == len(picks) and analysis.rowcount == 1
            and await complete.fetchone() is not None)


async def start_keyword_and_read(conn: AsyncConnection, context_id: int, expiry: timedelta,
                                 profile: str, owner: str | None = None
                                 ) -> tuple[Claim | None, StoredEmbedding | None, str]:
    """Guarded keyword start (SPEC §3, §7.3.1; records ``owner``) followed by the reads its stage
    needs — the stored vector and the presets' fingerprint — in one round trip. The reads change
    nothing; when the start affected 0 rows their results are simply not used.

    Returns:
        ``(claim or None, stored embedding or None, preset fingerprint)``.
    """
    driver = await driver_connection(conn)
    async with driver.pipeline():
        start = await _execute(conn, "start_stage", {"context_id": context_id,
                                                     "expiry": expiry, "owner": owner},
                               Stage.KEYWORD)
        stored = await _execute(conn, "read_embedding", {"context_id": context_id})
        fingerprint = await _execute(conn, "preset_fingerprint", {"profile": profile})
    claim = _claim(await start.fetchone())
    embedding = _stored(await stored.fetchone())
    return claim, embedding, (await fingerprint.fetchone())[0]


# --- the batch path (SPEC §5.4; docs/ARCHITECTURE.md "Batch path") ---------------------------
# One statement per step for many contexts (arrays as parameters, unique ids). Each repeats the
# single statement's guard for every row (the same fragment of state.sql); a row whose guard
# fails is absent from the result — 0 rows for that context, a normal outcome. Every batch start
# returns each started row's Claim and every batch save carries each row's own Claim
# (owns_claim per row, SPEC §7.3.1).


@dataclass(frozen=True)
class EmbeddingRow:
    """One context's embedding result for :func:`save_embeddings_batch`: ``vector`` ``(dim,)``
    float32 of the active profile (already checked: :func:`pinlog.ai.vectors.check_embeddings`),
    ``shadow`` the building profile's ``(dim,)`` vector when this replica made one (SPEC §9.1),
    ``claim`` the row's claim from its batch start (§7.3.1), ``note_terms`` / ``place_terms``
    the lexical terms of the request's text and placeMeta (SPEC §10, ``upsert_lexical_batch``)."""

    context_id: int
    user_id: int
    record_id: int
    vector: np.ndarray
    text_sha256: bytes
    claim: Claim
    shadow: np.ndarray | None = None
    note_terms: Sequence[str] = ()
    place_terms: Sequence[str] = ()


@dataclass(frozen=True)
class KeywordRow:
    """One context's keyword result for :func:`save_keywords_batch`: ``picks`` are
    ``(keyword_id, confidence)`` (unique ids among the candidates), the judge's
    ``unmatched_concepts``, ``model_profile`` and ``evidence`` (JSON-able mappings), the
    ``embedding_profile`` judged (SPEC §9.1) and the row's ``claim`` from its keyword start
    (§7.3.1)."""

    context_id: int
    picks: Sequence[tuple[int, float | None]]
    unmatched_concepts: Sequence[str]
    model_profile: str
    claim: Claim
    evidence: Sequence[Mapping[str, Any]] = ()
    embedding_profile: str | None = None


def _ids(context_ids: Sequence[int]) -> list[int]:
    """The ids as a list, refusing duplicates (a batch statement handles each row once)."""
    ids = [int(i) for i in context_ids]
    if len(set(ids)) != len(ids):
        raise ValueError("duplicate context ids in a batch")
    return ids


def _claims_params(claims: Sequence[Claim]) -> dict[str, Any]:
    """The ``:owners`` / ``:claimed_ats`` arrays of ``batch_claims`` (parallel to
    ``:context_ids``)."""
    return {"owners": [c.owner for c in claims], "claimed_ats": [c.claimed_at for c in claims]}


def _prechecks(rows: Sequence[Sequence[Any]]) -> dict[int, PreCheck]:
    return {int(cid): PreCheck(Status(emb), Status(kw), profile, _hash(sha))
            for cid, emb, kw, profile, sha in rows}


def _started(rows: Sequence[Sequence[Any]]) -> dict[int, Claim]:
    """A batch start's rows ``(context_id, previous_status, owner, claimed_at)`` as Claims."""
    return {int(cid): Claim(Status(previous), owner, claimed_at)
            for cid, previous, owner, claimed_at in rows}


async def precheck_batch(conn: AsyncConnection, context_ids: Sequence[int]) -> dict[int, PreCheck]:
    """:func:`precheck` for many contexts (no lock). Returns context id → PreCheck; a missing
    state row is absent. Raises ValueError for duplicate ids."""
    cursor = await _execute(conn, "precheck", {"context_ids": _ids(context_ids)})
    return _prechecks(await cursor.fetchall())


async def start_stage_batch(conn: AsyncConnection, context_ids: Sequence[int], stage: Stage,
                            expiry: timedelta, owner: str | None = None) -> dict[int, Claim]:
    """Guarded start of ``stage`` for many contexts (SPEC §3, §7.3.1, §7.4): each row only while
    the single start's predicate (``startable``) holds, ``FOR UPDATE SKIP LOCKED`` (a row
    locked elsewhere is skipped: two batches never claim one row), recording ``owner`` as the
    single start does, event row per start.

    Returns:
        context id → :class:`Claim` (previous status: ``PENDING`` fresh, ``PROCESSING``
        re-claim; owner recorded; claimed_at) for the rows started; the others affected 0 rows.
        Raises ValueError for duplicate ids.
    """
    cursor = await _execute(conn, "start_stage_batch", {"context_ids": _ids(context_ids),
                                                        "expiry": expiry, "owner": owner}, stage)
    return _started(await cursor.fetchall())


def _vectors(vectors: Sequence[np.ndarray], dimension: int) -> Float4Array:
    """``len(vectors) × dimension`` float32 values as one binary ``real[]``."""
    matrix = np.empty((len(vectors), dimension), dtype=np.float32)
    for i, vector in enumerate(vectors):
        matrix[i] = vector
    return Float4Array(matrix)


def _embedding_batch_params(rows: Sequence[EmbeddingRow], profile: str,
                            dimension: int) -> dict[str, Any]:
    """Parameters of ``save_embeddings_batch``: parallel arrays (ids, claims), the vectors as one
    binary ``real[]`` (:class:`~pinlog.ai.vectors.Float4Array`) of ``len(rows) × dimension``."""
    return {"context_ids": _ids([r.context_id for r in rows]),
            "user_ids": [r.user_id for r in rows], "record_ids": [r.record_id for r in rows],
            "text_sha256s": [r.text_sha256 for r in rows],
            "embeddings": _vectors([r.vector for r in rows], dimension),
            "dimension": dimension, "profile": profile,
            **_claims_params([r.claim for r in rows])}


def _shadow_batch_params(rows: Sequence[EmbeddingRow], profile: str,
                         dimension: int) -> dict[str, Any]:
    """Parameters of ``upsert_shadow_embeddings_batch``: the rows with a shadow vector."""
    return {"context_ids": [r.context_id for r in rows],
            "text_sha256s": [r.text_sha256 for r in rows],
            "embeddings": _vectors([r.shadow for r in rows if r.shadow is not None], dimension),
            "dimension": dimension, "profile": profile,
            **_claims_params([r.claim for r in rows])}


def _lexical_batch_params(rows: Sequence[EmbeddingRow]) -> dict[str, Any]:
    """Parameters of ``upsert_lexical_batch``: the rows' claims (``batch_claims``) and every
    row's ids and terms as one JSON array."""
    return {"context_ids": [r.context_id for r in rows], **_claims_params([r.claim for r in rows]),
            "rows": json.dumps([
                {"context_id": r.context_id, "user_id": r.user_id, "record_id": r.record_id,
                 "note_terms": list(r.note_terms), "place_terms": list(r.place_terms)}
                for r in rows], ensure_ascii=False)}


async def save_embeddings_batch(conn: AsyncConnection, rows: Sequence[EmbeddingRow], *,
                                profile: str, dimension: int, shadow_profile: str | None = None,
                                shadow_dimension: int | None = None) -> set[int]:
    """Embedding save of many contexts (SPEC §5.2 step 2, §9.1), inside the caller's
    transaction, in one round trip: the profile lock (shared), ``lock_states_batch``, the
    building profile's vectors (``upsert_shadow_embeddings_batch``: rows with ``shadow``, only
    while ``shadow_profile`` is building; never decides the save), the ai side's lexical terms
    (``upsert_lexical_batch``, SPEC §10, under the same guard), then ``save_embeddings_batch``.
    Each row is stored and completed only while its embedding stage is PROCESSING, the row's
    ``claim`` is still owned (§7.3.1) and ``profile`` is the active one (never reviving
    ``is_deleted``); the others write nothing, so the caller always commits.

    Args:
        rows: unique context ids; vectors of ``dimension`` float32 values (shadow vectors of
            ``shadow_dimension``).

    Returns:
        the context ids completed (the rest were discarded by their guard).

    Raises:
        ValueError: duplicate ids, or a vector of another length.
    """
    if not rows:
        return set()
    if any(r.vector.shape != (dimension,) for r in rows):
        raise ValueError("a vector of another length than the dimension")
    params = _embedding_batch_params(rows, profile, dimension)
    shadowed = [r for r in rows if r.shadow is not None] if shadow_profile else []
    if shadowed and any(r.shadow is not None and r.shadow.shape != (shadow_dimension,)
                        for r in shadowed):
        raise ValueError("a shadow vector of another length than the shadow dimension")
    driver = await driver_connection(conn)
    async with driver.pipeline():
        await _execute(conn, "lock_profiles_shared")
        await _execute(conn, "lock_states_batch", {"context_ids": params["context_ids"]})
        if shadowed:
            assert shadow_profile is not None and shadow_dimension is not None
            await _execute(conn, "upsert_shadow_embeddings_batch",
                           _shadow_batch_params(shadowed, shadow_profile, shadow_dimension))
        await _execute(conn, "upsert_lexical_batch", _lexical_batch_params(rows))
        saved = await _execute(conn, "save_embeddings_batch", {**params, "reason": "completed"},
                               Stage.EMBEDDING)
    return {int(row[0]) for row in await saved.fetchall()}


async def read_embeddings_batch(conn: AsyncConnection,
                                context_ids: Sequence[int]) -> dict[int, StoredEmbedding]:
    """The stored, not deleted vectors of many contexts: context id → StoredEmbedding."""
    if not context_ids:
        return {}
    cursor = await _execute(conn, "read_embeddings_batch", {"context_ids": _ids(context_ids)})
    return _stored_rows(await cursor.fetchall())


def _stored_rows(rows: Sequence[Sequence[Any]]) -> dict[int, StoredEmbedding]:
    """``read_embeddings_batch`` rows as context id → StoredEmbedding."""
    out: dict[int, StoredEmbedding] = {}
    for cid, *stored in rows:
        embedding = _stored(stored)
        assert embedding is not None
        out[int(cid)] = embedding
    return out


def _keyword_batch_params(rows: Sequence[KeywordRow], preset_version: int) -> dict[str, Any]:
    """Parameters of the keyword batch statements: the rows' ids and claims, one flattened pick
    list (parallel context / keyword / confidence arrays, 3 decimals) and the analysis rows as one
    JSON array."""
    ids = _ids([r.context_id for r in rows])
    pick_ids: list[int] = []
    keyword_ids: list[int] = []
    confidences: list[float | None] = []
    for row in rows:
        for keyword_id, confidence in row.picks:
            pick_ids.append(row.context_id)
            keyword_ids.append(int(keyword_id))
            confidences.append(None if confidence is None else round(float(confidence), 3))
    analyses = [{"context_id": r.context_id, "unmatched_concepts": list(r.unmatched_concepts),
                 "model_profile": r.model_profile, "evidence": [dict(e) for e in r.evidence],
                 "embedding_profile": r.embedding_profile}
                for r in rows]
    return {"context_ids": ids, "preset_version": preset_version,
            "pick_context_ids": pick_ids, "keyword_ids": keyword_ids, "confidences": confidences,
            "analyses": json.dumps(analyses, ensure_ascii=False),
            **_claims_params([r.claim for r in rows])}


async def save_keywords_batch(conn: AsyncConnection, rows: Sequence[KeywordRow], *,
                              preset_version: int) -> set[int]:
    """Keyword save of many contexts (SPEC §5.2 step 3), inside the caller's transaction, in one
    round trip: ``lock_states_batch``, delete + insert the keyword rows, upsert the analysis
    rows, guarded complete. Every statement carries the same guard (keyword PROCESSING,
    embedding COMPLETED and the row's own ``claim`` still owned, §7.3.1) under the lock, so a
    row is either wholly written and completed or not touched; the caller always commits.

    Returns:
        the context ids completed (the rest were discarded by their guard).

    Raises:
        ValueError: duplicate ids.
    """
    if not rows:
        return set()
    params = _keyword_batch_params(rows, preset_version)
    claims = {k: params[k] for k in ("context_ids", "owners", "claimed_ats")}
    driver = await driver_connection(conn)
    async with driver.pipeline():
        await _execute(conn, "lock_states_batch", {"context_ids": params["context_ids"]})
        await _execute(conn, "delete_keywords_batch", claims)
        if params["pick_context_ids"]:
            await _execute(conn, "insert_keywords_batch", {**claims, **{
                k: params[k] for k in ("pick_context_ids", "keyword_ids", "confidences",
                                       "preset_version")}})
        await _execute(conn, "upsert_keyword_analysis_batch", {**claims, **{
            k: params[k] for k in ("preset_version", "analyses")}})
        completed = await _execute(conn, "complete_stage", {**claims, "reason": "completed"},
                                   Stage.KEYWORD)
    return {int(row[0]) for row in await completed.fetchall()}


async def precheck_and_start_embedding_batch(
        conn: AsyncConnection, context_ids: Sequence[int], expiry: timedelta,
        owner: str | None = None) -> tuple[dict[int, PreCheck], dict[int, Claim]]:
    """``precheck`` and ``start_stage_batch`` (embedding; recording ``owner``) over the same ids in
    one round trip.

    Starting every row unconditionally is exactly what a job does after its pre-check: the
    guard starts only PENDING (or re-claimable PROCESSING) embedding stages, and no such stage
    is one the pre-check would stop (missing row, a contract violation or a reuse need a
    COMPLETED embedding; "nothing to do" has none unfinished). The pre-check read runs first,
    so it shows the rows as they were before this start.

    Returns:
        ``(context id → PreCheck, context id → Claim for the rows started)``.
    """
    ids = _ids(context_ids)
    driver = await driver_connection(conn)
    async with driver.pipeline():
        pre = await _execute(conn, "precheck", {"context_ids": ids})
        start = await _execute(conn, "start_stage_batch",
                               {"context_ids": ids, "expiry": expiry, "owner": owner},
                               Stage.EMBEDDING)
    prechecks = _prechecks(await pre.fetchall())
    return prechecks, _started(await start.fetchall())


async def start_keyword_batch_and_read(
        conn: AsyncConnection, context_ids: Sequence[int], expiry: timedelta, profile: str,
        read_ids: Sequence[int], owner: str | None = None
) -> tuple[dict[int, Claim], dict[int, StoredEmbedding], str]:
    """``start_stage_batch`` (keyword) over ``context_ids`` (recording ``owner``), the stored vectors of
    ``read_ids`` and the presets' fingerprint for ``profile``, in one round trip (the reads
    change nothing; vectors of rows that did not start are simply not used).

    Returns:
        ``(context id → Claim, context id → stored embedding, fingerprint)``.
    """
    ids = _ids(context_ids)
    driver = await driver_connection(conn)
    async with driver.pipeline():
        start = await _execute(conn, "start_stage_batch",
                               {"context_ids": ids, "expiry": expiry, "owner": owner},
                               Stage.KEYWORD)
        stored = None
        if read_ids:
            stored = await _execute(conn, "read_embeddings_batch",
                                    {"context_ids": _ids(read_ids)})
        fingerprint = await _execute(conn, "preset_fingerprint", {"profile": profile})
    started = _started(await start.fetchall())
    vectors = _stored_rows(await stored.fetchall()) if stored is not None else {}
    return started, vectors, (await fingerprint.fetchone())[0]
