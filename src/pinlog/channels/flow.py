"""One search, the same way in both components (SPEC §10 "The same decision for adopters").

:func:`search` runs the channels and the vector search side by side (the query embedded first
when the model computes on this machine's CPU: :meth:`VectorSearch.prepare`), asks for the cosines of
the records the channels named, and hands everything to the channel-neutral decision
(:func:`pinlog.relevance.decide`). core calls it with its own channels (its lexical channel
reads core's notes and places) and the ai side's answer over the search client; the ai side's
``/internal/v1/search`` calls it with *its* channels (its lexical channel reads the text of its
process requests) and its own vector search. :func:`explain` returns what each channel said
about each record, for a search debugger (the console).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from pinlog import relevance
from pinlog.channels.base import Channel, Found, RelevanceRule, SearchQuery
from pinlog.channels.lexical import LexicalFound, LexicalQuery, is_filler
from pinlog.contracts import MAX_SCORED_RECORDS, SearchResponse
from pinlog.relevance import Decision, Explained


class VectorSearch(Protocol):
    """The ai side's vector search as a search sees it (in process or over the search client)."""

    async def prepare(self, query: SearchQuery) -> None:
        """Called once before the channels read their rows. A vector search whose model
        computes on this machine's CPU embeds the query here (:attr:`pinlog.ai.ports.
        EmbeddingProvider.on_this_cpu`), so that neither the channels' statements nor their
        analysis compete with the model for the cores; any other does nothing, and the channels
        read while it embeds. Raises what :meth:`candidates` would raise for the query."""
        ...

    async def candidates(self, query: SearchQuery, limit: int) -> SearchResponse:
        """The records the vector channel vouches for (``results``, best first, at most
        ``limit``), each with its best context's cosine and calibrated strength."""
        ...

    async def score(self, query: SearchQuery, record_ids: Sequence[int]) -> SearchResponse:
        """``scored``: every searchable context of ``record_ids`` with its cosine and strength
        (the query's vector is reused, not embedded again)."""
        ...


async def gather(*aws: Awaitable[Any]) -> list[Any]:
    """The results of ``aws``, run side by side; when one fails, the others are cancelled
    (and awaited) and its exception is raised as it is (not wrapped)."""
    tasks = [asyncio.ensure_future(aw) for aw in aws]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


async def find_all(channels: Sequence[Channel], query: SearchQuery) -> list[Found]:
    """Each channel's findings for ``query``, in channel order (read side by side)."""
    return await gather(*(channel.find(query) for channel in channels))


def records_to_score(found: Sequence[Found], answer: SearchResponse | None = None) -> list[int]:
    """The records whose contexts the ai side is asked to score: every channel's requests in
    channel order, then the records of ``answer``'s ``results`` (the vector channel's) that
    another channel knows (its evidence about them must count all their notes), each record
    once, at most :data:`MAX_SCORED_RECORDS`."""
    wanted = dict.fromkeys(r for f in found for r in f.to_score())
    if answer is not None:
        wanted.update(dict.fromkeys(h.record_id for h in answer.results
                                    if any(f.knows(h.record_id) for f in found)))
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


def labels(channels: Sequence[Channel | type[Channel]]) -> tuple[str, ...]:
    """A label per channel, in channel order: its ``matchedBy`` names joined by ``/``."""
    return tuple("/".join(channel.names) for channel in channels)


@dataclass(frozen=True)
class Explanation:
    """What one search saw (:func:`explain`; the console's search debugger): no note text, ids
    and numbers only.

    Attributes:
        lexical: the query as the lexical channel read it (``None``: no lexical channel, or a
            filler query).
        channels: a label per channel, in channel order (:func:`labels`).
        records: per record, every channel's evidence, rank and whether its vouch counted,
            with the decision taken (:func:`pinlog.relevance.explain`), shown ones first.
    """

    lexical: LexicalQuery | None
    channels: tuple[str, ...]
    records: list[Explained]

    @property
    def decisions(self) -> list[Decision]:
        """What the search returns, best first (the shown records' decisions)."""
        return [r.decision for r in self.records if r.decision is not None]


async def _run(query: SearchQuery, channels: Sequence[Channel], vector: VectorSearch,
               rule: RelevanceRule, limit: int) -> tuple[list[Found], SearchResponse]:
    await vector.prepare(query)
    found, answer = await gather(find_all(channels, query), vector.candidates(query, limit))
    wanted = records_to_score(found, answer)
    if wanted:
        extra = await vector.score(query, wanted)
        # the doubt strength of the later answer, whose strengths the named records carry
        update: dict[str, Any] = {"scored": [*answer.scored, *extra.scored]}
        if extra.carries_doubt_strength:
            update["doubt_strength"] = extra.doubt_strength
        answer = answer.model_copy(update=update)
    return found, answer


async def search(query: SearchQuery, channels: Sequence[Channel], vector: VectorSearch,
                 rule: RelevanceRule, limit: int) -> list[Decision]:
    """The records to show for ``query``, best first, at most ``limit`` (1..100).

    A filler query (:func:`pinlog.channels.lexical.is_filler`: ``ㅎㅎ``, ``?``, ``...``) answers
    ``[]`` at once. Otherwise the channels read their rows while the vector search embeds the
    query — after it, when its model computes on this machine's CPU (:meth:`VectorSearch.prepare`);
    then the records the channels named are scored (their contexts' cosines and strengths) and
    :func:`decide` runs.

    Raises:
        whatever ``vector`` raises (the ai side's errors: unavailable, profile mismatch).
    """
    if is_filler(query.text):
        return []
    found, answer = await _run(query, channels, vector, rule, limit)
    return decide(found, answer, rule, limit)


async def explain(query: SearchQuery, channels: Sequence[Channel], vector: VectorSearch,
                  rule: RelevanceRule, limit: int) -> Explanation:
    """:func:`search` with each channel's evidence for every record it knows: the same run and
    the decision of :func:`pinlog.relevance.explain`, which calls :func:`pinlog.relevance.decide`
    itself (its ``decisions`` are those :func:`search` returns)."""
    if is_filler(query.text):
        return Explanation(None, labels(channels), [])
    found, answer = await _run(query, channels, vector, rule, limit)
    cosines = scored_contexts(answer)
    records = relevance.explain(cosines, [f.evidence(answer, cosines) for f in found],
                                rrf_k=rule.rrf_k, limit=limit)
    lexical = next((f.query for f in found if isinstance(f, LexicalFound)), None)
    return Explanation(lexical, labels(channels), records)
