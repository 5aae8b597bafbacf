"""Switching embedding profiles with no search outage (SPEC §9.1, issue 24), on the real
PostgreSQL: the backfill beside the active profile, search during it, atomic activation,
invalidation in every profile, rollback, crash and resume, replicas that disagree."""

from __future__ import annotations

import asyncio
import logging

import psycopg
import pytest

from pinlog.ai import profiles
from pinlog.ai.calibration import calibration_defaults
from pinlog.ai.profiles import ProfileError, activate_profile, build_profile, drop_profile
from pinlog.ai.routing import ProfileNotServed
from pinlog.ai.runtime import AiRuntime
from pinlog.core.services import CoreService, ServiceConfig
from pinlog.errors import StartupError
from tests.conftest import config_of
from tests.fakes import FakeEmbeddingProvider, FakeJudge
from tests.integration.ai.profile_support import (
    DIM_A,
    DIM_B,
    PROFILE_A,
    PROFILE_B,
    USER,
    NotesGate,
    Texts,
    add_note,
    expected,
    main_profiles,
    models,
    note,
    provider_a,
    provider_b,
    roles,
    search_request,
    seed_world,
    shadow_rows,
    state_snapshot,
)
from tests.integration.ai.support import ai_settings_for, core_cancel, request, statuses
from tests.support.locks import waiting_for_advisory_lock

N = 12
ACTIVE_A = (PROFILE_A, DIM_A)


def next_settings(tmp_path, db_url, **overrides):
    """Settings of a replica configured with A and, as the next profile, B."""
    return ai_settings_for(tmp_path, db_url, next_embedding_provider="openai",
                           next_embedding_profile=PROFILE_B, next_embedding_dimension=DIM_B,
                           next_embedding_base_url="http://127.0.0.1:9/v1", **overrides)


@pytest.fixture
def world(sync_conn):
    seed_world(sync_conn, N)
    return sync_conn


async def _build(engine, provider=None, texts=None, **kwargs):
    provider = provider or provider_b(N)
    built = models(provider)
    try:
        return await build_profile(engine, built, texts or Texts(N), active=ACTIVE_A,
                                   probe=False, **kwargs)
    finally:
        await built.provider.aclose(close_provider=False)


async def _runtime(tmp_path, db_url, engine, a, b, settings=None, **kwargs):
    settings = settings or next_settings(tmp_path, db_url)
    runtime = AiRuntime(engine, config_of(settings).ai, provider=a,
                        next_provider=b, judge=FakeJudge(), **kwargs)
    await runtime.start()
    return runtime


async def _submit(runtime, cid):
    """Submit the seeded note ``cid`` (the world's member, record ``cid``); the answer's status."""
    return await runtime.submit(request(cid, note(cid), user_id=USER, record_id=cid))


def _judged_with(world, cid):
    """The embedding profile ``cid``'s keyword analysis row names (the profile it was judged with)."""
    return world.execute("SELECT embedding_profile FROM ai.context_keyword_analysis "
                         "WHERE context_id = %s", (cid,)).fetchone()[0]


async def _answers(runtime, profile=PROFILE_A):
    return {k: [h.record_id for h in (await runtime.search(search_request(k, profile))).results]
            for k in range(4)}


# --- the backfill ----------------------------------------------------------------------------

async def test_build_writes_every_vector_beside_the_active_ones_and_changes_no_status(
        engine, world):
    before = (state_snapshot(world), main_profiles(world))
    provider = provider_b(N)
    report = await _build(engine, provider)
    assert report.embedded == N and report.skipped == {} and report.stopped is None
    assert shadow_rows(world, PROFILE_B) == {i: DIM_B for i in range(1, N + 1)}
    assert (state_snapshot(world), main_profiles(world)) == before  # no status, no event
    assert roles(world) == {PROFILE_A: "active", PROFILE_B: "building"}
    # presets were embedded for B first (SPEC §9.1), from what is loaded
    assert world.execute("SELECT count(*) FROM ai.keyword_preset_embedding WHERE "
                         "embedding_profile = %s", (PROFILE_B,)).fetchone()[0] == 5
    assert sorted(t for t in provider.texts if t.startswith("note")) == sorted(
        note(i) for i in range(1, N + 1))  # each note embedded once


async def test_a_second_build_embeds_nothing_again(engine, world):
    await _build(engine)
    provider = provider_b(N)
    report = await _build(engine, provider)
    assert report.embedded == 0 and not [t for t in provider.texts if t.startswith("note")]


async def test_build_skips_notes_whose_text_is_gone_or_changed(engine, world):
    texts = Texts(N)
    texts.deleted.add(3)
    texts.texts[4] = "another text under the same id"
    report = await _build(engine, texts=texts)
    assert report.skipped == {"text missing": 1, "text changed": 1}
    assert set(shadow_rows(world, PROFILE_B)) == set(range(1, N + 1)) - {3, 4}


