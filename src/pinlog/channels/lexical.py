"""The lexical channel's rules (SPEC §10), ``matchedBy`` ``text`` and ``place``: the same code
for core's search (over core's notes and places) and the ai side's ``/internal/v1/search`` (over
the text and ``placeMeta`` of its process requests, ``ai.context_lexical``). Shared kernel:
imports nothing of ``pinlog.core`` or ``pinlog.ai``; each component reads its own rows into
:class:`LexicalMatch` values (:func:`matches_from_rows`) and this module decides.

**What a query asks for** (:func:`analyse_query`): its lexical terms
(:func:`pinlog.text.lexical_terms`: Hangul/CJK character bigrams, English words) and, among
them, the **content terms** — those of its nouns, adjectives, foreign words and numbers
(kiwipiepy's tags ``NNG NNP NR XR VA SL SH SW SN``), never of verbs, adverbs, particles or
endings, nor of the variant table's generic words (``곳``, ``맛집``, ``place``, ``good``); plus
the terms of any phrase the variant table knows (:mod:`pinlog.channels.variants`: 돈까스,
``black bean noodles``, 달리기). A query without content terms gives no lexical evidence.

**Coverage** of a record: the share of the query's content terms its words contain — found
as they are, or covered by a concept of the variant table the record names in any form or
language (a query "돈가스" covers a note that says 돈카츠 or tonkatsu; "술집" one about an
이자카야). It is a property of one query and one record only.

**Evidence** (:class:`LexicalFound`): over the record's place terms and the terms of its
*scored* notes (a note without an embedding is not searchable yet: its words do not count),
with the thresholds of :class:`pinlog.channels.base.RelevanceRule`:

- coverage ≥ ``min_coverage`` → the channel vouches for the record;
- 0 < coverage < ``doubt_coverage`` → it **doubts** the record: part of the query is in the
  record's words and the rest is not ("중고 노트북 매장" against a note about working on a
  laptop: the shared word lifts the meaning match too), so another channel's vouch counts
  only at strength ≥ ``doubt_strength``.

It ranks every record with coverage above 0 by coverage, reports ``text`` when a scored note
covered part of the query and ``place`` when the place did, and would show the note that
covered most (then the closer one by cosine, then the lower id). Before the ai side is asked,
it names the records that can reach ``min_coverage`` counting all their notes, most covered
first (:meth:`LexicalFound.to_score`); the records the vector channel vouches for that it
knows are scored too (:meth:`LexicalFound.knows`), so a doubt counts all their notes.
"""

from __future__ import annotations

import asyncio
from abc import abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import Any

from pinlog.channels.base import Channel, RelevanceRule, SearchQuery
from pinlog.channels.variants import Found as Named
from pinlog.channels.variants import VariantTable, default_table
from pinlog.contracts import MAX_SCORED_RECORDS, SearchResponse
from pinlog.relevance import Cosines, Evidence
from pinlog.text import analyse, lexical_term_spans, lexical_terms, normalize

__all__ = ["MAX_MATCHED_ROWS", "PLACE", "QUERY_CONTENT_TAGS", "TEXT", "LexicalChannel", "LexicalFound",
           "LexicalMatch", "LexicalQuery", "analyse_query", "is_filler", "matches_from_rows",
           "place_meta_text", "tsquery"]

TEXT, PLACE = "text", "place"

#: kiwipiepy tags whose morphemes carry what a query asks for: common/proper nouns, numerals,
#: roots, adjectives, foreign words (SL: Latin, SH: Hanja, SW: other symbols/scripts), numbers.
QUERY_CONTENT_TAGS = frozenset({"NNG", "NNP", "NR", "XR", "VA", "SL", "SH", "SW", "SN"})

#: Most distinct terms one search looks for (content terms first, then the variant table's
#: alternatives in query order — round-robin over a concept, its narrower concepts and its
#: compounds, each alternating between scripts (``VariantTable.alternatives``); an alternative
#: that does not fit is not looked for). 32 keeps every figure of ``bench/calibrate_search.py``
#: that 64 had. The lexical statement's cost grows with
#: it: the ai side's statement tests every term of the ``tsquery`` against every row of the
#: member (core's looks each term up in its member-keyed index, migration 0012, then tests the
#: rows found). Measured at 10,000 notes of one member, before migration 0012 (core then read
#: every row too): 1 term 2 ms, 35 terms 9-22 ms, 187 terms 65-96 ms; 16 / 32 / 64 terms
#: 12 / 24 / 44 ms on a loaded 2-core machine.
MAX_SEARCH_TERMS = 32


