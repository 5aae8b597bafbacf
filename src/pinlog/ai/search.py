"""Personal natural-language search, ai side (SPEC §10).

The whole query is embedded once (``query`` kind, the profile's query prefix; optionally after
an LLM rewrite, :mod:`pinlog.ai.rewrite`), compared by exact cosine against the member's
COMPLETED, not-deleted embeddings of the same profile, one row per record. Only hits the vector
channel vouches for are returned: cosine at or above the profile's calibrated floor for the
query's length (and within a ratio of the best hit). There is no "keep the top hit" rule: an
off-topic query gets no result. The contexts of the records core's lexical channel found
(``recordIds``) are scored too, so core can merge the channels and report their cosine (SPEC §10).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import Row
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from pinlog import metrics
from pinlog.ai.calibration import Calibration
from pinlog.ai.candidates import select_candidates
from pinlog.ai.errors import PermanentModelError
from pinlog.ai.ports import EmbeddingProvider
from pinlog.ai.presets import load_snapshot
from pinlog.ai.routing import ProfileSwitched, read_roles
from pinlog.ai.vectors import check_embeddings, to_pgvector
from pinlog.contracts import SearchHit, SearchRequest, SearchResponse
from pinlog.db.sql import Queries
from pinlog.errors import PinlogError

log = logging.getLogger(__name__)
queries = Queries("pinlog.ai", "search.sql")


class ProfileMismatch(PinlogError, ValueError):
    """The request names another embedding profile than the server's (→ 422, SPEC §10)."""

    def __init__(self, requested: str, server: str) -> None:
        super().__init__("embedding profile mismatch")
        self.requested = requested
        self.server = server


@dataclass(frozen=True)
class SearchCuts:
    """Per-profile evidence thresholds of the vector channel, applied after the SQL (SPEC §10).

    Attributes:
        floor: absolute cosine floor for multi-word queries.
        short_query_floor: floor for one-word queries (they score lower).
        ratio: keep hits with ``similarity >= ratio × top`` as well (0 disables it).
    """

    floor: float
    short_query_floor: float
    ratio: float

    @classmethod
    def from_calibration(cls, calibration: Calibration) -> SearchCuts:
        return cls(calibration.search_floor, calibration.search_short_query_floor,
                   calibration.search_ratio)


def is_short_query(query: str) -> bool:
    """One word (whitespace-separated) → the lower floor applies."""
    return len(query.split()) <= 1


def apply_cuts(hits: list[SearchHit], query: str, cuts: SearchCuts) -> list[SearchHit]:
    """The hits the vector channel vouches for: similarity at or above the floor for the query's
    length and at or above ``ratio × top``. The top hit is cut like any other (SPEC §10: an
    off-topic query gets nothing). Order is preserved; hits are not modified.

    Args:
        hits: ordered by similarity, best first.
    """
    if not hits:
        return hits
    floor = cuts.short_query_floor if is_short_query(query) else cuts.floor
    top = hits[0].similarity
    return [h for h in hits if h.similarity >= floor and h.similarity >= cuts.ratio * top]


#: An optional query rewrite applied before embedding: text in, text out, never raises.
Rewrite = Callable[[str], Awaitable[str]]


#: How many of the query's nearest presets count for ``keywordMatched`` (a context keeps at
#: most 3 keywords, SPEC §8).
QUERY_PRESETS_TOP_K = 3


async def query_presets(conn: AsyncConnection, vector: np.ndarray, profile: str, *,
                        floor: float, top_k: int = QUERY_PRESETS_TOP_K) -> list[int]:
    """The query's own best presets: ids of its ``top_k`` nearest usable presets of
    ``profile`` at cosine ≥ ``floor`` (the profile's candidate floor) — the keyword stage's
    candidate rule applied to the query vector (SPEC §8). Empty when none are loaded."""
    snapshot = await load_snapshot(conn, profile)
    try:
        chosen = select_candidates(vector, snapshot, top_k=top_k, floor=floor)
    except PermanentModelError:  # a zero query vector: no preset is near it
        return []
    return [c.preset.id for c in chosen]


async def mark_keyword_matched(conn: AsyncConnection, hits: list[SearchHit], user_id: int,
                               preset_ids: list[int]) -> list[SearchHit]:
    """``hits`` with ``keyword_matched`` set: True when the hit's record has a keyword among
    ``preset_ids`` (COMPLETED keyword stage, active context, same member)."""
    if not hits or not preset_ids:
        return hits
    matched = set((await conn.execute(queries("keyword_matched_records"), {
        "user_id": user_id, "record_ids": [h.record_id for h in hits],
        "keyword_ids": preset_ids})).scalars())
    return [h.model_copy(update={"keyword_matched": h.record_id in matched}) for h in hits]


