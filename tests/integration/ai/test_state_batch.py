"""The batch statements of ``ai/state.sql`` against the real PostgreSQL (SPEC §3, §5.4): every
row of a batch gets exactly what the single-context statement would give it.

Each scenario is written twice — context ``2i+1`` for the single statement, ``2i+2`` for the
batch — in the same status (plain SQL, as core or an earlier job left it); the single statement
runs on the odd rows one by one, the batch statement on all even rows at once, and the outcome,
the statuses, the recorded owner, the event rows and the written rows of each pair must agree.
Each save carries the claim its start left (SPEC §7.3.1); a taken-over row's batch save writes
nothing while the rest of its batch is saved. Then the batch claim under concurrency: two claims
at once never share a row and never wait for each other.
"""

from __future__ import annotations

import asyncio
import hashlib
from datetime import timedelta

import numpy as np
import psycopg
import pytest

from pinlog.ai import state
from pinlog.states import Stage, Status
from tests.integration.ai.support import (PROFILE, analysis_row, basis, claim_of,
                                          embedding_rows, events, insert_embedding, insert_state,
                                          keyword_rows, seed_presets, statuses)
from tests.support.owners import add_process, owner_of, set_owner

EXPIRY = timedelta(minutes=10)
ALL = [s.value for s in Status]
OLD = EXPIRY.total_seconds() + 60
#: (embedding, keyword, age in seconds): every status pair, fresh and past the expiry
SCENARIOS = [(e, k, age) for e in ALL for k in ALL for age in (0, OLD)]


def _pairs(sync_conn, scenarios) -> tuple[list[int], list[int]]:
    """Write each scenario twice; returns (single ids, batch ids), paired by position."""
    single, batch = [], []
    for i, (embedding, keyword, age) in enumerate(scenarios):
        for cid in (2 * i + 1, 2 * i + 2):
            insert_state(sync_conn, cid, embedding, keyword, age_seconds=age)
        single.append(2 * i + 1)
        batch.append(2 * i + 2)
    return single, batch


def _picture(sync_conn, cid: int) -> tuple:
    """What a context's rows look like, without its id: statuses, recorded owner, events (stage,
    from, to, actor, reason), embedding rows, keyword rows, analysis row."""
    return (statuses(sync_conn, cid), owner_of(sync_conn, cid)[0], events(sync_conn, cid),
            embedding_rows(sync_conn, cid),
            [(k, float(c), v) for k, c, v in keyword_rows(sync_conn, cid)],
            analysis_row(sync_conn, cid))


def _assert_pairs_agree(sync_conn, single, batch, single_out, batch_out) -> None:
    for s, b in zip(single, batch, strict=True):
        assert (single_out[s], _picture(sync_conn, s)) == (batch_out[b], _picture(sync_conn, b)), \
            (statuses(sync_conn, s), statuses(sync_conn, b))


@pytest.mark.parametrize("stage", list(Stage))
async def test_batch_start_gives_every_row_what_the_single_start_gives_it(engine, sync_conn,
                                                                          stage):
    single, batch = _pairs(sync_conn, SCENARIOS)
    # plus: PROCESSING younger than the expiry whose retry_count rose since it started (§7.3)
    rose = len(SCENARIOS)
    for cid in (2 * rose + 1, 2 * rose + 2):
        insert_state(sync_conn, cid, "COMPLETED" if stage is Stage.KEYWORD else "PROCESSING",
                     "PROCESSING" if stage is Stage.KEYWORD else "PENDING")
        sync_conn.execute(f"UPDATE ai.context_ai_state SET retry_count = 2, "
                          f"{stage.label}_start_retry = 1 WHERE context_id = %s", (cid,))
    single.append(2 * rose + 1)
    batch.append(2 * rose + 2)
    # plus (§7.3.1): PROCESSING younger than the expiry whose owner is gone (re-claimed at once)
    # and one whose owner is live (left alone)
    for offset, live in ((1, False), (2, True)):
        owner = add_process(sync_conn, live=live)
        for cid in (2 * (rose + offset) + 1, 2 * (rose + offset) + 2):
            insert_state(sync_conn, cid, "COMPLETED" if stage is Stage.KEYWORD else "PROCESSING",
                         "PROCESSING" if stage is Stage.KEYWORD else "PENDING", owner=owner)
        single.append(2 * (rose + offset) + 1)
        batch.append(2 * (rose + offset) + 2)
    me = add_process(sync_conn)  # the claiming process: live, recorded as the owner

    def taken(claim: state.Claim | None) -> tuple | None:
        return None if claim is None else (claim.previous, claim.owner)

    single_out = {}
    for cid in single:
        async with engine.begin() as conn:
            single_out[cid] = taken(await state.start_stage(conn, cid, stage, EXPIRY, me))
    async with engine.begin() as conn:
        started = await state.start_stage_batch(conn, batch, stage, EXPIRY, me)
    batch_out = {cid: taken(started.get(cid)) for cid in batch}
    assert (Status.PENDING, me) in batch_out.values()  # fresh starts happened
    assert (Status.PROCESSING, me) in batch_out.values()  # and re-claims
    assert batch_out[2 * rose + 2] == (Status.PROCESSING, me)
    assert batch_out[2 * (rose + 1) + 2] == (Status.PROCESSING, me)  # owner gone: at once
    assert batch_out[2 * (rose + 2) + 2] is None  # owner live: waits for the expiry
    _assert_pairs_agree(sync_conn, single, batch, single_out, batch_out)


