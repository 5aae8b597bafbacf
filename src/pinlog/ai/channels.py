"""The ai side's search channels and its hybrid search (SPEC §10 "The same decision for
adopters"; issue 28).

A reference backend calls ``POST /internal/v1/search`` and has no lexical channel of its own.
The ai side keeps its own lexical evidence — the terms of the text and ``placeMeta`` of every
process request, stored with the embedding (``ai.context_lexical``, ``ai/state.sql`` →
``upsert_lexical``) — and answers mode ``hybrid`` with the shared flow
(:func:`pinlog.channels.search`) over its registry :data:`CHANNELS` (the same channel classes,
in the same order, as core's) and its own vector search: the same rules and the same decision
as core's ``POST /v1/search``. Nothing here reads ``core.*``.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.ext.asyncio import AsyncEngine

from pinlog import channels
from pinlog.ai.ports import EmbeddingProvider
from pinlog.ai.search import (
    Background,
    QueryVectors,
    Rewrite,
    SearchCuts,
    mark_keyword_matched,
    query_presets,
    queries,
    search,
)
from pinlog.channels import Channel, RelevanceRule, SearchQuery
from pinlog.channels.lexical import (MAX_MATCHED_ROWS, LexicalMatch, LexicalQuery, is_filler, matches_from_rows,
                                     tsquery)
from pinlog.channels.lexical import LexicalChannel as SharedLexicalChannel
from pinlog.channels.vector import VectorChannel
from pinlog.contracts import SearchHit, SearchMode, SearchRequest, SearchResponse
from pinlog.db.engine import autocommit


class LexicalChannel(SharedLexicalChannel):
    """The lexical channel over the ai side's own lexical rows (``ai/search.sql`` →
    ``lexical_matches``: through the embedding's four filters, of the profile in force)."""

    profile: str = ""

    async def matches(self, member_id: int, query: LexicalQuery) -> dict[int, LexicalMatch]:
        assert self.engine is not None
        if not query.search_terms:
            return {}
        async with autocommit(self.engine).connect() as conn:  # one read (issue 28)
            rows = (await conn.execute(queries("lexical_matches"), {
                "user_id": member_id, "profile": self.profile, "terms": list(query.search_terms),
                "tsquery": tsquery(query), "max_rows": MAX_MATCHED_ROWS})).all()
        return matches_from_rows(rows, query)


#: The ai side's registry, in ``matchedBy`` order (the same as core's, so both decide alike).
CHANNELS: tuple[type[Channel], ...] = (VectorChannel, LexicalChannel)


def build(engine: AsyncEngine, rule: RelevanceRule, profile: str,
          registry: Sequence[type[Channel]] = CHANNELS) -> list[Channel]:
    """The channels of one hybrid search, bound to the ai side's engine and profile."""
    built = []
    for channel in registry:
        instance = channel(rule, engine)
        if isinstance(instance, LexicalChannel):
            instance.profile = profile
        built.append(instance)
    return built


