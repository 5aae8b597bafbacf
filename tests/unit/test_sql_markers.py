"""The SQL loader resolves markers in SQL lines only (pinlog.db.sql): a comment that names the
fragment a statement uses stays a comment — a multi-line fragment spliced into a comment line
would leak SQL (and comment text) out of it."""

from __future__ import annotations

from pinlog.ai import state
from pinlog.states import Stage


def test_a_comment_naming_a_fragment_stays_as_written_and_the_sql_gets_the_fragment():
    sql = state.Q.sql("start_stage_batch", Stage.KEYWORD)
    comments = [line for line in sql.splitlines() if line.lstrip().startswith("--")]
    assert any("{@startable}" in line for line in comments)
    code = [line for line in sql.splitlines() if not line.lstrip().startswith("--")]
    assert not any("{" in line for line in code)
    assert sum("s.embedding_status = 'COMPLETED'" in line for line in code) == 2  # pick + UPDATE


def test_a_stage_fragment_marker_splices_the_stages_own_fragment():
    """``{@startable}`` is ``embedding_startable`` for the embedding stage (no embedding
    COMPLETED condition) and ``keyword_startable`` for the keyword stage (pinlog.db.sql)."""
    for stage, completed in ((Stage.EMBEDDING, 0), (Stage.KEYWORD, 2)):
        code = state.Q.native("start_stage_batch", stage)
        assert code.count("s.embedding_status = 'COMPLETED'") == completed, stage
        assert code.count(f"s.{stage.value} = 'PENDING'") == 2, stage  # pick + UPDATE


def test_every_ai_statement_resolves_to_sql_without_markers_or_comment_text():
    for name in state.Q.names():
        for stage in Stage:
            native = state.Q.native(name, stage)
            assert "{" not in native and "Rule:" not in native and "SPEC §" not in native, name
