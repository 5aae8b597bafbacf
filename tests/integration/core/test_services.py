"""core lifecycle services on a real PostgreSQL (SPEC §2.1, §4, §8)."""

from __future__ import annotations

import pytest

from pinlog.core.services import (
    InvalidInput,
    LastContext,
    MemberExists,
    NotFound,
    PlaceInput,
    RecordExists,
    RecordHasContexts,
)
from tests.integration.core.conftest import place
from tests.integration.core.support import add_presets, complete, count, set_status, snapshot, state_row
from tests.conftest import config_of


async def test_create_record_commits_context_and_pending_state_then_dispatches(
        service, dispatcher, client, sync_conn):
    member = await service.create_member()
    record_id, context_id = await service.create_record(member, place(), "조용한 카페")
    assert state_row(sync_conn, context_id) == ("PENDING", "PENDING")
    assert count(sync_conn, "SELECT retry_count FROM ai.context_ai_state WHERE context_id = %s",
                 context_id) == 0
    events = sync_conn.execute("SELECT stage, from_status, to_status, actor FROM ai.context_ai_event "
                               "WHERE context_id = %s ORDER BY stage", (context_id,)).fetchall()
    assert events == [("embedding", None, "PENDING", "core"), ("keyword", None, "PENDING", "core")]
    await dispatcher.join()
    assert [(r.context_id, r.user_id, r.record_id, r.text) for r in client.sent] == [
        (context_id, member, record_id, "조용한 카페")]
    assert client.states == [("PENDING", "PENDING")]  # committed before it was sent


async def test_place_is_upserted_by_external_id_and_never_updated(service, sync_conn):
    a, b = await service.create_member(), await service.create_member()
    await service.create_record(a, place(1, "first name"), "x")
    await service.create_record(b, place(1, "another name"), "y")
    assert sync_conn.execute("SELECT name FROM core.place").fetchall() == [("first name",)]


async def test_second_active_record_for_same_place_is_refused_with_its_id(service, sync_conn):
    member = await service.create_member()
    record_id, _ = await service.create_record(member, place(), "x")
    before = snapshot(sync_conn)
    with pytest.raises(RecordExists) as info:
        await service.create_record(member, place(), "again")
    assert info.value.record_id == record_id
    assert snapshot(sync_conn) == before
    assert await service.find_active_record(member, "kakao-1") == record_id
    assert await service.find_active_record(member, "kakao-2") is None


async def test_a_deleted_record_frees_the_place_for_a_new_record(service):
    member = await service.create_member()
    record_id, _ = await service.create_record(member, place(), "x")
    await service.delete_record(member, record_id)
    new_record, _ = await service.create_record(member, place(), "y")
    assert new_record != record_id


async def test_members_external_ref_unique_among_active_and_resolvable(service):
    member = await service.create_member("ext-1")
    with pytest.raises(MemberExists):
        await service.create_member("ext-1")
    assert await service.resolve_member("ext-1") == member
    assert await service.resolve_member(str(member)) == member
    with pytest.raises(NotFound):
        await service.resolve_member("nobody")
    await service.withdraw_member(member)
    with pytest.raises(NotFound):
        await service.resolve_member("ext-1")
    assert await service.create_member("ext-1") != member  # the ref is free again


async def test_add_context_dispatches_and_touches_the_record(service, dispatcher, client, sync_conn):
    member = await service.create_member()
    record_id, first = await service.create_record(member, place(), "one")
    second = await service.add_context(member, record_id, "two")
    assert second != first
    assert state_row(sync_conn, second) == ("PENDING", "PENDING")
    await dispatcher.join()
    assert sorted(r.context_id for r in client.sent) == [first, second]


async def test_delete_context_cancels_completed_and_failed_stages_and_hides_embedding(
        service, sync_conn):
    add_presets(sync_conn)
    member = await service.create_member()
    record_id, a = await service.create_record(member, place(), "a")
    b = await service.add_context(member, record_id, "b")
    c = await service.add_context(member, record_id, "c")
    complete(sync_conn, a, [1], user_id=member, record_id=record_id)
    set_status(sync_conn, b, "COMPLETED", "FAILED")
    await service.delete_context(member, a)
    await service.delete_context(member, b)
    assert state_row(sync_conn, a) == ("CANCELLED", "CANCELLED")
    assert state_row(sync_conn, b) == ("CANCELLED", "CANCELLED")
    assert state_row(sync_conn, c) == ("PENDING", "PENDING")
    assert sync_conn.execute("SELECT is_deleted FROM ai.context_embedding WHERE context_id = %s",
                             (a,)).fetchone() == (True,)
    # the keyword rows remain; only the status hides them (SPEC §8)
    assert count(sync_conn, "SELECT count(*) FROM ai.context_keyword WHERE context_id = %s", a) == 1
    events = sync_conn.execute(
        "SELECT stage, from_status, to_status, actor FROM ai.context_ai_event "
        "WHERE context_id = %s AND to_status = 'CANCELLED' ORDER BY stage", (b,)).fetchall()
    assert events == [("embedding", "COMPLETED", "CANCELLED", "core"),
                      ("keyword", "FAILED", "CANCELLED", "core")]
    assert count(sync_conn, "SELECT count(*) FROM core.context WHERE deleted_at IS NULL") == 1