async def test_build_refuses_the_active_profile_and_a_second_building_one(engine, world):
    await _build(engine)
    with pytest.raises(ProfileError, match="is building"):
        await _build(engine, FakeEmbeddingProvider("fake-profile-c", DIM_B))
    with pytest.raises(ProfileError, match="active profile"):
        await _build(engine, provider_a(N))


async def test_build_checks_the_building_profiles_dimension(engine, world):
    """SPEC §9: the probe and the stored vectors apply to the building profile too."""
    wrong = models(FakeEmbeddingProvider(PROFILE_B, DIM_B, wrong_dimension=4))
    with pytest.raises(StartupError, match="dimension mismatch under profile fake-profile-b"):
        await build_profile(engine, wrong, Texts(N), active=ACTIVE_A)
    await wrong.provider.aclose()
    world.execute("INSERT INTO ai.context_embedding_shadow (context_id, embedding_profile, "
                  "embedding) VALUES (1, %s, '[1,0,0]')", (PROFILE_B,))
    with pytest.raises(StartupError, match="profile switch have 3"):
        await _build(engine)
    assert roles(world) == {}  # refused before anything was recorded


async def test_a_crashed_build_resumes_with_no_duplicate_model_calls_beyond_the_batch_in_flight(
        engine, world):
    provider = provider_b(N)
    built = models(provider, batch_size=4)
    in_flight, never = asyncio.Event(), asyncio.Event()

    async def hang_on_second_batch(texts, kind):
        if note(5) in texts:  # the second batch of 4 is in flight ...
            in_flight.set()
            await never.wait()

    provider.on_call = hang_on_second_batch
    build = asyncio.create_task(build_profile(engine, built, Texts(N), active=ACTIVE_A,
                                              batch_size=4, probe=False))
    await in_flight.wait()
    build.cancel()  # ... when the process dies
    with pytest.raises(asyncio.CancelledError):
        await build
    await built.provider.aclose(close_provider=False)
    assert set(shadow_rows(world, PROFILE_B)) == {1, 2, 3, 4}  # the first batch was written
    provider.on_call = None
    restarted = models(provider, batch_size=4)
    report = await build_profile(engine, restarted, Texts(N), active=ACTIVE_A, batch_size=4,
                                 probe=False)
    await restarted.provider.aclose(close_provider=False)
    assert report.embedded == N - 4
    assert set(shadow_rows(world, PROFILE_B)) == set(range(1, N + 1))
    calls = [t for t in provider.texts if t.startswith("note")]
    twice = {t for t in calls if calls.count(t) > 1}
    assert twice and twice <= {note(i) for i in range(5, 9)}  # only the batch in flight


async def test_only_one_build_runs_at_a_time(engine, world):
    provider = provider_b(N)
    gate = provider.hold()
    first = asyncio.create_task(_build(engine, provider))
    await gate.wait_entered()
    with pytest.raises(ProfileError, match="another `pinlog profiles build` is running"):
        await _build(engine, provider_b(N))
    gate.open()
    assert (await first).embedded == N


# --- search during the build and activation ---------------------------------------------------

async def test_search_results_are_unchanged_during_a_build_and_it_uses_the_active_profile(
        tmp_path, db_url, engine, world):
    a, b = provider_a(N), provider_b(N)
    runtime = await _runtime(tmp_path, db_url, engine, a, b)
    try:
        before = await _answers(runtime)
        assert before == {k: expected(k, N, PROFILE_A) for k in range(4)}
        builder = provider_b(N)
        gate = NotesGate(builder)
        build = asyncio.create_task(_build(engine, builder))
        await gate.wait_entered()  # the build is embedding its first batch
        await runtime.refresh_profiles()  # the replica has seen B building
        assert await _answers(runtime) == before
        gate.open()
        await build
        assert await _answers(runtime) == before  # built, not active: still A
        assert b.kinds.count("query") == 0  # every query was embedded with A only
    finally:
        await runtime.stop()


async def test_activation_is_atomic_for_a_concurrent_search(tmp_path, db_url, engine, world):
    """A search sees one profile or the other, never a mix and never nothing: while the
    activation transaction is open, searches answer from A; once it commits, from B — even a
    search whose query was embedded with A before the commit (it re-embeds with B)."""
    a, b = provider_a(N), provider_b(N)
    await _build(engine)
    runtime = await _runtime(tmp_path, db_url, engine, a, b)
    answer_a = {k: expected(k, N, PROFILE_A) for k in range(4)}
    answer_b = {k: expected(k, N, PROFILE_B) for k in range(4)}
    try:
        with psycopg.connect(db_url) as blocker:  # holds one active-table row: the activation
            blocker.execute("SELECT 1 FROM ai.context_embedding WHERE context_id = 5 FOR UPDATE")
            activation = asyncio.create_task(activate_profile(engine, PROFILE_B,
                                                              current=ACTIVE_A))
            while not _waiting_on_row_lock(world):  # ... blocks in the middle of its copy
                await asyncio.sleep(0.01)
            assert await _answers(runtime) == answer_a  # mid-activation: A, complete
            # a search embeds its query with A, then the activation commits before its SQL
            commit = asyncio.Event()

            async def commit_now(texts, kind):
                if kind == "query" and not commit.is_set():
                    commit.set()
                    blocker.rollback()
                    await activation

            a.on_call = commit_now
            for searcher in runtime.searchers.values():  # recent query vectors are reused
                searcher.vectors.clear()  # (issue 28): this search must embed its query
            answer = [h.record_id for h in (await runtime.search(search_request(1))).results]
            assert answer == answer_b[1]  # B's answer, complete: re-embedded with B
            assert b.kinds.count("query") == 1
        a.on_call = None
        assert await _answers(runtime) == answer_b
    finally:
        await runtime.stop()