def is_filler(query: str) -> bool:
    """A query with no lexical term — only punctuation, symbols, emoji, Hangul jamo (``ㅎㅎ``,
    ``ㅋㅋ``, ``ㅠㅠ``), English function words: it asks for nothing, so every search path
    answers ``[]`` for it without embedding it (issue 27, README "Search")."""
    return not lexical_terms(query)


@dataclass(frozen=True)
class LexicalQuery:
    """One query as the lexical channel sees it (:func:`analyse_query`).

    Attributes:
        terms: every distinct lexical term, first-seen order.
        content: the content terms (the union of ``units``).
        named: the concepts of the variant table the query names (their ``covers`` ⊆ content).
        units: the query's content words — per content morpheme (or phrase of the variant
            table), its terms; coverage is their mean share. ``()``: every content term is a
            unit of its own.
    """

    terms: tuple[str, ...]
    content: frozenset[str]
    named: tuple[Named, ...] = ()
    units: tuple[frozenset[str], ...] = ()

    @cached_property
    def search_terms(self) -> tuple[str, ...]:
        """The distinct terms a record's rows are searched for (the SQL pre-filter and the
        terms it returns): the content terms, then every alternative's terms, at most
        :data:`MAX_SEARCH_TERMS` (an alternative that does not fit whole is left out)."""
        return self._search[0]

    @cached_property
    def alternatives(self) -> tuple[Named, ...]:
        """:attr:`named`, each with only the alternatives that fit in :attr:`search_terms`."""
        return self._search[1]

    @cached_property
    def _search(self) -> tuple[tuple[str, ...], tuple[Named, ...]]:
        return _search_terms(self)

    def matched(self, terms: frozenset[str] | set[str]) -> frozenset[str]:
        """The content terms a record with these lexical ``terms`` covers (memoised per term
        set: the notes of one search share few distinct ones)."""
        key = frozenset(terms)
        cached = self._matched.get(key)
        if cached is not None:
            return cached
        found = set(self.content.intersection(key))
        for named in self.alternatives:
            if not named.covers <= found and named.named_by(key):
                found |= named.covers
        out = self._matched[key] = frozenset(found & self.content)
        return out

    @cached_property
    def _matched(self) -> dict[frozenset[str], frozenset[str]]:
        return {}

    def coverage(self, terms: frozenset[str] | set[str]) -> float:
        """Share (0..1) of the query's content a record with these ``terms`` covers: the mean
        over the content words (:attr:`units`) of the share of each word's terms covered — so a
        word counts once however many bigrams it has ("노트북 수리" covered only by a note
        about a 노트북 is 0.5, not 2/3). Memoised per covered set, as :meth:`matched` is: a
        search asks it for every matched record, twice (its ``to_score`` and its evidence)."""
        if not self.content:
            return 0.0
        matched = self.matched(terms)
        cached = self._coverage.get(matched)
        if cached is None:
            units = self.units or tuple(frozenset((t,)) for t in self.content)
            cached = self._coverage[matched] = sum(len(u & matched) / len(u)
                                                   for u in units) / len(units)
        return cached

    @cached_property
    def _coverage(self) -> dict[frozenset[str], float]:
        return {}


def _search_terms(query: LexicalQuery) -> tuple[tuple[str, ...], tuple[Named, ...]]:
    wanted: dict[str, None] = dict.fromkeys(sorted(query.content, key=query.terms.index))
    kept = []
    for named in query.named:
        any_of = []
        for alt in named.any_of:
            if len(wanted) + len(alt - wanted.keys()) <= MAX_SEARCH_TERMS:
                wanted.update(dict.fromkeys(sorted(alt)))
                any_of.append(alt)
        all_of = []
        for part in named.all_of:
            fitting = []
            for alt in part:
                if len(wanted) + len(alt - wanted.keys()) <= MAX_SEARCH_TERMS:
                    wanted.update(dict.fromkeys(sorted(alt)))
                    fitting.append(alt)
            all_of.append(tuple(fitting))
        kept.append(Named(named.concept, named.covers, tuple(any_of),
                          tuple(all_of) if all(all_of) else ()))
    return tuple(wanted), tuple(kept)


