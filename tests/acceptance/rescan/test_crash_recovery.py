"""SPEC §11 #8 end to end: a worker dies mid-stage; the real rescan of a restarted
`pinlog serve` recovers the context to COMPLETED — at once when the dead process is known as
the stage's owner (SPEC §7.3.1: its heartbeat lease ended), after the expiry when the owner is
unknown (a row claimed before the upgrade; the `rescanned_at` fix of SPEC §7.3).

The real `pinlog serve` runs as a subprocess on the test database. Its embedding provider
(``openai``) and llm judge talk to a local OpenAI-compatible server that holds the call on an
Event until the test has SIGKILLed the server — no test hook in production code.

No step races the clock: the servers run with the default expiries (PROCESSING 600 s), so the
killed stage is certainly younger than the expiry when the test checks that nothing re-claims
it, however loaded the machine; the dead process's lease is moved with the database clock — kept
running while the test checks that a live owner's stage is left alone, then ended — instead of
waiting for its heartbeat timeout; and where the owner is unknown the row's clock is moved back
past the expiry (the database-clock shift stands in for the wait).
"""

from __future__ import annotations

import asyncio

import pytest

from pinlog.core.rescan import RescanLoop
from tests.conftest import make_settings, config_of
from tests.helpers import free_port, run_pinlog
from tests.integration.core.rescan.factory import RecordingClient, state
from tests.support.fake_openai import FakeOpenAI
from tests.support.owners import end_lease, extend_lease, owner_of
from tests.support.serve import PROFILE, TEXT, Server, create_context, serve_env, wait_for

pytestmark = pytest.mark.slow

#: The servers' expiries (the defaults): far longer than any step of the test takes.
PROCESSING_S, PENDING_S = 600, 300
LONG_EXPIRY = {"PINLOG_PROCESSING_EXPIRY": str(PROCESSING_S),
               "PINLOG_PENDING_EXPIRY": str(PENDING_S)}


async def crash_and_recover(tmp_path, db_url, sync_conn, engine, fake: FakeOpenAI,
                            hold: str, owner_known: bool, **extra: str) -> tuple[int, dict]:
    """Run serve, hold the `hold` stage's model call, SIGKILL, check that nothing re-claims the
    stage while its owner counts as live (or, owner unknown, while it is younger than the
    expiry), then end the dead owner's lease (``owner_known``) or forget the owner and move the
    stage's clock past the expiry; restart, and wait for both stages COMPLETED. Returns
    (id, state)."""
    port = free_port()
    env = serve_env(tmp_path, db_url, port, fake, **LONG_EXPIRY, **extra)
    loaded = run_pinlog(["presets", "load"], env, timeout=120)
    assert loaded.returncode == 0, loaded.stderr[-3000:]

    getattr(fake, f"hold_{hold}").set()
    first = Server(env, tmp_path, "serve-1")
    try:
        first.wait_ready()
        context_id = create_context(sync_conn, tmp_path, db_url, first.url)
        entered = await asyncio.to_thread(fake.entered.wait, 30)
        assert entered, first.err_path.read_text()[-3000:]
        first.kill()  # the worker dies mid-stage
    finally:
        first.close()

    stage = "embedding_status" if hold == "embeddings" else "keyword_status"
    row = state(sync_conn, context_id)
    assert row[stage] == "PROCESSING" and row["retry_count"] == 0
    (dead,) = sync_conn.execute("SELECT process_id FROM ai.process_settings WHERE pid = %s",
                                (first.proc.pid,)).fetchone()
    assert owner_of(sync_conn, context_id)[0] == dead  # the start recorded its live process
    if not owner_known:  # a row claimed before the upgrade: nobody knows its owner
        sync_conn.execute("UPDATE ai.context_ai_state SET owner = NULL WHERE context_id = %s",
                          (context_id,))
    # A PROCESSING stage whose owner counts as live, or (owner unknown) younger than the
    # expiry, is not re-claimed (SPEC §11 #8, §7.3.1): the rescan with the servers' own
    # settings leaves it alone.
    extend_lease(sync_conn, dead)
    young = RescanLoop(engine, config_of(make_settings(tmp_path, db_url, processing_expiry=PROCESSING_S,
                                             pending_expiry=PENDING_S, embedding_timeout=0.5,
                                             llm_timeout=0.5, model_attempts=2,
                                             backoff_base=0.1, backoff_cap=0.2)).core.rescan,
                       RecordingClient())
    assert await young.claim() == []
    assert state(sync_conn, context_id)["retry_count"] == 0
    if owner_known:
        # the dead process's heartbeat timeout passes: its lease is ended instead of waited for
        end_lease(sync_conn, dead)
    else:
        # The expiry passes: the stage's clock is moved back past it instead of waiting for it.
        sync_conn.execute("UPDATE ai.context_ai_state SET updated_at = updated_at - "
                          "make_interval(secs => %s) WHERE context_id = %s",
                          (PROCESSING_S + 60, context_id))

    fake.release.set()  # the model answers normally from now on
    fake.hold_embeddings.clear()
    fake.hold_chat.clear()
    second = Server(env, tmp_path, "serve-2")
    try:
        second.wait_ready()

        def done() -> dict | None:
            current = state(sync_conn, context_id)
            assert "FAILED" not in (current["embedding_status"], current["keyword_status"]), \
                current
            finished = (current["embedding_status"], current["keyword_status"]) == (
                "COMPLETED", "COMPLETED")
            return current if finished else None

        final = await wait_for(done, "both stages COMPLETED", server=second)
    finally:
        second.stop()
    return context_id, final


