"""Which database errors mean "unreachable" — the ones a job's step is run again for once the
database answers (SPEC §7.3.1; ``pinlog.db.engine.is_database_unreachable``) — and which do not
(the database answered: a lock timeout, a serialization failure, a cancelled statement, an
exhausted pool, a constraint violation)."""

from __future__ import annotations

import psycopg
import pytest
from psycopg import errors
from sqlalchemy import exc as sa_exc

from pinlog.db.engine import is_database_unreachable


def _wrapped(orig: BaseException, *, invalidated: bool = False) -> sa_exc.DBAPIError:
    """The SQLAlchemy error around a driver error, as a statement raises it."""
    return sa_exc.OperationalError("SELECT 1", {}, orig, connection_invalidated=invalidated)  # type: ignore[arg-type]


@pytest.mark.parametrize("error", [
    errors.AdminShutdown(), errors.CrashShutdown(), errors.CannotConnectNow(),
    errors.TooManyConnections(), errors.ConnectionException(), errors.ConnectionFailure(),
    psycopg.OperationalError("connection refused"),  # no SQLSTATE: the server never answered
    ConnectionRefusedError(), _wrapped(errors.AdminShutdown()),
    _wrapped(psycopg.OperationalError("server closed the connection unexpectedly")),
    _wrapped(errors.LockNotAvailable(), invalidated=True),
], ids=repr)
def test_lost_or_refused_connections_are_unreachable(error):
    assert is_database_unreachable(error)


@pytest.mark.parametrize("error", [
    errors.LockNotAvailable(), errors.SerializationFailure(), errors.QueryCanceled(),
    errors.UniqueViolation(), _wrapped(errors.LockNotAvailable()),
    sa_exc.TimeoutError("QueuePool limit reached"), ValueError("a bug"),
], ids=repr)
def test_an_answering_database_is_not_unreachable(error):
    assert not is_database_unreachable(error)