async def test_cancel_bumps_updated_at(service, sync_conn):
    member = await service.create_member()
    record_id, a = await service.create_record(member, place(), "a")
    await service.add_context(member, record_id, "b")
    sync_conn.execute("UPDATE ai.context_ai_state SET updated_at = now() - interval '1 hour' "
                      "WHERE context_id = %s", (a,))
    await service.delete_context(member, a)
    age = sync_conn.execute("SELECT now() - updated_at < interval '1 minute' FROM "
                            "ai.context_ai_state WHERE context_id = %s", (a,)).fetchone()[0]
    assert age is True


async def test_last_context_cannot_be_deleted_and_says_what_a_forced_delete_removes(
        service, sync_conn):
    member = await service.create_member()
    record_id, context_id = await service.create_record(member, place(1, "카페 온다"), "only")
    before = snapshot(sync_conn)
    with pytest.raises(LastContext) as info:
        await service.delete_context(member, context_id)
    assert (info.value.summary.record_id, info.value.summary.place_name,
            info.value.summary.contexts) == (record_id, "카페 온다", 1)
    assert snapshot(sync_conn) == before


async def test_record_delete_needs_force_with_several_contexts(service, sync_conn):
    member = await service.create_member()
    record_id, a = await service.create_record(member, place(), "a")
    b = await service.add_context(member, record_id, "b")
    before = snapshot(sync_conn)
    with pytest.raises(RecordHasContexts) as info:
        await service.delete_record(member, record_id)
    assert info.value.summary.contexts == 2
    assert snapshot(sync_conn) == before
    assert await service.delete_record(member, record_id, force=True) == 2
    assert state_row(sync_conn, a) == state_row(sync_conn, b) == ("CANCELLED", "CANCELLED")
    assert count(sync_conn, "SELECT count(*) FROM core.record WHERE deleted_at IS NULL") == 0
    assert count(sync_conn, "SELECT count(*) FROM core.context WHERE deleted_at IS NULL") == 0
    with pytest.raises(NotFound):
        await service.get_record(member, record_id)


async def test_record_with_one_context_is_deleted_without_force(service, sync_conn):
    member = await service.create_member()
    record_id, a = await service.create_record(member, place(), "a")
    assert await service.delete_record(member, record_id) == 1
    assert state_row(sync_conn, a) == ("CANCELLED", "CANCELLED")


async def test_withdrawal_invalidates_everything_of_the_member_only(service, sync_conn):
    add_presets(sync_conn)
    member, other = await service.create_member(), await service.create_member()
    r1, a = await service.create_record(member, place(1), "a")
    b = await service.add_context(member, r1, "b")
    _, c = await service.create_record(member, place(2), "c")
    _, keep = await service.create_record(other, place(1), "other's")
    complete(sync_conn, a, [1], user_id=member, record_id=r1)
    complete(sync_conn, keep, [1], user_id=other, record_id=99)
    await service.withdraw_member(member)
    for ctx in (a, b, c):
        assert state_row(sync_conn, ctx) == ("CANCELLED", "CANCELLED")
    assert state_row(sync_conn, keep) == ("COMPLETED", "COMPLETED")
    assert sync_conn.execute("SELECT context_id, is_deleted FROM ai.context_embedding ORDER BY 1"
                             ).fetchall() == [(a, True), (keep, False)]
    assert count(sync_conn, "SELECT count(*) FROM core.record WHERE deleted_at IS NULL") == 1
    assert count(sync_conn, "SELECT count(*) FROM core.context WHERE deleted_at IS NULL") == 1
    assert not await service.member_is_active(member)
    with pytest.raises(NotFound):
        await service.withdraw_member(member)
    with pytest.raises(NotFound):  # nothing can be created behind a withdrawal
        await service.create_record(member, place(3), "late")