def _waiting_on_row_lock(conn: psycopg.Connection) -> bool:
    return bool(conn.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
        "AND wait_event_type = 'Lock' AND query LIKE '%%embedding_profile = n.embedding_profile%%'"
    ).fetchone()[0])


async def test_activation_switches_every_search_and_keeps_the_old_vectors(
        tmp_path, db_url, engine, world):
    a, b = provider_a(N), provider_b(N)
    await _build(engine)
    runtime = await _runtime(tmp_path, db_url, engine, a, b)
    try:
        report = await activate_profile(engine, PROFILE_B, current=ACTIVE_A)
        assert (report.previous, report.copied, report.kept, report.missing) == \
            (PROFILE_A, N, N, 0)
        assert roles(world) == {PROFILE_A: "kept", PROFILE_B: "active"}
        assert set(main_profiles(world).values()) == {PROFILE_B}
        assert shadow_rows(world, PROFILE_A) == {i: DIM_A for i in range(1, N + 1)}
        assert shadow_rows(world, PROFILE_B) == {}
        queries_a = a.kinds.count("query")
        # the same replica, still naming A as core does, answers from B
        assert await _answers(runtime) == {k: expected(k, N, PROFILE_B) for k in range(4)}
        # every answer came from B; the first search found the switch in its snapshot (its A
        # query embedding was the only one wasted) before the heartbeat re-read the roles
        assert a.kinds.count("query") - queries_a == 1 and b.kinds.count("query") == 4
        assert runtime.profile == PROFILE_B
        # the vector channel alone (mode "vector", a backend's own fusion) accepts A's name too
        vector_only = search_request(1).model_copy(update={"mode": "vector"})
        answer = await runtime.search(vector_only)
        assert [h.record_id for h in answer.results] == expected(1, N, PROFILE_B)
        # ... and its strengths are B's, so a caller (core asks) doubts with B's doubt strength
        asked = vector_only.model_copy(update={"with_doubt_strength": True})
        assert (await runtime.search(asked)).doubt_or(-1.0) == \
            calibration_defaults(PROFILE_B).search_doubt_strength
    finally:
        await runtime.stop()


async def test_the_doubt_strength_follows_the_active_profile_through_a_switch(
        tmp_path, db_url, engine, world):
    """SPEC §9.1/§10: core's search rule is built once, with the first profile's doubt strength;
    the ai side's answers (modes vector and score) say whose strengths they carry, so after an
    activation a doubted record needs the new profile's doubt strength, not the old one's."""
    a, b = provider_a(N), provider_b(N)
    await _build(engine)
    runtime = await _runtime(tmp_path, db_url, engine, a, b,
                             settings=next_settings(tmp_path, db_url, search_doubt_strength=4.5))
    try:
        for mode in ("vector", "score"):
            asked = search_request(1).model_copy(update={"mode": mode, "record_ids": [1],
                                                         "with_doubt_strength": True})
            assert (await runtime.search(asked)).doubt_or(-1.0) == 4.5  # A's (the setting)
        await activate_profile(engine, PROFILE_B, current=ACTIVE_A)
        after = calibration_defaults(PROFILE_B).search_doubt_strength
        assert after != 4.5
        for mode in ("vector", "score"):
            asked = search_request(1).model_copy(update={"mode": mode, "record_ids": [1],
                                                         "with_doubt_strength": True})
            assert (await runtime.search(asked)).doubt_or(-1.0) == after
    finally:
        await runtime.stop()


async def test_rollback_is_activating_the_kept_profile(tmp_path, db_url, engine, world):
    await _build(engine)
    await activate_profile(engine, PROFILE_B, current=ACTIVE_A)
    report = await activate_profile(engine, PROFILE_A, current=ACTIVE_A)
    assert (report.previous, report.copied, report.kept) == (PROFILE_B, N, N)
    assert roles(world) == {PROFILE_A: "active", PROFILE_B: "kept"}
    assert set(main_profiles(world).values()) == {PROFILE_A}
    assert set(shadow_rows(world, PROFILE_B)) == set(range(1, N + 1))
    runtime = await _runtime(tmp_path, db_url, engine, provider_a(N), provider_b(N))
    try:
        assert await _answers(runtime) == {k: expected(k, N, PROFILE_A) for k in range(4)}
    finally:
        await runtime.stop()
    # and forward again: the kept B vectors are still complete
    assert (await activate_profile(engine, PROFILE_B, current=ACTIVE_A)).missing == 0


