"""The lexical channel (SPEC §10): the member's own words, ``matchedBy`` ``text`` and ``place``.

core owns the text, so core matches the query's lexical terms (:func:`pinlog.text.lexical_terms`
of the member's own query) against the terms of the member's active notes and of their records'
saved places (name and address; statement ``lexical_matches`` of ``core/search.sql``).

The evidence is the **coverage**: the share of the query's distinct terms found among the
record's place terms and the terms of its *scored* notes (a note without an embedding is not
searchable yet: its words do not count). The channel vouches for a record when the coverage is
at least ``min_coverage`` (``PINLOG_SEARCH_TEXT_MIN_COVERAGE``); it ranks every record with a
coverage above 0 by coverage; it reports ``text`` when a scored note's words matched, ``place``
when the place's did, and would show the note whose words matched most (then the closer one by
cosine, then the lower id). Coverage is a property of one query and one record only: it means
the same for a member with one note or 10,000.

Before the ai side is asked, the channel names the records that can pass its test counting all
their notes, most matched terms first: the ai side scores their contexts (``recordIds``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from sqlalchemy.ext.asyncio import AsyncEngine

from pinlog.contracts import MAX_SCORED_RECORDS, SearchResponse
from pinlog.core.channels.base import Channel, SearchQuery
from pinlog.db.sql import Queries
from pinlog.relevance import Cosines, Evidence
from pinlog.text import lexical_terms

queries = Queries("pinlog.core", "search.sql")

TEXT, PLACE = "text", "place"


@dataclass
class LexicalMatch:
    """The query terms found in one record's words.

    Attributes:
        note_terms: context id → query terms found in that active note's body.
        place_terms: query terms found in the place's name/address.
    """

    note_terms: dict[int, frozenset[str]] = field(default_factory=dict)
    place_terms: frozenset[str] = frozenset()

    def matched_terms(self, scored: Mapping[int, float] | None = None) -> frozenset[str]:
        """Query terms found in the record's place or in its notes — only those of ``scored``
        (context id → cosine of the record's scored contexts), or all notes with ``None``."""
        found: set[str] = set(self.place_terms)
        for context_id, terms in self.note_terms.items():
            if scored is None or context_id in scored:
                found |= terms
        return frozenset(found)


def coverage(match: LexicalMatch, query_terms: int, scored: Mapping[int, float] | None = None) -> float:
    """Share (0..1) of the query's ``query_terms`` distinct lexical terms the record contains,
    counting the notes of ``scored`` only (all with ``None``)."""
    return len(match.matched_terms(scored)) / query_terms if query_terms else 0.0


class LexicalFound:
    """The lexical matches of one query (record id → :class:`LexicalMatch`) and its rule."""

    def __init__(self, matches: dict[int, LexicalMatch], query_terms: int, min_coverage: float) -> None:
        self.matches, self.query_terms, self.min_coverage = matches, query_terms, min_coverage

    def to_score(self) -> list[int]:
        """The records that can pass the coverage test counting all their notes (records below it
        are shown only if the vector channel vouches for them, and then the ai side scores them
        anyway), most matched terms first, then lower id, at most :data:`MAX_SCORED_RECORDS`."""
        passing = [(len(m.matched_terms()), r) for r, m in self.matches.items()
                   if self.query_terms and coverage(m, self.query_terms) >= self.min_coverage]
        passing.sort(key=lambda t: (-t[0], t[1]))
        return [r for _, r in passing[:MAX_SCORED_RECORDS]]

    def evidence(self, response: SearchResponse, cosines: Cosines) -> dict[int, Evidence]:
        """Per matched record with a coverage above 0 (over its scored notes and its place):
        the coverage to rank by, vouched at ``min_coverage`` (module docstring)."""
        out: dict[int, Evidence] = {}
        for record_id, match in self.matches.items():
            scored = cosines.get(record_id, {})
            cov = coverage(match, self.query_terms, scored)
            if cov <= 0:
                continue
            notes = {cid: t for cid, t in match.note_terms.items() if t and cid in scored}
            names = ((TEXT,) if notes else ()) + ((PLACE,) if match.place_terms else ())
            shown = max(notes, key=lambda cid: (len(notes[cid]), scored[cid], -cid)) if notes else None
            out[record_id] = Evidence(cov, cov >= self.min_coverage, names, shown)
        return out


async def lexical_matches(engine: AsyncEngine, member_id: int, terms: list[str]) -> dict[int, LexicalMatch]:
    """record id → the query ``terms`` found in each of its active notes that contains any
    (``note_terms``) and in its place (``place_terms``), for every active record of the member
    with at least one matching term (``core/search.sql`` → ``lexical_matches``)."""
    if not terms:
        return {}
    wanted = frozenset(terms)
    tsquery = " | ".join(f"'{t}'" for t in terms)  # each term is a \w+ run: no quoting needed
    async with engine.connect() as conn:
        rows = (await conn.execute(queries("lexical_matches"), {
            "member_id": member_id, "tsquery": tsquery})).all()
    found: dict[int, LexicalMatch] = {}
    for context_id, record_id, note_terms, place_terms in rows:
        match = found.setdefault(int(record_id), LexicalMatch())
        if context_id is not None:
            match.note_terms[int(context_id)] = wanted.intersection(note_terms or ())
        else:
            match.place_terms = wanted.intersection(place_terms or ())
    return found


class LexicalChannel(Channel):
    names = (TEXT, PLACE)

    async def find(self, engine: AsyncEngine, query: SearchQuery) -> LexicalFound:
        terms = lexical_terms(query.text)
        return LexicalFound(await lexical_matches(engine, query.member_id, terms), len(terms),
                            self.rule.min_coverage)
