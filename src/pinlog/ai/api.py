"""Internal HTTP API of the ai side (SPEC §5.1).

``POST /internal/v1/context/process``: the secret header is checked first (constant time, against
every configured secret, for rotation) so an unauthenticated caller learns nothing about the body
rules; then the body is validated; then the job is queued. Error bodies are fixed strings in
the one envelope ``{"error": CODE, "message": …}`` (:func:`pinlog.http.error_body`).
``POST /internal/v1/context/process-batch`` is the same for many contexts at once, with one status
per item (docs/ARCHITECTURE.md "Batch path").
The runtime is read from ``request.app.state.ai``.

:func:`search_error` is the ai side's one map from a search error to its HTTP answer, used by
``POST /internal/v1/search`` and (to raise core's matching errors) by the in-process path in
:func:`pinlog.composition.in_process_search`.
"""

from __future__ import annotations

import logging
from typing import Any, TypeVar

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ValidationError

from pinlog import metrics
from pinlog.ai.errors import ModelError
from pinlog.ai.search import ProfileMismatch
from pinlog.contracts import (PROCESS_BATCH_PATH, PROCESS_PATH, SECRET_HEADER, ProcessBatchRequest,
                              ProcessBatchResponse, ProcessRequest, secret_ok)
from pinlog.http import error_body

log = logging.getLogger(__name__)
#: The body model of an internal route (:func:`_accepted_body`).
Body = TypeVar("Body", bound=BaseModel)

router = APIRouter(tags=["internal"])

#: Fixed answers of the internal routes (never an input value).
UNAUTHORIZED = error_body("UNAUTHORIZED", "missing or wrong X-Internal-Secret")
INVALID = error_body("INVALID_INPUT", "the request body is not a valid request for this route")
BUSY = error_body("BUSY", "the work queue is full, retry later")
SEARCH_UNAVAILABLE = error_body("SEARCH_UNAVAILABLE", "search unavailable, retry later")


def search_error(exc: ProfileMismatch | ModelError) -> tuple[int, dict[str, str]]:
    """``(HTTP status, fixed body)`` for a search that failed (SPEC §10).

    A profile mismatch → 422 naming both profiles under our keys and the reference's
    (``requestProfile``/``serverProfile``; no model was called); a model error → 503,
    counted in ``pinlog_search_requests_total{outcome="model_error"}`` and logged with its class
    only (never the query).
    """
    if isinstance(exc, ProfileMismatch):
        # Our keys and the reference system's (requestProfile/serverProfile, SPEC §10).
        return 422, error_body("PROFILE_MISMATCH", "embedding profile mismatch",
                               requested=exc.requested, server=exc.server,
                               requestProfile=exc.requested, serverProfile=exc.server)
    metrics.SEARCH_REQUESTS.labels("model_error").inc()
    log.warning("search query could not be embedded",
                extra={"error_class": "transient" if exc.transient else "permanent"})
    return 503, dict(SEARCH_UNAVAILABLE)


async def _accepted_body(request: Request, runtime: Any, model: type[Body],
                         what: str) -> Body | JSONResponse:
    """The request's body as ``model``, or the answer that refuses it: 401 with the fixed body
    when the secret header is missing or wrong (counted, logged at WARNING naming ``what``),
    checked before the body is read; 422 ``INVALID`` when the body is not a valid ``model``
    (counted as ``invalid``; the error names no input value)."""
    if not secret_ok(request.headers.get(SECRET_HEADER), runtime.config.secret_values()):
        metrics.PROCESS_REQUESTS.labels(outcome="unauthorized").inc()
        log.warning(f"{what} with a missing or wrong secret", extra={"http_status": 401})
        return JSONResponse(UNAUTHORIZED, status_code=401)
    try:
        return model.model_validate_json(await request.body())
    except ValidationError:
        metrics.PROCESS_REQUESTS.labels(outcome="invalid").inc()
        return JSONResponse(INVALID, status_code=422)


@router.post(
    PROCESS_PATH, status_code=202,
    responses={401: {"description": "missing or wrong secret"}, 422: {"description": "invalid body"},
               503: {"description": "work queue full; Retry-After set"}},
)
async def process_context(request: Request) -> Response:
    """Accept a context for background processing (SPEC §5.1): 202 (empty body), 401, 422, 503."""
    runtime = request.app.state.ai
    body = await _accepted_body(request, runtime, ProcessRequest, "process request")
    if isinstance(body, JSONResponse):
        return body
    # the request id rides in the logging context; another process sent it: this one takes
    # over sending it once accepted (SPEC §7.3.1)
    status = await runtime.submit(body, take_over=True)
    if status == 202:
        return Response(status_code=202)
    if status == 503:
        from pinlog.ai.runtime import RETRY_AFTER_SECONDS

        return JSONResponse(BUSY, status_code=503,
                            headers={"Retry-After": str(RETRY_AFTER_SECONDS)})
    return JSONResponse(INVALID, status_code=422)


@router.post(
    PROCESS_BATCH_PATH, status_code=202, response_model=ProcessBatchResponse,
    responses={401: {"description": "missing or wrong secret"},
               422: {"description": "not a batch of 1..1000 contexts"},
               503: {"description": "work queue full, no item accepted; Retry-After set"}},
)
async def process_batch(request: Request) -> Response:
    """Accept many contexts for background processing (docs/ARCHITECTURE.md "Batch path").

    Body ``{"contexts": [<process request>, …]}`` (1..1000 items, each the body of
    ``POST /internal/v1/context/process``). Answers 202 ``{"statuses": [...]}`` with one status
    per item, in order (202 queued, 422 invalid item or repeated ``contextId``, 503 the work
    queue was full when its turn came); 503 with the ``BUSY`` error envelope plus the same
    ``statuses`` and ``Retry-After`` when no valid item could be queued; 401 wrong secret; 422
    (``INVALID_INPUT``) when the body is not such a batch. Items are queued in order without
    waiting, so the workers take them as batches.
    """
    runtime = request.app.state.ai
    body = await _accepted_body(request, runtime, ProcessBatchRequest, "process-batch request")
    if isinstance(body, JSONResponse):
        return body
    items = body.items()
    valid = [item for item in items if item is not None]
    queued = iter(await runtime.submit_batch(valid, take_over=True))  # the request id rides in the context
    statuses = []
    for item in items:
        if item is None:
            metrics.PROCESS_REQUESTS.labels(outcome="invalid").inc()
            statuses.append(422)
        else:
            statuses.append(next(queued))
    if valid and all(status == 503 for status in statuses if status != 422):
        from pinlog.ai.runtime import RETRY_AFTER_SECONDS

        return JSONResponse({**BUSY, "statuses": statuses}, status_code=503,
                            headers={"Retry-After": str(RETRY_AFTER_SECONDS)})
    return JSONResponse({"statuses": statuses}, status_code=202)
