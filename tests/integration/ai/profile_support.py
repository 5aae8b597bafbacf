"""A world for the profile-switch tests (SPEC §9.1) on the real PostgreSQL: notes COMPLETED
on profile A (the fake profile, 8 dimensions), a second profile B of another dimension whose
vectors rank the notes differently, so a search answer tells which profile it came from.

Note ``i`` (context id = record id = ``i``) lies on axis ``i % 4`` under A and on axis
``(i + 1) % 4`` under B; the query ``"axis k"`` is ``e_k`` under both, so under A it finds the
notes with ``i % 4 == k`` and under B those with ``i % 4 == k - 1``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence

import psycopg

from pinlog.ai.calibration import GENERIC
from pinlog.ai.providers import MicroBatcher
from pinlog.ai.routing import ProfileModels
from pinlog.contracts import SearchRequest
from tests.fakes import FakeEmbeddingProvider, FakeJudge
from tests.integration.ai.support import DIM, PROFILE, basis, seed_presets, vec_text

PROFILE_A, DIM_A = PROFILE, DIM
PROFILE_B, DIM_B = "fake-profile-b", 6
USER = 7
AXES = 4


def note(i: int) -> str:
    return f"note number {i}"


def query(k: int) -> str:
    return f"axis {k}"


def axis(i: int, profile: str) -> int:
    return i % AXES if profile == PROFILE_A else (i + 1) % AXES


def vectors(profile: str, n: int, extra: Sequence[int] = ()) -> dict[str, list[float]]:
    """``text → vector`` of a fake provider of ``profile`` for notes 1..n (and ``extra``) and
    the queries."""
    dim = DIM_A if profile == PROFILE_A else DIM_B
    out = {note(i): basis(axis(i, profile), dim) for i in [*range(1, n + 1), *extra]}
    out |= {query(k): basis(k, dim) for k in range(AXES)}
    return out


def provider_a(n: int, extra: Sequence[int] = ()) -> FakeEmbeddingProvider:
    return FakeEmbeddingProvider(PROFILE_A, DIM_A, vectors=vectors(PROFILE_A, n, extra))


def provider_b(n: int, extra: Sequence[int] = ()) -> FakeEmbeddingProvider:
    return FakeEmbeddingProvider(PROFILE_B, DIM_B, vectors=vectors(PROFILE_B, n, extra))


def expected(k: int, n: int, profile: str) -> list[int]:
    """Record ids a search for ``query(k)`` answers under ``profile`` (all notes of the axis;
    they tie at cosine 1, ordered by record id)."""
    return [i for i in range(1, n + 1) if axis(i, profile) == k]


def seed_world(conn: psycopg.Connection, n: int) -> None:
    """Core rows (member 7, a place + record + context per note) and the ai rows of notes 1..n:
    both stages COMPLETED, the A vector, one keyword judged before profiles were recorded."""
    seed_presets(conn)
    conn.execute("INSERT INTO core.member (id, external_ref) OVERRIDING SYSTEM VALUE "
                 "VALUES (%s, 'world')", (USER,))
    for i in range(1, n + 1):
        add_note(conn, i)


def add_note(conn: psycopg.Connection, i: int, *, state: tuple[str, str] = ("COMPLETED",
                                                                           "COMPLETED"),
             embedded: bool = True) -> None:
    """Note ``i`` in core and its ai rows (with the A vector when ``embedded``)."""
    conn.execute("INSERT INTO core.place (id, external_place_id, name, lat, lng) "
                 "OVERRIDING SYSTEM VALUE VALUES (%s, %s, %s, 37.5, 127.0)",
                 (i, f"p{i}", f"place {i}"))
    conn.execute("INSERT INTO core.record (id, member_id, place_id) OVERRIDING SYSTEM VALUE "
                 "VALUES (%s, %s, %s)", (i, USER, i))
    conn.execute("INSERT INTO core.context (id, record_id, member_id, body) "
                 "OVERRIDING SYSTEM VALUE VALUES (%s, %s, %s, %s)", (i, i, USER, note(i)))
    # owned_at = updated_at, as a start leaves it (SPEC §7.3.1: claim_of is then the claim of
    # the job that started a PROCESSING stage inserted here)
    conn.execute("INSERT INTO ai.context_ai_state (context_id, embedding_status, keyword_status, "
                 "owned_at) VALUES (%s, %s, %s, now())", (i, *state))
    if embedded:
        conn.execute(
            "INSERT INTO ai.context_embedding (context_id, user_id, record_id, embedding, "
            "embedding_profile, text_sha256) VALUES (%s, %s, %s, %s::vector, %s, %s)",
            (i, USER, i, vec_text(basis(axis(i, PROFILE_A), DIM_A)), PROFILE_A,
             hashlib.sha256(note(i).encode()).digest()))
    if state[1] == "COMPLETED":
        conn.execute("INSERT INTO ai.context_keyword VALUES (%s, 101, 0.9, 1)", (i,))
        conn.execute("INSERT INTO ai.context_keyword_analysis (context_id, preset_version, "
                     "model_profile) VALUES (%s, 1, 'fake-judge-v1')", (i,))


class Texts:
    """A :class:`pinlog.ai.profiles.TextSource` over note texts, counting the ids asked for
    (``deleted`` ids are left out, as core leaves out deleted contexts)."""

    def __init__(self, n: int, extra: Sequence[int] = ()) -> None:
        self.texts = {i: note(i) for i in [*range(1, n + 1), *extra]}
        self.deleted: set[int] = set()
        self.asked: list[int] = []
        #: called with the ids of each fetch, after it was read (a hook between the loop's
        #: fetch and its write)
        self.on_fetch: Callable[[Sequence[int]], None] | None = None

    async def __call__(self, context_ids: Sequence[int]) -> Mapping[int, str]:
        self.asked += list(context_ids)
        if self.on_fetch is not None:
            self.on_fetch(context_ids)
        return {i: self.texts[i] for i in context_ids if i in self.texts and i not in self.deleted}


def models(provider: FakeEmbeddingProvider, *, batch_size: int = 8,
           judge: FakeJudge | None = None) -> ProfileModels:
    """The profile's models with the fake provider micro-batched (as production embeds)."""
    batched = MicroBatcher(provider, batch_size=batch_size, wait_ms=1.0)
    return ProfileModels(provider.profile, batched, GENERIC, judge)


