"""The relevance decision and the fusion of personal search (SPEC §10), channel-neutral.

Shared kernel: imports nothing of ``pinlog.core`` or ``pinlog.ai``, and names no channel. A
search **channel** (core's are registered in :mod:`pinlog.core.channels`) gives, per record it
knows, one :class:`Evidence`: a value to rank the record by, whether it vouches for the record
(its calibrated evidence), the ``matchedBy`` name(s) it reports then, and the context it would
show. :func:`decide` turns N such lists into the records to show:

- **searchable:** only records with at least one context the ai side scored (a cosine) can be
  shown — ``similarity`` is the shown context's cosine; a note without a COMPLETED embedding is
  not searchable yet, or no longer. Evidence about other records, or a channel's context that
  was not scored, is ignored.
- **no evidence, no result:** a record is shown only when at least one channel vouches for it;
  there is no "keep the top hit" rule (an off-topic query gets ``[]``).
- **matchedBy:** the names of the channels that vouched, in channel order, each once.
- **shown context:** the context named by the *last* vouching channel that names one — channels
  are listed from the most general evidence (meaning) to the most specific (the member's own
  words), so the note whose words matched wins over the one nearest in meaning; without one,
  the record's best-cosine context.
- **order:** reciprocal rank fusion (Cormack et al. 2009) over every channel's ranking of the
  searchable records: ``Σ 1/(k + rank)``, one term per channel that ranks the record (competition
  ranks, higher value first; a channel may rank records it does not vouch for). Ties: higher
  best cosine, then lower record id. Then at most ``limit``.

:func:`explain` shows, per record, every channel's evidence and rank next to the decision
:func:`decide` took (the operator console's search debugger).

Why the kernel: core decides for ``POST /v1/search`` today; the ai side's ``/internal/v1/search``
is to give adopters the same decision (SPEC §10, "The same decision for adopters"), so both
components must run this one function (core never imports ai, ai never imports core). Channel
rules and their data stay with the component that owns the data.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

#: record id → context id → cosine similarity to the query, for every context the ai side
#: scored (in the order the ai side answered; a record absent here is not searchable).
Cosines = Mapping[int, Mapping[int, float]]


class Evidence(NamedTuple):
    """What one channel says about one record (a tuple: built per record and channel, cheaply).

    Attributes:
        score: the value this channel ranks the record by (higher first; e.g. a cosine, a
            coverage in 0..1); ``None``: the channel does not rank the record (no RRF term).
        vouched: the channel's calibrated evidence holds — the record may be shown.
        matched_by: the ``matchedBy`` name(s) reported when ``vouched``.
        context_id: the context the channel would show (``None``: no preference).
    """

    score: float | None
    vouched: bool = False
    matched_by: tuple[str, ...] = ()
    context_id: int | None = None


#: One channel's evidence: record id → :class:`Evidence` (records it knows nothing of are absent).
ChannelEvidence = Mapping[int, Evidence]


@dataclass(frozen=True)
class Decision:
    """A record that passed: the context to show, its cosine, the channels that matched and
    its fused score (RRF, see the module docstring)."""

    record_id: int
    context_id: int
    similarity: float
    matched_by: tuple[str, ...]
    score: float


def competition_ranks(values: Mapping[int, float]) -> dict[int, int]:
    """Competition ranks ("1224") of ``record id → value``, higher value first."""
    ordered = sorted(values.values(), reverse=True)
    first: dict[float, int] = {}
    for i, v in enumerate(ordered, start=1):
        first.setdefault(v, i)
    return {record_id: first[v] for record_id, v in values.items()}


def channel_ranks(pool: Sequence[int], channels: Sequence[ChannelEvidence]) -> list[dict[int, int]]:
    """Per channel, the competition ranks of the ``pool`` records it gives a score."""
    return [competition_ranks({r: e.score for r in pool
                               if (e := ev.get(r)) is not None and e.score is not None})
            for ev in channels]


def decide(cosines: Cosines, channels: Sequence[ChannelEvidence], *, rrf_k: int,
           limit: int) -> list[Decision]:
    """The records to show, best first, at most ``limit`` (SPEC §10; rules in the module
    docstring).

    Args:
        cosines: every scored context of every record any channel may show.
        channels: each channel's evidence, in channel order (the order of ``matchedBy``).
        rrf_k: the reciprocal-rank-fusion constant (``PINLOG_SEARCH_RRF_K``, > 0).
        limit: most records returned (1..100).

    Returns:
        decisions; ``[]`` when no channel vouches for a searchable record.
    """
    pool = [record_id for record_id, scored in cosines.items() if scored]
    ranks = channel_ranks(pool, channels)
    best = {r: max(cosines[r].values()) for r in pool}
    decisions = []
    for r in pool:
        scored = cosines[r]
        vouching = [e for ev in channels if (e := ev.get(r)) is not None and e.vouched]
        if not vouching:
            continue
        matched_by = tuple(dict.fromkeys(name for e in vouching for name in e.matched_by))
        context_id = next((e.context_id for e in reversed(vouching)
                           if e.context_id is not None and e.context_id in scored), None)
        if context_id is None:
            context_id = max(scored, key=scored.__getitem__)
        score = 0.0
        for rank in ranks:
            if r in rank:
                score += 1.0 / (rrf_k + rank[r])
        decisions.append(Decision(r, context_id, scored[context_id], matched_by, score))
    decisions.sort(key=lambda d: (-d.score, -best[d.record_id], d.record_id))
    return decisions[:limit]


@dataclass(frozen=True)
class Explained:
    """What every channel said about one record, and what :func:`decide` made of it (the
    operator console's search debugger; issue 29).

    Attributes:
        record_id: the record.
        evidence: per channel, in channel order, its :class:`Evidence` (``None``: the channel
            knows nothing of the record).
        ranks: per channel, the record's rank in that channel's ranking (the RRF term's rank;
            ``None``: not ranked by it, or the record is not searchable).
        searchable: the ai side scored at least one of its contexts.
        decision: the :class:`Decision` when the record is among the shown ones, else ``None``.
        position: 1-based place in the fused order when shown, else ``None``.
    """

    record_id: int
    evidence: tuple[Evidence | None, ...]
    ranks: tuple[int | None, ...]
    searchable: bool
    decision: Decision | None
    position: int | None


def explain(cosines: Cosines, channels: Sequence[ChannelEvidence], *, rrf_k: int,
            limit: int) -> list[Explained]:
    """Every record a channel has evidence about (or the ai side scored), with each channel's
    evidence and rank and the decision taken — by :func:`decide` itself, so the explanation
    is the decision, not a re-computation of it. Channel-neutral: it shows whatever
    :class:`Evidence` the channels return.

    Returns:
        the shown records in their fused order, then the others by best cosine (unscored last),
        then record id.
    """
    decisions = decide(cosines, channels, rrf_k=rrf_k, limit=limit)
    shown = {d.record_id: (i, d) for i, d in enumerate(decisions, start=1)}
    pool = [record_id for record_id, scored in cosines.items() if scored]
    ranks = channel_ranks(pool, channels)
    searchable = set(pool)
    out = []
    for r in dict.fromkeys([*pool, *(r for ev in channels for r in ev)]):
        position, decision = shown.get(r, (None, None))
        out.append(Explained(r, tuple(ev.get(r) for ev in channels),
                             tuple(rank.get(r) for rank in ranks), r in searchable,
                             decision, position))
    best = {r: max(cosines[r].values()) for r in pool}
    out.sort(key=lambda x: (x.position is None, x.position or 0,
                            -best.get(x.record_id, float("-inf")), x.record_id))
    return out