@pytest.mark.parametrize("stage", list(Stage))
async def test_a_batch_start_records_the_owner_and_returns_each_rows_claim(engine, sync_conn,
                                                                          stage):
    """SPEC §7.3.1: as the single start, each started row records the live claiming process as
    its owner with owned_at = updated_at = the returned claimed_at."""
    me = add_process(sync_conn)
    for cid in (1, 2):
        insert_state(sync_conn, cid, "COMPLETED" if stage is Stage.KEYWORD else "PENDING")
    async with engine.begin() as conn:
        claims = await state.start_stage_batch(conn, [1, 2], stage, EXPIRY, me)
    assert sorted(claims) == [1, 2]
    for cid, claim in claims.items():
        owner, owned_at = owner_of(sync_conn, cid)
        updated_at = sync_conn.execute("SELECT updated_at FROM ai.context_ai_state "
                                       "WHERE context_id = %s", (cid,)).fetchone()[0]
        assert (claim.previous, claim.owner, owner) == (Status.PENDING, me, me)
        assert owned_at == updated_at == claim.claimed_at


async def test_batch_precheck_reads_what_precheck_reads(engine, sync_conn):
    insert_state(sync_conn, 1, "COMPLETED", "FAILED")
    insert_embedding(sync_conn, 1, basis(2), profile="p1", text="hello")
    insert_state(sync_conn, 2, "PENDING", "PENDING")
    insert_state(sync_conn, 3, "CANCELLED", "CANCELLED")
    insert_embedding(sync_conn, 3, basis(1), profile="p1", text="gone", is_deleted=True)
    async with engine.connect() as conn:
        singles = {cid: await state.precheck(conn, cid) for cid in (1, 2, 3, 4)}
        batch = await state.precheck_batch(conn, [1, 2, 3, 4])
    assert batch == {cid: pre for cid, pre in singles.items() if pre is not None}
    assert 4 not in batch and batch[3].embedding_profile is None  # a deleted row is not stored


async def test_precheck_and_start_in_one_round_trip_reads_before_it_starts(engine, sync_conn):
    insert_state(sync_conn, 1)
    insert_state(sync_conn, 2, "COMPLETED", "PENDING")
    auto = engine.execution_options(isolation_level="AUTOCOMMIT")
    async with auto.connect() as conn:
        pre, started = await state.precheck_and_start_embedding_batch(conn, [1, 2, 3], EXPIRY)
        single_pre = await state.precheck(conn, 2)
    assert pre[1].embedding_status is Status.PENDING  # as it was before this start
    assert list(started) == [1] and started[1].previous is Status.PENDING and 3 not in pre
    assert statuses(sync_conn, 1) == ("PROCESSING", "PENDING")
    assert single_pre == pre[2]


def _vector(cid: int) -> np.ndarray:
    return np.asarray(basis(cid % 8), dtype=np.float32) * 0.5 + 0.1


def _sha(cid: int) -> bytes:
    return hashlib.sha256(str(cid).encode()).digest()


