"""``last_error`` is cleared when a stage completes; the event rows keep the history (issue:
last_error stays set on rows that later COMPLETED)."""

from __future__ import annotations

from pinlog.ai.errors import TransientModelError
from tests.integration.ai.support import events, insert_state, read_state, request


def _age(sync_conn, context_id: int, seconds: int = 3600) -> None:
    """Make the PROCESSING stage older than the processing expiry (a re-sent request re-claims)."""
    sync_conn.execute("UPDATE ai.context_ai_state SET updated_at = now() - make_interval(secs => %s)"
                      " WHERE context_id = %s", (seconds, context_id))


def _error_columns(sync_conn, context_id: int):
    return sync_conn.execute("SELECT last_error, last_error_at FROM ai.context_ai_state "
                             "WHERE context_id = %s", (context_id,)).fetchone()


async def test_embedding_error_then_completion_clears_last_error(pipeline, sync_conn, provider):
    insert_state(sync_conn, 1)
    provider.fail_next(TransientModelError, times=3, message="upstream 503")
    assert (await pipeline.run(request(1))).embedding == "transient"
    assert _error_columns(sync_conn, 1)[0] == "embedding transient: upstream 503"
    _age(sync_conn, 1)
    result = await pipeline.run(request(1))
    assert (result.embedding, result.keyword) == ("completed", "completed")
    assert _error_columns(sync_conn, 1) == (None, None)
    reasons = [e[4] for e in events(sync_conn, 1)]
    assert "embedding transient: upstream 503" in reasons  # the history stays


async def test_keyword_error_then_completion_clears_last_error(pipeline, sync_conn, judge):
    insert_state(sync_conn, 1)
    judge.fail_next(TransientModelError, message="upstream 429")
    result = await pipeline.run(request(1))
    assert (result.embedding, result.keyword) == ("completed", "transient")
    assert _error_columns(sync_conn, 1)[0] == "keyword transient: upstream 429"
    _age(sync_conn, 1)
    assert (await pipeline.run(request(1))).keyword == "completed"
    row = read_state(sync_conn, 1)
    assert (row.embedding_status, row.keyword_status) == ("COMPLETED", "COMPLETED")
    assert _error_columns(sync_conn, 1) == (None, None)
    assert "keyword transient: upstream 429" in [e[4] for e in events(sync_conn, 1)]


async def test_embedding_completion_keeps_the_error_of_a_failed_keyword_stage(pipeline, sync_conn):
    """A keyword stage that is FAILED keeps its explanation (only reachable by a manual fix or an
    adopted database, but the rule is in the statement)."""
    insert_state(sync_conn, 1, "PENDING", "FAILED")
    sync_conn.execute("UPDATE ai.context_ai_state SET last_error = 'keyword permanent: x', "
                      "last_error_at = now() WHERE context_id = 1")
    assert (await pipeline.run(request(1))).embedding == "completed"
    assert _error_columns(sync_conn, 1)[0] == "keyword permanent: x"
