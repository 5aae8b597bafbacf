"""`pinlog import` on the real PostgreSQL through the real in-process path (issue 7): core
services create members/records/contexts and PENDING state rows, the dispatcher hands them to
the ai runtime (fake model providers at their Protocols), ``wait_for_stages`` waits and nudges,
``summarize`` reports. Every DB fact is read back over a separate connection (``sync_conn``)."""

from __future__ import annotations

import asyncio
import json

import pytest
from pydantic import ValidationError

from pinlog.ai.errors import PermanentModelError
from pinlog.ai.ports import JudgeAnswer, Pick
from pinlog.composition import running_components
from pinlog.core.importer import import_lines, parse_import_file, summarize, wait_for_stages
from pinlog.cli.importing import import_with, print_import_outcome
from pinlog.core.rescan import resend
from tests.fakes import FakeEmbeddingProvider, FakeJudge
from tests.integration.core.importer.conftest import (
    FRIENDS_TEXT, QUIET_TEXT, count, db_counts, import_settings, note, quiet_console, write_jsonl)
from tests.conftest import config_of
from tests.integration.core.support import dispatch_count

WAIT = 30.0  # seconds; a generous ceiling, the tests end as soon as the work is done


def state(conn, context_id: int) -> tuple[str, str, int]:
    return conn.execute("SELECT embedding_status, keyword_status, retry_count "
                        "FROM ai.context_ai_state WHERE context_id = %s", (context_id,)).fetchone()


async def run(parts, engine, settings, path, *, wait: bool = True, console=None):
    parsed = parse_import_file(path, max_text_chars=settings.max_text_chars)
    return await import_with(parts.core, engine, parsed, wait=wait, timeout=WAIT,
                             console=console or quiet_console())


# --- malformed lines ---------------------------------------------------------------------------

async def test_malformed_lines_are_reported_skipped_and_nothing_of_them_is_written(
        tmp_path, parts, engine, isettings, sync_conn):
    bad_texts = [f"잘못된 줄의 메모 {i}" for i in range(2, 10)]
    lines = [
        note("alice", "one", "ext-ok-1", FRIENDS_TEXT),                               # 1 ok
        '{"member": "ghost-2", "place": {"name": "x"}, "context": "' + bad_texts[0],  # 2 bad JSON
        json.dumps({"member": "ghost-3", "record": "r",                               # 3 no place
                    "context": bad_texts[1]}, ensure_ascii=False),
        note("ghost-4", "r", "ext-bad-4", "   \n\t "),                                # 4 blank
        note("ghost-5", "r", "ext-bad-5", bad_texts[3], lat=123.0),                   # 5 bad lat
        note("ghost-6", "r", "ext-bad-6", bad_texts[4], lng=-181.0),                  # 6 bad lng
        note("ghost-7", "r", "ext-bad-7", "가" * (isettings.max_text_chars + 1)),     # 7 too long
        note("ghost-8", "r", "ext-bad-8", bad_texts[6] + "\x00"),                     # 8 NUL
        note("alice", "two", "ext-bad-9", bad_texts[7], name="   "),                  # 9 blank name
        note("ghost-10", "r", "e" * 250, "외부 id가 너무 긴 줄"),                       # 10 long id
        "",                                                                           # blank line
        note("bob", "three", "ext-ok-3", QUIET_TEXT),                                 # 12 ok
    ]
    outcome = await run(parts, engine, isettings, write_jsonl(tmp_path / "n.jsonl", lines))

    assert [n for n, _ in outcome.report.errors] == [2, 3, 4, 5, 6, 7, 8, 9, 10]
    messages = dict(outcome.report.errors)
    assert messages[3].startswith("place") and messages[5].startswith("place.lat")
    assert messages[6].startswith("place.lng") and "longer than" in messages[7]
    # the valid lines around them were imported and processed
    assert len(outcome.report.context_ids) == 2 and outcome.summary.all_completed
    assert sorted(r[0] for r in sync_conn.execute("SELECT body FROM core.context")) == sorted(
        [FRIENDS_TEXT, QUIET_TEXT])
    # nothing of a malformed line reached the database: no member, place, record, context
    assert [r[0] for r in sync_conn.execute(
        "SELECT external_ref FROM core.member ORDER BY id")] == ["alice", "bob"]
    assert sorted(r[0] for r in sync_conn.execute("SELECT external_place_id FROM core.place")) == [
        "ext-ok-1", "ext-ok-3"]
    assert db_counts(sync_conn) == {"core.member": 2, "core.place": 2, "core.record": 2,
                                    "core.context": 2, "ai.context_ai_state": 2}
    # the human report lists every bad line by number, never the note text
    console = quiet_console()
    print_import_outcome(console, outcome)
    text = console.export_text()
    for number in (2, 3, 4, 5, 6, 7, 8, 9, 10):
        assert f"line {number}: " in text
    assert not any(bad in text for bad in bad_texts)


