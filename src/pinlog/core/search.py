"""Personal search, core side (SPEC §10): the shared flow (:func:`pinlog.channels.search`)
over core's channels (:mod:`pinlog.core.channels`) and the ai side's vector search, then
re-verification of every hit.

While core's lexical channel reads the member's own words, the ai side embeds the query and
answers the records its vector search vouches for (mode ``vector``); then it scores the
contexts of the records the lexical channel named (mode ``score``, the query vector reused).
The channel-neutral decision (:mod:`pinlog.relevance`, the same the ai side's hybrid mode runs)
picks and orders the records; core keeps only hits whose context is still active and whose
record is active, both owned by the member, and decorates them with the place, the matched
context's text and the owner-view keywords of that context (SPEC §8).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import httpx
from sqlalchemy.ext.asyncio import AsyncEngine

from pinlog import channels
from pinlog.contracts import (REQUEST_ID_HEADER, SEARCH_PATH, SECRET_HEADER, SearchMode, SearchRequest,
                              SearchResponse)
from pinlog.core.channels import RelevanceRule, SearchQuery, build
from pinlog.core.dispatch import DispatchConfig
from pinlog.core.services import PlaceView
from pinlog.db.engine import autocommit
from pinlog.db.sql import Queries
from pinlog.errors import PinlogError
from pinlog.logs import request_id_or_new
from pinlog.channels.lexical import LexicalQuery
from pinlog.relevance import Decision, Explained
from pinlog.settings import Settings

log = logging.getLogger(__name__)
queries = Queries("pinlog.core", "search.sql")
core_queries = Queries("pinlog.core", "core.sql")

#: The ai side's search as core calls it (in process or :class:`HttpSearchClient`). It may
#: also have ``prepare_request(request) -> Awaitable[None]``: the in-process client's hook to
#: embed a search's query before core's channels read (the model computes on this CPU;
#: :meth:`pinlog.channels.flow.VectorSearch.prepare`, issue 28); raises as the search would.
SearchFn = Callable[[SearchRequest], Awaitable[SearchResponse]]


class SearchUnavailable(PinlogError, RuntimeError):
    """The ai side could not answer the search (→ 503); the message is a fixed string."""


class SearchRejected(PinlogError, RuntimeError):
    """The ai side refused the search (e.g. profile mismatch, → 422 with ``detail``)."""

    def __init__(self, detail: dict[str, object]) -> None:
        super().__init__("search rejected")
        self.detail = detail


@dataclass(frozen=True)
class SearchConfig:
    """What core's search reads (SPEC §10).

    Attributes:
        profile: the embedding profile in force (the ai side's provider config, given by the
            composition root); sent with every search request.
        rule: the relevance decision's parameters (``PINLOG_SEARCH_TEXT_*``,
            ``PINLOG_SEARCH_RRF_K`` and the profile's calibrated doubt strength: the same rule
            the ai side's hybrid search applies).
        timeout: ``PINLOG_SEARCH_TIMEOUT``, seconds (the ai side answers 503 at its deadline).
    """

    profile: str
    rule: RelevanceRule
    timeout: float

    @classmethod
    def from_settings(cls, settings: Settings, *, profile: str,
                      doubt_strength: float | None = None) -> SearchConfig:
        """``profile`` and the doubt strength are the ai side's (its provider and calibration),
        given as values by the composition root."""
        return cls(profile=profile,
                   rule=RelevanceRule.from_settings(settings, doubt_strength=doubt_strength),
                   timeout=settings.search_timeout)


@dataclass(frozen=True)
class SearchResult:
    """One verified hit: the record, its matched context, that context's cosine similarity and
    the channels that matched (``matched_by``: :data:`pinlog.core.channels.MATCHED_BY`; SPEC §10)."""

    record_id: int
    context_id: int
    similarity: float
    place: PlaceView
    text: str
    keywords: list[str]
    matched_by: tuple[str, ...]


class HttpSearchClient:
    """Calls ``POST {PINLOG_AI_BASE_URL}/internal/v1/search`` with the internal secret.

    Timeouts: connect ``dispatch.connect_timeout``, read ``config.timeout`` plus one second
    (the ai side answers 503 itself at its deadline), seconds.

    Raises:
        ValueError: no ``PINLOG_AI_BASE_URL`` or internal secret (:meth:`DispatchConfig.endpoint`).
    """

    def __init__(self, config: SearchConfig, dispatch: DispatchConfig) -> None:
        base_url, self._secret = dispatch.endpoint()
        self._client = httpx.AsyncClient(
            base_url=base_url.rstrip("/"),
            timeout=httpx.Timeout(config.timeout + 1.0, connect=dispatch.connect_timeout))

    async def __call__(self, request: SearchRequest) -> SearchResponse:
        """Raises SearchRejected on 422, SearchUnavailable on anything else but 200. Sends the
        logging context's request id (``X-Request-Id``: the public request's), or a new one."""
        try:
            response = await self._client.post(
                SEARCH_PATH, json=request.model_dump(by_alias=True),
                headers={SECRET_HEADER: self._secret, REQUEST_ID_HEADER: request_id_or_new()})
        except httpx.HTTPError as exc:
            log.warning("search call failed", extra={"error_class": type(exc).__name__})
            raise SearchUnavailable("search unavailable") from None
        if response.status_code == 422:
            raise SearchRejected(response.json())
        if response.status_code != 200:
            level = logging.ERROR if response.status_code in (401, 403) else logging.WARNING
            log.log(level, "search call answered", extra={"http_status": response.status_code})
            raise SearchUnavailable("search unavailable")
        return SearchResponse.model_validate(response.json())

    async def aclose(self) -> None:
        await self._client.aclose()


async def verify_hits(engine: AsyncEngine, member_id: int,
                      hits: Sequence[Decision]) -> list[SearchResult]:
    """Keep the hits core still vouches for, in the given order (SPEC §10).

    Args:
        hits: the decisions of :func:`pinlog.core.channels.decide`.

    Returns:
        verified results with place, matched context text and owner-view keywords.
    """
    if not hits:
        return []
    context_ids = [hit.context_id for hit in hits]
    # two reads, each its own snapshot as under READ COMMITTED: no BEGIN/ROLLBACK (issue 28)
    async with autocommit(engine).connect() as conn:
        rows = {int(r["context_id"]): r for r in (await conn.execute(
            queries("verify_hits"), {"context_ids": context_ids, "member_id": member_id}
        )).mappings().all()}
        keywords: dict[int, list[str]] = {}
        if rows:
            for kw in (await conn.execute(core_queries("owner_keywords"),
                                          {"context_ids": list(rows)})).mappings().all():
                keywords.setdefault(int(kw["context_id"]), []).append(kw["display_name"])
    results = []
    for hit in hits:
        row = rows.get(hit.context_id)
        if row is None or int(row["record_id"]) != hit.record_id:
            log.info("search hit dropped by core verification",
                     extra={"context_id": hit.context_id, "member_id": member_id})
            continue
        results.append(SearchResult(
            record_id=hit.record_id, context_id=hit.context_id, similarity=hit.similarity,
            place=PlaceView(external_place_id=row["external_place_id"], name=row["name"],
                            address=row["address"], road_address=row["road_address"],
                            lat=float(row["lat"]), lng=float(row["lng"])),
            text=row["body"], keywords=keywords.get(hit.context_id, []),
            matched_by=hit.matched_by))
    return results


class AiVectorSearch:
    """The ai side's vector search over the search client (the kernel's
    :class:`pinlog.channels.VectorSearch`): mode ``vector`` for the candidates, mode ``score``
    for the records core's channels named."""

    def __init__(self, search: SearchFn, profile: str) -> None:
        self._search, self._profile = search, profile

    def _request(self, query: SearchQuery, mode: SearchMode, limit: int = 20,
                 record_ids: Sequence[int] = ()) -> SearchRequest:
        return SearchRequest(user_id=query.member_id, query=query.text, limit=limit,
                             embedding_profile=self._profile, record_ids=list(record_ids), mode=mode,
                             with_doubt_strength=True)

    async def prepare(self, query: SearchQuery) -> None:
        """The search client's ``prepare_request`` hook (``SearchFn``), when it has one."""
        prepare = getattr(self._search, "prepare_request", None)
        if prepare is not None:
            await prepare(self._request(query, "vector"))

    async def candidates(self, query: SearchQuery, limit: int) -> SearchResponse:
        return await self._search(self._request(query, "vector", limit))

    async def score(self, query: SearchQuery, record_ids: Sequence[int]) -> SearchResponse:
        return await self._search(self._request(query, "score", record_ids=record_ids))