async def test_activation_refuses_below_full_coverage_unless_forced(engine, world):
    texts = Texts(N)
    texts.deleted.add(2)  # gone from core while COMPLETED here: never built
    await _build(engine, texts=texts)
    before = (main_profiles(world), roles(world))
    with pytest.raises(ProfileError, match="1 contexts have no vector"):
        await activate_profile(engine, PROFILE_B, current=ACTIVE_A)
    assert (main_profiles(world), roles(world)) == before  # nothing changed
    report = await activate_profile(engine, PROFILE_B, current=ACTIVE_A, force=True)
    assert report.missing == 1 and main_profiles(world)[2] == PROFILE_A
    with pytest.raises(ProfileError, match="already the active profile"):
        await activate_profile(engine, PROFILE_B, current=ACTIVE_A)


async def test_activation_refuses_a_profile_without_presets(engine, world):
    with pytest.raises(ProfileError, match="no keyword presets are embedded"):
        await activate_profile(engine, PROFILE_B, current=ACTIVE_A, force=True)


# --- invalidation holds for every profile -----------------------------------------------------

async def test_delete_during_the_build_removes_its_building_vector_and_it_never_becomes_searchable(
        tmp_path, db_url, engine, world, settings):
    service = CoreService(engine, None, ServiceConfig.from_settings(settings))
    provider = provider_b(N)
    gate = NotesGate(provider)
    build = asyncio.create_task(_build(engine, provider))
    await gate.wait_entered()  # notes 1..8 are being embedded for B
    await service.delete_record(USER, 2)  # our core: cancel + remove its vectors everywhere
    gate.open()
    await build
    assert 2 not in shadow_rows(world, PROFILE_B)  # the write skipped the cancelled context
    await service.delete_record(USER, 11)  # after it was built: removed with the context
    assert 11 not in shadow_rows(world, PROFILE_B)
    assert statuses(world, 2) == ("CANCELLED", "CANCELLED")
    await activate_profile(engine, PROFILE_B, current=ACTIVE_A)
    runtime = await _runtime(tmp_path, db_url, engine, provider_a(N), provider_b(N))
    try:
        found = {r for rs in (await _answers(runtime)).values() for r in rs}
        assert found == set(range(1, N + 1)) - {2, 11}
    finally:
        await runtime.stop()
    assert main_profiles(world)[2] == PROFILE_A  # its deleted row was never switched


async def test_a_backend_cancel_during_the_build_is_never_activated(engine, world):
    """On an adopted database the backend's cancel knows nothing of the shadow table: the
    building vector stays, but activation copies only contexts still COMPLETED, not deleted."""
    await _build(engine)
    core_cancel(world, 3)
    report = await activate_profile(engine, PROFILE_B, current=ACTIVE_A)
    assert report.copied == N - 1
    assert main_profiles(world)[3] == PROFILE_A
    assert 3 not in shadow_rows(world, PROFILE_B)


@pytest.mark.parametrize("batch_size", [1, 64], ids=["single_job", "batch_path"])
async def test_edit_and_new_notes_during_the_build_get_a_vector_in_both_profiles(
        tmp_path, db_url, engine, world, batch_size):
    """Both job paths (one context per job, and the batch path the work queue uses for many)."""
    a, b = provider_a(N, extra=(13, 14)), provider_b(N, extra=(13, 14))
    runtime = await _runtime(tmp_path, db_url, engine, a, b, settings=next_settings(
        tmp_path, db_url, process_batch_size=batch_size))
    try:
        builder = provider_b(N)
        gate = NotesGate(builder)
        build = asyncio.create_task(_build(engine, builder))
        await gate.wait_entered()
        await runtime.refresh_profiles()  # within one heartbeat every replica knows
        for cid in (13, 14):  # a new note, and an edit's new context (the old one cancelled)
            add_note(world, cid, state=("PENDING", "PENDING"), embedded=False)
            core_cancel(world, 4)  # the edited note
        for cid in (13, 14):
            assert await _submit(runtime, cid) == 202
        await runtime.join()
        # the jobs embedded both profiles while the build is still on its first batch
        assert {13, 14} <= set(shadow_rows(world, PROFILE_B))
        gate.open()
        await build
        assert main_profiles(world)[13] == PROFILE_A and main_profiles(world)[14] == PROFILE_A
        built = shadow_rows(world, PROFILE_B)
        assert {13, 14} <= set(built) and 4 not in built
        assert b.texts.count(note(13)) == 1  # embedded for B by the job, not again by the build
        await activate_profile(engine, PROFILE_B, current=ACTIVE_A)
        found = {r for rs in (await _answers(runtime)).values() for r in rs}
        assert found == (set(range(1, N + 1)) - {4}) | {13, 14}
    finally:
        await runtime.stop()