# --- re-import ---------------------------------------------------------------------------------

async def test_reimporting_the_same_file_creates_no_record_and_no_context(
        tmp_path, parts, engine, isettings, sync_conn, provider):
    path = write_jsonl(tmp_path / "n.jsonl", [
        note("alice", "cafe", "ext-1", FRIENDS_TEXT),
        note("alice", "cafe", "ext-1", "같은 곳, 두 번째 메모"),
        note("alice", "park", "ext-2", "산책하기 좋은 공원"),
        note("bob", "cafe", "ext-1", QUIET_TEXT),
    ])
    first = await run(parts, engine, isettings, path)
    assert (first.report.members_created, first.report.records_created,
            first.report.records_existing, len(first.report.context_ids)) == (2, 3, 0, 4)
    assert first.summary.all_completed
    before, embedded = db_counts(sync_conn), len(provider.texts)

    second = await run(parts, engine, isettings, path)

    assert db_counts(sync_conn) == before == {"core.member": 2, "core.place": 2, "core.record": 3,
                                              "core.context": 4, "ai.context_ai_state": 4}
    assert (second.report.members_created, second.report.records_created,
            second.report.context_ids, second.report.errors) == (0, 0, [], [])
    assert second.report.records_existing == 3  # records, not lines
    assert second.report.record_keys == first.report.record_keys  # keys still resolve
    assert len(provider.texts) == embedded  # nothing sent to the model again
    assert second.as_json()["contexts"] == 0 and second.summary.all_completed  # exit 0
    console = quiet_console()
    print_import_outcome(console, second)
    assert "records created 0, already present 3, contexts 0" in console.export_text()


# --- the real in-process path -----------------------------------------------------------------

async def test_state_rows_are_committed_pending_then_processed_by_the_in_process_ai(
        tmp_path, parts, engine, isettings, sync_conn, provider, judge):
    path = write_jsonl(tmp_path / "n.jsonl", [
        note("alice", "a", "ext-1", FRIENDS_TEXT), note("alice", "b", "ext-2", QUIET_TEXT),
        note("bob", "c", "ext-3", "아무 키워드도 없는 메모")])
    parsed = parse_import_file(path, max_text_chars=isettings.max_text_chars)
    gate = provider.hold()  # every embedding call waits here

    report = await import_lines(parts.core.service, parsed)
    await parts.core.dispatcher.join()
    await gate.wait_entered()

    ids = report.context_ids
    assert len(ids) == 3
    rows = {cid: state(sync_conn, cid) for cid in ids}
    assert all(emb in ("PENDING", "PROCESSING") and kw == "PENDING" and retry == 0
               for emb, kw, retry in rows.values()), rows
    assert count(sync_conn, "SELECT count(*) FROM ai.context_embedding") == 0

    gate.open()
    assert await wait_for_stages(engine, ids, timeout=WAIT) is True

    assert {cid: state(sync_conn, cid)[:2] for cid in ids} == {
        cid: ("COMPLETED", "COMPLETED") for cid in ids}
    history = sync_conn.execute(
        "SELECT context_id, stage, from_status, to_status, actor FROM ai.context_ai_event "
        "WHERE context_id = ANY(%s) ORDER BY id", (ids,)).fetchall()
    for cid in ids:
        for stage in ("embedding", "keyword"):
            assert [(f, t, a) for c, s, f, t, a in history if c == cid and s == stage] == [
                (None, "PENDING", "core"), ("PENDING", "PROCESSING", "ai"),
                ("PROCESSING", "COMPLETED", "ai")]
    assert sorted(provider.texts) == sorted(line.context for _, line in parsed.lines)
    assert judge.calls == 2  # the third text has no candidate: no judge call (SPEC §8)
    summary = await summarize(engine, ids)
    assert (summary.embedding, summary.keyword, summary.keywords_assigned, summary.failures) == (
        {"COMPLETED": 3}, {"COMPLETED": 3}, 2, [])


