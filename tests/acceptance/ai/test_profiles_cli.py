"""``pinlog profiles`` end to end (SPEC §9.1, issue 24), as real subprocesses against the real
PostgreSQL, with two fake OpenAI-compatible model servers: profile A (the first provider, also
the llm judge) and profile B (``PINLOG_NEXT_EMBEDDING_*``, another dimension).

Import notes on A → ``pinlog profiles`` → ``pinlog profiles build B``, SIGKILLed while a later
batch is in flight → the build again resumes and finishes, embedding no note twice except those
of the batch in flight → ``activate`` (search now embeds its query with B) → ``drop`` the kept A.
"""

from __future__ import annotations

import json
import signal
import subprocess

from tests.conftest import TEST_JWT_SECRET, TEST_SECRET
from tests.helpers import PINLOG, pinlog_env, run_pinlog
from tests.support.fake_openai import FakeOpenAI

N = 40
BATCH = 8
PROFILE_A, PROFILE_B = "fake-a-8-v1", "fake-b-6-v1"


def _note(i: int) -> str:
    return f"조용한 카페 메모 {i}"


def _env(tmp_path, db_url, a: FakeOpenAI, b: FakeOpenAI) -> dict[str, str]:
    return pinlog_env(
        tmp_path / "data", PINLOG_DATABASE_URL=db_url, PINLOG_INTERNAL_SECRETS=TEST_SECRET,
        PINLOG_JWT_SECRET=TEST_JWT_SECRET, COLUMNS="200", **a.env(PROFILE_A),
        PINLOG_NEXT_EMBEDDING_PROVIDER="openai", PINLOG_NEXT_EMBEDDING_BASE_URL=b.base_url,
        PINLOG_NEXT_EMBEDDING_MODEL="fake-embed-b", PINLOG_NEXT_EMBEDDING_PROFILE=PROFILE_B,
        PINLOG_NEXT_EMBEDDING_DIMENSION=str(b.dimension))


def _ok(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def _notes_embedded(server: FakeOpenAI) -> list[str]:
    return [t for t in server.embedded_texts if t.startswith("조용한 카페 메모")]


def test_build_crash_resume_activate_and_drop(tmp_path, db_url, sync_conn):
    a, b = FakeOpenAI(dimension=8).start(), FakeOpenAI(dimension=6).start()
    try:
        env = _env(tmp_path, db_url, a, b)
        loaded = _ok(run_pinlog(["presets", "load"], env))  # for both configured profiles
        assert f"profile {PROFILE_A}: inserted" in loaded and f"profile {PROFILE_B}: " in loaded
        lines = tmp_path / "notes.jsonl"
        lines.write_text("\n".join(json.dumps({
            "member": "alice", "place": {"name": f"place {i}", "external_place_id": f"p{i}",
                                         "lat": 37.5, "lng": 127.0},
            "context": _note(i)}, ensure_ascii=False) for i in range(1, N + 1)) + "\n")
        _ok(run_pinlog(["import", str(lines), "--wait"], env))
        listing = _ok(run_pinlog(["profiles"], env))
        assert PROFILE_A in listing and f"{N}/{N} (100%)" in listing

        # the build, SIGKILLed while its third batch is being embedded
        third = {_note(i) for i in range(2 * BATCH + 1, 3 * BATCH + 1)}
        b.hold_when = lambda texts: bool(third & set(texts))
        build = subprocess.Popen(PINLOG + ["profiles", "build", PROFILE_B, "--batch-size",
                                           str(BATCH)], env=env, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
        try:
            assert b.entered.wait(120), "the build never reached its third batch"
        finally:
            build.send_signal(signal.SIGKILL)
            build.wait(30)
        assert sync_conn.execute("SELECT count(*) FROM ai.context_embedding_shadow WHERE "
                                 "embedding_profile = %s", (PROFILE_B,)).fetchone()[0] == 2 * BATCH
        b.hold_when = None
        b.release.set()
        out = _ok(run_pinlog(["profiles", "build", PROFILE_B, "--batch-size", str(BATCH)], env))
        assert f"profile {PROFILE_B}: {N - 2 * BATCH} vectors embedded" in out
        assert f"{N}/{N} (100%)" in out.split(PROFILE_B, 2)[-1]
        embedded = _notes_embedded(b)
        twice = {t for t in embedded if embedded.count(t) > 1}
        assert set(embedded) == {_note(i) for i in range(1, N + 1)}
        assert twice <= third  # no duplicate model call beyond the batch in flight

        # activation: every replica (here: the next command) searches with B
        out = _ok(run_pinlog(["profiles", "activate", PROFILE_B], env))
        assert f"profile {PROFILE_B} is active (was {PROFILE_A}): {N} vectors switched" in out
        assert f"keywords re-judged with {PROFILE_B}'s presets: " in out
        queries_a, queries_b = a.embedded[_note(3)], b.embedded[_note(3)]
        found = json.loads(_ok(run_pinlog(["search", "--member", "alice", _note(3), "--json"],
                                          env)).strip().splitlines()[-1])
        # the query was embedded with B only
        assert (a.embedded[_note(3)], b.embedded[_note(3)]) == (queries_a, queries_b + 1)
        assert found["results"] and found["results"][0]["text"] == _note(3)
        listing = _ok(run_pinlog(["profiles"], env))
        assert "active" in listing.split(PROFILE_B, 1)[1].splitlines()[0]

        # the kept A is dropped
        out = _ok(run_pinlog(["profiles", "drop", PROFILE_A], env))
        assert f"profile {PROFILE_A} dropped: {N} vectors deleted" in out
        refused = run_pinlog(["profiles", "drop", PROFILE_B], env)
        assert refused.returncode == 1 and "is the active profile" in refused.stderr
    finally:
        a.stop()
        b.stop()
