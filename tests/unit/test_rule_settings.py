"""The rule-relevant settings each process records for the replica-agreement check (issue 16
#7; ``pinlog.db.process_settings.rule_settings``): which ones, in seconds, never a secret. No
database: recording and comparing them is ``tests/integration/test_process_settings.py``."""

from __future__ import annotations

from datetime import timedelta

from pinlog.db.process_settings import rule_settings
from tests.conftest import TEST_JWT_SECRET, TEST_SECRET, make_settings


def test_rule_settings_record_no_secret(tmp_path):
    values = rule_settings(make_settings(tmp_path), ("core", "ai", "rescan"))
    assert set(values) == {"pending_expiry", "processing_expiry", "max_retries",
                           "embedding_timeout", "llm_timeout", "model_attempts", "backoff_base",
                           "backoff_cap", "embedding_profile"}
    assert values["processing_expiry"] == timedelta(seconds=600).total_seconds()
    assert TEST_SECRET not in repr(values) and TEST_JWT_SECRET not in repr(values)