async def test_members_are_keyed_by_external_ref(tmp_path, parts, engine, isettings, sync_conn):
    service = parts.core.service
    ara = await service.create_member("ara")
    other = await service.create_member("someone-else")
    path = write_jsonl(tmp_path / "n.jsonl", [
        note("ara", "a", "ext-1", "아라의 메모"),
        note("new-member", "b", "ext-2", "새 회원의 메모"),
        note(str(other), "c", "ext-3", "숫자 키를 가진 회원의 메모"),  # a ref, never a member id
        note("ara", "d", "ext-4", "아라의 두 번째 장소"),
    ])
    outcome = await run(parts, engine, isettings, path)

    assert outcome.report.errors == []
    assert outcome.report.members_created == 2
    members = dict(sync_conn.execute("SELECT external_ref, id FROM core.member").fetchall())
    assert set(members) == {"ara", "someone-else", "new-member", str(other)}
    assert outcome.report.member_ids == {"ara": ara, "new-member": members["new-member"],
                                         str(other): members[str(other)]}
    owners = dict(sync_conn.execute(
        "SELECT p.external_place_id, r.member_id FROM core.record r "
        "JOIN core.place p ON p.id = r.place_id").fetchall())
    assert owners == {"ext-1": ara, "ext-2": members["new-member"],
                      "ext-3": members[str(other)], "ext-4": ara}
    assert count(sync_conn, "SELECT count(*) FROM core.record WHERE member_id = %s", other) == 0


async def test_two_lines_for_one_member_and_place_make_one_record_with_two_contexts(
        tmp_path, parts, engine, isettings, sync_conn):
    path = write_jsonl(tmp_path / "n.jsonl", [
        note("alice", "cafe", "ext-1", FRIENDS_TEXT),
        note("bob", "cafe", "ext-1", "밥의 메모"),           # same place, another member
        note("alice", "cafe", "ext-1", QUIET_TEXT),          # same member + place
    ])
    outcome = await run(parts, engine, isettings, path)

    assert outcome.report.records_created == 2 and len(outcome.report.context_ids) == 3
    alice = outcome.report.member_ids["alice"]
    records = sync_conn.execute("SELECT id FROM core.record WHERE member_id = %s", (alice,)).fetchall()
    assert len(records) == 1
    (record_id,) = records[0]
    assert sorted(r[0] for r in sync_conn.execute(
        "SELECT body FROM core.context WHERE record_id = %s AND deleted_at IS NULL",
        (record_id,))) == sorted([FRIENDS_TEXT, QUIET_TEXT])
    assert count(sync_conn, "SELECT count(*) FROM core.place") == 1
    assert outcome.report.record_keys[("alice", "cafe")] == record_id
    assert outcome.summary.all_completed and outcome.summary.keywords_assigned == 2


# --- summary, dead ends, JSON ------------------------------------------------------------------

