"""The relevance decision and the channel merge of personal search (SPEC §10), owned by core.

Two channels give evidence for a record:

- **vector** (the ai side): the record's best cosine is at or above the embedding profile's
  calibrated floor for the query's length (``pinlog.ai.search.apply_cuts``); the ai side returns
  only such records in ``results``.
- **lexical** (core): the share of the query's lexical terms (:func:`pinlog.text.lexical_terms`)
  found among the terms of the record's active notes (``text``) and of its saved place's name
  and address (``place``) — the *coverage* — is at least ``min_coverage``. Coverage is a
  property of one query and one record only: it means the same for a member with one note or
  10,000.

A record is shown only when at least one channel gives evidence (no "keep the top hit" rule:
an off-topic query gets no result). Records that passed are ordered by reciprocal rank fusion
(Cormack et al. 2009) of the two channel rankings over the candidates: ``1/(k + vector rank) +
1/(k + lexical rank)``, vector rank by cosine, lexical rank by coverage (records without a
matched term have no lexical rank). Ties: higher cosine, then lower record id. The rule and its
defaults were measured with ``bench/calibrate_search.py`` (README, "Search relevance").
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

#: Values of ``matchedBy`` (SPEC §10), in this order.
VECTOR, TEXT, PLACE = "vector", "text", "place"


@dataclass(frozen=True)
class RelevanceRule:
    """Parameters of the relevance decision and the merge.

    Attributes:
        min_coverage: lexical evidence threshold — share (0..1] of the query's distinct
            lexical terms found in the record's notes and place (``PINLOG_SEARCH_TEXT_MIN_COVERAGE``).
        rrf_k: the reciprocal-rank-fusion constant (``PINLOG_SEARCH_RRF_K``); larger flattens
            the rank differences.
    """

    min_coverage: float = 0.35
    rrf_k: int = 60


@dataclass
class RecordEvidence:
    """What the channels know about one record of the member.

    Attributes:
        record_id: the record.
        similarities: context id → cosine similarity, for every context of the record the ai
            side scored (a context without an embedding yet is absent: it is not searchable).
        vector: the vector channel vouched for the record (it was in the ai side's results).
        vector_context_id: the ai side's best context of the record, when ``vector``.
        note_terms: context id → query terms found in that active note's body.
        place_terms: query terms found in the place's name/address.
    """

    record_id: int
    similarities: dict[int, float] = field(default_factory=dict)
    vector: bool = False
    vector_context_id: int | None = None
    note_terms: dict[int, frozenset[str]] = field(default_factory=dict)
    place_terms: frozenset[str] = frozenset()

    @property
    def best_similarity(self) -> float | None:
        """The record's best cosine over its scored contexts (None if none was scored)."""
        return max(self.similarities.values()) if self.similarities else None

    def matched_terms(self, *, all_notes: bool = False) -> frozenset[str]:
        """Query terms found in the record's place or in its notes — only the scored ones (a
        note without an embedding is not searchable yet), or all with ``all_notes``."""
        found: set[str] = set(self.place_terms)
        for context_id, terms in self.note_terms.items():
            if all_notes or context_id in self.similarities:
                found |= terms
        return frozenset(found)


@dataclass(frozen=True)
class Decision:
    """A record that passed: the context to show, its cosine, and the channels that matched."""

    record_id: int
    context_id: int
    similarity: float
    matched_by: tuple[str, ...]
    score: float


def coverage(candidate: RecordEvidence, query_terms: int) -> float:
    """Share of the query's ``query_terms`` distinct lexical terms the record contains (0..1)."""
    return len(candidate.matched_terms()) / query_terms if query_terms else 0.0


def _ranks(values: dict[int, float]) -> dict[int, int]:
    """Competition ranks (1224) of ``record id → value``, higher value first."""
    ordered = sorted(values.values(), reverse=True)
    first: dict[float, int] = {}
    for i, v in enumerate(ordered, start=1):
        first.setdefault(v, i)
    return {record_id: first[v] for record_id, v in values.items()}


def decide(candidates: Iterable[RecordEvidence], query_terms: int, rule: RelevanceRule,
           limit: int) -> list[Decision]:
    """The records to show, best first, at most ``limit`` (SPEC §10).

    Args:
        candidates: every record either channel found (at most one per record).
        query_terms: number of distinct lexical terms of the query (0: no lexical evidence).
        rule: thresholds and the RRF constant.
        limit: most records returned (1..100).

    Returns:
        decisions; a record none of whose contexts was scored by the ai side is never shown
        (it is not searchable yet, or no longer).
    """
    pool = [c for c in candidates if c.similarities]
    cov = {c.record_id: coverage(c, query_terms) for c in pool}
    vector_rank = _ranks({c.record_id: c.best_similarity for c in pool})  # type: ignore[misc]
    lexical_rank = _ranks({r: v for r, v in cov.items() if v > 0})
    decisions = []
    for c in pool:
        lexical = cov[c.record_id] >= rule.min_coverage and cov[c.record_id] > 0
        if not (c.vector or lexical):
            continue
        matched_by = [VECTOR] if c.vector else []
        context_id = c.vector_context_id if c.vector and c.vector_context_id in c.similarities \
            else max(c.similarities, key=lambda cid: c.similarities[cid])
        if lexical:
            scored_notes = {cid: t for cid, t in c.note_terms.items()
                            if t and cid in c.similarities}
            if scored_notes:
                matched_by.append(TEXT)
                # show the note whose words matched most (then the closer one by cosine)
                context_id = max(scored_notes, key=lambda cid: (len(scored_notes[cid]),
                                                                c.similarities[cid], -cid))
            if c.place_terms:
                matched_by.append(PLACE)
        score = 1.0 / (rule.rrf_k + vector_rank[c.record_id])
        if c.record_id in lexical_rank:
            score += 1.0 / (rule.rrf_k + lexical_rank[c.record_id])
        decisions.append(Decision(c.record_id, context_id, c.similarities[context_id],
                                  tuple(matched_by), score))
    best = {c.record_id: c.best_similarity for c in pool}
    decisions.sort(key=lambda d: (-d.score, -best[d.record_id], d.record_id))  # type: ignore[operator]
    return decisions[:limit]
