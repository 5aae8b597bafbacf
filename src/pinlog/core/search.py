"""Personal search, core side (SPEC §10): lexical channel, ai vector channel, relevance
decision and merge (:mod:`pinlog.core.relevance`), then re-verification of every hit.

core matches the query's lexical terms against the member's own words (active note bodies and
saved places' names/addresses, ``lexical_matches``), asks the ai side for the records its
vector channel vouches for and for the cosine of the lexically matched contexts, decides which
records have evidence and orders them, then keeps only hits whose context is still active and
whose record is active, both owned by the member, and decorates them with the place, the
matched context's text and the owner-view keywords of that context (SPEC §8).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import httpx
from sqlalchemy.ext.asyncio import AsyncEngine

from pinlog.contracts import (MAX_SCORED_RECORDS, REQUEST_ID_HEADER, SEARCH_PATH, SECRET_HEADER,
                              SearchHit, SearchRequest, SearchResponse)
from pinlog.core.dispatch import DispatchConfig
from pinlog.core.relevance import RecordEvidence, Decision, RelevanceRule, decide
from pinlog.core.services import PlaceView
from pinlog.db.sql import Queries
from pinlog.errors import PinlogError
from pinlog.settings import Settings
from pinlog.text import lexical_terms

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
    the channels that matched (``matched_by``: ``vector``, ``text``, ``place``; SPEC §10)."""

    record_id: int
    context_id: int
    similarity: float
    place: PlaceView
    text: str
    keywords: list[str]
    matched_by: tuple[str, ...] = ("vector",)


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
        """Raises SearchRejected on 422, SearchUnavailable on anything else but 200."""
        try:
            response = await self._client.post(
                SEARCH_PATH, json=request.model_dump(by_alias=True),
                headers={SECRET_HEADER: self._secret, REQUEST_ID_HEADER: uuid.uuid4().hex})
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
                      response: SearchResponse | list[Decision]) -> list[SearchResult]:
    """Keep the hits core still vouches for, in the given order (SPEC §10).

    Args:
        response: the ai side's response (its ``results``, matched by the vector channel) or
            the merged decisions of :func:`pinlog.core.relevance.decide`.

    Returns:
        verified results with place, matched context text and owner-view keywords.
    """
    hits: list[SearchHit] | list[Decision] = (
        response.results if isinstance(response, SearchResponse) else response)
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
            matched_by=getattr(hit, "matched_by", ("vector",))))
    return results


async def lexical_matches(engine: AsyncEngine, member_id: int,
                          terms: list[str]) -> dict[int, RecordEvidence]:
    """The lexical channel (SPEC §10): record id → candidate with the query terms found in each
    of its active notes that contains any (``note_terms``) and in its place (``place_terms``),
    for every active record of the member with at least one matching term."""
    if not terms:
        return {}
    wanted = frozenset(terms)
    tsquery = " | ".join(f"'{t}'" for t in terms)  # each term is a \w+ run: no quoting needed
    async with engine.connect() as conn:
        rows = (await conn.execute(queries("lexical_matches"), {
            "member_id": member_id, "tsquery": tsquery})).all()
    found: dict[int, RecordEvidence] = {}
    for context_id, record_id, note_terms, place_terms in rows:
        candidate = found.setdefault(int(record_id), RecordEvidence(int(record_id)))
        if context_id is not None:
            candidate.note_terms[int(context_id)] = wanted.intersection(note_terms or ())
        else:
            candidate.place_terms = wanted.intersection(place_terms or ())
    return found


def records_to_score(lexical: dict[int, RecordEvidence], query_terms: int,
                     rule: RelevanceRule) -> list[int]:
    """The lexically matched records whose contexts the ai side is asked to score: those that
    can pass the lexical test (records below it are shown only if the vector channel vouches
    for them, and then the ai side returns them anyway), most matched terms first, at most
    :data:`MAX_SCORED_RECORDS`."""
    passing = [c for c in lexical.values()
               if query_terms and len(c.matched_terms(all_notes=True)) / query_terms >= rule.min_coverage]
    passing.sort(key=lambda c: (-len(c.matched_terms(all_notes=True)), c.record_id))
    return [c.record_id for c in passing[:MAX_SCORED_RECORDS]]


def merge_channels(lexical: dict[int, RecordEvidence], response: SearchResponse) -> list[RecordEvidence]:
    """One candidate per record from the lexical matches and the ai side's answer: the vector
    channel's results (flagged ``vector``) and the cosines of the scored contexts."""
    candidates = dict(lexical)
    for hit in response.scored:
        candidate = candidates.setdefault(hit.record_id, RecordEvidence(hit.record_id))
        candidate.similarities[hit.context_id] = hit.similarity
    for hit in response.results:
        candidate = candidates.setdefault(hit.record_id, RecordEvidence(hit.record_id))
        candidate.similarities[hit.context_id] = hit.similarity
        candidate.vector = True
        candidate.vector_context_id = hit.context_id
    return list(candidates.values())


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
    if search is None:
        raise SearchUnavailable("search unavailable")
    terms = lexical_terms(query)
    rule = config.rule
    lexical = await lexical_matches(engine, member_id, terms)
    request = SearchRequest(user_id=member_id, query=query, limit=limit,
                            embedding_profile=config.profile,
                            record_ids=records_to_score(lexical, len(terms), rule))
    response = await search(request)
    decisions = decide(merge_channels(lexical, response), len(terms), rule, limit)
    return await verify_hits(engine, member_id, decisions)
