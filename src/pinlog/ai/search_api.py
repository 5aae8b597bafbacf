"""``POST /internal/v1/search`` (SPEC §10): the ai side's personal vector search.

Secret-protected like the process route (checked first, constant time). A request naming
another embedding profile than the server's gets 422 with both values and no model call.
"""

from __future__ import annotations

import logging

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import ValidationError

from pinlog import metrics
from pinlog.ai.api import INVALID, UNAUTHORIZED, search_error, secret_ok
from pinlog.ai.errors import ModelError
from pinlog.ai.search import ProfileMismatch
from pinlog.contracts import SEARCH_PATH, SECRET_HEADER, SearchRequest, SearchResponse

log = logging.getLogger(__name__)
router = APIRouter(tags=["internal"])


@router.post(SEARCH_PATH, response_model=SearchResponse, response_model_by_alias=True,
             responses={401: {"description": "missing or wrong secret"},
                        422: {"description": "invalid body or embedding profile mismatch"},
                        503: {"description": "the query could not be embedded in time "
                                              "(PINLOG_SEARCH_TIMEOUT); Retry-After given"}})
async def search(request: Request) -> JSONResponse:
    """Rank the member's records by cosine similarity to the query (one row per record)."""
    runtime = request.app.state.ai
    if not secret_ok(request.headers.get(SECRET_HEADER), runtime.config.secret_values()):
        metrics.SEARCH_REQUESTS.labels("unauthorized").inc()
        return JSONResponse(UNAUTHORIZED, status_code=401)
    try:
        body = SearchRequest.model_validate_json(await request.body())
    except ValidationError:
        metrics.SEARCH_REQUESTS.labels("invalid").inc()
        return JSONResponse(INVALID, status_code=422)
    try:
        response = await runtime.search(body)
    except (ProfileMismatch, ModelError) as exc:
        status, answer = search_error(exc)
        if status == 503:  # PINLOG_SEARCH_TIMEOUT or a model error: the caller may retry
            from pinlog.ai.runtime import RETRY_AFTER_SECONDS

            return JSONResponse(answer, status_code=status,
                                headers={"Retry-After": str(RETRY_AFTER_SECONDS)})
        return JSONResponse(answer, status_code=status)
    answer = response.model_dump(by_alias=True, exclude_none=True)
    if response.carries_doubt_strength:  # null included: "this profile has none"
        answer["doubtStrength"] = response.doubt_strength
    return JSONResponse(answer)
