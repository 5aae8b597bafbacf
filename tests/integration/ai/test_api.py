"""``POST /internal/v1/context/process`` through the real ASGI app and the real database
(SPEC §5.1): 202 / 401 / 422 / 503, and the in-process adapter with the same semantics."""

from __future__ import annotations

import logging

import pytest

from pinlog import metrics
from pinlog.contracts import PROCESS_PATH, SECRET_HEADER
from tests.conftest import TEST_SECRET
from tests.integration.ai.support import ai_settings_for
from tests.integration.ai.support import QUIET_TEXT, insert_state, keyword_rows, request, statuses
from tests.support.app import running_ai as running_app


def body(context_id: int = 1, text: str = QUIET_TEXT, **extra) -> dict:
    return {"contextId": context_id, "userId": 7, "recordId": 70, "text": text,
            "placeMeta": None, **extra}


def _count(outcome: str) -> float:
    return metrics.PROCESS_REQUESTS.labels(outcome=outcome)._value.get()


async def test_202_accepted_and_processed(ai_settings, db_url, provider, judge, presets, sync_conn):
    insert_state(sync_conn, 1)
    before = _count("accepted")
    async with running_app(ai_settings, db_url, provider, judge) as (client, ai):
        response = await client.post(PROCESS_PATH, json=body(),
                                     headers={SECRET_HEADER: TEST_SECRET, "X-Request-Id": "r-1"})
        assert response.status_code == 202 and response.content == b""
        await ai.join()
    assert statuses(sync_conn, 1) == ("COMPLETED", "COMPLETED")
    assert [k for k, *_ in keyword_rows(sync_conn, 1)] == [301]
    assert _count("accepted") == before + 1


@pytest.mark.parametrize("headers", [{}, {SECRET_HEADER: "wrong"}, {SECRET_HEADER: ""},
                                     {SECRET_HEADER: TEST_SECRET + "x"}])
async def test_401_missing_or_wrong_secret_changes_nothing(ai_settings, db_url, provider, judge,
                                                           presets, sync_conn, headers):
    insert_state(sync_conn, 1)
    before = _count("unauthorized")
    async with running_app(ai_settings, db_url, provider, judge) as (client, ai):
        response = await client.post(PROCESS_PATH, json=body(), headers=headers)
        # checked before the body: an unauthenticated caller learns nothing about body rules
        invalid = await client.post(PROCESS_PATH, content=b"{not json", headers=headers)
        await ai.join()
    assert response.status_code == 401 and invalid.status_code == 401
    assert response.json() == {"error": "UNAUTHORIZED", "message": "missing or wrong X-Internal-Secret"}
    assert statuses(sync_conn, 1) == ("PENDING", "PENDING") and provider.calls == 0
    assert _count("unauthorized") == before + 2


async def test_rotation_every_configured_secret_is_accepted(tmp_path, db_url, provider, judge,
                                                            presets, sync_conn):
    settings = ai_settings_for(tmp_path, db_url, internal_secrets="new-secret-1,old-secret-0")
    insert_state(sync_conn, 1)
    insert_state(sync_conn, 2)
    async with running_app(settings, db_url, provider, judge) as (client, ai):
        for cid, secret in ((1, "new-secret-1"), (2, "old-secret-0")):
            r = await client.post(PROCESS_PATH, json=body(cid), headers={SECRET_HEADER: secret})
            assert r.status_code == 202
        r = await client.post(PROCESS_PATH, json=body(1), headers={SECRET_HEADER: TEST_SECRET})
        assert r.status_code == 401
        await ai.join()
    assert statuses(sync_conn, 2) == ("COMPLETED", "COMPLETED")


@pytest.mark.parametrize("payload", [
    b"{not json",
    b"[]",
    b'{"contextId": 1, "userId": 7, "recordId": 70}',                       # no text
    b'{"contextId": 1, "userId": 7, "recordId": 70, "text": ""}',           # empty text
    b'{"contextId": "x", "userId": 7, "recordId": 70, "text": "a"}',
    b'{"contextId": 0, "userId": 7, "recordId": 70, "text": "a"}',
    b'{"contextId": 1, "userId": "7", "recordId": 70, "text": "a", "extra": 1}',  # strict types
])
async def test_422_invalid_body_changes_nothing(ai_settings, db_url, provider, judge, presets,
                                                sync_conn, payload):
    insert_state(sync_conn, 1)
    async with running_app(ai_settings, db_url, provider, judge) as (client, ai):
        response = await client.post(PROCESS_PATH, content=payload,
                                     headers={SECRET_HEADER: TEST_SECRET,
                                              "Content-Type": "application/json"})
        await ai.join()
    assert response.status_code == 422 and response.json() == {
        "error": "INVALID_INPUT", "message": "the request body is not a valid request for this route"}
    assert statuses(sync_conn, 1) == ("PENDING", "PENDING") and provider.calls == 0


