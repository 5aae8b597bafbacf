"""Rows for the retention tests (issue 31), made by the real services: core's lifecycle
(:class:`~pinlog.core.services.CoreService`: create, edit, delete, withdraw — the real
invalidation) and the ai side's job (:class:`~pinlog.ai.pipeline.Pipeline` with fake model
providers: real embedding, keyword, analysis and event rows).

Time is moved with the database clock: :func:`set_back` moves timestamps into the past (the
purge measures ages with ``now()``), never a sleep.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import psycopg

from pinlog.ai.pipeline import Pipeline
from pinlog.contracts import ProcessRequest
from pinlog.core.services import CoreService, Place
from tests.fakes import FakeEmbeddingProvider, unit
from tests.integration.ai.support import basis

_places = itertools.count(1)

#: Every table a context's data lives in, with the column that names the context (the text and
#: its lexical terms are columns of core.context).
CONTEXT_TABLES = {
    "core.context": "id",
    "ai.context_ai_state": "context_id",
    "ai.context_embedding": "context_id",
    "ai.context_keyword": "context_id",
    "ai.context_keyword_analysis": "context_id",
    "ai.context_ai_event": "context_id",
}
#: The ai tables keyed by context id whose rows the purge removes with the context (events go by
#: their own retention).
AI_DATA = ("ai.context_embedding", "ai.context_keyword", "ai.context_keyword_analysis")


class QuietProvider(FakeEmbeddingProvider):
    """Every text is near the QUIET preset (301) of the test presets: each note gets a keyword
    row and an analysis row."""

    def vector_for(self, text: str) -> np.ndarray:
        return unit(basis(2))


@dataclass
class Note:
    """A note the tests made: its ids and text."""

    context_id: int
    record_id: int
    member_id: int
    text: str


@dataclass
class World:
    """Notes by fate (see :func:`build_world`)."""

    live: list[Note] = field(default_factory=list)
    dead: list[Note] = field(default_factory=list)
    members_withdrawn: list[int] = field(default_factory=list)
    members_active: list[int] = field(default_factory=list)
    records_deleted: list[int] = field(default_factory=list)

    @property
    def dead_ids(self) -> list[int]:
        return [n.context_id for n in self.dead]

    @property
    def live_ids(self) -> list[int]:
        return [n.context_id for n in self.live]


def place() -> Place:
    n = next(_places)
    return Place(external_place_id=f"retention-{n}", name=f"장소 {n}", lat=37.5, lng=127.0,
                 address="서울 중구")


async def process(pipeline: Pipeline, notes: Iterable[Note]) -> None:
    """Run the ai job of each note to its end (what dispatch would trigger)."""
    for note in notes:
        await pipeline.run(ProcessRequest(context_id=note.context_id, user_id=note.member_id,
                                          record_id=note.record_id, text=note.text))


async def build_world(core: CoreService, pipeline: Pipeline, *, tag: str = "") -> World:
    """Members and notes in every fate, all processed by the ai job before core acts:

    live — a note of an active member; the edited note's successor; the other note of a
    record one of whose notes was deleted. dead — a deleted note; an edited (superseded) note;
    both notes of a deleted record; both notes of a withdrawn member.
    """
    world = World()
    alice = await core.create_member()
    bob = await core.create_member()
    world.members_active.append(alice)
    world.members_withdrawn.append(bob)

    markers = itertools.count(1)

    async def note(member: int, text: str, record: int | None = None) -> Note:
        # a word of its own (a lower-cased Latin term of the lexical channel): what the
        # no-trace checks look for, in bodies and in terms alike
        text = f"{text} zq{tag}n{next(markers)}x"
        if record is None:
            record, context = await core.create_record(member, place(), text)
        else:
            context = await core.add_context(member, record, text)
        return Note(context, record, member, text)

    kept = await note(alice, "부모님과 조용히 밥 먹기 좋은 곳")
    edited = await note(alice, "비 오는 날 가기 좋은 카페")
    deleted = await note(alice, "삭제할 메모 하나", kept.record_id)
    gone_a = await note(alice, "지울 기록의 첫 메모")
    gone_b = await note(alice, "지울 기록의 둘째 메모", gone_a.record_id)
    bob_a = await note(bob, "탈퇴할 회원의 메모")
    bob_b = await note(bob, "탈퇴할 회원의 또 다른 메모")
    await process(pipeline, [kept, edited, deleted, gone_a, gone_b, bob_a, bob_b])

    successor_text = f"비 오는 날 카페 zq{tag}n{next(markers)}x"
    successor_id = await core.edit_context(alice, edited.context_id, successor_text)
    successor = Note(successor_id, edited.record_id, alice, successor_text)
    await process(pipeline, [successor])
    await core.delete_context(alice, deleted.context_id)
    await core.delete_record(alice, gone_a.record_id, force=True)
    await core.withdraw_member(bob)
    world.live += [kept, successor]
    world.dead += [edited, deleted, gone_a, gone_b, bob_a, bob_b]
    world.records_deleted += [gone_a.record_id, bob_a.record_id, bob_b.record_id]
    return world


def set_back(conn: psycopg.Connection, seconds: float, *,
             context_ids: Sequence[int] | None = None) -> None:
    """Move every soft deletion and every cancellation (of ``context_ids``, or all) ``seconds``
    into the past: ``deleted_at`` of notes (and of their records and members), ``updated_at``
    of CANCELLED state rows. Event rows are moved by :func:`set_events_back`."""
    ids = list(context_ids) if context_ids is not None else None
    by_note = "" if ids is None else " AND id = ANY(%(ids)s)"
    by_state = "" if ids is None else " AND context_id = ANY(%(ids)s)"
    of_notes = "" if ids is None else (
        " AND id IN (SELECT {col} FROM core.context WHERE id = ANY(%(ids)s))")
    params = {"s": seconds, "ids": ids}
    with conn.transaction():
        conn.execute("UPDATE core.context SET deleted_at = deleted_at - make_interval(secs => %(s)s) "
                     "WHERE deleted_at IS NOT NULL" + by_note, params)
        conn.execute("UPDATE core.record SET deleted_at = deleted_at - make_interval(secs => %(s)s) "
                     "WHERE deleted_at IS NOT NULL" + of_notes.format(col="record_id"), params)
        conn.execute("UPDATE core.member SET deleted_at = deleted_at - make_interval(secs => %(s)s) "
                     "WHERE deleted_at IS NOT NULL" + of_notes.format(col="member_id"), params)
        conn.execute("UPDATE ai.context_ai_state SET updated_at = updated_at - "
                     "make_interval(secs => %(s)s) WHERE embedding_status = 'CANCELLED' "
                     "AND keyword_status = 'CANCELLED'" + by_state, params)


def set_events_back(conn: psycopg.Connection, seconds: float, *,
                    context_ids: Sequence[int] | None = None) -> None:
    """Move the event rows (of ``context_ids``, or all) ``seconds`` into the past."""
    where = "" if context_ids is None else " WHERE context_id = ANY(%(ids)s)"
    conn.execute("UPDATE ai.context_ai_event SET at = at - make_interval(secs => %(s)s)" + where,
                 {"s": seconds, "ids": list(context_ids or [])})


def rows_of(conn: psycopg.Connection, context_ids: Sequence[int]) -> dict[str, list[tuple]]:
    """Every row of the given contexts in every table a context's data lives in (as text)."""
    return {table: [r[0] for r in conn.execute(
        f"SELECT t::text FROM {table} AS t WHERE {col} = ANY(%s) ORDER BY t::text",  # noqa: S608
        (list(context_ids),)).fetchall()] for table, col in CONTEXT_TABLES.items()}


def count_rows(conn: psycopg.Connection, table: str, context_ids: Sequence[int]) -> int:
    col = CONTEXT_TABLES.get(table, "context_id")
    return conn.execute(f"SELECT count(*) FROM {table} WHERE {col} = ANY(%s)",  # noqa: S608
                        (list(context_ids),)).fetchone()[0]


def text_anywhere(conn: psycopg.Connection, text: str) -> list[str]:
    """The core.* and ai.* tables any of whose rows contains ``text`` (whole rows as text:
    bodies, terms, analysis, evidence, reasons…)."""
    tables = [r[0] for r in conn.execute(
        "SELECT quote_ident(schemaname) || '.' || quote_ident(tablename) FROM pg_tables "
        "WHERE schemaname IN ('core', 'ai') ORDER BY 1").fetchall()]
    return [t for t in tables if conn.execute(
        f"SELECT count(*) FROM {t} AS r WHERE strpos(r::text, %s) > 0", (text,)).fetchone()[0]]


def marker(note: Note) -> str:
    """The note's own word (:func:`build_world`)."""
    return note.text.rsplit(" ", 1)[1]