def assert_recovered_through_the_rescan(sync_conn, context_id: int, final: dict) -> None:
    assert final["retry_count"] >= 1  # the rescan re-sent it (nothing else would)
    rows = sync_conn.execute(
        "SELECT embedding_profile, is_deleted FROM ai.context_embedding WHERE context_id = %s",
        (context_id,)).fetchall()
    assert rows == [(PROFILE, False)]  # exactly one embedding row
    actors = [a for (a,) in sync_conn.execute(
        "SELECT actor FROM ai.context_ai_event WHERE context_id = %s ORDER BY id",
        (context_id,))]
    assert "rescan" in actors and "finalizer" not in actors


async def test_a_killed_owners_embedding_stage_is_reclaimed_before_the_expiry(
        tmp_path, db_url, sync_conn, engine, fake_openai):
    """SPEC §7.3.1: owner dead → the restarted server's rescan re-sends the stage at once; it is
    COMPLETED long before the 10-minute processing expiry (nothing moved the row's clock)."""
    context_id, final = await crash_and_recover(tmp_path, db_url, sync_conn, engine,
                                                fake_openai, hold="embeddings", owner_known=True)
    assert_recovered_through_the_rescan(sync_conn, context_id, final)
    # the killed call and the recovered one
    assert fake_openai.embedded_texts.count(TEXT) == 2


async def test_scenario_08_worker_killed_during_keyword_judging_recovers_through_the_rescan(
        tmp_path, db_url, sync_conn, engine, fake_openai):
    """Owner unknown (a row claimed before the upgrade): the expiry is the backstop."""
    context_id, final = await crash_and_recover(
        tmp_path, db_url, sync_conn, engine, fake_openai, hold="chat", owner_known=False,
        PINLOG_JUDGE="llm", PINLOG_LLM_BASE_URL=fake_openai.base_url,
        PINLOG_LLM_CHAIN="fake-judge")
    assert_recovered_through_the_rescan(sync_conn, context_id, final)
    # partial resume: the stored embedding was reused, only the keyword stage reran
    assert fake_openai.embedded_texts.count(TEXT) == 1
    assert fake_openai.chat_calls == 2
    keywords = sync_conn.execute(
        "SELECT count(*) FROM ai.context_keyword WHERE context_id = %s", (context_id,)).fetchone()
    assert keywords[0] == 1  # one pick, not doubled
