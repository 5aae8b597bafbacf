"""The rescan SQL file: one expiry predicate shared by claim and finalizer (SPEC §7.2, §7.3)."""

from __future__ import annotations

import re
from datetime import timedelta
from importlib import resources

import pytest

from pinlog.core.rescan import SqlStatements, statements
from pinlog.settings import SettingsError, load_settings
from tests.sqltext import sql_code

SOURCE = resources.files("pinlog.core").joinpath("rescan.sql").read_text(encoding="utf-8")
MIGRATION = resources.files("pinlog.db.migrations.versions").joinpath(
    "0001_initial_schema.py").read_text(encoding="utf-8")

# Every text assertion below runs on the SQL without its comments (tests/sqltext.py): the
# statements' comments name their rules ("FOR UPDATE SKIP LOCKED …"), so a check on the raw text
# could never fail.
_code = sql_code


def test_the_expiry_predicate_is_written_once_and_shared_by_claim_and_finalizer():
    code = _code(SOURCE)
    q = statements()
    fragment = _code(q.raw("expired"))
    # only inside `expired` — and `next_expiry`, the read-only outlook that computes *when* a
    # row becomes expired (issue 13; tests/integration/core/rescan/test_recovery_speed.py checks
    # that both agree for every status pair)
    outlook = _code(q.raw("next_expiry"))
    for param in (":pending_expiry", ":processing_expiry"):
        assert code.count(param) == fragment.count(param) + outlook.count(param)
        assert fragment.count(param) > 0
    for name in ("claim", "finalize_exhausted"):
        assert "{expired}" in _code(q.raw(name))
        assert "pending_expiry" not in _code(q.raw(name))
    expired = _code(q.sql("expired")).strip()
    claim, finalize = _code(q.sql("claim")), _code(q.sql("finalize_exhausted"))
    assert expired in claim and expired in finalize
    # guarded: each appears in the lock query and again in the UPDATE's WHERE
    assert claim.count(expired) == 2
    assert finalize.count(expired) == 2


def test_claim_orders_by_exactly_the_partial_index_expression_and_skips_locked_rows():
    index = re.search(r"context_ai_state_rescan_idx\s+ON ai\.context_ai_state \(\((.+?)\)\)\s+WHERE (.+?);",
                      MIGRATION, re.S)
    assert index is not None
    expression, predicate = index.group(1), " ".join(index.group(2).split())
    q = statements()
    for name in ("claim", "finalize_exhausted", "finalize_dead_ends"):
        sql = _code(q.sql(name))
        assert f"ORDER BY {expression}\n" in sql
        assert re.search(r"\bLIMIT :batch_size\s+FOR UPDATE SKIP LOCKED\s*\)", sql), name
        assert predicate in " ".join(sql.split())  # the index predicate, verbatim
    assert "updated_at = now()" not in _code(q.sql("claim"))  # SPEC §7.3


def test_finalizer_is_a_whitelist():
    sql = " ".join(_code(statements().sql("finalize_exhausted")).split())
    for stage in ("embedding_status", "keyword_status"):
        assert (f"{stage} = CASE WHEN s.{stage} IN ('PENDING','PROCESSING') "
                f"THEN 'FAILED' ELSE s.{stage} END") in sql


def test_unknown_statement_or_fragment_is_an_error():
    with pytest.raises(KeyError):
        statements().sql("no_such_fragment")
    assert isinstance(statements(), SqlStatements)


@pytest.mark.parametrize("field,value,message", [
    ("rescan_interval", timedelta(0), "PINLOG_RESCAN_INTERVAL"),
    ("pending_expiry", timedelta(seconds=-1), "PINLOG_PENDING_EXPIRY"),
    ("max_retries", -1, "PINLOG_MAX_RETRIES"),
    ("rescan_batch_size", 0, "PINLOG_RESCAN_BATCH_SIZE"),
    ("rescan_concurrency", 0, "PINLOG_RESCAN_CONCURRENCY"),
])
def test_rescan_settings_are_validated(tmp_path, field, value, message):
    """The SPEC §7.1 parameters are checked once, when the settings load (the rescan's config
    takes them as they are)."""
    with pytest.raises(SettingsError, match=message):
        load_settings(data_dir=tmp_path, **{field: value})


def test_default_settings_are_valid(tmp_path):
    assert load_settings(data_dir=tmp_path).rescan_batch_size >= 1


def test_status_reuses_the_rescan_fragments_verbatim():
    """`pinlog status` counts unfinished rows with the rescan's own predicate and age (written
    once in rescan.sql), so its reads stay on the partial index."""
    from pinlog.core.status import _q as status_q

    rescan = statements()
    unfinished = _code(rescan.sql("unfinished")).strip()
    age = _code(rescan.sql("age")).strip()
    for name in ("unfinished_by_retry_count", "unfinished_summary"):
        assert "{unfinished}" in _code(status_q.raw(name))
        assert unfinished in _code(status_q.sql(name))
        assert "{" not in _code(status_q.sql(name))
    assert age in _code(status_q.sql("unfinished_summary"))
    assert status_q.names() == ["state_counts_maintained", "state_counts",
                                "compact_state_counts_lock", "compact_state_counts",
                                "rows_per_stage_status", "unfinished_by_retry_count",
                                "unfinished_summary", "recent_failures", "anomalies"]
    assert unfinished in status_q.sql("anomalies")  # half_cancelled counts on the same predicate
