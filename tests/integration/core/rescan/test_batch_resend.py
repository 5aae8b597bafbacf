"""The rescan's and reprocess's re-sends through the batch path (docs/ARCHITECTURE.md "Batch
path"): one re-read and one process-batch call per batch of ``PINLOG_PROCESS_BATCH_SIZE``
contexts, every context keeping its own outcome (SPEC §7.2 step 3). The ai side is a recording
batch client at the contract; the rows are real (plain SQL)."""

from __future__ import annotations

import logging

from pinlog.contracts import ProcessRequest
from pinlog.core.reprocess import ReprocessConfig, reprocess
from pinlog.core.rescan import RescanLoop
from tests.integration.core.rescan.factory import (RecordingBatchClient, RecordingClient,
                                                   delete_context, make_context, state)

OLD = 10_000


async def test_a_round_re_sends_its_claimed_rows_in_batches(sync_conn, engine,
                                                            make_rescan_config, caplog):
    live = [make_context(sync_conn, body=f"메모 {i}", age_s=OLD) for i in range(5)]
    gone = make_context(sync_conn, age_s=OLD)
    missed = make_context(sync_conn, age_s=OLD)
    finished = make_context(sync_conn, age_s=OLD)
    # after the claim the contexts change: deleted (cancelled), deleted with the invalidation
    # missed, finished meanwhile — the re-read of the batch sees it
    client = RecordingBatchClient()
    loop = RescanLoop(engine, make_rescan_config(process_batch_size=3), client)
    claimed = await loop.claim()
    delete_context(sync_conn, gone)
    delete_context(sync_conn, missed, cancel=False)
    sync_conn.execute("UPDATE ai.context_ai_state SET embedding_status = 'COMPLETED', "
                      "keyword_status = 'COMPLETED' WHERE context_id = %s", (finished,))
    with caplog.at_level(logging.WARNING, logger="pinlog.core.rescan"):
        report = await loop.dispatch(claimed)
    assert sorted(claimed) == sorted([*live, gone, missed, finished])
    assert sorted(report.dispatched) == live
    assert sorted(report.skipped_deleted) == sorted([gone, missed])
    assert report.skipped_finished == [finished] and report.failed_calls == []
    assert all(len(batch) <= 3 for batch in client.batches) and len(client.batches) >= 2
    assert sorted(r.context_id for r in client.requests) == live  # each once, none deleted
    member, record = sync_conn.execute("SELECT member_id, record_id FROM core.context "
                                       "WHERE id = %s", (live[0],)).fetchone()
    sent = {r.context_id: r for r in client.requests}[live[0]]  # the text re-read from core
    assert sent.model_dump(exclude={"place_meta"}) == ProcessRequest(
        context_id=live[0], user_id=member, record_id=record, text="메모 0").model_dump(
        exclude={"place_meta"})
    assert sent.place_meta is not None  # and the saved place (SPEC §10, issue 28)
    assert [r.context_id for r in caplog.records if "invalidation was missed" in r.getMessage()] \
        == [missed]


async def test_busy_items_of_a_batch_are_re_sent_within_the_round(sync_conn, engine,
                                                                  make_rescan_config):
    ids = [make_context(sync_conn, age_s=OLD) for _ in range(4)]
    busy_once = {ids[1], ids[3]}
    client = RecordingBatchClient(
        answer=lambda r, attempt: 503 if r.context_id in busy_once and attempt == 1 else 202)
    report = await RescanLoop(engine, make_rescan_config(process_batch_size=10,
                                                         rescan_busy_wait=30),
                              client).run_round()
    assert sorted(report.dispatched_ids) == ids and report.failed_calls == 0
    assert [sorted(r.context_id for r in batch) for batch in client.batches] == [
        ids, sorted(busy_once)]  # only the busy ones again
    assert all(state(sync_conn, i)["retry_count"] == 1 for i in ids)


async def test_items_refused_by_a_batch_are_failed_calls_and_the_rest_dispatched(
        sync_conn, engine, make_rescan_config):
    ids = [make_context(sync_conn, age_s=OLD) for _ in range(3)]
    client = RecordingBatchClient(answer=lambda r, _: 422 if r.context_id == ids[0] else 202)
    report = await RescanLoop(engine, make_rescan_config(process_batch_size=10,
                                                         rescan_busy_wait=0),
                              client).run_round()
    assert report.failed_call_ids == [ids[0]] and sorted(report.dispatched_ids) == ids[1:]


async def test_a_client_without_batches_or_a_batch_size_of_one_sends_per_context(
        sync_conn, engine, make_rescan_config):
    ids = [make_context(sync_conn, age_s=OLD) for _ in range(3)]
    plain = RecordingClient()
    report = await RescanLoop(engine, make_rescan_config(process_batch_size=10),
                              plain).run_round()
    assert sorted(plain.ids) == ids and sorted(report.dispatched_ids) == ids
    more = [make_context(sync_conn, age_s=OLD) for _ in range(2)]
    batching = RecordingBatchClient()
    await RescanLoop(engine, make_rescan_config(process_batch_size=1), batching).run_round()
    assert batching.batches == [] and sorted(batching.ids) == more


async def test_reprocess_dispatches_each_committed_batch_through_the_batch_path(
        sync_conn, engine):
    ids = [make_context(sync_conn, emb="COMPLETED", kw="COMPLETED") for _ in range(5)]
    for cid in ids:
        sync_conn.execute(
            "INSERT INTO ai.context_embedding (context_id, user_id, record_id, embedding, "
            "embedding_profile, text_sha256) SELECT c.id, c.member_id, c.record_id, '[1,0]', "
            "'old-profile', %s FROM core.context c WHERE c.id = %s", (b"\x01" * 32, cid))
    client = RecordingBatchClient()
    config = ReprocessConfig(profile="new-profile", concurrency=2, dispatch_batch=2)
    report = await reprocess(engine, config, "profile", client=client, batch_size=3)
    assert sorted(report.moved_ids) == ids and sorted(report.dispatch.dispatched) == ids
    # per committed batch of 3 (moved in id order): 2 + 1, then 2 — the dispatches of one
    # committed batch run concurrently (concurrency 2), so their order is not asserted
    sent = sorted(sorted(r.context_id for r in batch) for batch in client.batches)
    assert sent == [ids[0:2], ids[2:3], ids[3:5]]