@lru_cache(maxsize=4096)
def _analyse(query: str, table: VariantTable) -> LexicalQuery:
    folded = normalize(query).casefold()
    spans = lexical_term_spans(folded)
    terms = tuple(dict.fromkeys(t for t, _, _ in spans))
    if not terms:
        return LexicalQuery((), frozenset())
    units: list[frozenset[str]] = []
    for m in analyse(folded):
        tag = m.tag.split("-")[0]
        if tag not in QUERY_CONTENT_TAGS or table.is_generic(m.lemma) or table.is_generic(m.form):
            continue
        start, end = m.start, m.start + m.length
        # the word's terms: those inside the morpheme, else (a noun) those overlapping it — a
        # one-syllable noun has only the bigram it shares with its particle (꽃을); a
        # one-syllable adjective stem none (많은 / 많아서: its endings vary, the term would not)
        inside = frozenset(t for t, s, e in spans if s >= start and e <= end)
        unit = inside or (frozenset() if tag == "VA" else
                          frozenset(t for t, s, e in spans if s < end and e > start))
        if unit:
            units.append(unit)
    named = tuple(n for n in table.find(folded) if n.covers)
    units += [n.covers for n in named]
    # a word inside a longer one counts once, as the longer (라멘 inside the phrase 라멘집)
    distinct = list(dict.fromkeys(units))
    kept = tuple(u for u in distinct if not any(u < other for other in distinct))
    content = frozenset().union(*kept) if kept else frozenset()
    return LexicalQuery(terms, content, named, kept)


def analyse_query(query: str, table: VariantTable | None = None) -> LexicalQuery:
    """The :class:`LexicalQuery` of ``query`` (module docstring) with ``table`` (default: the
    packaged variant table). Cached per query text; ~2 ms for a short query once the Korean
    analyser is loaded (:func:`pinlog.text.warm_up`). Raises nothing for any ``str``."""
    return _analyse(query, table or default_table())


def place_meta_text(meta: Mapping[str, object] | None) -> str:
    """The text of a process request's ``placeMeta`` the lexical channel reads: the string
    values of its name and address keys (``name``, ``placeName``, ``address``,
    ``roadAddress``, ``addressName``, ``roadAddressName``, in any case, with or without
    ``_``), each at most 300 characters, joined by spaces; ``""`` for anything else."""
    if not isinstance(meta, Mapping):
        return ""
    wanted = ("name", "placename", "address", "roadaddress", "addressname", "roadaddressname")
    values = {}
    for key, value in meta.items():
        norm = str(key).replace("_", "").lower()
        if norm in wanted and isinstance(value, str):
            values[wanted.index(norm)] = value[:300]
    return " ".join(values[i] for i in sorted(values))


@dataclass
class LexicalMatch:
    """The search terms (:attr:`LexicalQuery.search_terms`) found in one record's words.

    Attributes:
        note_terms: context id → search terms found in that active note.
        place_terms: search terms found in the place's name/address.
    """

    note_terms: dict[int, frozenset[str]] = field(default_factory=dict)
    place_terms: frozenset[str] = frozenset()

    def terms(self, scored: Mapping[int, float] | None = None) -> frozenset[str]:
        """The record's found terms: its place's and its notes' — only those of ``scored``
        (context id → cosine of the record's scored contexts), or all notes with ``None``."""
        found: set[str] = set(self.place_terms)
        for context_id, terms in self.note_terms.items():
            if scored is None or context_id in scored:
                found |= terms
        return frozenset(found)


def matches_from_rows(rows: Iterable[Sequence[Any]], query: LexicalQuery) -> dict[int, LexicalMatch]:
    """record id → :class:`LexicalMatch` from rows ``(context_id, record_id, note_terms,
    place_terms)`` — the shape of both components' ``lexical_matches`` statements: a row with a
    context id gives that note's terms, a row with place terms (not NULL) the place's (core
    returns notes and places apart; the ai side both in one row per context). Terms outside
    :attr:`LexicalQuery.search_terms` are ignored."""
    wanted = frozenset(query.search_terms)
    found: dict[int, LexicalMatch] = {}
    for context_id, record_id, note_terms, place_terms in rows:
        match = found.setdefault(int(record_id), LexicalMatch())
        if context_id is not None:
            match.note_terms[int(context_id)] = wanted.intersection(note_terms or ())
        if place_terms is not None:
            match.place_terms = match.place_terms | wanted.intersection(place_terms)
    return found


