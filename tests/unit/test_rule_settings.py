"""The rule-relevant settings each process records for the replica-agreement check (issue 16
#7; ``pinlog.composition.replica_rules``): which ones, in seconds, never a secret. No
database: recording and comparing them is ``tests/integration/test_process_settings.py``."""

from __future__ import annotations

from datetime import timedelta

from pinlog.composition import replica_rules
from tests.conftest import TEST_JWT_SECRET, TEST_SECRET, config_of, make_settings


def test_rule_settings_record_no_secret(tmp_path):
    values = replica_rules(config_of(make_settings(tmp_path)), ("core", "ai", "rescan")).values()
    assert set(values) == {"pending_expiry", "processing_expiry", "max_retries",
                           "embedding_timeout", "llm_timeout", "model_attempts", "backoff_base",
                           "backoff_cap", "embedding_profile"}
    assert values["processing_expiry"] == timedelta(seconds=600).total_seconds()
    assert TEST_SECRET not in repr(values) and TEST_JWT_SECRET not in repr(values)
