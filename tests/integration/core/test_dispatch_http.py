"""Dispatch over real HTTP to a local receiver (SPEC §4 dispatch cases of §11)."""

from __future__ import annotations

import asyncio
import logging

import pytest

from pinlog.contracts import PROCESS_PATH, REQUEST_ID_HEADER, SECRET_HEADER, ProcessRequest
from pinlog.core.dispatch import Dispatcher, HttpProcessClient
from pinlog.core.services import CoreService
from pinlog.logs import log_context
from tests.conftest import TEST_SECRET, config_of
from tests.helpers import free_port
from tests.integration.core.conftest import place
from tests.integration.core.support import Receiver, dispatch_count

REQ = ProcessRequest(context_id=7, user_id=1, record_id=3, text="비 오는 날", place_meta=None)


async def test_state_row_is_committed_when_the_process_request_arrives(engine, settings, db_url):
    with Receiver(db_url, mode=202) as receiver:
        client = HttpProcessClient(receiver.url, TEST_SECRET, 1.0, 3.0)
        dispatcher = Dispatcher(client, queue_size=10, workers=2)
        dispatcher.start()
        try:
            service = CoreService(engine, dispatcher, config_of(settings).core.service)
            member = await service.create_member()
            record_id, first = await service.create_record(member, place(), "첫 메모")
            second = await service.add_context(member, record_id, "둘째 메모")
            edited = await service.edit_context(member, first, "고친 메모")
            await dispatcher.join()
        finally:
            await dispatcher.stop()
            await client.aclose()
    got = {r.body["contextId"]: r for r in receiver.received}
    assert sorted(got) == sorted([first, second, edited])
    for r in got.values():  # read by the receiver over its own connection at arrival
        assert r.state == ("PENDING", "PENDING")
        assert r.path == PROCESS_PATH
        assert r.headers[SECRET_HEADER] == TEST_SECRET
        assert len(r.headers[REQUEST_ID_HEADER]) >= 16
    # every request carries the record's saved place (SPEC §10: the ai side's lexical terms)
    meta = {"externalPlaceId": "kakao-1", "name": "카페 온다", "address": "서울 중구"}
    assert got[edited].body == {"contextId": edited, "userId": member, "recordId": record_id,
                                "text": "고친 메모", "placeMeta": meta}
    assert got[first].body["placeMeta"] == got[second].body["placeMeta"] == meta
    assert len({r.headers[REQUEST_ID_HEADER] for r in got.values()}) == 3


async def test_accepted_is_counted():
    before = dispatch_count("accepted")
    with Receiver(mode=202) as receiver:
        client = HttpProcessClient(receiver.url, TEST_SECRET)
        with log_context(request_id="rid-1"):
            assert await client.send(REQ) == 202
        await client.aclose()
    assert receiver.received[0].headers[REQUEST_ID_HEADER] == "rid-1"
    assert dispatch_count("accepted") == before + 1


@pytest.mark.parametrize("status,outcome,level", [
    (401, "unauthorized", logging.ERROR), (403, "unauthorized", logging.ERROR),
    (422, "client_error", logging.ERROR), (500, "server_error", logging.WARNING),
    (502, "server_error", logging.WARNING), (503, "busy", logging.WARNING),
])
async def test_answers_are_logged_by_class_and_counted(caplog, status, outcome, level):
    before = dispatch_count(outcome)
    with Receiver(mode=status) as receiver, caplog.at_level(logging.INFO, "pinlog.core.dispatch"):
        client = HttpProcessClient(receiver.url, "wrong-secret")
        assert await client.send(REQ) == status
        await client.aclose()
    assert dispatch_count(outcome) == before + 1
    records = [r for r in caplog.records if r.name == "pinlog.core.dispatch"]
    assert [r.levelno for r in records] == [level]
    assert records[0].context_id == 7 and records[0].outcome == outcome
    assert "비 오는 날" not in caplog.text and "wrong-secret" not in caplog.text


async def test_401_is_logged_at_error(caplog):
    with Receiver(mode=401) as receiver, caplog.at_level(logging.WARNING):
        client = HttpProcessClient(receiver.url, "wrong-secret")
        await client.send(REQ)
        await client.aclose()
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 1 and "secret" in errors[0].getMessage()


async def test_hang_up_returns_zero_and_is_counted_as_connection(caplog):
    before = dispatch_count("connection")
    with Receiver(mode="hangup") as receiver, caplog.at_level(logging.WARNING):
        client = HttpProcessClient(receiver.url, TEST_SECRET)
        assert await client.send(REQ) == 0
        await client.aclose()
    assert dispatch_count("connection") == before + 1
    assert any(r.levelno == logging.WARNING for r in caplog.records)


async def test_refused_connection_returns_zero():
    before = dispatch_count("connection")
    client = HttpProcessClient(f"http://127.0.0.1:{free_port()}", TEST_SECRET)
    assert await client.send(REQ) == 0
    await client.aclose()
    assert dispatch_count("connection") == before + 1


async def test_read_timeout_returns_zero_while_the_ai_side_still_holds_the_request():
    before = dispatch_count("timeout")
    with Receiver(mode="hang") as receiver:
        client = HttpProcessClient(receiver.url, TEST_SECRET, connect_timeout=1.0, read_timeout=0.2)
        assert await client.send(REQ) == 0
        assert receiver.arrived.is_set() and not receiver.release.is_set()
        await client.aclose()
    assert dispatch_count("timeout") == before + 1


async def test_a_hung_ai_side_does_not_block_other_dispatches():
    """Workers are independent: one hung request leaves the others flowing."""
    with Receiver(mode="hang") as receiver:
        client = HttpProcessClient(receiver.url, TEST_SECRET, read_timeout=5.0)
        dispatcher = Dispatcher(client, queue_size=10, workers=2)
        dispatcher.start()
        dispatcher.enqueue(REQ)
        await asyncio.to_thread(receiver.arrived.wait, 5)
        receiver.arrived.clear()
        dispatcher.enqueue(REQ.model_copy(update={"context_id": 8}))
        assert await asyncio.to_thread(receiver.arrived.wait, 5)
        assert len(receiver.received) == 2
        receiver.release.set()
        await dispatcher.join()
        await dispatcher.stop()
        await client.aclose()