async def search(
    engine: AsyncEngine,
    provider: EmbeddingProvider,
    request: SearchRequest,
    cuts: SearchCuts,
    *,
    apply: bool = True,
    rewrite: Rewrite | None = None,
    keyword_floor: float | None = None,
    accepted_profiles: Collection[str] | None = None,
) -> SearchResponse:
    """Run one personal search. With ``keyword_floor`` (the profile's candidate floor) each
    hit's ``keywordMatched`` is set (:func:`query_presets`, :func:`mark_keyword_matched`).

    The profile (SPEC §9.1): the query is embedded with ``provider`` (the active profile's, as
    this replica last read the roles); the roles and the vectors are then read in ONE
    REPEATABLE READ snapshot, so the vectors searched are all of the profile the query was
    embedded with, and an activation committed in between is noticed instead of searching an
    empty space (:class:`~pinlog.ai.routing.ProfileSwitched`).

    Args:
        apply: apply the vector-evidence cuts (False: every hit, for calibration/benchmarks).
        rewrite: optional query rewrite before embedding (must fall back to the query itself
            on any failure; :class:`pinlog.ai.rewrite.QueryRewriter` does).
        accepted_profiles: the profiles a request may name (this replica's configured ones,
            SPEC §9.1: a backend keeps naming its profile through a switch); default
            ``provider.profile`` only.

    Raises:
        ProfileMismatch: ``request.embedding_profile`` is not accepted (checked before any
            model call).
        ProfileSwitched: the database's active profile is not ``provider.profile`` (the caller
            re-reads the roles and searches again).
        pinlog.ai.errors.ModelError: the query could not be embedded, or its vector is
            degenerate (:class:`~pinlog.ai.errors.DegenerateVectorError`).
    """
    if request.embedding_profile not in (accepted_profiles or (provider.profile,)):
        metrics.SEARCH_REQUESTS.labels("profile_mismatch").inc()
        raise ProfileMismatch(request.embedding_profile, provider.profile)
    text = await rewrite(request.query) if rewrite is not None else request.query
    # SPEC §9/§10: a degenerate query vector (zero norm, NaN, wrong length) is a provider error
    # (→ 503), never a query: its cosine against every note would be NaN.
    vector = check_embeddings(await provider.embed([text], "query"), 1, provider.dimension)[0]
    params = {"query_vector": to_pgvector(vector), "user_id": request.user_id,
              "profile": provider.profile}
    async with engine.connect() as conn:
        # SPEC §9.1: one snapshot for the roles and the vectors (read-only: never a conflict)
        await conn.execution_options(isolation_level="REPEATABLE READ")
        active = (await read_roles(conn)).active
        if active is not None and active != provider.profile:
            raise ProfileSwitched(active)
        # the floor this query's hits must reach (apply_cuts) bounds the statement's work
        min_similarity = (cuts.short_query_floor if is_short_query(request.query)
                          else cuts.floor) if apply else NO_CUT
        rows = (await conn.execute(queries("search_member"), {
            **params, "limit": request.limit, "min_similarity": min_similarity})).all()
        scored_rows = (await conn.execute(queries("score_records"), {
            **params, "record_ids": list(request.record_ids)})).all() if request.record_ids else []
        hits = [_hit(r) for r in rows]
        kept = apply_cuts(hits, request.query, cuts) if apply else hits
        if keyword_floor is not None and kept:
            presets = await query_presets(conn, vector, provider.profile, floor=keyword_floor)
            kept = await mark_keyword_matched(conn, kept, request.user_id, presets)
    metrics.SEARCH_REQUESTS.labels("ok").inc()
    log.info("search", extra={"user_id": request.user_id, "count": len(kept),
                              "scored": len(scored_rows)})
    return SearchResponse(results=kept, scored=[_hit(r) for r in scored_rows])


#: ``min_similarity`` that cuts nothing (cosine similarity is at least -1).
NO_CUT = -2.0


def _hit(row: Row[Any]) -> SearchHit:
    return SearchHit(record_id=row.record_id, context_id=row.context_id,
                     similarity=round(float(row.similarity), 6))
