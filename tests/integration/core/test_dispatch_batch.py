"""core's process clients sending many contexts at once (docs/ARCHITECTURE.md "Batch path"):
``HttpProcessClient.send_batch`` against the real ai app (ASGI) and against an ai side without
the batch route (a real local HTTP receiver that knows only ``/process``)."""

from __future__ import annotations

import http.server
import json
import logging
import threading

import httpx

from pinlog.contracts import PROCESS_BATCH_PATH, PROCESS_PATH, REQUEST_ID_HEADER
from pinlog.core.dispatch import HttpProcessClient, UnconfiguredClient
from pinlog.logs import log_context
from tests.conftest import TEST_SECRET
from tests.integration.ai.support import (QUIET_TEXT, ai_settings_for, insert_state, request,
                                          statuses)
from tests.integration.core.support import Receiver, dispatch_count
from tests.support.app import running_app


async def test_send_batch_is_one_call_with_one_status_per_context(tmp_path, db_url, provider,
                                                                  judge, presets, sync_conn):
    ai_settings = ai_settings_for(tmp_path, db_url, max_text_chars=100)
    for cid in (1, 2):
        insert_state(sync_conn, cid)
    accepted = dispatch_count("accepted")
    async with running_app(ai_settings, db_url, components=("ai",), provider=provider,
                           judge=judge, base_url="http://ai") as running:
        client = HttpProcessClient("http://ai", TEST_SECRET,
                                   transport=httpx.ASGITransport(app=running.app))
        with log_context(request_id="rid-batch"):
            got = await client.send_batch([request(1), request(2, "가" * 101)])
        wrong = HttpProcessClient("http://ai", "wrong-secret",
                                  transport=httpx.ASGITransport(app=running.app))
        refused = await wrong.send_batch([request(1), request(2)])
        await client.aclose()
        await wrong.aclose()
        await running.ai.join()
    assert got == [202, 422]  # the text over the ai side's limit is refused alone
    assert refused == [401, 401]
    assert statuses(sync_conn, 1) == ("COMPLETED", "COMPLETED")
    assert dispatch_count("accepted") == accepted + 1


async def test_an_ai_side_without_the_batch_route_gets_one_request_per_context(caplog):
    with Receiver(mode=202) as receiver, caplog.at_level(logging.WARNING,
                                                         "pinlog.core.dispatch"):
        client = HttpProcessClient(receiver.url, TEST_SECRET)
        with log_context(request_id="rid-old"):
            first = await client.send_batch([request(1), request(2)])
        second = await client.send_batch([request(3)])
        await client.aclose()
    assert first == [202, 202] and second == [202]
    assert [r.path for r in receiver.received] == [PROCESS_BATCH_PATH, PROCESS_PATH, PROCESS_PATH,
                                                   PROCESS_PATH]  # asked once, then remembered
    assert [r.body["contextId"] for r in receiver.received[1:]] == [1, 2, 3]
    assert {r.headers[REQUEST_ID_HEADER] for r in receiver.received[:3]} == {"rid-old"}
    assert sum("no process-batch route" in r.getMessage() for r in caplog.records) == 1


async def test_no_answer_is_status_0_for_every_context_and_never_raises():
    before = dispatch_count("connection")
    with Receiver(mode="hangup") as receiver:
        client = HttpProcessClient(receiver.url, TEST_SECRET, connect_timeout=1, read_timeout=2)
        got = await client.send_batch([request(1, QUIET_TEXT), request(2, QUIET_TEXT)])
        await client.aclose()
    assert got == [0, 0] and dispatch_count("connection") == before + 2


async def test_the_unconfigured_client_answers_0_for_every_context():
    assert await UnconfiguredClient().send_batch([request(1), request(2)]) == [0, 0]