async def test_batch_embedding_save_gives_every_row_what_the_single_save_gives_it(
        engine, sync_conn):
    scenarios = [(e, k, 0) for e in ALL for k in ("PENDING", "CANCELLED")]
    single, batch = _pairs(sync_conn, scenarios)
    # plus a PROCESSING stage whose embedding core already marked deleted (never revived), and a
    # PROCESSING stage with a live vector of another profile (replaced)
    extra = len(scenarios)
    for offset, deleted in ((0, True), (1, False)):
        i = extra + offset
        for cid in (2 * i + 1, 2 * i + 2):
            insert_state(sync_conn, cid, "PROCESSING", "PENDING")
            insert_embedding(sync_conn, cid, basis(3), profile="old", text="old",
                             is_deleted=deleted)
        single.append(2 * i + 1)
        batch.append(2 * i + 2)
    single_out = {}
    for cid in single:  # as Pipeline._save runs it: committed only when the guards matched
        async with engine.connect() as conn:
            transaction = await conn.begin()
            # the vector and hash its batch partner (cid + 1) gets, so the pair's rows compare
            saved = await state.save_embedding(
                conn, context_id=cid, user_id=7, record_id=70, vector=_vector(cid + 1),
                profile=PROFILE, text_sha256=_sha(cid + 1), claim=claim_of(sync_conn, cid))
            await (transaction.commit() if saved else transaction.rollback())
        single_out[cid] = saved
    rows = [state.EmbeddingRow(cid, 7, 70, _vector(cid), _sha(cid), claim_of(sync_conn, cid))
            for cid in batch]
    async with engine.begin() as conn:  # the batch always commits what it wrote
        completed = await state.save_embeddings_batch(conn, rows, profile=PROFILE, dimension=8)
    batch_out = {cid: cid in completed for cid in batch}
    # PROCESSING with keyword PENDING / CANCELLED, and the live vector of another profile
    assert sum(batch_out.values()) == 3
    _assert_pairs_agree(sync_conn, single, batch, single_out, batch_out)
    # the vectors stored are exactly the ones sent (binary float4 array, row by row)
    stored = sync_conn.execute(
        "SELECT context_id, embedding::text FROM ai.context_embedding "
        "WHERE context_id = ANY(%s) AND embedding_profile = %s", (batch, PROFILE)).fetchall()
    assert stored and all(np.array_equal(np.array(text.strip("[]").split(","), dtype=np.float32),
                                         _vector(cid)) for cid, text in stored)


@pytest.mark.parametrize("picks", [((301, 0.9), (101, 0.333)), ()])
async def test_batch_keyword_save_gives_every_row_what_the_single_save_gives_it(
        engine, sync_conn, picks):
    seed_presets(sync_conn)
    single, batch = _pairs(sync_conn, [(e, k, 0) for e in ALL for k in ALL])
    for cid in single + batch:  # an earlier pick of every context (replaced, or kept)
        sync_conn.execute("INSERT INTO ai.context_keyword VALUES (%s, 201, 0.5, 1)", (cid,))
    answer = {"picks": list(picks), "unmatched_concepts": ["야경"], "model_profile": "judge-m",
              "evidence": [{"id": 301, "score": 4.5}], "embedding_profile": PROFILE}
    single_out = {}
    for cid in single:
        async with engine.connect() as conn:
            transaction = await conn.begin()
            saved = await state.save_keywords(conn, cid, preset_version=2,
                                              claim=claim_of(sync_conn, cid), **answer)
            await (transaction.commit() if saved else transaction.rollback())
        single_out[cid] = saved
    rows = [state.KeywordRow(cid, claim=claim_of(sync_conn, cid), **answer) for cid in batch]
    async with engine.begin() as conn:
        completed = await state.save_keywords_batch(conn, rows, preset_version=2)
    batch_out = {cid: cid in completed for cid in batch}
    assert sum(batch_out.values()) == 1  # only embedding COMPLETED + keyword PROCESSING
    _assert_pairs_agree(sync_conn, single, batch, single_out, batch_out)


async def test_read_embeddings_batch_reads_what_read_embedding_reads(engine, sync_conn):
    insert_embedding(sync_conn, 1, basis(2), profile="p1", text="a")
    insert_embedding(sync_conn, 2, basis(2), profile="p1", is_deleted=True)
    async with engine.connect() as conn:
        batch = await state.read_embeddings_batch(conn, [1, 2, 3])
        single = await state.read_embedding(conn, 1)
    assert list(batch) == [1] and single is not None
    assert np.array_equal(batch[1].vector, single.vector)
    assert (batch[1].profile, batch[1].text_sha256) == (single.profile, single.text_sha256)


async def test_batch_statements_refuse_a_context_twice(engine, sync_conn):
    insert_state(sync_conn, 1)
    async with engine.begin() as conn:
        with pytest.raises(ValueError, match="duplicate"):
            await state.start_stage_batch(conn, [1, 1], Stage.EMBEDDING, EXPIRY)
    assert statuses(sync_conn, 1) == ("PENDING", "PENDING")