async def test_a_job_that_embedded_with_the_old_profile_saves_under_the_new_one(
        tmp_path, db_url, engine, world):
    """The embedding save writes the active table only under the active profile: an activation
    that commits while a job is embedding makes the save use the job's building-profile vector."""
    a, b = provider_a(N, extra=(13,)), provider_b(N, extra=(13,))
    await _build(engine)
    runtime = await _runtime(tmp_path, db_url, engine, a, b)
    try:
        add_note(world, 13, state=("PENDING", "PENDING"), embedded=False)
        gate = a.hold()
        assert await _submit(runtime, 13) == 202
        await gate.wait_entered()
        await activate_profile(engine, PROFILE_B, current=ACTIVE_A, force=True)
        gate.open()
        await runtime.join()
        assert main_profiles(world)[13] == PROFILE_B
        assert statuses(world, 13) == ("COMPLETED", "COMPLETED")
        assert _judged_with(world, 13) == PROFILE_B
    finally:
        await runtime.stop()


# --- keywords after an activation ------------------------------------------------------------

async def test_keywords_are_rejudged_with_the_new_presets_and_the_old_ones_stay_until_then(
        engine, world):
    await _build(engine)
    await activate_profile(engine, PROFILE_B, current=ACTIVE_A)
    before = state_snapshot(world)
    # until re-judged, the old keywords are still there and shown (COMPLETED)
    assert world.execute("SELECT count(*) FROM ai.context_keyword").fetchone()[0] == N
    built = models(provider_b(N), judge=FakeJudge())
    texts = Texts(N)

    def delete_while_judged(ids):
        if 9 in ids:  # the note is deleted while its batch is re-judged: it gets nothing
            core_cancel(world, 9)
        if 10 in ids:  # its keyword stage runs again meanwhile (not COMPLETED): left to it
            world.execute("UPDATE ai.context_ai_state SET keyword_status = 'PROCESSING' "
                          "WHERE context_id = 10")

    texts.on_fetch = delete_while_judged
    report = await profiles.rejudge_keywords(engine, built, texts, top_k=10, batch_size=4)
    assert report.rejudged == N - 2 and report.skipped == {"no longer COMPLETED": 2}
    rows = world.execute("SELECT context_id, embedding_profile FROM "
                         "ai.context_keyword_analysis ORDER BY 1").fetchall()
    assert [p for c, p in rows if c not in (9, 10)] == [PROFILE_B] * (N - 2)
    assert dict(rows)[9] is None and dict(rows)[10] is None  # not re-judged
    changed = [r for r, b in zip(state_snapshot(world), before, strict=True) if r != b]
    assert [r[0] for r in changed] == [9, 10]  # only the test changed state rows; no event
    assert world.execute("SELECT rejudge_after FROM ai.embedding_profile WHERE profile = %s",
                         (PROFILE_B,)).fetchone()[0] is None  # finished
    again = await profiles.rejudge_keywords(engine, built, Texts(N), top_k=10)
    assert again.rejudged == 0
    await built.provider.aclose(close_provider=False)


# --- replicas that disagree ---------------------------------------------------------------------

async def test_a_replica_without_a_provider_for_the_active_profile_refuses(
        tmp_path, db_url, engine, world, caplog):
    await _build(engine)
    await activate_profile(engine, PROFILE_B, current=ACTIVE_A)
    stale = AiRuntime(engine, config_of(ai_settings_for(tmp_path, db_url)).ai,
                      provider=provider_a(N), judge=FakeJudge())
    with caplog.at_level(logging.ERROR):
        await stale.start()
    try:
        assert any("active embedding profile is fake-profile-b" in r.getMessage()
                   for r in caplog.records if r.levelno == logging.ERROR)
        with pytest.raises(ProfileNotServed):
            await stale.search(search_request(1))
        add_note(world, 13, state=("PENDING", "PENDING"), embedded=False)
        assert await _submit(stale, 13) == 503
        assert not await stale.ready()
        assert statuses(world, 13) == ("PENDING", "PENDING")
    finally:
        await stale.stop()


async def test_a_replica_notices_an_activation_within_one_heartbeat(
        tmp_path, db_url, engine, world):
    await _build(engine)
    runtime = await _runtime(tmp_path, db_url, engine, provider_a(N), provider_b(N),
                             profile_refresh=0.01)
    try:
        assert runtime.profile == PROFILE_A
        await activate_profile(engine, PROFILE_B, current=ACTIVE_A)
        while runtime.profile != PROFILE_B:  # the heartbeat re-reads the roles
            await asyncio.sleep(0.01)
        assert runtime.pipeline.profile == PROFILE_B
    finally:
        await runtime.stop()


