"""core's search channels (SPEC §10): the registry, and core's decision over them.

A **channel** is one module of this package with one :class:`Channel` subclass, listed in
:data:`CHANNELS`. Per search, :meth:`Channel.find` reads what the channel needs before the ai
side is asked (it may name records whose contexts the ai side must score: :meth:`Found.to_score`);
the :class:`Found` it returns then turns the ai side's answer into the channel's evidence, record
id → :class:`pinlog.relevance.Evidence` (a value to rank by, whether it vouches, its
``matchedBy`` names, the context it would show). The decision and the fusion
(:func:`pinlog.relevance.decide`, shared kernel) name no channel.

:data:`CHANNELS` is in ``matchedBy`` order and from the most general evidence to the most
specific (the last vouching channel's context is shown). Adding a channel: one module here and
one entry in :data:`CHANNELS` (docs/ARCHITECTURE.md, "Add a search channel").
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.ext.asyncio import AsyncEngine

from pinlog import relevance
from pinlog.contracts import MAX_SCORED_RECORDS, SearchResponse
from pinlog.core.channels.base import Channel, Found, RelevanceRule, SearchQuery
from pinlog.core.channels.lexical import LexicalChannel
from pinlog.core.channels.vector import VectorChannel
from pinlog.relevance import Decision, Explained

__all__ = ["CHANNELS", "MATCHED_BY", "Channel", "Found", "RelevanceRule", "SearchQuery", "decide",
           "explain", "find_all", "labels", "records_to_score", "scored_contexts"]

#: The registry, in ``matchedBy`` order, most general evidence first.
CHANNELS: tuple[type[Channel], ...] = (VectorChannel, LexicalChannel)

#: Every ``matchedBy`` value, in order (the public API's description lists them).
MATCHED_BY: tuple[str, ...] = tuple(dict.fromkeys(n for c in CHANNELS for n in c.names))


async def find_all(engine: AsyncEngine, query: SearchQuery, rule: RelevanceRule,
                   channels: Sequence[type[Channel]] = CHANNELS) -> list[Found]:
    """Each channel's findings for ``query``, in channel order."""
    return [await channel(rule).find(engine, query) for channel in channels]


def records_to_score(found: Sequence[Found]) -> list[int]:
    """The records whose contexts the ai side is asked to score: every channel's requests in
    channel order, each record once, at most :data:`MAX_SCORED_RECORDS`."""
    wanted = dict.fromkeys(r for f in found for r in f.to_score())
    return list(wanted)[:MAX_SCORED_RECORDS]


def scored_contexts(response: SearchResponse) -> dict[int, dict[int, float]]:
    """record id → context id → cosine of every context the ai side scored: the ``scored``
    contexts, then the ``results`` (the records the vector channel vouches for), in that order."""
    cosines: dict[int, dict[int, float]] = {}
    for hit in (*response.scored, *response.results):
        cosines.setdefault(hit.record_id, {})[hit.context_id] = hit.similarity
    return cosines


def decide(found: Sequence[Found], response: SearchResponse, rule: RelevanceRule,
           limit: int) -> list[Decision]:
    """The records to show for one search, best first, at most ``limit`` (SPEC §10):
    :func:`pinlog.relevance.decide` over the channels' evidence."""
    cosines = scored_contexts(response)
    return relevance.decide(cosines, [f.evidence(response, cosines) for f in found],
                            rrf_k=rule.rrf_k, limit=limit)


def labels(channels: Sequence[type[Channel]] = CHANNELS) -> tuple[str, ...]:
    """A label per channel, in channel order: its ``matchedBy`` names joined by ``/``."""
    return tuple("/".join(channel.names) for channel in channels)


def explain(found: Sequence[Found], response: SearchResponse, rule: RelevanceRule,
            limit: int) -> list[Explained]:
    """:func:`decide`'s decision with every channel's evidence per record
    (:func:`pinlog.relevance.explain`; the operator console's search debugger)."""
    cosines = scored_contexts(response)
    return relevance.explain(cosines, [f.evidence(response, cosines) for f in found],
                             rrf_k=rule.rrf_k, limit=limit)