async def test_summary_counts_failures_and_json_line(tmp_path, db_url, engine, presets, sync_conn):
    broken = "임베딩이 거부되는 메모"
    settings = import_settings(tmp_path, db_url, embedding_batch_size=1)  # one text per call
    provider = FakeEmbeddingProvider(config_of(settings).profile, config_of(settings).ai.embedding.dimension,
                                     vectors={FRIENDS_TEXT: [1, 0, 0, 0, 0, 0, 0, 0],
                                              QUIET_TEXT: [0, 0, 1, 0, 0, 0, 0, 0]})

    def refuse(texts, kind):
        if broken in texts:
            raise PermanentModelError("input over the model limit")

    def answer(text, candidates):
        if text == QUIET_TEXT:
            raise PermanentModelError("judge refused")
        best = max(candidates, key=lambda c: c.similarity)
        return JudgeAnswer(picks=(Pick(best.preset.id, 0.9),), model_profile="fake-judge-v1")

    provider.on_call = refuse
    judge = FakeJudge(answer)
    path = write_jsonl(tmp_path / "n.jsonl", [
        note("alice", "a", "ext-1", FRIENDS_TEXT),          # 1 keyword
        note("alice", "b", "ext-2", "키워드 없는 평범한 메모"),  # 0 keywords, COMPLETED
        note("alice", "c", "ext-3", QUIET_TEXT),            # keyword FAILED (permanent)
        note("alice", "d", "ext-4", broken),                # embedding FAILED → keyword dead end
    ])
    async with running_components(config_of(settings), engine,
                                  ai_kwargs={"provider": provider, "judge": judge}) as parts:
        outcome = await run(parts, engine, settings, path)

    ids = outcome.report.context_ids
    summary = outcome.summary
    # a keyword stage behind a FAILED embedding can never start: waiting does not hang on it
    assert outcome.finished is True
    assert summary.contexts == 4
    assert summary.embedding == {"COMPLETED": 3, "FAILED": 1}
    assert summary.keyword == {"COMPLETED": 2, "FAILED": 1, "PENDING": 1}
    assert summary.keywords_assigned == 1 == count(sync_conn, "SELECT count(*) FROM ai.context_keyword")
    assert not summary.all_completed  # → `pinlog import` exits 1
    assert [(cid, emb, kw) for cid, emb, kw, _ in summary.failures] == [
        (ids[2], "COMPLETED", "FAILED"), (ids[3], "FAILED", "PENDING")]
    errors = [err for *_, err in summary.failures]
    assert errors[0].startswith("keyword permanent") and errors[1].startswith("embedding permanent")

    line = outcome.as_json()
    assert set(line) == {"contexts", "embedding", "keyword", "seconds", "lines", "imported",
                         "skipped", "bad"}
    assert (line["lines"], line["imported"], line["skipped"], line["bad"]) == (4, 4, 0, 0)
    assert (line["contexts"], line["embedding"], line["keyword"]) == (
        4, {"COMPLETED": 3, "FAILED": 1}, {"COMPLETED": 2, "FAILED": 1, "PENDING": 1})
    assert isinstance(line["seconds"], float) and line["seconds"] >= 0
    assert json.loads(json.dumps(line)) == line  # one JSON-serialisable line


async def test_import_and_the_api_refuse_the_same_lines_and_json_counts_them(
        tmp_path, parts, engine, isettings, sync_conn):
    """Issue 27 #10: one model for both doors. A line the API would refuse is a bad line (a
    string latitude, a JSON array, an ``id:`` member ref); a line whose member + place already
    has a record is skipped; ``--json`` counts lines read, imported, skipped and bad."""
    from pinlog.core.inputs import PlaceIn

    good = [note("alice", "one", "ext-1", FRIENDS_TEXT), note("bob", "two", "ext-2", QUIET_TEXT)]
    string_lat = note("carol", "r", "ext-3", "위도가 문자열인 줄", lat="37.5")
    bad = [string_lat, "[1,2]", note("id:5", "r", "ext-4", "이상한 회원 키")]
    first = await run(parts, engine, isettings, write_jsonl(tmp_path / "a.jsonl", good + bad))
    assert first.as_json() | {"seconds": 0} == {
        "contexts": 2, "embedding": {"COMPLETED": 2}, "keyword": {"COMPLETED": 2}, "seconds": 0,
        "lines": 5, "imported": 2, "skipped": 0, "bad": 3}
    messages = dict(first.report.errors)
    assert messages == {3: "place.lat: must be a number", 4: "the line must be a JSON object",
                        5: "member: must not start with id: or ref: (those prefixes say how a "
                           "member is named: pinlog token --member id:7)"}
    # the API's model refuses the same place (what the file calls external_place_id)
    place = json.loads(string_lat)["place"]
    with pytest.raises(ValidationError):
        PlaceIn.model_validate({"externalPlaceId": place["external_place_id"],
                                "name": place["name"], "lat": place["lat"], "lng": place["lng"]})
    again = await run(parts, engine, isettings, write_jsonl(tmp_path / "b.jsonl", good))
    assert (again.as_json()["lines"], again.as_json()["imported"], again.as_json()["skipped"],
            again.as_json()["bad"]) == (2, 0, 2, 0)
    assert count(sync_conn, "SELECT count(*) FROM core.context") == 2


