"""What every HTTP route of the app gets, whoever wrote it (issue 27; docs/ARCHITECTURE.md §5
"Errors"): one error envelope, a request-body limit checked before a body is buffered, and
metric labels from closed sets.

Shared kernel: imports nothing of ``pinlog.core`` or ``pinlog.ai``; :func:`pinlog.app.create_app`
installs it on the whole app, so a router added later (``/console``…) gets it without a line of
its own.

* **Envelope.** Every error answer is ``{"error": CODE, "message": sentence, …extra}``
  (:func:`error_body`): ``CODE`` a fixed UPPER_SNAKE string, ``message`` a fixed sentence
  without input values (note text is personal data), extra keys only where documented (422
  ``problems``, 409 ``recordId`` …). :func:`install_error_handlers` renders Starlette's and
  FastAPI's own errors (unknown route 404, wrong method 405, unreadable body 400, validation
  422) in it instead of ``{"detail": …}``.
* **Body limit.** :class:`BodyLimit` (pure ASGI middleware) answers ``413 BODY_TOO_LARGE``
  when ``Content-Length`` exceeds the route's limit — before the body is read — and stops a
  chunked body as soon as the bytes received pass it (the bytes already read are dropped; at
  most one chunk over the limit is ever held). Limits per route: :class:`BodyLimits`.
* **Metric labels.** :func:`method_label`: the HTTP methods the API knows, else ``other``
  (a client may send any token as a method; each would otherwise be a new series).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

#: HTTP methods that are metric labels as they are; any other method is counted as ``other``.
KNOWN_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
#: The ``route`` label of a request that matched no route (any path: one series).
UNMATCHED_ROUTE = "unmatched"


def method_label(method: object) -> str:
    """``method`` when it is one of :data:`KNOWN_METHODS`, else ``"other"`` (a closed set of
    label values: made-up methods never add a series)."""
    return method if isinstance(method, str) and method in KNOWN_METHODS else "other"


def error_body(code: str, message: str, **extra: Any) -> dict[str, Any]:
    """The one error envelope: ``{"error": code, "message": message, **extra}``."""
    return {"error": code, "message": message, **extra}


def error_response(status: int, code: str, message: str, *,
                   headers: Mapping[str, str] | None = None, **extra: Any) -> JSONResponse:
    """A JSON answer with :func:`error_body` and ``status``."""
    return JSONResponse(error_body(code, message, **extra), status_code=status,
                        headers=dict(headers) if headers else None)


# --- validation problems (422) -------------------------------------------------------------------

_PROBLEMS = {
    "missing": "is required",
    "extra_forbidden": "is not an allowed field",
    "json_invalid": "is not valid JSON",
    "json_type": "must be JSON",
    "model_attributes_type": "must be a JSON object",
    "model_type": "must be a JSON object",
    "dict_type": "must be a JSON object",
    "string_type": "must be a string",
    "float_type": "must be a number",
    "float_parsing": "must be a number",
    "int_type": "must be an integer",
    "int_parsing": "must be an integer",
    "int_from_float": "must be an integer",
    "bool_type": "must be true or false",
    "bool_parsing": "must be true or false",
    "list_type": "must be a list",
    "finite_number": "must be a finite number",
    "string_too_short": "must not be empty",
    "too_short": "is too short",
    "too_long": "has too many items",
    "recursion_loop": "is nested too deeply",
}


def problem(err: Mapping[str, Any]) -> str:
    """A fixed sentence for one pydantic error (``exc.errors()`` item): never the input value,
    never an internal class name (``"must be a JSON object"``, not "instance of ImportLine")."""
    kind = err.get("type", "")
    if kind in _PROBLEMS:
        return _PROBLEMS[kind]
    ctx = err.get("ctx") or {}
    if kind == "string_too_long":
        return f"must be at most {ctx.get('max_length')} characters"
    if kind in ("greater_than_equal", "less_than_equal", "greater_than", "less_than"):
        bound = next(iter(ctx.values()), "")
        words = {"greater_than_equal": ">=", "less_than_equal": "<=", "greater_than": ">",
                 "less_than": "<"}
        return f"must be {words[kind]} {bound}"
    if kind == "value_error":  # our own validators: fixed sentences
        error = ctx.get("error")
        return str(error) if error is not None else "is invalid"
    return "is invalid"


def problem_field(err: Mapping[str, Any]) -> str:
    """The dotted field path of one pydantic error, without the source (``body``, ``query``,
    ``path``); ``""`` for the whole input (e.g. invalid JSON, whose location is an offset)."""
    loc = [str(p) for p in err.get("loc", ())]
    if loc and loc[0] in ("body", "query", "path"):  # the source, not a field name
        loc = loc[1:]
    if err.get("type") in ("json_invalid", "json_type"):
        loc = []
    return ".".join(loc)


def validation_response(errors: Sequence[Mapping[str, Any]]) -> JSONResponse:
    """422 ``INVALID_INPUT`` with one ``{"field", "problem"}`` per error and no input values;
    ``message`` is the first problem (``"place.lat must be <= 90"``)."""
    problems = [{"field": problem_field(err) or "body", "problem": problem(err)} for err in errors]
    first = problems[0] if problems else {"field": "body", "problem": "is invalid"}
    return error_response(422, "INVALID_INPUT", f"{first['field']} {first['problem']}",
                          problems=problems)


# --- Starlette's and FastAPI's own errors --------------------------------------------------------

#: (code, message) of the errors the framework raises itself, by status.
FRAMEWORK_ERRORS: dict[int, tuple[str, str]] = {
    400: ("BAD_REQUEST", "the request body could not be read (malformed, or nested too deeply)"),
    401: ("UNAUTHORIZED", "missing or invalid credentials"),
    403: ("FORBIDDEN", "not allowed"),
    404: ("NOT_FOUND", "no such route (the API is described at /openapi.json)"),
    405: ("METHOD_NOT_ALLOWED", "this route does not accept this method (see the Allow header)"),
    413: ("BODY_TOO_LARGE", "the request body is too large for this route"),
    415: ("UNSUPPORTED_MEDIA_TYPE", "unsupported content type"),
}


class ApiError(StarletteHTTPException):
    """An HTTP error raised on purpose with its own code and message (rendered in the envelope
    by :func:`install_error_handlers`, wherever it is raised)."""

    def __init__(self, status: int, code: str, message: str,
                 headers: Mapping[str, str] | None = None) -> None:
        super().__init__(status_code=status, detail=message,
                         headers=dict(headers) if headers else None)
        self.code = code
        self.message = message


class BodyTooLarge(ApiError):
    """The request body passed its route's limit (``limit`` bytes) → 413 ``BODY_TOO_LARGE``.
    Raised from the body stream, so FastAPI's body parsing passes it on (an HTTP error) instead
    of turning it into a 400."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, "BODY_TOO_LARGE",
                         f"the request body is larger than {limit} bytes, this route's limit",
                         headers={"Connection": "close"})
        self.limit = limit


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    headers = dict(exc.headers or {})
    if isinstance(exc, ApiError):
        return error_response(exc.status_code, exc.code, exc.message, headers=headers)
    code, message = FRAMEWORK_ERRORS.get(exc.status_code, (None, None))
    if code is None or message is None:
        try:
            phrase = HTTPStatus(exc.status_code).phrase
        except ValueError:
            phrase = "error"
        code, message = phrase.upper().replace(" ", "_").replace("-", "_"), phrase.lower()
    return error_response(exc.status_code, code, message, headers=headers)


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    return validation_response(exc.errors())