async def member_search(engine: AsyncEngine, config: SearchConfig, search: SearchFn | None,
                        member_id: int, query: str, limit: int = 20) -> list[SearchResult]:
    """Search the member's records by meaning and by their own words (SPEC §10).

    Args:
        search: the ai side's search (in-process ``AiRuntime.search`` or :class:`HttpSearchClient`).
        query: 1..2000 characters; embedded whole, once; its lexical terms are matched against
            the member's active notes and saved places.
        limit: 1..100 records.

    Returns:
        records with evidence from at least one channel, best first (``[]`` for an off-topic
        query or a filler one: ``ㅎㅎ``, ``?``, ``...``).

    Raises:
        SearchUnavailable: no ai side configured or it failed.
        SearchRejected: the ai side refused (profile mismatch).
    """
    if search is None:
        raise SearchUnavailable("search unavailable")
    decisions = await channels.search(SearchQuery(member_id, query), build(engine, config.rule),
                                      AiVectorSearch(search, config.profile), config.rule, limit)
    return await verify_hits(engine, member_id, decisions)


@dataclass(frozen=True)
class SearchExplanation:
    """One search explained (the operator console's search debugger, issue 29).

    Attributes:
        channels: a label per channel, in channel order (:func:`pinlog.channels.labels`).
        records: every record a channel had evidence about, with each channel's evidence, rank
            and whether its vouch counted, and the decision (:class:`pinlog.relevance.Explained`),
            shown ones first.
        results: what :func:`member_search` answers for the same search (after re-verification).
        lexical: the query as the lexical channel read it (its content words and the variant
            table's concepts; ``None`` for a filler query).
    """

    channels: tuple[str, ...]
    records: list[Explained]
    results: list[SearchResult]
    lexical: LexicalQuery | None = None


async def explain_search(engine: AsyncEngine, config: SearchConfig, search: SearchFn | None,
                         member_id: int, query: str, limit: int = 20) -> SearchExplanation:
    """:func:`member_search` with the evidence behind its answer: the same channels, the same
    ai-side requests and the same decision — :func:`pinlog.channels.explain` is the flow
    :func:`pinlog.channels.search` runs, and its records come from :func:`pinlog.relevance.explain`,
    which calls :func:`pinlog.relevance.decide` itself. Ids and numbers; the results (verified
    as :func:`member_search` does) carry the matched notes' text.

    Raises:
        SearchUnavailable, SearchRejected: as :func:`member_search`.
    """
    if search is None:
        raise SearchUnavailable("search unavailable")
    why = await channels.explain(SearchQuery(member_id, query), build(engine, config.rule),
                                 AiVectorSearch(search, config.profile), config.rule, limit)
    return SearchExplanation(why.channels, why.records,
                             await verify_hits(engine, member_id, why.decisions), why.lexical)
