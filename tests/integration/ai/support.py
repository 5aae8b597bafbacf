"""Helpers for ai tests on the real PostgreSQL: seed rows with plain SQL (what core would do),
read state back, and do core's cancellation ("delete") over a separate connection."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import psycopg

from pinlog.ai import state
from pinlog.ai.state import Claim
from pinlog.contracts import ProcessRequest
from pinlog.settings import Settings
from pinlog.states import Status
from tests.conftest import make_settings

DIM = 8
PROFILE = "fake-profile-v1"


def basis(i: int, dim: int = DIM) -> list[float]:
    """Unit vector ``e_i`` (presets and texts built from these have controlled similarity)."""
    v = [0.0] * dim
    v[i] = 1.0
    return v


def mix(*weights: tuple[int, float], dim: int = DIM) -> list[float]:
    v = np.zeros(dim)
    for i, w in weights:
        v[i] = w
    return list(v / np.linalg.norm(v))


def vec_text(v: list[float]) -> str:
    return "[" + ",".join(str(float(x)) for x in v) + "]"


#: Presets of the tests: id → (code, category, vector, visibility).
PRESETS = {
    101: ("WITH_FRIENDS", "COMPANION", basis(0), "PUBLIC"),
    201: ("WORK_STUDY", "ACTIVITY", basis(1), "PUBLIC"),
    301: ("QUIET", "ATMOSPHERE", basis(2), "PUBLIC"),
    302: ("COZY", "ATMOSPHERE", mix((2, 0.9), (3, 0.436)), "PRIVATE_ONLY"),
    401: ("HIDDEN_BLOCKED", "SITUATION", basis(4), "BLOCKED"),
}

#: Texts with controlled vectors (FakeEmbeddingProvider(vectors=TEXT_VECTORS)).
TEXT_VECTORS = {
    "친구들이랑 떠들기 좋은 곳": basis(0),
    "조용히 책 읽기 좋은 카페": mix((2, 0.95), (1, 0.31)),
    "blocked topic": basis(4),
    "nothing matches this": basis(7),
}
QUIET_TEXT = "조용히 책 읽기 좋은 카페"
FRIENDS_TEXT = "친구들이랑 떠들기 좋은 곳"
BLOCKED_TEXT = "blocked topic"
NOMATCH_TEXT = "nothing matches this"


def seed_presets(conn: psycopg.Connection, profile: str = PROFILE, presets=None) -> None:
    """Insert presets and their vectors for ``profile`` (plain SQL)."""
    for pid, (code, category, vector, visibility) in (presets or PRESETS).items():
        conn.execute(
            "INSERT INTO ai.keyword_preset (id, code, display_name, category, description, "
            "examples, visibility) VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (id) DO NOTHING",
            (pid, code, code.title(), category, f"{code} description", ["ex one", "ex two"],
             visibility))
        conn.execute(
            "INSERT INTO ai.keyword_preset_embedding (preset_id, embedding_profile, embedding) "
            "VALUES (%s, %s, %s::vector)", (pid, profile, vec_text(vector)))


def insert_state(conn: psycopg.Connection, context_id: int, embedding: str = "PENDING",
                 keyword: str = "PENDING", *, age_seconds: float = 0,
                 owner: str | None = None) -> None:
    """A state row as core creates it (optionally with statuses and an old ``updated_at``).
    Its owner record (SPEC §7.3.1) is ``owner`` (default none: unknown) with ``owned_at`` =
    ``updated_at``, as a start leaves it — so :func:`claim_of` is the claim of the job that
    started a PROCESSING stage inserted here."""
    conn.execute(
        "INSERT INTO ai.context_ai_state (context_id, embedding_status, keyword_status, updated_at,"
        " owner, owned_at) VALUES (%s, %s, %s, now() - make_interval(secs => %s), %s,"
        " now() - make_interval(secs => %s))",
        (context_id, embedding, keyword, age_seconds, owner, age_seconds))


def claim_of(conn: psycopg.Connection, context_id: int) -> Claim:
    """The claim held on the row as it is now (its recorded owner, ``owned_at``): what the job
    that started its PROCESSING stage carries into its writes (SPEC §7.3.1)."""
    row = conn.execute("SELECT owner, owned_at FROM ai.context_ai_state WHERE context_id = %s",
                       (context_id,)).fetchone()
    assert row is not None, f"no state row {context_id}"
    return Claim(Status.PROCESSING, row[0], row[1])


def insert_embedding(conn: psycopg.Connection, context_id: int, vector: list[float], *,
                     profile: str = PROFILE, text: str = "", user_id: int = 1, record_id: int = 1,
                     is_deleted: bool = False) -> None:
    import hashlib

    conn.execute(
        "INSERT INTO ai.context_embedding (context_id, user_id, record_id, embedding, "
        "embedding_profile, text_sha256, is_deleted) VALUES (%s, %s, %s, %s::vector, %s, %s, %s)",
        (context_id, user_id, record_id, vec_text(vector), profile,
         hashlib.sha256(text.encode()).digest(), is_deleted))


async def save_claimed_embedding(engine, claim: Claim, *, user_id: int = 7, record_id: int = 70,
                                 text_sha256: bytes = b"\x01" * 32) -> bool:
    """Run the guarded embedding save of context 1 (vector ``basis(0)``, profile "p") under
    ``claim`` in its own transaction: committed when it saved (True), rolled back when the
    claim no longer holds (False, nothing written; SPEC §7.3.1)."""
    async with engine.connect() as conn:
        transaction = await conn.begin()
        saved = await state.save_embedding(conn, context_id=1, user_id=user_id, record_id=record_id,
                                           vector=np.asarray(basis(0), dtype=np.float32),
                                           profile="p", text_sha256=text_sha256, claim=claim)
        await (transaction.commit() if saved else transaction.rollback())
    return saved


def core_cancel(conn: psycopg.Connection, context_id: int) -> None:
    """What core's delete/edit does to the ai rows (SPEC §4): both stages CANCELLED
    (unconditionally), embedding ``is_deleted``; committed at once (autocommit connection)."""
    with conn.transaction():
        conn.execute(
            "UPDATE ai.context_ai_state SET embedding_status = 'CANCELLED', "
            "keyword_status = 'CANCELLED', updated_at = now() WHERE context_id = %s", (context_id,))
        conn.execute("UPDATE ai.context_embedding SET is_deleted = true WHERE context_id = %s",
                     (context_id,))


@dataclass
class StateRow:
    embedding_status: str
    keyword_status: str
    retry_count: int
    updated_at: object
    last_error: str | None
    last_error_at: object


def read_state(conn: psycopg.Connection, context_id: int) -> StateRow | None:
    row = conn.execute(
        "SELECT embedding_status, keyword_status, retry_count, updated_at, last_error, "
        "last_error_at FROM ai.context_ai_state WHERE context_id = %s", (context_id,)).fetchone()
    return StateRow(*row) if row else None


def statuses(conn: psycopg.Connection, context_id: int) -> tuple[str, str] | None:
    row = read_state(conn, context_id)
    return (row.embedding_status, row.keyword_status) if row else None


def _of_context(conn: psycopg.Connection, context_id: int, columns: str, table: str,
                order: str | None = None) -> psycopg.Cursor:
    """``SELECT columns FROM table WHERE context_id = …`` (test-owned SQL, names are constants)."""
    sql = f"SELECT {columns} FROM {table} WHERE context_id = %s"
    return conn.execute(sql + (f" ORDER BY {order}" if order else ""), (context_id,))


def embedding_rows(conn: psycopg.Connection, context_id: int) -> list[tuple]:
    return _of_context(conn, context_id, "embedding_profile, is_deleted, vector_dims(embedding), "
                       "text_sha256", "ai.context_embedding").fetchall()


def keyword_rows(conn: psycopg.Connection, context_id: int) -> list[tuple]:
    return _of_context(conn, context_id, "keyword_id, confidence, preset_version",
                       "ai.context_keyword", order="keyword_id").fetchall()


def analysis_row(conn: psycopg.Connection, context_id: int) -> tuple | None:
    return _of_context(conn, context_id, "preset_version, unmatched_concepts, model_profile",
                       "ai.context_keyword_analysis").fetchone()


def events(conn: psycopg.Connection, context_id: int) -> list[tuple]:
    """``(stage, from_status, to_status, actor, reason)`` in order."""
    return _of_context(conn, context_id, "stage, from_status, to_status, actor, reason",
                       "ai.context_ai_event", order="id").fetchall()


def request(context_id: int, text: str = QUIET_TEXT, *, user_id: int = 7,
            record_id: int = 70) -> ProcessRequest:
    return ProcessRequest(context_id=context_id, user_id=user_id, record_id=record_id, text=text)


def ai_settings_for(tmp_path: Path, db_url: str, **overrides: object) -> Settings:
    """Test settings for the fake profile (:data:`PROFILE`, :data:`DIM`) with short timeouts."""
    values: dict[str, object] = {
        "embedding_profile": PROFILE, "embedding_dimension": DIM, "candidate_floor": 0.5,
        "embedding_timeout": 5.0, "llm_timeout": 5.0, "embedding_batch_wait_ms": 1.0,
    }
    values.update(overrides)
    return make_settings(tmp_path, db_url, **values)
