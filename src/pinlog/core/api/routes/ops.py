"""``/ops/v1``: what the ``pinlog`` command asks a running server (issue 29).

``pinlog search``, ``pinlog records`` and ``pinlog status`` use these routes when a server runs
for the same data directory (or ``PINLOG_SERVER_URL`` is set), so the command neither loads the
model nor opens the database; each answer is, byte for byte, the JSON the command prints with
``--json`` (:func:`search_json`, :func:`records_json`, :func:`status_json` — the in-process path
prints the same functions' output).

Authentication: ``X-Internal-Secret`` = one of ``PINLOG_INTERNAL_SECRETS`` (what a command
sends to ``PINLOG_SERVER_URL``) or the random token ``pinlog serve`` wrote for this run into
``server.json`` (mode 0600, beside the generated secrets: what a command of the same data
directory sends), compared in constant time. Wrong or missing → 401. Bodies never echo input.
"""

from __future__ import annotations

import json
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request, Response
from pydantic import Field
from sqlalchemy.ext.asyncio import AsyncEngine

from pinlog.contracts import SECRET_HEADER, secret_ok
from pinlog.core.api.errors import R401, R404, R422, CoreRoute, Unauthorized
from pinlog.core.api.routes.search import SearchOut
from pinlog.core.api.schemas import NonBlank, RecordListOut, RecordOut, _In
from pinlog.core.search import SearchConfig, SearchFn, member_search
from pinlog.core.services import CoreService
from pinlog.core.status import StatusConfig, snapshot_json, status_snapshot

OPS_PREFIX = "/ops/v1"
JSON = "application/json"

router = APIRouter(prefix=OPS_PREFIX, tags=["ops"], route_class=CoreRoute,
                   responses={**R401, **R422}, include_in_schema=False)


def operator(request: Request) -> None:
    """The caller presents one of ``PINLOG_INTERNAL_SECRETS`` in ``X-Internal-Secret``.

    Raises:
        Unauthorized: missing or wrong (→ 401).
    """
    auth = request.app.state.core.config.auth
    accepted = auth.internal_secret_values()
    token = getattr(request.app.state, "server_token", None)  # `pinlog serve`'s, in server.json
    if token:
        accepted = [*accepted, token]
    if not secret_ok(request.headers.get(SECRET_HEADER), accepted):
        raise Unauthorized("missing or wrong internal secret")


Operator = Annotated[None, Depends(operator)]


class OpsSearchIn(_In):
    """A member (id, ``id:N``, ``ref:X`` or an external ref), a query (1..500) and a limit."""

    member: str = Field(min_length=1, max_length=200)
    query: NonBlank = Field(min_length=1, max_length=500)
    limit: int = Field(10, ge=1, le=100)


async def search_json(engine: AsyncEngine, config: SearchConfig, search: SearchFn | None,
                      member_id: int, query: str, limit: int) -> str:
    """The ``pinlog search --json`` line: ``POST /v1/search``'s body for the member's search.

    Raises:
        SearchUnavailable, SearchRejected: the search.
    """
    results = await member_search(engine, config, search, member_id, query, limit)
    body = SearchOut.of(results).model_dump(mode="json", by_alias=True)
    return json.dumps(body, ensure_ascii=False)


async def records_json(service: CoreService, member_id: int) -> str:
    """The ``pinlog records --json`` line: the member's records in the ``GET /v1/records``
    shape, every page in one body (``total`` = all of them, ``nextCursor`` null)."""
    views: list[RecordOut] = []
    before = None
    while True:  # every page (cursor = the last record id of the page before)
        page = await service.record_page(member_id, limit=500, before=before)
        views += [RecordOut.of(v) for v in page.records]
        if page.next_before is None:
            return RecordListOut(records=views, total=len(views),
                                 next_cursor=None).model_dump_json(by_alias=True)
        before = page.next_before


async def status_json(engine: AsyncEngine, config: StatusConfig) -> str:
    """The ``pinlog status --json`` line (:func:`pinlog.core.status.snapshot_json`)."""
    snap = await status_snapshot(engine, config, anomalies=True)
    return json.dumps(snapshot_json(snap), ensure_ascii=False)


@router.post("/search", responses={**R404, 503: {"description": "search unavailable"}})
async def ops_search(body: OpsSearchIn, _: Operator, request: Request) -> Response:
    """``pinlog search``'s answer for a member (errors: :class:`CoreRoute`)."""
    core = request.app.state.core
    member_id = await core.service.resolve_member(body.member)
    return Response(await search_json(core.engine, core.config.search, core.search_client,
                                      member_id, body.query, body.limit), media_type=JSON)


@router.get("/records", responses=R404)
async def ops_records(member: Annotated[str, Query(min_length=1, max_length=200)], _: Operator,
                      request: Request) -> Response:
    """``pinlog records``'s answer for a member."""
    service = request.app.state.core.service
    member_id = await service.resolve_member(member)
    return Response(await records_json(service, member_id), media_type=JSON)


@router.get("/status")
async def ops_status(_: Operator, request: Request) -> Response:
    """``pinlog status``'s answer."""
    core = request.app.state.core
    return Response(await status_json(core.engine, core.config.status), media_type=JSON)
