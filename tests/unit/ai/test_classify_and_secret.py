"""Failure classification of the pipeline (SPEC §6) and the secret check of the route (§5.1)."""

from __future__ import annotations

import psycopg
import pytest
from sqlalchemy import exc as sa_exc

from pinlog.ai.api import secret_ok
from pinlog.ai.errors import PermanentModelError, TransientModelError
from pinlog.ai.pipeline import classify


@pytest.mark.parametrize("error,expected", [
    (TransientModelError("upstream 503"), "transient"),
    (PermanentModelError("upstream 400"), "permanent"),
    (TimeoutError(), "transient"),
    (psycopg.errors.SerializationFailure("x"), "transient"),        # 40001
    (psycopg.errors.DeadlockDetected("x"), "transient"),            # 40P01
    (psycopg.errors.LockNotAvailable("x"), "transient"),            # 55P03
    (psycopg.errors.TooManyConnections("x"), "transient"),          # 53300
    (psycopg.errors.AdminShutdown("x"), "transient"),               # 57P01
    (psycopg.OperationalError("connection refused"), "transient"),  # no SQLSTATE: connection
    (psycopg.errors.UniqueViolation("x"), "permanent"),             # 23505
    (psycopg.errors.UndefinedTable("x"), "permanent"),              # 42P01
    (ValueError("bug"), "internal"),
])
def test_classify(error, expected):
    assert classify(error)[0] == expected


def test_classify_unwraps_sqlalchemy_dbapi_errors():
    wrapped = sa_exc.OperationalError("stmt", {}, psycopg.errors.LockNotAvailable("x"))
    assert classify(wrapped) == ("transient", "database error 55P03")
    wrapped = sa_exc.IntegrityError("stmt", {}, psycopg.errors.UniqueViolation("dup"))
    assert classify(wrapped) == ("permanent", "database error 23505")


def test_classify_never_carries_the_database_message():
    wrapped = sa_exc.IntegrityError("stmt", {}, psycopg.errors.UniqueViolation("secret text here"))
    assert "secret" not in classify(wrapped)[1]


def test_secret_ok_accepts_any_configured_secret_only():
    assert secret_ok("b", ["a", "b"])
    assert secret_ok("a", ["a", "b"])
    assert not secret_ok("c", ["a", "b"])
    assert not secret_ok(None, ["a"]) and not secret_ok("", ["a"]) and not secret_ok("a", [])
    assert not secret_ok("ab", ["a"])
    assert secret_ok("비밀", ["비밀"])


def test_vector_text_round_trips_float32_exactly():
    import numpy as np

    from pinlog.ai.vectors import parse_pgvector as _parse_vector
    from pinlog.ai.vectors import to_pgvector as _vector_text

    vector = (np.random.default_rng(1).random(384) - 0.5).astype(np.float32)
    text = _vector_text(vector)
    assert text.startswith("[") and text.endswith("]")
    assert np.array_equal(_parse_vector(text), vector)