async def test_a_replica_refuses_to_start_when_the_next_profiles_dimension_is_wrong(
        tmp_path, db_url, engine, world):
    runtime = AiRuntime(engine, config_of(next_settings(tmp_path, db_url)).ai,
                        provider=provider_a(N), judge=FakeJudge(),
                        next_provider=FakeEmbeddingProvider(PROFILE_B, DIM_B))
    world.execute("INSERT INTO ai.context_embedding_shadow (context_id, embedding_profile, "
                  "embedding) VALUES (1, %s, '[1,0,0]')", (PROFILE_B,))
    with pytest.raises(StartupError, match="under profile fake-profile-b"):
        await runtime.start()


# --- drop ------------------------------------------------------------------------------------------

async def test_drop_deletes_an_inactive_profiles_vectors_and_refuses_the_active_one(
        engine, world):
    await _build(engine)
    with pytest.raises(ProfileError, match="is the active profile"):
        await drop_profile(engine, PROFILE_A)
    assert await drop_profile(engine, PROFILE_B) == N
    assert shadow_rows(world, PROFILE_B) == {} and PROFILE_B not in roles(world)
    assert world.execute("SELECT count(*) FROM ai.keyword_preset_embedding WHERE "
                         "embedding_profile = %s", (PROFILE_B,)).fetchone()[0] == 0
    with pytest.raises(ProfileError, match="nothing is stored"):
        await drop_profile(engine, PROFILE_B)


async def test_dropping_the_building_profile_stops_its_build(engine, world):
    provider = provider_b(N)
    gate = NotesGate(provider)
    build = asyncio.create_task(_build(engine, provider, batch_size=4))
    await gate.wait_entered()
    await drop_profile(engine, PROFILE_B)
    gate.open()
    report = await build
    assert report.stopped and "no longer the building profile" in report.stopped
    assert shadow_rows(world, PROFILE_B) == {}


# --- the overview ---------------------------------------------------------------------------------

async def test_overview_shows_coverage_of_each_profile(engine, world):
    texts = Texts(N)
    texts.deleted.update({1, 2, 3})
    await _build(engine, texts=texts)
    # contexts that should not have a vector are not counted: re-run since, or deleted
    world.execute("UPDATE ai.context_ai_state SET embedding_status = 'PENDING' "
                  "WHERE context_id = 12")
    world.execute("UPDATE ai.context_embedding SET is_deleted = true WHERE context_id = 11")
    rows = {r.profile: r for r in await profiles.profile_overview(engine, current=PROFILE_A)}
    assert (rows[PROFILE_A].role, rows[PROFILE_A].embedded, rows[PROFILE_A].eligible) == \
        ("active", N - 2, N - 2)
    assert (rows[PROFILE_B].role, rows[PROFILE_B].embedded, rows[PROFILE_B].coverage) == \
        ("building", N - 5, (N - 5) / (N - 2))
    assert rows[PROFILE_B].build_finished_at is not None


async def test_overview_before_any_switch_shows_the_configured_profile(engine, world):
    rows = await profiles.profile_overview(engine, current=PROFILE_A)
    assert [(r.profile, r.role, r.embedded, r.eligible) for r in rows] == \
        [(PROFILE_A, "active", N, N)]


async def test_the_consoles_profiles_page_counts_every_profiles_vectors_and_the_recorded_roles(
        engine, world):
    """The operator console (issue 29) reads the switch's tables: a building profile's vectors
    (in the shadow table) are its coverage, and the active profile is the database's."""
    from pinlog.console import reads

    async def shown():
        data = await reads.profiles(engine, PROFILE_A, N)
        return {p["profile"]: (p["role"], p["active"], p["live"], p["coverage"])
                for p in data["profiles"]}

    assert await shown() == {PROFILE_A: ("active", True, N, 1.0)}
    texts = Texts(N)
    texts.deleted.add(3)  # gone from core: never built
    await _build(engine, texts=texts)
    assert await shown() == {PROFILE_A: ("active", True, N, 1.0),
                             PROFILE_B: ("building", False, N - 1, (N - 1) / N)}
    await activate_profile(engine, PROFILE_B, current=ACTIVE_A, force=True)
    # B is active (its copied vectors and context 3's A vector left in the active table: the
    # forced activation's gap); A's vectors are kept beside them
    rows = await shown()
    assert rows[PROFILE_B][:2] == ("active", True) and rows[PROFILE_B][2] == N - 1
    assert rows[PROFILE_A] == ("kept", False, N, 1.0)


# --- the reset path stays (SPEC §7.5) --------------------------------------------------------------