async def test_withdrawal_hides_every_embedding_of_the_member_also_of_earlier_deleted_contexts(
        service, sync_conn):
    """SPEC §4: withdrawal invalidates ALL of the member's AI data. A context deleted earlier
    whose embedding is still searchable (its invalidation was missed, a manual fix, an adopted
    database) is no longer the member's active context, so only the member-wide statement can
    hide it."""
    add_presets(sync_conn)
    member, other = await service.create_member(), await service.create_member()
    record_id, gone = await service.create_record(member, place(1), "지운 메모")
    kept = await service.add_context(member, record_id, "남은 메모")
    _, theirs = await service.create_record(other, place(2), "다른 회원 메모")
    for context_id, owner, rec in ((gone, member, record_id), (kept, member, record_id),
                                   (theirs, other, 99)):
        complete(sync_conn, context_id, [1], user_id=owner, record_id=rec)
    await service.delete_context(member, gone)
    # the earlier invalidation of `gone` did not reach its embedding
    sync_conn.execute("UPDATE ai.context_embedding SET is_deleted = false WHERE context_id = %s",
                      (gone,))

    await service.withdraw_member(member)

    assert sync_conn.execute("SELECT context_id, is_deleted FROM ai.context_embedding "
                             "ORDER BY context_id").fetchall() == [
        (gone, True), (kept, True), (theirs, False)]


async def test_another_members_ids_are_not_found_and_nothing_changes(service, sync_conn):
    owner, stranger = await service.create_member(), await service.create_member()
    record_id, context_id = await service.create_record(owner, place(), "mine")
    await service.add_context(owner, record_id, "mine too")
    before = snapshot(sync_conn)
    for call in (service.get_record(stranger, record_id),
                 service.add_context(stranger, record_id, "x"),
                 service.edit_context(stranger, context_id, "x"),
                 service.delete_context(stranger, context_id),
                 service.delete_record(stranger, record_id, force=True)):
        with pytest.raises(NotFound):
            await call
    assert snapshot(sync_conn) == before
    assert await service.list_records(stranger) == []


@pytest.mark.parametrize("text", ["", "   ", "\n\t ", "x" * 2001, "nul\x00byte", None, 5])
async def test_invalid_text_writes_nothing(service, sync_conn, text):
    member = await service.create_member()
    record_id, context_id = await service.create_record(member, place(), "ok")
    before = snapshot(sync_conn)
    for call in (service.create_record(member, place(2), text),
                 service.add_context(member, record_id, text),
                 service.edit_context(member, context_id, text)):
        with pytest.raises(InvalidInput):
            await call
    assert snapshot(sync_conn) == before


@pytest.mark.parametrize("bad", [
    PlaceInput("kakao-9", "n", 91.0, 0.0), PlaceInput("kakao-9", "n", 0.0, -180.5),
    PlaceInput("kakao-9", "n", float("nan"), 0.0), PlaceInput("kakao-9", "n", 0.0, float("inf")),
    PlaceInput(" ", "n", 0.0, 0.0), PlaceInput("kakao-9", "", 0.0, 0.0),
    PlaceInput("kakao-9", "n", True, 0.0), PlaceInput("kakao-9", "n", "37", 0.0),  # type: ignore[arg-type]
])
async def test_invalid_place_writes_nothing(service, sync_conn, bad):
    member = await service.create_member()
    before = snapshot(sync_conn)
    with pytest.raises(InvalidInput):
        await service.create_record(member, bad, "text")
    assert snapshot(sync_conn) == before


async def test_text_limit_is_the_configured_one(engine, dispatcher, tmp_path, db_url, sync_conn):
    from pinlog.core.services import CoreService
    from tests.conftest import make_settings

    service = CoreService(engine, dispatcher,
                          config_of(make_settings(tmp_path, db_url, max_text_chars=10)).core.service)
    member = await service.create_member()
    await service.create_record(member, place(), "x" * 10)
    with pytest.raises(InvalidInput, match="longer than 10 characters"):
        await service.create_record(member, place(2), "x" * 11)


async def test_views_show_statuses_and_owner_keywords(service, sync_conn):
    add_presets(sync_conn)
    member = await service.create_member()
    record_id, a = await service.create_record(member, place(), "a")
    b = await service.add_context(member, record_id, "b")
    c = await service.add_context(member, record_id, "c")
    complete(sync_conn, a, [5, 1, 2, 3, 4], user_id=member, record_id=record_id)
    complete(sync_conn, b, [1], user_id=member, record_id=record_id, embedding=False)
    set_status(sync_conn, b, "COMPLETED", "PROCESSING")  # keyword rows present but not COMPLETED
    set_status(sync_conn, c, "FAILED", "PENDING")
    view = await service.get_record(member, record_id)
    by_id = {ctx.context_id: ctx for ctx in view.contexts}
    assert [ctx.context_id for ctx in view.contexts] == [a, b, c]
    assert by_id[a].ai_status == "ready"
    # owner view: PUBLIC and PRIVATE_ONLY of active presets; never BLOCKED or retired
    assert by_id[a].keywords == ["조용한", "친구와", "데이트"]
    assert by_id[b].ai_status == "processing" and by_id[b].keywords == []
    assert by_id[c].ai_status == "failed" and by_id[c].keywords == []
    assert view.keywords == ["조용한", "친구와", "데이트"]
    public = await service.public_keywords(record_id)
    assert public.keywords == ["조용한", "친구와"]  # PUBLIC only
    listed = await service.list_records(member)
    assert listed == [view]
