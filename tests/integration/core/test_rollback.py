"""One transaction per call; a rolled-back transaction never dispatches (SPEC §4)."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from sqlalchemy.exc import DBAPIError

from tests.integration.core.conftest import place
from tests.integration.core.support import snapshot, state_row


@pytest.fixture
def failing_trigger(sync_conn: psycopg.Connection) -> Iterator[callable]:
    """Install a trigger that makes the given statement on ai.context_ai_state fail (a real
    database error inside the service's transaction); dropped at test end."""
    installed: list[str] = []
    sync_conn.execute("""
        CREATE OR REPLACE FUNCTION ai.test_fail() RETURNS trigger LANGUAGE plpgsql AS
        $$ BEGIN RAISE EXCEPTION 'injected failure'; END $$""")

    def install(event: str) -> None:
        sync_conn.execute(f"CREATE TRIGGER test_fail_{event.lower()} BEFORE {event} ON "
                          f"ai.context_ai_state FOR EACH ROW EXECUTE FUNCTION ai.test_fail()")
        installed.append(event)

    yield install
    for event in installed:
        sync_conn.execute(f"DROP TRIGGER IF EXISTS test_fail_{event.lower()} ON ai.context_ai_state")
    sync_conn.execute("DROP FUNCTION IF EXISTS ai.test_fail()")


async def test_rolled_back_create_never_dispatches(service, dispatcher, client, sync_conn,
                                                   failing_trigger):
    member = await service.create_member()
    record_id, first = await service.create_record(member, place(), "ok")
    await dispatcher.join()
    client.sent.clear()
    before = snapshot(sync_conn)
    failing_trigger("INSERT")  # the state row insert fails → the whole call rolls back
    with pytest.raises(DBAPIError):
        await service.create_record(member, place(2), "never")
    with pytest.raises(DBAPIError):
        await service.add_context(member, record_id, "never")
    with pytest.raises(DBAPIError):
        await service.edit_context(member, first, "never")
    await dispatcher.join()
    assert client.sent == []
    assert snapshot(sync_conn) == before  # no context, no record, no place without its state row


async def test_failed_invalidation_rolls_back_the_delete_and_the_edit(service, dispatcher, client,
                                                                      sync_conn, failing_trigger):
    member = await service.create_member()
    record_id, a = await service.create_record(member, place(), "a")
    b = await service.add_context(member, record_id, "b")
    await dispatcher.join()
    client.sent.clear()
    before = snapshot(sync_conn)
    failing_trigger("UPDATE")  # cancelling the stages fails
    with pytest.raises(DBAPIError):
        await service.delete_context(member, a)
    with pytest.raises(DBAPIError):
        await service.edit_context(member, b, "new text")  # new context inserted, then rolled back
    with pytest.raises(DBAPIError):
        await service.delete_record(member, record_id, force=True)
    with pytest.raises(DBAPIError):
        await service.withdraw_member(member)
    await dispatcher.join()
    assert client.sent == []
    assert snapshot(sync_conn) == before
    assert state_row(sync_conn, a) == ("PENDING", "PENDING")


# --- a commit that fails AT COMMIT dispatches nothing (SPEC §4: dispatch after commit) ----------

@pytest.fixture
def fail_at_commit(sync_conn: psycopg.Connection) -> Iterator[None]:
    """A DEFERRABLE INITIALLY DEFERRED constraint trigger on new state rows: every statement of
    the service's transaction succeeds and the failure comes from COMMIT itself — the only place
    where a dispatch moved inside the transaction block is observable. Dropped at test end."""
    sync_conn.execute("""
        CREATE OR REPLACE FUNCTION ai.test_fail_at_commit() RETURNS trigger LANGUAGE plpgsql AS
        $$ BEGIN RAISE EXCEPTION 'injected failure at commit'; END $$""")
    sync_conn.execute("""
        CREATE CONSTRAINT TRIGGER test_fail_at_commit AFTER INSERT ON ai.context_ai_state
        DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION ai.test_fail_at_commit()""")
    try:
        yield
    finally:
        sync_conn.execute("DROP TRIGGER IF EXISTS test_fail_at_commit ON ai.context_ai_state")
        sync_conn.execute("DROP FUNCTION IF EXISTS ai.test_fail_at_commit()")


def test_the_injected_failure_really_fires_at_commit_not_at_the_statement(db_url, fail_at_commit):
    """Guards the test tool itself: the INSERT succeeds, COMMIT raises."""
    with psycopg.connect(db_url) as conn:
        member = conn.execute("INSERT INTO core.member DEFAULT VALUES RETURNING id").fetchone()[0]
        assert member > 0
        conn.execute("INSERT INTO ai.context_ai_state (context_id) VALUES (424242)")  # no error yet
        with pytest.raises(psycopg.errors.RaiseException, match="injected failure at commit"):
            conn.commit()


@pytest.mark.parametrize("operation", ["create_record", "add_context", "edit_context"])
async def test_a_commit_that_fails_at_commit_dispatches_nothing(service, dispatcher, client,
                                                               sync_conn, operation, request):
    """Every service operation that dispatches (create record, add context, edit context): when
    COMMIT itself fails, the call raises, nothing is written and no process request is sent."""
    member = await service.create_member()
    record_id, first = await service.create_record(member, place(), "ok")
    await dispatcher.join()
    assert [r.context_id for r in client.sent] == [first]  # the harness does dispatch
    client.sent.clear()
    before = snapshot(sync_conn)
    calls = {
        "create_record": lambda: service.create_record(member, place(2), "never committed"),
        "add_context": lambda: service.add_context(member, record_id, "never committed"),
        "edit_context": lambda: service.edit_context(member, first, "never committed"),
    }
    request.getfixturevalue("fail_at_commit")

    with pytest.raises(DBAPIError, match="injected failure at commit"):
        await calls[operation]()
    await dispatcher.join()

    assert client.sent == []
    assert snapshot(sync_conn) == before
    assert state_row(sync_conn, first) == ("PENDING", "PENDING")