async def test_wait_for_stages_gives_up_at_the_timeout(tmp_path, parts, engine, isettings, provider):
    path = write_jsonl(tmp_path / "n.jsonl", [note("alice", "a", "ext-1", FRIENDS_TEXT)])
    gate = provider.hold()
    report = await import_lines(parts.core.service,
                                parse_import_file(path, max_text_chars=isettings.max_text_chars))
    await gate.wait_entered()
    seen: list[int] = []
    assert await wait_for_stages(engine, report.context_ids, timeout=0.5, poll=0.05,
                                 progress=seen.append) is False
    assert seen and set(seen) == {0}
    gate.open()
    assert await wait_for_stages(engine, report.context_ids, timeout=WAIT,
                                 progress=seen.append) is True
    assert seen[-1] == 1


# --- the nudge ---------------------------------------------------------------------------------

def _four_notes_one_job_at_a_time(tmp_path, db_url, busy_wait: float = 0.0):
    """Settings whose ai side queues one job and runs one at a time, and a file of 4 notes.
    ``busy_wait``: how long the live dispatch re-sends a refused (503) request (default: once,
    so a refused context stays PENDING)."""
    settings = import_settings(tmp_path, db_url, work_queue_size=1, worker_concurrency=1,
                               rescan_busy_wait=busy_wait)
    lines = [note("alice", f"r{i}", f"ext-{i}", f"메모 {i}") for i in range(4)]
    return settings, parse_import_file(write_jsonl(tmp_path / "n.jsonl", lines),
                                       max_text_chars=settings.max_text_chars)


async def _import_while_the_first_embedding_is_held(parts, provider, parsed):
    """Import ``parsed`` while the first embedding call is held (later requests are refused
    with 503), then let it go and wait for the ai side's accepted jobs; returns the report."""
    gate = provider.hold()
    report = await import_lines(parts.core.service, parsed)
    await parts.core.dispatcher.join()
    await gate.wait_entered()
    gate.open()
    await parts.ai.join()
    return report


async def test_a_refused_dispatch_is_nudged_by_wait_for_stages_and_finishes(
        tmp_path, db_url, engine, presets, sync_conn, provider, judge):
    """The ai work queue holds one job and runs one at a time; while the first embedding is held,
    later process requests are refused with 503 (the PENDING rows are already committed). Nothing
    re-sends them but the import's nudge — no rescan runs here."""
    settings, parsed = _four_notes_one_job_at_a_time(tmp_path, db_url)
    nudged: list[list[int]] = []
    async with running_components(config_of(settings), engine,
                                  ai_kwargs={"provider": provider, "judge": judge}) as parts:
        report = await _import_while_the_first_embedding_is_held(parts, provider, parsed)
        ids = report.context_ids
        stuck = [cid for cid in ids if state(sync_conn, cid)[:2] == ("PENDING", "PENDING")]
        assert len(stuck) >= 2, "at most one job runs and one waits: the rest were refused"

        async def nudge(pending: list[int]) -> None:
            nudged.append(pending)
            await resend(engine, parts.core.client, pending, concurrency=1, actor="import")

        finished = await wait_for_stages(engine, ids, timeout=WAIT, nudge=nudge,
                                         nudge_after=0.2, poll=0.05)

    assert finished is True
    assert nudged and nudged[0] == stuck
    assert {cid: state(sync_conn, cid) for cid in ids} == {
        cid: ("COMPLETED", "COMPLETED", 0) for cid in ids}  # a nudge spends no retry budget
    assert sorted(provider.texts) == sorted(f"메모 {i}" for i in range(4))  # each embedded once


