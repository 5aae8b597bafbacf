"""The console's pages, its JSON for the live refresh, and its actions (issue 29).

Server-rendered HTML (Jinja2, autoescaped); the overview polls ``/console/api/overview``
(small vanilla JS, vendored under ``static/``). Roles (:mod:`pinlog.console.access`):

* ``read``: overview, failures (by reason, drill-down to one context's timeline), replicas,
  profiles and presets, the action log. Never a note's text, never a token, an external ref or
  a setting's secret value.
* ``admin``: all of that, the **search debugger** (member + query → each channel's evidence, the
  fused rank and the decision; it shows the matched notes' text, as ``pinlog search`` does for
  an operator — the one console page with note text, admins only, and recorded in the action
  log without the query), and the **actions**: run a rescan round, reprocess (a dry-run first;
  the confirmation carries the dry-run's signed count), activate a profile (a placeholder: the
  switch is ``pinlog profiles``, SPEC §9.1). Each action is confirmed (a confirmation page,
  then a POST with ``confirm=yes``) and recorded in ``core.console_action``.

Every POST needs the session's CSRF token; a read-only session gets 403 on admin pages and
actions. Every request is logged by :class:`ConsoleRoute` — route template, method, status,
role, request id — never a query string, a form value or text.
"""

from __future__ import annotations

import asyncio
import hmac
import inspect
import logging
import time
import uuid
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote

from fastapi import APIRouter, Request, Response
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse
from fastapi.routing import APIRoute
from jinja2 import Environment, PackageLoader, select_autoescape

from pinlog import __version__
from pinlog.console import reads
from pinlog.console.access import (
    COOKIE_PATH,
    LOGIN_COOKIE,
    LOGIN_FORM_SECONDS,
    SESSION_COOKIE,
    ConsoleConfig,
    Session,
    csrf_ok,
    csrf_token,
    issue_session,
    read_session,
    role_for_token,
    sign,
    signed_ok,
)
from pinlog.console.charts import per_minute_svg
from pinlog.core.status import format_age

log = logging.getLogger("pinlog.console")

STATIC = Path(__file__).parent / "static"
#: Largest form body accepted (bytes): tokens, member refs and queries are small.
MAX_FORM_BYTES = 16_384
#: Longest search-debugger query (characters), as ``POST /v1/search``.
MAX_QUERY = 500

SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; "
                               "img-src 'self' data:; connect-src 'self'; form-action 'self'; "
                               "frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
}

_env = Environment(loader=PackageLoader("pinlog.console", "templates"),
                   autoescape=select_autoescape(("html",)), trim_blocks=True, lstrip_blocks=True)


_env.filters["age"] = format_age
_env.filters["urlquote"] = lambda value: quote(str(value), safe="")