class LexicalFound:
    """The lexical matches of one query (record id → :class:`LexicalMatch`) and the rule."""

    def __init__(self, matches: dict[int, LexicalMatch], query: LexicalQuery, rule: RelevanceRule) -> None:
        self.matches, self.query, self.rule = matches, query, rule

    def to_score(self) -> list[int]:
        """The records that can reach ``min_coverage`` counting all their notes (the others are
        shown only if another channel vouches for them, and then the ai side scores them
        anyway), most covered first, then lower id, at most :data:`MAX_SCORED_RECORDS`."""
        passing = []
        for record_id, match in self.matches.items():
            cov = self.query.coverage(match.terms())
            if cov > 0 and cov >= self.rule.min_coverage:
                passing.append((-cov, record_id))
        passing.sort()
        return [r for _, r in passing[:MAX_SCORED_RECORDS]]

    def knows(self, record_id: int) -> bool:
        """Whether any of the record's words matched the query (its evidence, or its doubt,
        needs every scored note of the record)."""
        return record_id in self.matches

    def evidence(self, response: SearchResponse, cosines: Cosines) -> dict[int, Evidence]:
        """Per matched record with a coverage above 0 over its scored notes and its place: the
        coverage to rank by, vouched at ``min_coverage``, doubting below ``doubt_coverage``
        (module docstring)."""
        rule, query = self.rule, self.query
        # the doubt of the profile whose strengths answered (SPEC §9.1): the answer's, else ours
        doubt_strength = response.doubt_or(rule.doubt_strength)
        out: dict[int, Evidence] = {}
        for record_id, match in self.matches.items():
            scored = cosines.get(record_id, {})
            cov = query.coverage(match.terms(scored))
            if cov <= 0:
                continue
            notes = {cid: len(query.matched(t | match.place_terms) - query.matched(match.place_terms))
                     for cid, t in match.note_terms.items() if cid in scored}
            notes = {cid: n for cid, n in notes.items() if n}
            names = ((TEXT,) if notes else ()) + ((PLACE,) if query.matched(match.place_terms) else ())
            shown = max(notes, key=lambda cid: (notes[cid], scored[cid], -cid)) if notes else None
            doubt = doubt_strength if cov < rule.doubt_coverage else None
            out[record_id] = Evidence(cov, cov >= rule.min_coverage, names or (TEXT,), shown,
                                      doubt=doubt)
        return out


class LexicalChannel(Channel):
    """The lexical channel of one component: the rules of this module over the rows
    :meth:`matches` reads (core: ``core/search.sql``; the ai side: ``ai/search.sql``, from
    ``ai.context_lexical``)."""

    names = (TEXT, PLACE)

    async def find(self, query: SearchQuery) -> LexicalFound:
        lexical = await asyncio.to_thread(analyse_query, query.text)  # Kiwi: off the event loop
        matches = await self.matches(query.member_id, lexical) if lexical.content else {}
        return LexicalFound(matches, lexical, self.rule)

    @abstractmethod
    async def matches(self, member_id: int, query: LexicalQuery) -> dict[int, LexicalMatch]:
        """record id → the :attr:`LexicalQuery.search_terms` found in each of the member's
        active, searchable notes and in its active records' places (the member's rows only;
        at most :data:`MAX_MATCHED_ROWS` notes and as many places, most terms first)."""


#: Most note rows (and, apart, place rows) one lexical statement returns: those with the most
#: search terms first (the rest could only give weaker evidence than the ones kept).
MAX_MATCHED_ROWS = 1000


def tsquery(query: LexicalQuery) -> str:
    """The ``tsquery`` literal of the search terms: ``'t1' | 't2' …`` (each term matches
    ``\\w+``: no quoting needed, pinlog.text.lexical_terms)."""
    return " | ".join(f"'{t}'" for t in query.search_terms)