async def test_wait_without_a_nudge_leaves_a_refused_context_pending(
        tmp_path, db_url, engine, presets, sync_conn, provider, judge):
    """The control of the previous test: the same refusal without a nudge never finishes."""
    settings, parsed = _four_notes_one_job_at_a_time(tmp_path, db_url)
    async with running_components(config_of(settings), engine,
                                  ai_kwargs={"provider": provider, "judge": judge}) as parts:
        report = await _import_while_the_first_embedding_is_held(parts, provider, parsed)
        assert await wait_for_stages(engine, report.context_ids, timeout=1.0, poll=0.05) is False
    assert count(sync_conn, "SELECT count(*) FROM ai.context_ai_state "
                 "WHERE embedding_status = 'PENDING'") >= 2


async def test_a_refused_live_dispatch_is_sent_again_once_the_queue_has_room(
        tmp_path, db_url, engine, presets, sync_conn, provider, judge):
    """SPEC §5.1/§7.2: with the busy wait (PINLOG_RESCAN_BUSY_WAIT) the live dispatch re-sends
    a request the full ai side refused (503), paced by that queue, so every context finishes
    as soon as there is room — no rescan runs here, no nudge, and no context waits for the
    PENDING expiry."""
    # the longest busy wait allowed: the re-sends never give up on a slow machine
    settings, parsed = _four_notes_one_job_at_a_time(tmp_path, db_url, busy_wait=3600.0)
    busy = dispatch_count("busy")
    async with running_components(config_of(settings), engine,
                                  ai_kwargs={"provider": provider, "judge": judge}) as parts:
        gate = provider.hold()
        report = await import_lines(parts.core.service, parsed)
        await gate.wait_entered()  # one job runs (held), one waits: the others are refused

        async def refused_twice() -> None:  # the outcome counter as the hook
            while dispatch_count("busy") < busy + 2:
                await asyncio.sleep(0.01)

        await asyncio.wait_for(refused_twice(), WAIT)
        gate.open()
        await parts.core.dispatcher.join()  # the refused ones were sent again and accepted
        await parts.ai.join()
        ids = report.context_ids
    assert {cid: state(sync_conn, cid) for cid in ids} == {
        cid: ("COMPLETED", "COMPLETED", 0) for cid in ids}
    assert sorted(provider.texts) == sorted(f"메모 {i}" for i in range(4))  # each embedded once


async def test_an_import_sends_its_contexts_as_process_batches(tmp_path, db_url, engine, presets,
                                                               sync_conn, provider, judge, caplog):
    """The batch path (docs/ARCHITECTURE.md "Batch path"): the committed contexts go to the ai
    side ``PINLOG_PROCESS_BATCH_SIZE`` at a time, where they run as batches (no context alone);
    every context is processed once with its events."""
    settings = import_settings(tmp_path, db_url, process_batch_size=4)
    path = write_jsonl(tmp_path / "n.jsonl", [note("carol", f"r{i}", f"ext-b{i}", f"메모 {i}")
                                              for i in range(10)])
    caplog.set_level("INFO", logger="pinlog.ai.batch")
    async with running_components(config_of(settings), engine,
                                  ai_kwargs={"provider": provider, "judge": judge}) as parts:
        outcome = await run(parts, engine, settings, path)
    sizes = [r.batch for r in caplog.records if r.getMessage() == "batch processed"]
    assert outcome.finished and outcome.summary.all_completed
    assert sum(sizes) == 10 and max(sizes) <= 4
    assert sorted(provider.texts) == sorted(f"메모 {i}" for i in range(10))
    assert count(sync_conn, "SELECT count(*) FROM ai.context_ai_event WHERE to_status = "
                 "'COMPLETED'") == 20