def install_error_handlers(app: FastAPI) -> None:
    """Render every HTTP error of the framework — and :class:`ApiError` — in the envelope:
    Starlette's ``HTTPException`` (404 unknown route, 405 wrong method, 400 unreadable body,
    …; headers such as ``Allow`` kept) and FastAPI's ``RequestValidationError`` (422)."""
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(RequestValidationError, _validation_error)


# --- request body limits ------------------------------------------------------------------------

@dataclass(frozen=True)
class BodyLimits:
    """Request-body limits in bytes: ``routes`` maps ``(method, path)`` (exact path) to a
    limit; every other request gets ``default``.

    The app's table is :func:`pinlog.app.body_limits`: ``POST /v1/search`` 16 KiB (a query is
    at most 500 characters); everything else ``PINLOG_MAX_BODY_BYTES``
    (:meth:`pinlog.settings.Settings.body_limit`).
    """

    default: int
    routes: Mapping[tuple[str, str], int] = field(default_factory=dict)

    def for_request(self, method: str, path: str) -> int:
        """The limit of one request, bytes."""
        return self.routes.get((method, path), self.default)


class BodyLimit:
    """Pure ASGI middleware: a body larger than its route's limit is answered ``413`` in the
    envelope, before it is buffered.

    * ``Content-Length`` over the limit → 413 at once; the body is never read and the
      connection is closed after the answer (``Connection: close``).
    * A body without (or lying about) its length is counted as it streams: the first chunk
      that passes the limit raises :class:`BodyTooLarge` inside the app's body read (rendered
      by :func:`install_error_handlers`); if a route caught it, it still ends here as 413.
    * An unparsable ``Content-Length`` → 400 ``BAD_REQUEST``.
    """

    def __init__(self, app: Any, limits: BodyLimits) -> None:
        self.app = app
        self.limits = limits

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limits.for_request(str(scope.get("method", "")), str(scope.get("path", "")))
        declared = None
        for name, value in scope.get("headers") or ():
            if name == b"content-length":
                declared = value
        if declared is not None:
            if not declared.isdigit() or len(declared) > 19:
                await error_response(400, "BAD_REQUEST", "Content-Length is not a number")(
                    scope, receive, send)
                return
            if int(declared) > limit:
                exc = BodyTooLarge(limit)
                await error_response(413, exc.code, exc.message, headers=exc.headers)(
                    scope, receive, send)
                return
        received = 0
        started = False

        async def limited_receive() -> Any:
            nonlocal received
            message = await receive()
            if message.get("type") == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise BodyTooLarge(limit)
            return message

        async def tracking_send(message: Any) -> None:
            nonlocal started
            if message.get("type") == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except BodyTooLarge as exc:
            if started:
                raise
            await error_response(413, exc.code, exc.message, headers=exc.headers)(
                scope, receive, send)
