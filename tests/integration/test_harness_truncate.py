"""The test harness itself: a transaction an earlier test leaked fails the next test at once,
with the sessions named, instead of hanging every later test (tests/conftest.py truncate_all)."""

from __future__ import annotations

import psycopg
import pytest
from tests import conftest


def test_a_leaked_transaction_is_reported_and_ended(db_url, monkeypatch):
    monkeypatch.setattr(conftest, "TRUNCATE_LOCK_TIMEOUT", "200ms")
    leak = psycopg.connect(db_url)
    leak.execute("SELECT count(*) FROM core.member")  # AccessShareLock held in a transaction
    with pytest.raises(RuntimeError, match="an earlier test left a transaction"):
        conftest.truncate_all(db_url)
    conftest.truncate_all(db_url)  # the leak is ended: the next one passes
    with pytest.raises(psycopg.OperationalError):
        leak.execute("SELECT 1")