async def test_422_text_longer_than_the_limit(tmp_path, db_url, provider, judge, presets,
                                              sync_conn):
    settings = ai_settings_for(tmp_path, db_url, max_text_chars=10)
    insert_state(sync_conn, 1)
    async with running_app(settings, db_url, provider, judge) as (client, ai):
        too_long = await client.post(PROCESS_PATH, json=body(text="가" * 11),
                                     headers={SECRET_HEADER: TEST_SECRET})
        exact = await ai.submit(request(1, "가" * 10))
        await ai.join()
    assert too_long.status_code == 422
    assert exact == 202  # 10 characters (not bytes) is within the limit


async def test_503_with_retry_after_when_the_work_queue_is_full(tmp_path, db_url, provider, judge,
                                                                presets, sync_conn):
    settings = ai_settings_for(tmp_path, db_url, work_queue_size=1, worker_concurrency=1)
    for cid in (1, 2, 3):
        insert_state(sync_conn, cid)
    before = _count("busy")
    async with running_app(settings, db_url, provider, judge) as (client, ai):
        gate = provider.hold()
        headers = {SECRET_HEADER: TEST_SECRET}
        assert (await client.post(PROCESS_PATH, json=body(1), headers=headers)).status_code == 202
        await gate.wait_entered()  # the only worker is busy with context 1
        assert (await client.post(PROCESS_PATH, json=body(2), headers=headers)).status_code == 202
        full = await client.post(PROCESS_PATH, json=body(3), headers=headers)
        assert await ai.submit(request(3)) == 503  # same semantics in process
        gate.open()
        await ai.join()
    assert full.status_code == 503 and int(full.headers["Retry-After"]) > 0
    assert _count("busy") == before + 2
    assert statuses(sync_conn, 3) == ("PENDING", "PENDING")  # the rescan recovers it
    assert statuses(sync_conn, 2) == ("COMPLETED", "COMPLETED")


async def test_refusals_of_a_full_queue_are_logged_once_per_interval_with_a_count(
        tmp_path, db_url, provider, judge, presets, sync_conn, caplog, monkeypatch):
    """A backlog re-sent into a full queue logs one WARNING per interval, not one per request;
    the next line after the interval carries how many were refused meanwhile."""
    from pinlog.ai import runtime as ai_runtime

    settings = ai_settings_for(tmp_path, db_url, work_queue_size=1, worker_concurrency=1)
    for cid in range(1, 9):
        insert_state(sync_conn, cid)
    caplog.set_level(logging.WARNING, logger="pinlog.ai.runtime")
    async with running_app(settings, db_url, provider, judge) as (_client, ai):
        gate = provider.hold()
        assert await ai.submit(request(1)) == 202
        await gate.wait_entered()
        assert await ai.submit(request(2)) == 202  # fills the queue
        assert [await ai.submit(request(c)) for c in (3, 4, 5, 6)] == [503] * 4
        monkeypatch.setattr(ai_runtime, "REFUSAL_LOG_INTERVAL", 0.0)  # the interval has passed
        assert await ai.submit(request(7)) == 503
        gate.open()
        await ai.join()
    lines = [r for r in caplog.records if r.name == "pinlog.ai.runtime"
             and "work queue full" in r.getMessage()]
    assert [r.count for r in lines] == [1, 4]  # the first refusal, then 4, 5, 6 and 7


async def test_in_process_submit_has_the_route_semantics(ai_settings, db_url, provider, judge,
                                                         presets, sync_conn):
    insert_state(sync_conn, 1)
    async with running_app(ai_settings, db_url, provider, judge) as (_client, ai):
        assert await ai.submit(request(1)) == 202
        await ai.join()
    assert statuses(sync_conn, 1) == ("COMPLETED", "COMPLETED")
