"""``POST /internal/v1/context/process-batch`` through the real ASGI app and the real database
(docs/ARCHITECTURE.md "Batch path"): one status per item, 401 / 422 / 503 for the call, and the
in-process adapter (``AiRuntime.submit_batch``) with the same semantics."""

from __future__ import annotations

import asyncio

import pytest

from pinlog import metrics
from pinlog.ai import state
from pinlog.contracts import MAX_BATCH_CONTEXTS, PROCESS_BATCH_PATH, SECRET_HEADER
from pinlog.core.dispatch import InProcessClient
from tests.conftest import TEST_SECRET
from tests.integration.ai.support import (FRIENDS_TEXT, QUIET_TEXT, ai_settings_for, insert_state,
                                          request, statuses)
from tests.support.app import running_ai as running_app

HEADERS = {SECRET_HEADER: TEST_SECRET}


def item(context_id: int, text: str = QUIET_TEXT) -> dict:
    return {"contextId": context_id, "userId": 7, "recordId": 70 + context_id, "text": text}


def _count(outcome: str) -> float:
    return metrics.PROCESS_REQUESTS.labels(outcome=outcome)._value.get()


def one_worker_batches_of_5(tmp_path, db_url, sync_conn, context_ids):  # type: ignore[no-untyped-def]
    """Settings of an ai side with one worker taking up to 5 waiting jobs as a batch, with a
    PENDING state row inserted for each of ``context_ids``."""
    for cid in context_ids:
        insert_state(sync_conn, cid)
    return ai_settings_for(tmp_path, db_url, process_batch_size=5, worker_concurrency=1,
                           embedding_batch_size=64)


async def test_one_status_per_item_and_a_bad_item_refused_alone(tmp_path, db_url, provider,
                                                                judge, presets, sync_conn):
    settings = ai_settings_for(tmp_path, db_url, max_text_chars=50)
    for cid in (1, 2, 3):
        insert_state(sync_conn, cid)
    accepted, invalid = _count("accepted"), _count("invalid")
    async with running_app(settings, db_url, provider, judge) as (client, ai):
        response = await client.post(PROCESS_BATCH_PATH, headers=HEADERS, json={"contexts": [
            item(1), {"contextId": 2, "text": FRIENDS_TEXT},  # no userId/recordId
            item(3, FRIENDS_TEXT), item(1, FRIENDS_TEXT),  # a repeated contextId
            item(4, "가" * 51), "not an object"]})
        await ai.join()
    assert response.status_code == 202
    assert response.json() == {"statuses": [202, 422, 202, 422, 422, 422]}
    assert statuses(sync_conn, 1) == statuses(sync_conn, 3) == ("COMPLETED", "COMPLETED")
    assert statuses(sync_conn, 2) == ("PENDING", "PENDING") and provider.texts.count(QUIET_TEXT) == 1
    assert (_count("accepted"), _count("invalid")) == (accepted + 2, invalid + 4)


@pytest.mark.parametrize("payload", [b"{not json", b"{}", b'{"contexts": []}',
                                     b'{"contexts": {"contextId": 1}}', b"[]"])
async def test_422_when_the_body_is_not_a_batch(ai_settings, db_url, provider, judge, presets,
                                                payload):
    async with running_app(ai_settings, db_url, provider, judge) as (client, _ai):
        response = await client.post(PROCESS_BATCH_PATH, headers=HEADERS, content=payload)
    assert response.status_code == 422 and response.json()["error"] == "INVALID_INPUT"


async def test_422_over_the_most_contexts_of_one_batch(ai_settings, db_url, provider, judge,
                                                       presets, sync_conn):
    async with running_app(ai_settings, db_url, provider, judge) as (client, _ai):
        response = await client.post(PROCESS_BATCH_PATH, headers=HEADERS, json={
            "contexts": [item(cid) for cid in range(1, MAX_BATCH_CONTEXTS + 2)]})
    assert response.status_code == 422 and provider.calls == 0


@pytest.mark.parametrize("headers", [{}, {SECRET_HEADER: "wrong"}])
async def test_401_before_the_body_is_read(ai_settings, db_url, provider, judge, presets,
                                           sync_conn, headers):
    insert_state(sync_conn, 1)
    async with running_app(ai_settings, db_url, provider, judge) as (client, ai):
        response = await client.post(PROCESS_BATCH_PATH, headers=headers,
                                     json={"contexts": [item(1)]})
        invalid = await client.post(PROCESS_BATCH_PATH, headers=headers, content=b"{not json")
        await ai.join()
    assert response.status_code == invalid.status_code == 401
    assert response.json()["error"] == invalid.json()["error"] == "UNAUTHORIZED"
    assert statuses(sync_conn, 1) == ("PENDING", "PENDING") and provider.calls == 0