async def test_two_batch_claims_at_once_share_no_row_and_never_wait(engine, db_url, sync_conn):
    """SPEC §7.4: claim A holds its rows (transaction open); claim B over an overlapping set
    gets exactly the others at once (SKIP LOCKED: no wait); after A commits, a third claim finds
    nothing left. Each row is claimed by exactly one batch, with one start event."""
    for cid in range(1, 9):
        insert_state(sync_conn, cid)
    holder = await psycopg.AsyncConnection.connect(db_url)
    try:
        async with holder.transaction():
            cursor = await holder.execute(
                state.native_sql("start_stage_batch", Stage.EMBEDDING),
                {"context_ids": [1, 2, 3, 4], "expiry": EXPIRY, "owner": None})
            first = {row[0] for row in await cursor.fetchall()}
            async with engine.connect() as conn:  # B fails instead of waiting on A's locks
                await conn.exec_driver_sql("SET LOCAL lock_timeout = '5s'")
                second = set(await state.start_stage_batch(conn, list(range(1, 9)),
                                                           Stage.EMBEDDING, EXPIRY))
                await conn.commit()
    finally:
        await holder.close()
    async with engine.begin() as conn:
        third = await state.start_stage_batch(conn, list(range(1, 9)), Stage.EMBEDDING, EXPIRY)
    assert first == {1, 2, 3, 4} and second == {5, 6, 7, 8} and third == {}
    for cid in range(1, 9):
        assert statuses(sync_conn, cid) == ("PROCESSING", "PENDING")
        assert [e[:3] for e in events(sync_conn, cid)] == [("embedding", "PENDING", "PROCESSING")]


async def test_two_batch_claims_racing_claim_every_row_once(engine, sync_conn):
    """Both claims run at the same time over the same 40 rows (no ordering imposed): every row
    is started exactly once, by one of them."""
    for cid in range(1, 41):
        insert_state(sync_conn, cid)

    async def claim() -> set[int]:
        async with engine.begin() as conn:
            return set(await state.start_stage_batch(conn, list(range(1, 41)),
                                                     Stage.EMBEDDING, EXPIRY))

    a, b = await asyncio.gather(claim(), claim())
    assert not a & b and a | b == set(range(1, 41))
    assert sync_conn.execute("SELECT count(*) FROM ai.context_ai_event").fetchone()[0] == 40


# --- a taken-over claim (SPEC §7.3.1): its batch save writes nothing, the others are saved ------
async def test_a_taken_over_rows_batch_embedding_save_writes_nothing(engine, sync_conn):
    """Rows 1 and 2 were started by this job (their claims); row 1 was then claimed by another
    process (the rescan recorded it as owner). The batch save of both stores and completes row 2
    only: row 1 gets no vector, no event, and stays PROCESSING for its new owner."""
    me, other = add_process(sync_conn), add_process(sync_conn)
    for cid in (1, 2):
        insert_state(sync_conn, cid, "PROCESSING", "PENDING", owner=me)
    claims = {cid: claim_of(sync_conn, cid) for cid in (1, 2)}
    set_owner(sync_conn, 1, other)  # taken over
    rows = [state.EmbeddingRow(cid, 7, 70, _vector(cid), _sha(cid), claims[cid]) for cid in (1, 2)]
    async with engine.begin() as conn:
        completed = await state.save_embeddings_batch(conn, rows, profile=PROFILE, dimension=8)
    assert completed == {2}
    assert statuses(sync_conn, 1) == ("PROCESSING", "PENDING") and embedding_rows(sync_conn, 1) == []
    assert events(sync_conn, 1) == [] and owner_of(sync_conn, 1)[0] == other
    assert statuses(sync_conn, 2) == ("COMPLETED", "PENDING") and embedding_rows(sync_conn, 2)


async def test_a_taken_over_rows_batch_keyword_save_writes_nothing(engine, sync_conn):
    """As above for the keyword stage: row 1's earlier pick is neither deleted nor replaced, no
    analysis row is written and it is not completed; row 2 is saved."""
    seed_presets(sync_conn)
    me, other = add_process(sync_conn), add_process(sync_conn)
    for cid in (1, 2):
        insert_state(sync_conn, cid, "COMPLETED", "PROCESSING", owner=me)
        sync_conn.execute("INSERT INTO ai.context_keyword VALUES (%s, 201, 0.5, 1)", (cid,))
    claims = {cid: claim_of(sync_conn, cid) for cid in (1, 2)}
    set_owner(sync_conn, 1, other)  # taken over
    rows = [state.KeywordRow(cid, [(301, 0.9)], ["야경"], "judge-m", claims[cid],
                             embedding_profile=PROFILE) for cid in (1, 2)]
    async with engine.begin() as conn:
        completed = await state.save_keywords_batch(conn, rows, preset_version=2)
    assert completed == {2}
    assert [k for k, *_ in keyword_rows(sync_conn, 1)] == [201] and analysis_row(sync_conn, 1) is None
    assert statuses(sync_conn, 1) == ("COMPLETED", "PROCESSING") and events(sync_conn, 1) == []
    assert [k for k, *_ in keyword_rows(sync_conn, 2)] == [301]
    assert statuses(sync_conn, 2) == ("COMPLETED", "COMPLETED")