async def test_reprocess_profile_after_a_forced_activation_resets_only_the_notes_left_behind(
        engine, world):
    """``pinlog reprocess --profile`` regenerates against the database's active profile, not the
    replica's first provider: after a forced activation only the notes without a vector of it
    go back to PENDING."""
    from pinlog.core.reprocess import ReprocessConfig, count_candidates, reprocess

    texts = Texts(N)
    texts.deleted.add(2)
    await _build(engine, texts=texts)
    await activate_profile(engine, PROFILE_B, current=ACTIVE_A, force=True)
    config = ReprocessConfig(profile=PROFILE_A, concurrency=1)  # configured: A first
    assert await count_candidates(engine, config, "profile") == 1
    report = await reprocess(engine, config, "profile")
    assert report.target == PROFILE_B and report.moved_ids == [2]
    assert statuses(world, 2) == ("PENDING", "PENDING")
    assert statuses(world, 3) == ("COMPLETED", "COMPLETED")


async def test_the_build_writes_nothing_for_a_note_invalidated_between_fetch_and_write(
        engine, world):
    """The write re-checks under the FOR SHARE lock: a stage no longer COMPLETED (a re-run),
    or a vector marked deleted (a backend that marks it before cancelling) → no vector."""
    texts = Texts(N)

    def meanwhile(ids):
        if 3 in ids:
            world.execute("UPDATE ai.context_ai_state SET embedding_status = 'PENDING' "
                          "WHERE context_id = 3")
            world.execute("UPDATE ai.context_embedding SET is_deleted = true "
                          "WHERE context_id = 4")

    texts.on_fetch = meanwhile
    await _build(engine, texts=texts)
    assert set(shadow_rows(world, PROFILE_B)) == set(range(1, N + 1)) - {3, 4}


async def test_activation_copies_only_contexts_still_completed_and_not_deleted(engine, world):
    await _build(engine)
    world.execute("UPDATE ai.context_ai_state SET embedding_status = 'PENDING', "
                  "keyword_status = 'PENDING' WHERE context_id = 5")  # a reset since the build
    world.execute("UPDATE ai.context_embedding SET is_deleted = true WHERE context_id = 6")
    report = await activate_profile(engine, PROFILE_B, current=ACTIVE_A)
    assert (report.copied, report.kept) == (N - 2, N - 2)
    profiles_now = main_profiles(world)
    assert (profiles_now[5], profiles_now[6]) == (PROFILE_A, PROFILE_A)
    assert {c for c, p in profiles_now.items() if p == PROFILE_B} == set(range(1, N + 1)) - {5, 6}
    assert shadow_rows(world, PROFILE_B) == {}  # the two stale ones are gone, never searchable


async def _claim_embedding(engine, context_id: int):
    """The guarded embedding start of ``context_id`` (its claim, SPEC §7.3.1)."""
    from datetime import timedelta

    from pinlog.ai import state
    from pinlog.states import Stage

    async with engine.begin() as conn:
        claim = await state.start_stage(conn, context_id, Stage.EMBEDDING, timedelta(minutes=5))
    assert claim is not None
    return claim


async def test_a_building_vector_is_written_only_while_its_profile_is_building(engine, world):
    """The embedding save's shadow vector (a replica that still thinks B is building after a
    drop) is not written."""
    from pinlog.ai import state
    from tests.fakes import fake_vector

    add_note(world, 13, state=("PENDING", "PENDING"), embedded=False)
    world.execute("INSERT INTO ai.embedding_profile (profile, role) VALUES (%s, 'active')",
                  (PROFILE_A,))  # B was dropped: only A is recorded
    claim = await _claim_embedding(engine, 13)
    async with engine.connect() as conn:
        async with conn.begin():
            assert await state.save_embedding(
                conn, context_id=13, user_id=USER, record_id=13, vector=fake_vector("x", DIM_A),
                profile=PROFILE_A, text_sha256=b"h" * 32,
                shadow={PROFILE_B: fake_vector("x", DIM_B)}, claim=claim)
    assert statuses(world, 13) == ("COMPLETED", "PENDING")
    assert shadow_rows(world, PROFILE_B) == {}


async def test_an_activation_waits_for_an_embedding_save_in_flight(engine, world):
    """The save takes the profile lock shared; activation takes it exclusive: a save that read
    the roles before the switch commits before the switch does."""
    from pinlog.ai import state
    from tests.fakes import fake_vector

    await _build(engine)
    add_note(world, 13, state=("PENDING", "PENDING"), embedded=False)
    claim = await _claim_embedding(engine, 13)
    async with engine.connect() as conn:
        transaction = await conn.begin()
        assert await state.save_embedding(
            conn, context_id=13, user_id=USER, record_id=13, vector=fake_vector("x", DIM_A),
            profile=PROFILE_A, text_sha256=b"h" * 32,
            shadow={PROFILE_B: fake_vector("x", DIM_B)}, claim=claim)
        activation = asyncio.create_task(activate_profile(engine, PROFILE_B, current=ACTIVE_A))
        while not waiting_for_advisory_lock(world) and not activation.done():
            await asyncio.sleep(0.01)
        assert not activation.done()  # it waits for the save's transaction
        await transaction.commit()
    report = await activation
    assert report.missing == 0 and main_profiles(world)[13] == PROFILE_B


