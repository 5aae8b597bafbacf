"""`pinlog import FILE [--wait] [--timeout S] [--json]` as a user runs it, against the real test
PostgreSQL (issue 7): exit codes, the JSON summary line, bad lines on stderr, re-import."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest

from tests.conftest import TEST_JWT_SECRET, TEST_SECRET
from tests.helpers import free_port, pinlog_env, run_pinlog

pytestmark = pytest.mark.slow

PACKAGED_SAMPLE = (Path(__file__).resolve().parents[3] / "src" / "pinlog" / "demo_data"
                   / "sample_notes.jsonl")
NOTE_TEXT = "창가 자리가 조용해서 오래 머물기 좋았던 카페"


def note(member: str, ext: str, context: str = NOTE_TEXT, **place: object) -> str:
    return json.dumps({"member": member, "record": ext, "context": context,
                       "place": {"name": "카페", "external_place_id": ext, "address": "서울",
                                 "lat": 37.5, "lng": 127.0, **place}}, ensure_ascii=False)


def env_for(tmp_path: Path, db_url: str, **extra: str) -> dict[str, str]:
    return pinlog_env(tmp_path / "data", PINLOG_DATABASE_URL=db_url,
                      PINLOG_INTERNAL_SECRETS=TEST_SECRET, PINLOG_JWT_SECRET=TEST_JWT_SECRET,
                      PINLOG_RESCAN_ENABLED="false", **extra)


def json_line(stdout: str) -> dict:
    """The last stdout line, parsed (the `--json` contract)."""
    return json.loads(stdout.strip().splitlines()[-1])


def counts(db_url: str) -> tuple[int, ...]:
    with psycopg.connect(db_url) as conn:
        return tuple(conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]  # fixed names
                     for t in ("core.member", "core.record", "core.context", "ai.context_ai_state"))


def test_import_json_line_bad_lines_and_reimport_with_a_remote_ai_side(tmp_path, db_url):
    """PINLOG_AI_BASE_URL set (nobody listens there): no wait unless --wait, rows stay PENDING."""
    env = env_for(tmp_path, db_url, PINLOG_AI_BASE_URL=f"http://127.0.0.1:{free_port()}")
    path = tmp_path / "notes.jsonl"
    path.write_text("\n".join([note("ara", "ext-1"), "{not json", note("ara", "ext-2"),
                               note("bora", "ext-3", lat=99.0)]) + "\n", encoding="utf-8")

    result = run_pinlog(["import", str(path), "--json"], env, timeout=120)
    assert result.returncode == 1, result.stderr  # bad lines → exit 1
    line = json_line(result.stdout)
    assert set(line) == {"contexts", "embedding", "keyword", "seconds", "lines", "imported",
                         "skipped", "bad"}
    assert (line["contexts"], line["embedding"], line["keyword"]) == (
        2, {"PENDING": 2}, {"PENDING": 2})
    assert (line["lines"], line["imported"], line["skipped"], line["bad"]) == (4, 2, 0, 2)
    assert isinstance(line["seconds"], (int, float))
    assert len(result.stdout.strip().splitlines()) == 1  # with --json, stdout is just the line
    assert "line 2: not valid JSON" in result.stderr and "line 4: place.lat" in result.stderr
    assert NOTE_TEXT not in result.stderr + result.stdout  # note text is never echoed
    assert counts(db_url) == (1, 2, 2, 2)  # "bora" (only on the bad line 4) was not created

    clean = tmp_path / "clean.jsonl"
    clean.write_text(note("ara", "ext-1") + "\n" + note("ara", "ext-2") + "\n", encoding="utf-8")
    again = run_pinlog(["import", str(clean), "--json"], env, timeout=120)
    assert again.returncode == 0, again.stderr
    assert json_line(again.stdout)["contexts"] == 0
    assert "already present 2" in again.stderr
    assert counts(db_url) == (1, 2, 2, 2)

    # --wait against an ai side that never answers: times out, work unfinished → exit 1
    more = tmp_path / "more.jsonl"
    more.write_text(note("chan", "ext-9") + "\n", encoding="utf-8")
    waited = run_pinlog(["import", str(more), "--wait", "--timeout", "1", "--json"], env,
                        timeout=120)
    assert waited.returncode == 1
    assert json_line(waited.stdout)["embedding"] == {"PENDING": 1}
    assert "timed out waiting" in waited.stderr


def test_import_with_the_in_process_ai_always_waits_and_completes(tmp_path, db_url):
    """No PINLOG_AI_BASE_URL: the ai side runs in the command (real local model), which waits
    for it even without --wait; every context ends COMPLETED on both stages."""
    env = env_for(tmp_path, db_url)
    loaded = run_pinlog(["presets", "load"], env, timeout=300)
    assert loaded.returncode == 0, loaded.stderr
    lines = [x for x in PACKAGED_SAMPLE.read_text(encoding="utf-8").splitlines() if x.strip()]

    result = run_pinlog(["import", str(PACKAGED_SAMPLE), "--json"], env, timeout=300)

    assert result.returncode == 0, result.stderr
    line = json_line(result.stdout)
    assert line["contexts"] == len(lines)
    assert line["embedding"] == line["keyword"] == {"COMPLETED": len(lines)}
    with psycopg.connect(db_url) as conn:
        assert conn.execute("SELECT count(*) FROM ai.context_embedding WHERE NOT is_deleted"
                            ).fetchone()[0] == len(lines)
