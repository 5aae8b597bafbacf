"""A background job's log lines carry its request id and context id with no parameter passed
(pinlog.logs; SPEC §12 ids per line): set by the HTTP middleware of the real process route
(from ``X-Request-Id``) or by the in-process adapter, resumed by the work queue's job runner."""

from __future__ import annotations

import contextlib
import json
import logging

import httpx

from pinlog.contracts import PROCESS_PATH, SECRET_HEADER
from pinlog.core.dispatch import HttpProcessClient, InProcessClient
from pinlog.logs import JsonFormatter, log_context
from tests.conftest import TEST_SECRET
from tests.integration.ai.support import FRIENDS_TEXT, QUIET_TEXT, insert_state, request
from tests.support.app import running_app


#: The loggers of a job's lines: the single-context job and the batch path (several waiting jobs
#: run together, each line in its own job's context).
JOB_LOGGERS = ("pinlog.ai.pipeline", "pinlog.ai.batch")


def job_lines(caplog) -> list[dict]:
    """The jobs' per-context lines as emitted (JSON), in order (the batch summary line, which
    carries no context, left out)."""
    return [json.loads(JsonFormatter().format(r)) for r in caplog.records
            if r.name in JOB_LOGGERS and r.getMessage() != "batch processed"]


def ids_by_context(lines: list[dict]) -> dict[int, set[tuple[object, object]]]:
    out: dict[int, set[tuple[object, object]]] = {}
    for line in lines:
        out.setdefault(line["context_id"], set()).add((line.get("request_id"), line.get("record_id")))
    return out


@contextlib.asynccontextmanager
async def two_pending_contexts(settings, db_url, provider, judge, sync_conn, caplog):
    """An ai-only app with the state rows of contexts 1 and 2, the jobs' DEBUG lines captured
    (a completed stage is a DEBUG line)."""
    insert_state(sync_conn, 1)
    insert_state(sync_conn, 2)
    for name in JOB_LOGGERS:
        caplog.set_level(logging.DEBUG, logger=name)
    async with running_app(settings, db_url, components=("ai",), provider=provider,
                           judge=judge, base_url="http://ai") as running:
        yield running


async def test_a_job_sent_over_the_http_route_logs_the_request_id_it_was_sent_with(
        ai_settings, db_url, provider, judge, presets, sync_conn, caplog):
    async with two_pending_contexts(ai_settings, db_url, provider, judge, sync_conn,
                                    caplog) as running:
        # core's HTTP client over the app's real route: the header comes from the context
        client = HttpProcessClient("http://ai", TEST_SECRET,
                                   transport=httpx.ASGITransport(app=running.app))
        with log_context(request_id="rid-http-1"):
            assert await client.send(request(1, record_id=71)) == 202
        await client.aclose()
        response = await running.http.post(  # any caller's X-Request-Id
            PROCESS_PATH, headers={SECRET_HEADER: TEST_SECRET, "X-Request-Id": "rid-http-2"},
            json={"contextId": 2, "userId": 7, "recordId": 72, "text": FRIENDS_TEXT})
        assert response.status_code == 202
        await running.ai.join()
    lines = job_lines(caplog)
    assert {line["msg"] for line in lines} >= {"embedding completed", "keywords completed"}
    assert ids_by_context(lines) == {1: {("rid-http-1", 71)}, 2: {("rid-http-2", 72)}}


async def test_a_job_submitted_in_process_logs_the_callers_request_id(
        ai_settings, db_url, provider, judge, presets, sync_conn, caplog):
    async with two_pending_contexts(ai_settings, db_url, provider, judge, sync_conn,
                                    caplog) as running:
        client = InProcessClient(running.ai.submit)
        with log_context(request_id="rid-in-1"):
            assert await client.send(request(1, QUIET_TEXT, record_id=71)) == 202
        assert await client.send(request(2, FRIENDS_TEXT, record_id=72)) == 202  # no id: a new one
        await running.ai.join()
    by_context = ids_by_context(job_lines(caplog))
    assert by_context[1] == {("rid-in-1", 71)}
    [(generated, record)] = by_context[2]
    assert record == 72 and isinstance(generated, str) and len(generated) == 32