async def test_an_answer_without_one_status_per_context_is_not_taken_as_the_batch_contract():
    """A 202 to the batch call that says nothing per context (not this contract): each context
    is sent on its own instead (safe: the ai side's guarded start lets one job own a stage)."""
    seen: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_POST(self) -> None:  # noqa: N802 - every path: 202, no body
            self.rfile.read(int(self.headers["Content-Length"]))
            seen.append(self.path)
            self.send_response(202)
            self.send_header("Content-Length", "0")
            self.end_headers()

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        client = HttpProcessClient(f"http://127.0.0.1:{server.server_address[1]}", TEST_SECRET)
        assert await client.send_batch([request(1), request(2)]) == [202, 202]
        await client.aclose()
    finally:
        server.shutdown()
        server.server_close()
    assert seen == [PROCESS_BATCH_PATH, PROCESS_PATH, PROCESS_PATH]


class _Counting(httpx.AsyncBaseTransport):
    """An ASGI transport that records (path, items, status) of every call it carries, and the
    largest body it carried (bytes)."""

    def __init__(self, app: object) -> None:
        self.inner = httpx.ASGITransport(app=app)  # type: ignore[arg-type]
        self.calls: list[tuple[str, int, int]] = []
        self.largest = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        items = len(body["contexts"]) if isinstance(body, dict) and "contexts" in body else 1
        self.largest = max(self.largest, len(request.content))
        response = await self.inner.handle_async_request(request)
        self.calls.append((request.url.path, items, response.status_code))
        return response


async def _send_long_notes(tmp_path, db_url, provider, judge, sync_conn, *, n: int,
                           process_batch_size: int) -> tuple[list[int], _Counting, object]:
    """``n`` notes of nearly PINLOG_MAX_TEXT_CHARS = 2000 non-ASCII characters sent as one
    ``send_batch`` to an ai app with ``process_batch_size``; every job run to its end."""
    ai_settings = ai_settings_for(tmp_path, db_url, max_text_chars=2000,
                                  process_batch_size=process_batch_size)
    for cid in range(1, n + 1):
        insert_state(sync_conn, cid)
    async with running_app(ai_settings, db_url, components=("ai",), provider=provider,
                           judge=judge, base_url="http://ai") as running:
        transport = _Counting(running.app)
        client = HttpProcessClient("http://ai", TEST_SECRET, transport=transport)
        got = await client.send_batch([request(cid, f"{cid} " + "가" * 1990)
                                       for cid in range(1, n + 1)])
        await client.aclose()
        await running.ai.join()
    return got, transport, ai_settings


async def test_a_batch_of_the_longest_notes_fits_the_batch_routes_limit_in_one_call(
        tmp_path, db_url, provider, judge, presets, sync_conn):
    """PINLOG_PROCESS_BATCH_SIZE notes of PINLOG_MAX_TEXT_CHARS non-ASCII characters are far
    over one note's body limit (64 KiB): the batch route has its own
    (``Settings.batch_body_limit``), so they go in one call."""
    got, transport, ai_settings = await _send_long_notes(tmp_path, db_url, provider, judge,
                                                         sync_conn, n=16, process_batch_size=16)
    assert got == [202] * 16
    assert transport.calls == [(PROCESS_BATCH_PATH, 16, 202)]
    assert transport.largest > ai_settings.body_limit()  # really over one note's limit
    assert statuses(sync_conn, 16) == ("COMPLETED", "COMPLETED")


async def test_a_batch_over_the_ai_sides_limit_is_sent_again_in_halves(
        tmp_path, db_url, provider, judge, presets, sync_conn):
    """An ai side whose batch limit is smaller than the batch (its PINLOG_PROCESS_BATCH_SIZE
    of 1: one note's limit) answers 413: the client sends halves until they fit, and every
    context is accepted once."""
    got, transport, _ = await _send_long_notes(tmp_path, db_url, provider, judge, sync_conn,
                                               n=16, process_batch_size=1)
    assert got == [202] * 16
    assert transport.calls[0] == (PROCESS_BATCH_PATH, 16, 413)
    accepted = [(path, items) for path, items, status in transport.calls if status == 202]
    assert sum(items for _, items in accepted) == 16 and len(accepted) > 1
    assert all(items < 16 for _, items in accepted)
    assert all(statuses(sync_conn, cid) == ("COMPLETED", "COMPLETED") for cid in range(1, 17))
