"""The mutation catalogue follows the code (runs in every normal test session, no database).

A snippet that is no longer found — a rule moved or was rewritten — or a named test that no
longer exists fails here first; ``python -m tests.mutations`` then proves each mutation is caught.
"""

from __future__ import annotations

from pathlib import Path

from tests.mutations.__main__ import apply, copy_tree, problems
from tests.mutations.catalogue import MUTATIONS, Mutation


def test_every_snippet_and_test_of_the_catalogue_exists():
    assert problems(MUTATIONS) == []


def test_the_catalogue_covers_the_audited_rules():
    names = {m.name for m in MUTATIONS}
    for op in ("create_record", "add_context", "edit_context"):
        assert f"dispatch_inside_transaction_{op}" in names
    paths = {m.path.rsplit("/", 1)[-1] for m in MUTATIONS}
    assert {"state.sql", "rescan.sql", "search.sql", "core.sql", "services.py", "candidates.py",
            "auth.py"} <= paths
    assert len(MUTATIONS) >= 12


def test_the_catalogue_covers_the_families_of_issue_30():
    """Relevance and the lexical channel, degenerate vectors, NFC, the migration and adoption
    locks and lock_timeout, the search deadline and lane, the keyword category rule, the 503
    middleware and /metrics, process settings, dead ends and busy pacing: each has mutations."""
    files = {m.path.rsplit("/", 1)[-1] for m in MUTATIONS}
    assert {"relevance.py", "vectors.py", "text.py", "contracts.py", "migrate.py", "runtime.py",
            "batching.py", "similarity.py", "app.py", "process_settings.sql", "rescan.py"} <= files
    names = {m.name for m in MUTATIONS}
    assert {"lexical_notes_keep_deleted_contexts", "lexical_notes_of_every_member",
            "lexical_places_of_every_member", "lexical_places_keep_deleted_records",
            "withdrawal_hides_only_active_contexts_embeddings", "lexical_terms_of_the_raw_query",
            "migrate_inspects_before_the_migration_lock", "adopt_alters_before_the_migration_lock",
            "adopt_waits_without_lock_timeout", "search_without_deadline",
            "search_statement_uses_the_multi_word_floor_for_one_word",
            "core_process_records_no_processing_expiry", "dead_end_not_finalized",
            "busy_resend_given_up_at_once"} <= names


def test_a_missing_snippet_or_test_is_reported(tmp_path: Path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.sql").write_text("SELECT 1 FOR UPDATE SKIP LOCKED\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_a.py").write_text("async def test_locks():\n    pass\n")
    good = Mutation("m", "r", "src/a.sql", "SKIP LOCKED", "", ("tests/test_a.py::test_locks",))
    assert problems([good], tmp_path) == []
    gone = Mutation("m", "r", "src/a.sql", "NOWAIT", "", ("tests/test_a.py::test_gone[x]",))
    assert problems([good, gone], tmp_path) == [
        "m: duplicate name",
        "m: snippet found 0 times in src/a.sql, expected 1",
        "m: no test function 'test_gone' in tests/test_a.py",
    ]


def test_mutations_apply_to_a_copy_never_to_the_working_tree(tmp_path: Path):
    (tmp_path / "root" / "src").mkdir(parents=True)
    (tmp_path / "root" / "tests").mkdir()
    (tmp_path / "root" / "pyproject.toml").write_text("")
    original = "SELECT 1 FROM t FOR UPDATE SKIP LOCKED\n"
    (tmp_path / "root" / "src" / "a.sql").write_text(original)
    tree = copy_tree(tmp_path / "copy", tmp_path / "root")
    apply(Mutation("m", "r", "src/a.sql", " SKIP LOCKED", "", ("x",)), tree)
    assert (tree / "src" / "a.sql").read_text() == "SELECT 1 FROM t FOR UPDATE\n"
    assert (tmp_path / "root" / "src" / "a.sql").read_text() == original
