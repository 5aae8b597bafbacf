"""Error responses of the public API: fixed strings, ``{"error": CODE, "message": ...}``.

:class:`CoreRoute` turns service errors (:class:`pinlog.core.services.CoreError`), search errors
(:class:`pinlog.core.search.SearchRejected`, :class:`~pinlog.core.search.SearchUnavailable`),
authentication failures and request validation errors into JSON responses for every route of
this package — :func:`error_response` is the one map from an error to its answer — so
the app-level handlers (not owned by core) need no change. Validation errors never echo the
input (the member's text is personal data): only the field path and a fixed problem sentence.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute

from pinlog.core.search import SearchRejected, SearchUnavailable
from pinlog.core.services import (
    CoreError,
    ForcedDeleteRequired,
    InvalidInput,
    LastContext,
    MemberExists,
    NotFound,
    RecordExists,
    RecordHasContexts,
)
from pinlog.errors import PinlogError
from pinlog.http import error_body
from pinlog.http import validation_response as kernel_validation_response


class Unauthorized(PinlogError):
    """Missing/invalid token or a withdrawn member → 401."""

    code = "UNAUTHORIZED"

    def __init__(self, message: str = "missing or invalid token") -> None:
        super().__init__(message)


UNAUTHORIZED_BODY = error_body("UNAUTHORIZED", "missing or invalid token")


def validation_response(exc: RequestValidationError) -> JSONResponse:
    """422 with one ``{"field", "problem"}`` per error and no input values (the one rendering,
    :func:`pinlog.http.validation_response`)."""
    return kernel_validation_response(exc.errors())


def error_response(exc: CoreError | SearchRejected | SearchUnavailable) -> JSONResponse:
    """Map a service or search error to its HTTP response (404, 409, 422, 503)."""
    if isinstance(exc, SearchRejected):
        return JSONResponse(status_code=422, content={
            "error": "SEARCH_REJECTED", "message": "embedding profile mismatch between core and ai"})
    if isinstance(exc, SearchUnavailable):
        return JSONResponse(status_code=503, headers={"Retry-After": "5"}, content={
            "error": "SEARCH_UNAVAILABLE", "message": "search is unavailable, retry later"})
    body: dict[str, Any] = {"error": exc.code, "message": exc.message}
    if isinstance(exc, NotFound):
        status = 404
    elif isinstance(exc, InvalidInput):
        status = 422
        if exc.field:
            body["problems"] = [{"field": exc.field, "problem": exc.problem}]
    elif isinstance(exc, RecordExists):
        status, body["recordId"] = 409, exc.record_id
    elif isinstance(exc, ForcedDeleteRequired):
        status = 409
        body["forcedDeleteWouldRemove"] = {"recordId": exc.summary.record_id,
                                           "placeName": exc.summary.place_name,
                                           "contexts": exc.summary.contexts}
    elif isinstance(exc, MemberExists):
        status = 409
    else:  # pragma: no cover - every CoreError subclass is mapped above
        raise exc
    return JSONResponse(status_code=status, content=body)


class CoreRoute(APIRoute):
    """APIRoute that renders this package's errors (see module docstring)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def route_handler(request: Request) -> Response:
            try:
                return await handler(request)
            except RequestValidationError as exc:
                return validation_response(exc)
            except Unauthorized:
                return JSONResponse(status_code=401, content=UNAUTHORIZED_BODY,
                                    headers={"WWW-Authenticate": "Bearer"})
            except (CoreError, SearchRejected, SearchUnavailable) as exc:
                return error_response(exc)

        return route_handler


def _example(code: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"description": message, "content": {"application/json": {
        "example": {"error": code, "message": message, **extra}}}}


#: OpenAPI ``responses`` of a route: status → description.
Responses = dict[int | str, dict[str, Any]]

#: OpenAPI descriptions of the error responses, per status.
R401: Responses = {401: _example("UNAUTHORIZED", "missing or invalid token")}
R404: Responses = {404: _example("NOT_FOUND", "record not found")}
R422: Responses = {422: _example("INVALID_INPUT", "text must not be empty or whitespace",
                      problems=[{"field": "text", "problem": "must not be empty or whitespace"}])}
R409_LAST: Responses = {409: _example(LastContext.code, "this is the record's last context; delete the "
                           "record instead (force=true)",
                           forcedDeleteWouldRemove={"recordId": 1, "placeName": "…", "contexts": 1})}
R409_RECORD: Responses = {409: _example(RecordHasContexts.code, "the record has several contexts; delete it "
                             "with force=true",
                             forcedDeleteWouldRemove={"recordId": 1, "placeName": "…", "contexts": 2})}
R409_EXISTS: Responses = {409: _example(RecordExists.code, "an active record already exists for this place",
                             recordId=1)}