async def test_a_keyword_stage_after_an_activation_re_reads_the_roles(
        tmp_path, db_url, engine, world):
    """A replica whose view is a heartbeat old meets a vector of the new active profile: it
    re-reads the roles and judges with B instead of failing the stage (profile mismatch)."""
    await _build(engine)
    runtime = await _runtime(tmp_path, db_url, engine, provider_a(N), provider_b(N))
    try:
        await activate_profile(engine, PROFILE_B, current=ACTIVE_A)
        world.execute("UPDATE ai.context_ai_state SET keyword_status = 'PENDING' "
                      "WHERE context_id = 5")
        assert runtime.profiles.active_profile == PROFILE_A  # not refreshed yet
        assert await _submit(runtime, 5) == 202
        await runtime.join()
        assert statuses(world, 5) == ("COMPLETED", "COMPLETED")
        assert _judged_with(world, 5) == PROFILE_B
    finally:
        await runtime.stop()


async def test_a_search_reads_the_roles_and_the_vectors_in_one_snapshot(
        tmp_path, db_url, engine, world, monkeypatch):
    """An activation that commits right after the search read the roles: the vectors it reads
    are still A's (its snapshot), never B's rows under A's name (which would answer nothing)."""
    from pinlog.ai import search as search_module

    await _build(engine)
    runtime = await _runtime(tmp_path, db_url, engine, provider_a(N), provider_b(N))
    real = search_module.read_roles

    async def then_activate(conn):
        roles_now = await real(conn)  # the search's snapshot starts here
        if roles_now.active == PROFILE_A:
            await activate_profile(engine, PROFILE_B, current=ACTIVE_A)  # ... and commits
        return roles_now

    monkeypatch.setattr(search_module, "read_roles", then_activate)
    try:
        answer = await runtime.search(search_request(1))
        assert [h.record_id for h in answer.results] == expected(1, N, PROFILE_A)
        assert roles(world)[PROFILE_B] == "active"
    finally:
        await runtime.stop()


async def test_a_cancel_that_commits_during_the_builds_write_wins(engine, world, db_url):
    """The write locks the state rows FOR SHARE: a cancel holding a row (core's cancel locks it
    FOR UPDATE, then removes the context's other vectors) is waited for, and its context is then
    skipped — the building vector is never left behind a committed delete."""
    texts = Texts(N)
    blocker = psycopg.connect(db_url)
    started: list[asyncio.Task] = []

    async def commit_when_the_write_waits(build: asyncio.Task) -> None:
        while not _waiting_on_state_lock(world) and not build.done():
            await asyncio.sleep(0.01)
        blocker.commit()

    def cancel_meanwhile(ids):
        if 3 in ids and not started:  # a delete of note 3, not committed yet
            blocker.execute("UPDATE ai.context_ai_state SET embedding_status = 'CANCELLED', "
                            "keyword_status = 'CANCELLED' WHERE context_id = 3")
            blocker.execute("DELETE FROM ai.context_embedding_shadow WHERE context_id = 3")
            started.append(asyncio.get_running_loop().create_task(
                commit_when_the_write_waits(build)))

    texts.on_fetch = cancel_meanwhile
    try:
        build = asyncio.create_task(_build(engine, texts=texts))
        await build
        await started[0]
    finally:
        blocker.close()
    assert 3 not in shadow_rows(world, PROFILE_B)
    assert statuses(world, 3) == ("CANCELLED", "CANCELLED")


def _waiting_on_state_lock(conn: psycopg.Connection) -> bool:
    return bool(conn.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
        "AND wait_event_type = 'Lock' AND query LIKE '%%FOR SHARE OF s%%'").fetchone()[0])


async def test_activation_during_a_build_stops_it(engine, world):
    provider = provider_b(N)
    gate = NotesGate(provider)
    build = asyncio.create_task(_build(engine, provider, batch_size=4))
    await gate.wait_entered()
    await activate_profile(engine, PROFILE_B, current=ACTIVE_A, force=True)
    gate.open()
    report = await build
    assert report.stopped and "no longer the building profile" in report.stopped
    assert report.embedded == 0 and shadow_rows(world, PROFILE_B) == {}


async def test_a_paced_build_waits_between_batches_for_its_rate(engine, world):
    """``--max-rate``: after each batch the build sleeps until its average rate is at most the
    cap (here 1 vector/s: after the batch of 4 it owes ~4 s, after 8 ~8 s, …); unpaced, never."""
    slept: list[float] = []

    async def record(seconds: float) -> None:
        slept.append(seconds)

    await _build(engine, batch_size=4, max_rate=1.0, sleep=record)
    assert len(slept) == N // 4 and all(0 < s <= 4 * (i + 1) for i, s in enumerate(slept))
    assert slept[-1] > N - 4 - 1  # the sleeps were never taken: it owes the whole build
    await drop_profile(engine, PROFILE_B)
    slept.clear()
    await _build(engine, batch_size=4, sleep=record)
    assert slept == []