async def test_a_take_over_in_flight_never_splits_the_batch_its_rows_join(
        tmp_path, db_url, provider, judge, presets, sync_conn, monkeypatch):
    """SPEC §7.3.1 with the batch path: the ``take_over_sending`` statement of queued requests
    holds their row locks until it commits; a batch start meanwhile (``SKIP LOCKED``) would pass
    every row over to a single job. The worker waits for that statement, then claims the batch
    whole. Ordered by hooks: the statement is held after it ran (its locks taken) until the
    worker waits for it, or (without the wait) until the batch start has returned."""
    settings = one_worker_batches_of_5(tmp_path, db_url, sync_conn, range(1, 7))
    taken_over, release = asyncio.Event(), asyncio.Event()
    events: list[str] = []
    real_take_over, real_start = state.take_over_sending, state.precheck_and_start_embedding_batch

    async def holding_take_over(conn, ids, owner):
        result = await real_take_over(conn, ids, owner)
        if 2 in ids:  # the queued batch's statement: its row locks are held until release
            taken_over.set()
            await release.wait()
        return result

    async def signalling_start(*args, **kwargs):
        result = await real_start(*args, **kwargs)
        events.append(f"claimed {len(result[1])}")
        release.set()  # without the wait: the rows were passed over under the held locks
        return result

    class SignallingLock(asyncio.Lock):
        async def acquire(self):
            if self.locked():
                events.append("waited")
                release.set()  # the worker waits for the statement in flight
            return await super().acquire()

    monkeypatch.setattr(state, "take_over_sending", holding_take_over)
    monkeypatch.setattr(state, "precheck_and_start_embedding_batch", signalling_start)
    async with running_app(settings, db_url, provider, judge) as (client, ai):
        ai._take_over_lock = SignallingLock()
        gate = provider.hold()
        first = await client.post(PROCESS_BATCH_PATH, headers=HEADERS, json={"contexts": [item(1)]})
        await gate.wait_entered()  # the only worker is busy with context 1
        queued = await client.post(PROCESS_BATCH_PATH, headers=HEADERS, json={
            "contexts": [item(cid, f"메모 {cid}") for cid in range(2, 7)]})
        await asyncio.wait_for(taken_over.wait(), 10)  # rows 2..6 locked by the take-over
        gate.open()
        await ai.join()
    assert first.json() == {"statuses": [202]} and queued.json() == {"statuses": [202] * 5}
    assert events == ["waited", "claimed 5"]  # one claim of the whole batch, after the commit
    assert provider.batches == [1, 5]  # context 1 alone, then 2..6 in one call
    assert all(statuses(sync_conn, cid) == ("COMPLETED", "COMPLETED") for cid in range(1, 7))


@pytest.fixture
def recorded(monkeypatch) -> list[int]:
    """The ids of every ``take_over_sending`` statement, in order (the statement still runs)."""
    ids_seen: list[int] = []
    real_take_over = state.take_over_sending

    async def recording_take_over(conn, ids, owner):
        ids_seen.extend(ids)
        return await real_take_over(conn, ids, owner)

    monkeypatch.setattr(state, "take_over_sending", recording_take_over)
    return ids_seen


async def post_while_the_take_over_waits(client, ai, context_ids):  # type: ignore[no-untyped-def]
    """POST a batch of ``context_ids`` and let it run while the test holds the take-over lock,
    so the take-over task cannot take the list before the batch has run; then release it and
    flush once more (the lock is first-come: the task's own flush has run when this returns).
    Returns the response."""
    await ai._take_over_lock.acquire()
    response = await client.post(PROCESS_BATCH_PATH, headers=HEADERS, json={
        "contexts": [item(cid, f"메모 {cid}") for cid in context_ids]})
    await asyncio.wait_for(ai.join(), 30)
    ai._take_over_lock.release()
    await ai._flush_take_overs()
    return response


async def test_the_rows_a_worker_claims_are_not_taken_over_behind_its_back(
        tmp_path, db_url, provider, judge, presets, sync_conn, recorded, caplog):
    """SPEC §7.3.1 with the batch path: requests a worker has taken from the queue leave the
    take-over list (the claim records the owner itself), so no ``take_over_sending`` statement
    can lock their rows under the batch start. The test holds the take-over lock, so the
    take-over task cannot take the list before the batch has run."""
    settings = one_worker_batches_of_5(tmp_path, db_url, sync_conn, range(2, 7))
    caplog.set_level("INFO", logger="pinlog.ai.batch")
    async with running_app(settings, db_url, provider, judge) as (client, ai):
        queued = await post_while_the_take_over_waits(client, ai, range(2, 7))
    assert queued.json() == {"statuses": [202] * 5}
    assert recorded == [] and provider.batches == [5]
    assert [r.batch for r in caplog.records if r.getMessage() == "batch processed"] == [5]
    assert all(statuses(sync_conn, cid) == ("COMPLETED", "COMPLETED") for cid in range(2, 7))


