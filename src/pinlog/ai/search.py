"""Personal natural-language search, ai side (SPEC §10).

The whole query is embedded once (``query`` kind, the profile's query prefix), compared by exact
cosine against the member's COMPLETED, not-deleted embeddings of the same profile, one row per
record, then cut by the profile's calibrated floors and a ratio to the top hit. The top hit is
never cut.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncEngine

from pinlog import metrics
from pinlog.ai.calibration import Calibration
from pinlog.ai.ports import EmbeddingProvider
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
    """Per-profile cuts applied after the SQL (SPEC §10).

    Attributes:
        floor: absolute cosine floor for multi-word queries.
        short_query_floor: floor for one-word queries (they score lower).
        ratio: keep hits with ``similarity >= ratio × top``.
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
    """Drop hits under the floor or under ``ratio × top``; the top hit is always kept.

    Args:
        hits: ordered by similarity, best first.
    """
    if not hits:
        return hits
    floor = cuts.short_query_floor if is_short_query(query) else cuts.floor
    top = hits[0].similarity
    kept = [hits[0]]
    kept += [h for h in hits[1:] if h.similarity >= floor and h.similarity >= cuts.ratio * top]
    return kept


async def search(
    engine: AsyncEngine,
    provider: EmbeddingProvider,
    request: SearchRequest,
    cuts: SearchCuts,
    *,
    apply: bool = True,
) -> SearchResponse:
    """Run one personal search.

    Raises:
        ProfileMismatch: ``request.embedding_profile`` differs from ``provider.profile``
            (checked before any model call).
        pinlog.ai.errors.ModelError: the query could not be embedded, or its vector is
            degenerate (:class:`~pinlog.ai.errors.DegenerateVectorError`).
    """
    if request.embedding_profile != provider.profile:
        metrics.SEARCH_REQUESTS.labels("profile_mismatch").inc()
        raise ProfileMismatch(request.embedding_profile, provider.profile)
    # SPEC §9/§10: a degenerate query vector (zero norm, NaN, wrong length) is a provider error
    # (→ 503), never a query: its cosine against every note would be NaN.
    vector = check_embeddings(await provider.embed([request.query], "query"), 1,
                              provider.dimension)[0]
    async with engine.connect() as conn:
        rows = (await conn.execute(queries("search_member"), {
            "query_vector": to_pgvector(vector), "user_id": request.user_id,
            "profile": provider.profile, "limit": request.limit,
        })).all()
    hits = [SearchHit(record_id=r.record_id, context_id=r.context_id,
                      similarity=round(float(r.similarity), 6)) for r in rows]
    kept = apply_cuts(hits, request.query, cuts) if apply else hits
    metrics.SEARCH_REQUESTS.labels("ok").inc()
    log.info("search", extra={"user_id": request.user_id, "count": len(kept)})
    return SearchResponse(results=kept)
