"""CoreRuntime wiring: HTTP vs in-process client, dispatcher lifecycle (SPEC §1, §4)."""

from __future__ import annotations

import psycopg

from pinlog.contracts import ProcessRequest
from pinlog.core.dispatch import HttpProcessClient, InProcessClient, UnconfiguredClient
from pinlog.core.runtime import CoreRuntime
from tests.integration.core.conftest import place
from tests.integration.core.support import Receiver, dispatch_count, state_row
from tests.conftest import config_of


async def _one_context(runtime: CoreRuntime, *, check_ready: bool = False) -> int:
    """Start ``runtime``, create a member and a record (one context), wait until its dispatch
    was attempted, stop; return the context id. ``check_ready``: assert readiness while running."""
    await runtime.start()
    try:
        member = await runtime.service.create_member()
        _, context_id = await runtime.service.create_record(member, place(), "메모")
        await runtime.dispatcher.join()
        if check_ready:
            assert await runtime.ready()
    finally:
        await runtime.stop()
    return context_id


async def test_in_process_path_sends_committed_contexts(engine, settings, db_url):
    seen: list[tuple[int, tuple[str, str] | None]] = []

    async def submit(request: ProcessRequest) -> int:
        with psycopg.connect(db_url, autocommit=True) as conn:  # a separate session
            seen.append((request.context_id, state_row(conn, request.context_id)))
        return 202

    runtime = CoreRuntime(engine, config_of(settings).core, in_process_submit=submit)
    assert isinstance(runtime.client, InProcessClient)
    context_id = await _one_context(runtime)
    assert seen == [(context_id, ("PENDING", "PENDING"))]


async def test_in_process_submit_failures_never_reach_the_user(engine, settings, sync_conn):
    async def submit(request: ProcessRequest) -> int:
        raise RuntimeError("ai side bug")

    before = dispatch_count("error")
    runtime = CoreRuntime(engine, config_of(settings).core, in_process_submit=submit)
    context_id = await _one_context(runtime)
    assert dispatch_count("error") == before + 1
    assert state_row(sync_conn, context_id) == ("PENDING", "PENDING")


async def test_http_client_when_ai_base_url_is_set(engine, settings, db_url):
    with Receiver(db_url, mode=202) as receiver:
        runtime = CoreRuntime(engine, config_of(settings.model_copy(update={"ai_base_url": receiver.url})).core,
                              in_process_submit=None)
        assert isinstance(runtime.client, HttpProcessClient)
        context_id = await _one_context(runtime)
    assert [(r.body["contextId"], r.state) for r in receiver.received] == [
        (context_id, ("PENDING", "PENDING"))]


async def test_without_any_ai_side_rows_stay_pending(engine, settings, sync_conn):
    runtime = CoreRuntime(engine, config_of(settings).core)
    assert isinstance(runtime.client, UnconfiguredClient)
    before = dispatch_count("unconfigured")
    context_id = await _one_context(runtime, check_ready=True)
    assert dispatch_count("unconfigured") == before + 1
    assert state_row(sync_conn, context_id) == ("PENDING", "PENDING")


async def test_rescan_loop_is_started_and_stopped_when_enabled(engine, settings):
    runtime = CoreRuntime(engine, config_of(settings.model_copy(update={"rescan_enabled": True})).core)
    await runtime.start()
    try:
        assert runtime.rescan is not None
        await runtime.refresh_gauges()
    finally:
        await runtime.stop()
    assert runtime.rescan is None
    disabled = CoreRuntime(engine, config_of(settings).core)
    await disabled.start()
    assert disabled.rescan is None
    await disabled.stop()