@pytest.mark.parametrize("failing", ["pre_check", "whole_batch"])
async def test_a_batch_stopped_before_its_claim_takes_its_rows_over_after_all(
        tmp_path, db_url, provider, judge, presets, sync_conn, monkeypatch, recorded, failing):
    """SPEC §7.3.1: rows whose batch stopped before any claim (its pre-check statement fails,
    or the whole batch raises) stay PENDING, and this process accepted them: they are listed
    again for the take-over, so it records itself as their owner as the single path does."""
    settings = one_worker_batches_of_5(tmp_path, db_url, sync_conn, range(2, 7))
    async def failing_start(*args, **kwargs):
        raise RuntimeError("the batch start failed")

    if failing == "pre_check":
        monkeypatch.setattr(state, "precheck_and_start_embedding_batch", failing_start)
    else:
        from pinlog.ai.batch import BatchRunner
        monkeypatch.setattr(BatchRunner, "run", failing_start)
    async with running_app(settings, db_url, provider, judge) as (client, ai):
        queued = await post_while_the_take_over_waits(client, ai, range(2, 7))
        owner = ai.owner
    assert queued.json() == {"statuses": [202] * 5} and provider.calls == 0
    assert sorted(recorded) == [2, 3, 4, 5, 6]
    owners = {row[0] for row in sync_conn.execute(
        "SELECT owner FROM ai.context_ai_state WHERE context_id BETWEEN 2 AND 6").fetchall()}
    assert owners == {owner} and all(statuses(sync_conn, cid) == ("PENDING", "PENDING")
                                     for cid in range(2, 7))


async def test_a_finished_row_of_a_batch_is_not_taken_over_late(
        tmp_path, db_url, provider, judge, presets, sync_conn, recorded):
    """SPEC §7.3.1: a batch's rows with no PENDING work to own (no state row: ``missing``; a
    cancelled context: ``finished``) are not listed again for the take-over after the batch —
    a late record could only overwrite the owner of whoever took such a row over since."""
    settings = one_worker_batches_of_5(tmp_path, db_url, sync_conn, ())
    for cid in (4, 5):
        insert_state(sync_conn, cid, "CANCELLED", "CANCELLED")
    async with running_app(settings, db_url, provider, judge) as (client, ai):
        queued = await post_while_the_take_over_waits(client, ai, (2, 3, 4, 5))
    assert queued.json() == {"statuses": [202] * 4} and provider.calls == 0
    assert recorded == []
    assert statuses(sync_conn, 4) == ("CANCELLED", "CANCELLED")


async def test_a_full_queue_refuses_the_items_that_do_not_fit_and_503_when_none_does(
        tmp_path, db_url, provider, judge, presets, sync_conn):
    settings = ai_settings_for(tmp_path, db_url, work_queue_size=1, worker_concurrency=1,
                               process_batch_size=1)
    for cid in range(1, 6):
        insert_state(sync_conn, cid)
    async with running_app(settings, db_url, provider, judge) as (client, ai):
        gate = provider.hold()
        first = await client.post(PROCESS_BATCH_PATH, headers=HEADERS, json={"contexts": [item(1)]})
        await gate.wait_entered()  # the only worker is busy with context 1
        some = await client.post(PROCESS_BATCH_PATH, headers=HEADERS,
                                 json={"contexts": [item(2), item(3)]})
        none = await client.post(PROCESS_BATCH_PATH, headers=HEADERS,
                                 json={"contexts": [item(4), {"contextId": 5}]})
        in_process = await InProcessClient(ai.submit, ai.submit_batch).send_batch(
            [request(4), request(5)])
        gate.open()
        await ai.join()
    assert first.json() == {"statuses": [202]}
    assert some.status_code == 202 and some.json() == {"statuses": [202, 503]}
    assert none.status_code == 503 and none.json()["statuses"] == [503, 422]
    assert none.json()["error"] == "BUSY"  # the one error envelope, with the statuses
    assert int(none.headers["Retry-After"]) > 0
    assert in_process == [503, 503]  # the same semantics in process
    assert statuses(sync_conn, 3) == ("PENDING", "PENDING")  # the rescan recovers it
    assert statuses(sync_conn, 2) == ("COMPLETED", "COMPLETED")


async def test_the_items_of_a_batch_are_processed_together(tmp_path, db_url, provider, judge,
                                                           presets, sync_conn, caplog):
    """Queued in order without waiting, so a waiting worker takes them as batches of
    ``PINLOG_PROCESS_BATCH_SIZE``: one claim, one embedding call and one write per batch."""
    settings = one_worker_batches_of_5(tmp_path, db_url, sync_conn, range(1, 13))
    caplog.set_level("INFO", logger="pinlog.ai.batch")
    async with running_app(settings, db_url, provider, judge) as (client, ai):
        response = await client.post(PROCESS_BATCH_PATH, headers=HEADERS, json={
            "contexts": [item(cid, f"메모 {cid}") for cid in range(1, 13)]})
        await ai.join()
    assert response.json() == {"statuses": [202] * 12}
    sizes = [r.batch for r in caplog.records if r.getMessage() == "batch processed"]
    assert sorted(sizes) == [2, 5, 5] and sorted(provider.batches) == [2, 5, 5]
    assert all(statuses(sync_conn, cid) == ("COMPLETED", "COMPLETED") for cid in range(1, 13))