def search_request(k: int, profile: str = PROFILE_A) -> SearchRequest:
    return SearchRequest(user_id=USER, query=query(k), limit=100, embedding_profile=profile)


def shadow_rows(conn: psycopg.Connection, profile: str) -> dict[int, int]:
    """``context_id → vector length`` of the shadow vectors of ``profile``."""
    return dict(conn.execute("SELECT context_id, vector_dims(embedding) FROM "
                             "ai.context_embedding_shadow WHERE embedding_profile = %s "
                             "ORDER BY 1", (profile,)).fetchall())


def main_profiles(conn: psycopg.Connection) -> dict[int, str]:
    """``context_id → profile`` of the active table."""
    return dict(conn.execute("SELECT context_id, embedding_profile FROM ai.context_embedding "
                             "ORDER BY 1").fetchall())


def roles(conn: psycopg.Connection) -> dict[str, str]:
    return dict(conn.execute("SELECT profile, role FROM ai.embedding_profile").fetchall())


def state_snapshot(conn: psycopg.Connection) -> list[tuple]:
    """Every state row as it is (statuses, retry, timestamps) and the event count."""
    rows = conn.execute("SELECT context_id, embedding_status, keyword_status, retry_count, "
                        "updated_at FROM ai.context_ai_state ORDER BY 1").fetchall()
    events = conn.execute("SELECT count(*) FROM ai.context_ai_event").fetchone()[0]
    return [*rows, ("events", events)]


class NotesGate:
    """Holds the first embedding call of ``provider`` that carries a note (not the presets'
    call) until :meth:`open`: the build is then between its fetch and its write."""

    def __init__(self, provider: FakeEmbeddingProvider) -> None:
        import asyncio

        self.entered, self._release = asyncio.Event(), asyncio.Event()
        provider.on_call = self._call

    async def _call(self, texts: Sequence[str], kind: str) -> None:
        if kind == "passage" and any(t.startswith("note number") for t in texts) \
                and not self._release.is_set():
            self.entered.set()
            await self._release.wait()

    async def wait_entered(self) -> None:
        import asyncio

        await asyncio.wait_for(self.entered.wait(), 10)

    def open(self) -> None:
        self._release.set()
