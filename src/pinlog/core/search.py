"""Personal search, core side (SPEC §10): the channels (:mod:`pinlog.core.channels`), the
relevance decision and fusion (:mod:`pinlog.relevance`), then re-verification of every hit.

Each channel reads what it needs for the query (the lexical channel: the member's own words);
core asks the ai side for the records its vector search vouches for and for the cosine of the
contexts the channels named, decides which records have evidence and orders them, then keeps
only hits whose context is still active and whose record is active, both owned by the member,
and decorates them with the place, the matched context's text and the owner-view keywords of
that context (SPEC §8).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import httpx
from sqlalchemy.ext.asyncio import AsyncEngine

from pinlog.contracts import REQUEST_ID_HEADER, SEARCH_PATH, SECRET_HEADER, SearchRequest, SearchResponse
from pinlog.core.channels import (Found, RelevanceRule, SearchQuery, decide, explain, find_all, labels,
                                  records_to_score)
from pinlog.core.dispatch import DispatchConfig
from pinlog.core.services import PlaceView
from pinlog.db.sql import Queries
from pinlog.errors import PinlogError
from pinlog.logs import request_id_or_new
from pinlog.relevance import Decision, Explained
from pinlog.settings import Settings

log = logging.getLogger(__name__)
queries = Queries("pinlog.core", "search.sql")
core_queries = Queries("pinlog.core", "core.sql")

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
        rule: the relevance decision's parameters (``PINLOG_SEARCH_TEXT_MIN_COVERAGE``,
            ``PINLOG_SEARCH_RRF_K``).
        timeout: ``PINLOG_SEARCH_TIMEOUT``, seconds (the ai side answers 503 at its deadline).
    """

    profile: str
    rule: RelevanceRule
    timeout: float

    @classmethod
    def from_settings(cls, settings: Settings, *, profile: str) -> SearchConfig:
        return cls(profile=profile, rule=RelevanceRule(min_coverage=settings.search_text_min_coverage,
                                                       rrf_k=settings.search_rrf_k),
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
    async with engine.connect() as conn:
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
        query or one without any word).

    Raises:
        SearchUnavailable: no ai side configured or it failed.
        SearchRejected: the ai side refused (profile mismatch).
    """
    found, response = await _channels_and_answer(engine, config, search, member_id, query, limit)
    return await verify_hits(engine, member_id, decide(found, response, config.rule, limit))


async def _channels_and_answer(engine: AsyncEngine, config: SearchConfig, search: SearchFn | None,
                               member_id: int, query: str, limit: int,
                               ) -> tuple[list[Found], SearchResponse]:
    """Each channel's findings and the ai side's answer for one search (SPEC §10)."""
    if search is None:
        raise SearchUnavailable("search unavailable")
    found = await find_all(engine, SearchQuery(member_id, query), config.rule)
    request = SearchRequest(user_id=member_id, query=query, limit=limit,
                            embedding_profile=config.profile, record_ids=records_to_score(found))
    return found, await search(request)


@dataclass(frozen=True)
class SearchExplanation:
    """One search explained (the operator console's search debugger, issue 29).

    Attributes:
        channels: a label per channel, in channel order (:func:`pinlog.core.channels.labels`).
        records: every record a channel had evidence about, with each channel's evidence and
            rank and the decision (:class:`pinlog.relevance.Explained`), shown ones first.
        results: what :func:`member_search` answers for the same search (after re-verification).
    """

    channels: tuple[str, ...]
    records: list[Explained]
    results: list[SearchResult]


async def explain_search(engine: AsyncEngine, config: SearchConfig, search: SearchFn | None,
                         member_id: int, query: str, limit: int = 20) -> SearchExplanation:
    """:func:`member_search` with the evidence behind its answer: the same channels, the same
    ai-side request and the same decision (:func:`pinlog.core.channels.explain` runs
    :func:`pinlog.relevance.decide`), plus every channel's evidence per record.

    Raises:
        SearchUnavailable, SearchRejected: as :func:`member_search`.
    """
    found, response = await _channels_and_answer(engine, config, search, member_id, query, limit)
    records = explain(found, response, config.rule, limit)
    hits = [r.decision for r in records if r.decision is not None]
    return SearchExplanation(labels(), records, await verify_hits(engine, member_id, hits))
