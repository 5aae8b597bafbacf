"""``POST /v1/search``: the member's natural-language search over their own records (SPEC §10)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from pydantic import Field

from pinlog.core.api.deps import Member
from pinlog.core.api.errors import R401, R422, CoreRoute
from pinlog.core.api.schemas import NonBlank, PlaceOut, _In, _Out
from pinlog.core.channels import MATCHED_BY
from pinlog.core.search import SearchResult, member_search

router = APIRouter(prefix="/v1/search", tags=["search"], route_class=CoreRoute,
                   responses={**R401, **R422})


class SearchIn(_In):
    """A query (1..500 characters, embedded whole) and how many records to return (1..100)."""

    query: NonBlank = Field(min_length=1, max_length=500)
    limit: int = Field(20, ge=1, le=100)


class SearchResultOut(_Out):
    record_id: int
    context_id: int
    similarity: float
    place: PlaceOut
    text: str
    keywords: list[str]
    matched_by: list[str] = Field(description=f"Channels that matched: {', '.join(MATCHED_BY)}.")


class SearchOut(_Out):
    """The body of ``POST /v1/search`` — and of ``pinlog search --json`` (one schema for both)."""

    results: list[SearchResultOut]

    @classmethod
    def of(cls, results: list[SearchResult]) -> SearchOut:
        """Build from :func:`pinlog.core.search.member_search`'s verified hits, in rank order."""
        return cls(results=[SearchResultOut(
            record_id=r.record_id, context_id=r.context_id, similarity=r.similarity,
            place=PlaceOut.of(r.place), text=r.text, keywords=r.keywords,
            matched_by=list(r.matched_by)) for r in results])


@router.post("", response_model=SearchOut, response_model_by_alias=True,
             responses={503: {"description": "search unavailable"}})
async def search(body: SearchIn, member_id: Member, request: Request) -> SearchOut:
    """Records of the current member that a search channel vouches for (by meaning, or by their
    own words in notes and place name/address), best first, each with its matched context, that
    context's similarity (cosine), owner-view keywords and ``matchedBy`` (the channels that
    matched). An off-topic query gets ``{"results": []}``. Another member's data never appears;
    deleted or edited contexts never come back (every hit is re-verified)."""
    core = request.app.state.core
    results = await member_search(core.engine, core.config.search, core.search_client,
                                  member_id, body.query, body.limit)  # errors: CoreRoute
    return SearchOut.of(results)