class ConsoleRoute(APIRoute):
    """Logs every console request once it is answered: ``route`` (the template, e.g.
    ``/console/contexts/{context_id}``), ``method``, ``status``, ``role`` (or ``-``),
    ``request_id`` — never a query string, a form field or a body; and adds the security
    headers to every answer."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        path = self.path

        async def logged(request: Request) -> Response:
            request.state.console_role = "-"
            status = 500
            try:
                response = await handler(request)
                status = response.status_code
                for key, value in SECURITY_HEADERS.items():
                    response.headers.setdefault(key, value)
                return response
            finally:
                log.info("console request", extra={
                    "route": path, "method": request.method, "status": status,
                    "role": request.state.console_role,
                    "request_id": request.headers.get("x-request-id")})

        return logged


#: A console page or action as :func:`build_router`'s ``handles`` calls it (request, session,
#: [form fields,] path parameters).
Handler = Callable[..., Coroutine[Any, Any, Response]]


class Denied(Exception):
    """A request the console refuses: an answer to send instead of the page."""

    def __init__(self, response: Response) -> None:
        self.response = response


class BackgroundActions:
    """The console's long actions that run after their answer (a reprocess), one per name, tied
    to the app's lifetime: :meth:`stop` (the app's shutdown, before its database engine is
    disposed) cancels those still running and waits for them, so none outlives the engine
    holding a connection in a transaction."""

    def __init__(self) -> None:
        self._tasks: dict[str, asyncio.Task[None]] = {}

    def names(self) -> list[str]:
        """The names of the actions still running, sorted."""
        return sorted(name for name, task in self._tasks.items() if not task.done())

    def busy(self, name: str) -> bool:
        """Whether the action ``name`` started here is still running."""
        task = self._tasks.get(name)
        return task is not None and not task.done()

    def start(self, name: str, work: Coroutine[Any, Any, None]) -> None:
        """Run ``work`` in the background as the action ``name``."""
        self._tasks[name] = asyncio.create_task(work, name=f"console-{name}")

    async def stop(self) -> None:
        """Cancel the running actions and wait until each has ended (their own ``finally`` /
        ``except CancelledError`` included). Idempotent; raises nothing."""
        tasks = [t for t in self._tasks.values() if not t.done()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def build_router(config: ConsoleConfig, actions: BackgroundActions | None = None) -> APIRouter:
    """The ``/console`` router for ``config`` (mounted by :func:`pinlog.console.mount`); its
    long actions run in ``actions`` (the app stops them at shutdown)."""
    router = APIRouter(prefix="/console", route_class=ConsoleRoute, include_in_schema=False)
    running = actions if actions is not None else BackgroundActions()
    minutes = reads.MinuteCounts()

    # --- helpers ---------------------------------------------------------------------------
    def session_of(request: Request) -> Session | None:
        session = read_session(config, request.cookies.get(SESSION_COOKIE))
        if session is not None:
            request.state.console_role = session.role
        return session

    def need(request: Request, *, admin: bool = False, api: bool = False) -> Session:
        session = session_of(request)
        if session is None:
            if api:
                raise Denied(JSONResponse({"error": "UNAUTHORIZED", "message": "log in first"},
                                          status_code=401))
            raise Denied(RedirectResponse("/console/login", status_code=303))
        if admin and not session.admin:
            raise Denied(page(request, session, "denied.html", status_code=403,
                              reason="This needs the admin role; this session is read-only."))
        return session

    async def form(request: Request) -> dict[str, str]:
        if int(request.headers.get("content-length") or 0) > MAX_FORM_BYTES:
            raise Denied(HTMLResponse("form too large", status_code=413))
        body = await request.body()
        if len(body) > MAX_FORM_BYTES:
            raise Denied(HTMLResponse("form too large", status_code=413))
        return {k: v[0] for k, v in parse_qs(body.decode("utf-8", "replace")).items()}

    def need_post(request: Request, session: Session, fields: dict[str, str]) -> None:
        if not csrf_ok(config, session, fields.get("csrf")):
            log.warning("console request without a valid CSRF token",
                        extra={"route": request.url.path, "role": session.role})
            raise Denied(page(request, session, "denied.html", status_code=403,
                              reason="The form's CSRF token is missing or wrong: reload the "
                                     "page and try again."))

    def page(request: Request, session: Session | None, template: str, *,
             status_code: int = 200, **context: Any) -> HTMLResponse:
        html = _env.get_template(template).render(
            session=session, csrf=csrf_token(config, session) if session else "",
            refresh=config.refresh, version=__version__, active=context.pop("active", ""),
            **context)
        return HTMLResponse(html, status_code=status_code)

    def core(request: Request) -> Any:
        return request.app.state.core

    def guarded(handler: Callable[..., Coroutine[Any, Any, Response]],
                ) -> Callable[..., Coroutine[Any, Any, Response]]:
        async def run(request: Request, **kwargs: Any) -> Response:
            try:
                return await handler(request, **kwargs)
            except Denied as denied:
                return denied.response
        run.__name__ = handler.__name__
        run.__doc__ = handler.__doc__
        run.__signature__ = inspect.signature(handler)  # type: ignore[attr-defined]
        return run

    def handles(method: str, path: str, *, admin: bool = False, posted: bool = False,
                ) -> Callable[[Handler], Handler]:
        """Register the decorated page or action at ``method path`` (``guarded``) with the
        session it needs: called as ``handler(request, session, **path_params)``, and with
        ``posted`` as ``handler(request, session, fields, **path_params)`` once the form is
        read and its CSRF token checked. Refused before the handler runs: no session →
        redirect to the login; ``admin`` on a read-only session → 403; ``posted`` without a
        valid CSRF token → 403, a form over :data:`MAX_FORM_BYTES` → 413."""

        def register(handler: Handler) -> Handler:
            async def run(request: Request, **kwargs: Any) -> Response:
                session = need(request, admin=admin)
                if not posted:
                    return await handler(request, session, **kwargs)
                fields = await form(request)
                need_post(request, session, fields)
                return await handler(request, session, fields, **kwargs)

            own = inspect.signature(handler)
            run.__name__, run.__doc__ = handler.__name__, handler.__doc__
            run.__signature__ = own.replace(parameters=[  # type: ignore[attr-defined]
                p for p in own.parameters.values() if p.name not in ("session", "fields")])
            router.api_route(path, methods=[method])(guarded(run))
            return handler

        return register

    # --- login / logout --------------------------------------------------------------------
    @router.get("/login")
    @guarded
    async def login_form(request: Request) -> Response:
        nonce = uuid.uuid4().hex
        response = page(request, None, "login.html", nonce=nonce, error=None)
        response.set_cookie(LOGIN_COOKIE, nonce, max_age=LOGIN_FORM_SECONDS, path=COOKIE_PATH,
                            httponly=True, samesite="strict",
                            secure=request.url.scheme == "https")
        return response

    @router.post("/login")
    @guarded
    async def login(request: Request) -> Response:
        fields = await form(request)
        nonce = request.cookies.get(LOGIN_COOKIE)
        if not nonce or not hmac.compare_digest(nonce.encode(), fields.get("nonce", "").encode()):
            return page(request, None, "login.html", status_code=403, nonce="",
                        error="The login form expired: reload the page.")
        role = role_for_token(config, fields.get("token", ""))
        if role is None:
            log.warning("console login refused", extra={"route": "/console/login"})
            return page(request, None, "login.html", status_code=401, nonce=nonce,
                        error="That token is not accepted.")
        cookie, session = issue_session(config, role)
        request.state.console_role = role
        log.info("console login", extra={"route": "/console/login", "role": role})
        response = RedirectResponse("/console", status_code=303)
        response.set_cookie(SESSION_COOKIE, cookie, max_age=int(config.session_ttl.total_seconds()),
                            path=COOKIE_PATH, httponly=True, samesite="strict",
                            secure=request.url.scheme == "https")
        response.delete_cookie(LOGIN_COOKIE, path=COOKIE_PATH)
        return response

    @handles("POST", "/logout", posted=True)
    async def logout(request: Request, session: Session, fields: dict[str, str]) -> Response:
        response = RedirectResponse("/console/login", status_code=303)
        response.delete_cookie(SESSION_COOKIE, path=COOKIE_PATH)
        return response

    # --- read pages ------------------------------------------------------------------------
    @handles("GET", "")
    async def overview_page(request: Request, session: Session) -> Response:
        data = await reads.overview(core(request).engine, core(request).config.status, minutes)
        return page(request, session, "overview.html", active="overview", data=data,
                    chart=per_minute_svg(data["per_minute"]))

    @router.get("/api/overview")
    @guarded
    async def overview_json(request: Request) -> Response:
        need(request, api=True)
        data = await reads.overview(core(request).engine, core(request).config.status, minutes)
        return JSONResponse({**data, "chart": per_minute_svg(data["per_minute"]),
                             "generated_at": time.time()})

    @handles("GET", "/failures")
    async def failures_page(request: Request, session: Session) -> Response:
        reason = request.query_params.get("reason")
        page_no = max(0, int(request.query_params.get("page", "0") or 0)) \
            if (request.query_params.get("page", "0") or "0").isdigit() else 0
        rows = (await reads.failures_for_reason(core(request).engine, reason, page_no)
                if reason is not None else None)
        return page(request, session, "failures.html", active="failures",
                    reasons=await reads.failure_reasons(core(request).engine), reason=reason,
                    rows=rows, page_no=page_no, page_size=reads.PAGE)

    @handles("GET", "/contexts/{context_id}")
    async def context_page(request: Request, session: Session, context_id: int) -> Response:
        if not 0 < context_id < 2**63:
            return page(request, session, "denied.html", status_code=404,
                        reason="No such context.")
        timeline = await reads.context_timeline(core(request).engine, context_id)
        if timeline is None:
            return page(request, session, "denied.html", status_code=404,
                        reason=f"Context {context_id} has no AI state row.")
        return page(request, session, "context.html", active="failures", timeline=timeline,
                    context_id=context_id)

    @handles("GET", "/replicas")
    async def replicas_page(request: Request, session: Session) -> Response:
        return page(request, session, "replicas.html", active="replicas",
                    data=await reads.replicas(core(request).engine))

    @handles("GET", "/profiles")
    async def profiles_page(request: Request, session: Session) -> Response:
        runtime = core(request)
        from pinlog.core.status import state_counts

        async with runtime.engine.connect() as conn:
            completed = (await state_counts(conn))["embedding"]["COMPLETED"]
        data = await reads.profiles(runtime.engine, runtime.config.search.profile, completed)
        return page(request, session, "profiles.html", active="profiles", data=data,
                    completed=completed)

    # --- search debugger (admin) -----------------------------------------------------------
    @handles("GET", "/search", admin=True)
    async def search_form(request: Request, session: Session) -> Response:
        return page(request, session, "search.html", active="search", result=None, error=None,
                    member="", query="")

    @handles("POST", "/search", admin=True, posted=True)
    async def search_debug(request: Request, session: Session, fields: dict[str, str]) -> Response:
        member, query = fields.get("member", "").strip(), fields.get("query", "")
        runtime = core(request)
        from pinlog.core.search import SearchRejected, SearchUnavailable, explain_search
        from pinlog.core.services import CoreError
        from pinlog.text import is_blank, normalize

        query = normalize(query)
        if not member or is_blank(query) or len(query) > MAX_QUERY:
            return page(request, session, "search.html", active="search", result=None,
                        error=f"Give a member (id or external ref) and a query of 1..{MAX_QUERY} "
                              "characters.", member=member, query=query, status_code=422)
        try:
            member_id = await runtime.service.resolve_member(member)
            result = await explain_search(runtime.engine, runtime.config.search,
                                          runtime.search_client, member_id, query, 20)
        except CoreError as exc:
            return page(request, session, "search.html", active="search", result=None,
                        error=exc.message, member=member, query=query, status_code=404)
        except (SearchUnavailable, SearchRejected):
            return page(request, session, "search.html", active="search", result=None,
                        error="The search is unavailable right now.", member=member,
                        query=query, status_code=503)
        await reads.record_action(runtime.engine, session.role, "search_debug",
                                  {"member_id": member_id},
                                  {"records": len(result.records), "shown": len(result.results)},
                                  request.headers.get("x-request-id"))
        texts = {r.context_id: r.text for r in result.results}
        return page(request, session, "search.html", active="search", result=result,
                    texts=texts, error=None, member=member, query=query, member_id=member_id)

    # --- actions (admin) -------------------------------------------------------------------
    @handles("GET", "/actions")
    async def actions_page(request: Request, session: Session) -> Response:
        return page(request, session, "actions.html", active="actions",
                    actions=await reads.recent_actions(core(request).engine),
                    running=running.names(),
                    profile=core(request).config.search.profile)

    @handles("GET", "/actions/rescan", admin=True)
    async def rescan_confirm(request: Request, session: Session) -> Response:
        runtime = core(request)
        from pinlog.core.rescan import expiry_outlook

        outlook = await expiry_outlook(runtime.engine, runtime.config.rescan)
        return page(request, session, "confirm.html", active="actions", action="rescan",
                    title="Run one rescan round",
                    description=(f"Finalize exhausted rows, claim up to "
                                 f"{runtime.config.rescan.batch_size} expired rows (each spends "
                                 "one retry) and re-send them."),
                    facts={"expired rows now": outlook.expired,
                           "unfinished, not expired yet": outlook.waiting},
                    fields={})

    @handles("POST", "/actions/rescan", admin=True, posted=True)
    async def rescan_run(request: Request, session: Session, fields: dict[str, str]) -> Response:
        if fields.get("confirm") != "yes":
            return RedirectResponse("/console/actions/rescan", status_code=303)
        runtime = core(request)
        from pinlog.core.rescan import RescanLoop

        report = await RescanLoop(runtime.engine, runtime.config.rescan, runtime.client).run_round()
        outcome = {"finalized": report.finalized, "dead_ends": report.dead_ends,
                   "half_cancelled": report.half_cancelled, "claimed": report.claimed,
                   "dispatched": report.dispatched, "failed_calls": report.failed_calls,
                   "seconds": round(report.seconds, 3)}
        action_id = await reads.record_action(runtime.engine, session.role, "rescan_round", {},
                                              outcome, request.headers.get("x-request-id"))
        log.info("console action", extra={"route": "/console/actions/rescan",
                                          "role": session.role, "count": report.claimed})
        return RedirectResponse(f"/console/actions?done={action_id}", status_code=303)

    @handles("GET", "/actions/reprocess", admin=True)
    async def reprocess_dry_run(request: Request, session: Session) -> Response:
        mode = request.query_params.get("mode", "")
        if mode not in ("profile", "presets"):
            return page(request, session, "denied.html", status_code=422,
                        reason="mode must be profile or presets")
        runtime = core(request)
        from pinlog.core.reprocess import ReprocessError, count_candidates

        try:
            n = await count_candidates(runtime.engine, runtime.config.reprocess, mode)  # type: ignore[arg-type]
        except ReprocessError as exc:
            return page(request, session, "denied.html", status_code=409, reason=exc.message)
        await reads.record_action(runtime.engine, session.role, "reprocess_dry_run",
                                  {"mode": mode}, {"candidates": n},
                                  request.headers.get("x-request-id"))
        ticket = f"{mode}:{n}:{int(time.time())}"
        what = ("embeddings made with another profile: both stages → PENDING" if mode == "profile"
                else "keywords judged with an older preset version: keyword stage → PENDING")
        return page(request, session, "confirm.html", active="actions", action="reprocess",
                    title=f"Reprocess --{mode}", description=(
                        f"Dry-run: {n} context(s) would be reprocessed ({what}; profile "
                        f"{runtime.config.reprocess.profile}). Old results stay until each new "
                        "one replaces them."),
                    facts={"contexts (dry-run)": n},
                    fields={"mode": mode, "ticket": ticket,
                            "signature": sign(config, session, ticket)},
                    nothing=n == 0)

    @handles("POST", "/actions/reprocess", admin=True, posted=True)
    async def reprocess_run(request: Request, session: Session, fields: dict[str, str]) -> Response:
        ticket, mode = fields.get("ticket", ""), fields.get("mode", "")
        parts = ticket.split(":")
        fresh = len(parts) == 3 and parts[2].isdigit() and time.time() - int(parts[2]) < 900
        if (fields.get("confirm") != "yes" or not fresh or parts[0] != mode
                or not signed_ok(config, session, ticket, fields.get("signature"))):
            return page(request, session, "denied.html", status_code=409,
                        reason="Run the dry-run first (or again: it is older than 15 minutes).")
        if running.busy("reprocess"):
            return page(request, session, "denied.html", status_code=409,
                        reason="A reprocess started from the console is still running.")
        runtime = core(request)
        action_id = await reads.record_action(
            runtime.engine, session.role, "reprocess", {"mode": mode, "dry_run": int(parts[1])},
            {"state": "running"}, request.headers.get("x-request-id"))

        async def work() -> None:
            from pinlog.core.reprocess import reprocess

            try:
                report = await reprocess(runtime.engine, runtime.config.reprocess, mode,  # type: ignore[arg-type]
                                         client=runtime.client)
                outcome = {"state": "done", "moved": report.moved, "batches": report.batches,
                           "dispatched": len(report.dispatch.dispatched),
                           "failed_calls": len(report.dispatch.failed_calls)}
            except asyncio.CancelledError:
                # the app stops (BackgroundActions.stop): the batches committed so far stay
                # moved, the rescan sends the rest; the action log says it was stopped
                await reads.finish_action(runtime.engine, action_id, {"state": "stopped"})
                raise
            except Exception as exc:  # noqa: BLE001 - recorded, and the rescan recovers the rest
                outcome = {"state": "failed", "error_class": type(exc).__name__}
                log.warning("console reprocess failed", extra={"error_class": type(exc).__name__})
            await reads.finish_action(runtime.engine, action_id, outcome)

        running.start("reprocess", work())
        log.info("console action", extra={"route": "/console/actions/reprocess",
                                          "role": session.role})
        return RedirectResponse(f"/console/actions?done={action_id}", status_code=303)

    return router