class AiSearch:
    """The ai side's searches under one profile: the vector channel (modes ``vector`` and
    ``score``, :func:`pinlog.ai.search.search`) and the hybrid search (mode ``hybrid``).

    Args:
        cuts: the vector channel's thresholds (the profile's calibration).
        rule: the decision's parameters (the same value core's search uses).
        background: the profile's embedded background (``None``: uncalibrated profile).
        vectors: the recent query vectors, shared by the two calls of one search.
        keyword_floor: the profile's candidate floor (``keywordMatched``).
        accepted_profiles: the profiles a request may name (SPEC §9.1: a backend keeps naming
            its profile through a switch); default ``provider.profile`` only.
    """

    def __init__(self, engine: AsyncEngine, provider: EmbeddingProvider, cuts: SearchCuts,
                 rule: RelevanceRule, *, background: Background | None = None,
                 vectors: QueryVectors | None = None, rewrite: Rewrite | None = None,
                 keyword_floor: float | None = None,
                 accepted_profiles: Sequence[str] | None = None) -> None:
        self.engine, self.provider, self.cuts, self.rule = engine, provider, cuts, rule
        self.accepted_profiles = tuple(accepted_profiles or (provider.profile,))
        self.background, self.rewrite, self.keyword_floor = background, rewrite, keyword_floor
        self.vectors = vectors if vectors is not None else QueryVectors()

    async def vector(self, request: SearchRequest, *, keywords: bool = True) -> SearchResponse:
        """Modes ``vector``/``score`` (:func:`pinlog.ai.search.search`), with this profile's
        doubt strength when the request asks ``withDoubtStrength`` (the caller's decision doubts
        with the strengths of the profile that answered, SPEC §9.1)."""
        response = await search(self.engine, self.provider, request, self.cuts,
                                rewrite=self.rewrite,
                                keyword_floor=self.keyword_floor if keywords else None,
                                background=self.background, vectors=self.vectors,
                                accepted_profiles=self.accepted_profiles)
        if not request.with_doubt_strength:
            return response
        return response.model_copy(update={"doubt_strength": self.rule.doubt_strength})

    def _request(self, query: SearchQuery, mode: SearchMode, limit: int = 20,
                 record_ids: Sequence[int] = ()) -> SearchRequest:
        return SearchRequest(user_id=query.member_id, query=query.text, limit=limit,
                             embedding_profile=self.provider.profile, record_ids=list(record_ids),
                             mode=mode, with_doubt_strength=True)

    # the kernel's VectorSearch, in process
    async def prepare(self, query: SearchQuery) -> None:
        """The query's vector, embedded now when the model computes on this machine's CPU
        (``on_this_cpu``; kept in :attr:`vectors` for the search's requests), else nothing
        (:meth:`pinlog.channels.flow.VectorSearch.prepare`). Measured on 2 cores, 10,000 notes
        of one member among 200k rows, 100 queries × 3 alternating rounds, request p95 with the
        channels beside the embedding vs after it: 92-108 vs 76-84 ms.

        Raises:
            pinlog.ai.errors.ModelError: the query could not be embedded.
        """
        if getattr(self.provider, "on_this_cpu", False) and not is_filler(query.text):
            await self.vectors.get(self.provider, query.text, self.rewrite)

    async def prepare_request(self, request: SearchRequest) -> None:
        """:meth:`prepare` for a search client's request (core's optional hook, SearchFn in
        :mod:`pinlog.core.search`); nothing for a profile this search does not accept (the
        request itself is then refused, before any model call)."""
        if request.embedding_profile in self.accepted_profiles:
            await self.prepare(SearchQuery(request.user_id, request.query))

    async def candidates(self, query: SearchQuery, limit: int) -> SearchResponse:
        return await self.vector(self._request(query, "vector", limit), keywords=False)

    async def score(self, query: SearchQuery, record_ids: Sequence[int]) -> SearchResponse:
        return await self.vector(self._request(query, "score", record_ids=record_ids), keywords=False)

    async def hybrid(self, request: SearchRequest) -> SearchResponse:
        """Mode ``hybrid``: the ai side's channels and the shared decision; ``results`` with
        ``matchedBy`` and ``keywordMatched``.

        Raises:
            pinlog.ai.search.ProfileMismatch: another profile was requested (no model call).
            pinlog.ai.errors.ModelError: the query could not be embedded.
        """
        query = SearchQuery(request.user_id, request.query)
        if request.embedding_profile not in self.accepted_profiles:
            return await self.vector(request)  # raises ProfileMismatch before any model call
        decisions = await channels.search(query, build(self.engine, self.rule, self.provider.profile),
                                          self, self.rule, request.limit)
        hits = [SearchHit(record_id=d.record_id, context_id=d.context_id, similarity=d.similarity,
                          matched_by=list(d.matched_by)) for d in decisions]
        if hits and self.keyword_floor is not None:
            vector = await self.vectors.get(self.provider, request.query, self.rewrite)
            async with self.engine.connect() as conn:
                presets = await query_presets(conn, vector, self.provider.profile, floor=self.keyword_floor)
                hits = await mark_keyword_matched(conn, hits, request.user_id, presets)
        return SearchResponse(results=hits)

    async def __call__(self, request: SearchRequest) -> SearchResponse:
        """The answer to one request, by its mode."""
        return await (self.hybrid(request) if request.mode == "hybrid" else self.vector(request))

    async def explain(self, request: SearchRequest) -> channels.Explanation:
        """What each of the ai side's channels said about each record (mode ``hybrid``'s
        decision; :func:`pinlog.channels.explain`)."""
        query = SearchQuery(request.user_id, request.query)
        return await channels.explain(query, build(self.engine, self.rule, self.provider.profile),
                                      self, self.rule, request.limit)
