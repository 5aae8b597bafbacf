"""Engines and URLs (SQLAlchemy 2 async on psycopg 3).

``resolve_database_url`` is the one place that decides which server is used: the external
``PINLOG_DATABASE_URL`` or the embedded server of ``PINLOG_DATA_DIR`` (SPEC §13).
"""

from __future__ import annotations

import select
import time
import weakref
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from sqlalchemy import event, exc, text
from sqlalchemy.engine import Dialect, make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import ConnectionPoolEntry

from pinlog.db.embedded import EmbeddedDatabase
from pinlog.settings import Settings

_embedded: dict[str, EmbeddedDatabase] = {}


def embedded_for(settings: Settings) -> EmbeddedDatabase:
    """The (cached) embedded server handle of ``settings.data_dir``."""
    key = str(settings.data_dir.expanduser().resolve())
    if key not in _embedded:
        _embedded[key] = EmbeddedDatabase(settings.data_dir)
    return _embedded[key]


def resolve_database_url(settings: Settings, *, keep_running: bool = False) -> str:
    """A libpq URL (``postgresql://…``) for the configured database.

    Starts or joins the embedded server when no external URL is configured.
    """
    if settings.database_url is not None:
        return settings.database_url.get_secret_value()
    return embedded_for(settings).start(keep_running=keep_running)


def sqlalchemy_url(url: str) -> str:
    """Turn a libpq URL into a SQLAlchemy URL for the psycopg 3 driver."""
    parsed = make_url(url)
    if parsed.drivername in ("postgresql", "postgres", "postgresql+psycopg2", "postgresql+asyncpg"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed.render_as_string(hide_password=False)


def redacted_url(url: str) -> str:
    """The URL without its password, safe to print (never log the full URL: SPEC §6).

    Works on the raw string (``user:password@`` → ``user@``) so it never depends on a URL
    library's idea of "hidden"; an unparsable URL is replaced as a whole.
    """
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    userinfo, _, hostinfo = parts.netloc.rpartition("@")
    user = userinfo.split(":", 1)[0]
    netloc = f"{user}@{hostinfo}" if user else hostinfo
    return urlunsplit(parts._replace(netloc=netloc))


def create_engine(url: str, *, pool_size: int = 10,
                  clock: Callable[[], float] = time.monotonic) -> AsyncEngine:
    """An async engine for ``url`` (libpq or SQLAlchemy form).

    ``pool_size`` bounds concurrent connections of this process; workers never exceed it.
    A pooled connection is checked before it is handed out only when it may be dead
    (:func:`watch_idle_connections`); ``clock`` (seconds, monotonic) is the hook tests move.
    """
    engine = create_async_engine(
        sqlalchemy_url(url),
        pool_size=pool_size,
        max_overflow=0,
        pool_timeout=30,
        # statement parameters (note text is personal data, SPEC §6) never reach an
        # exception message, hence never a log line or a traceback
        hide_parameters=True,
    )
    watch_idle_connections(engine, clock=clock)
    return engine


_AUTOCOMMIT: weakref.WeakKeyDictionary[AsyncEngine, AsyncEngine] = weakref.WeakKeyDictionary()


def autocommit(engine: AsyncEngine) -> AsyncEngine:
    """``engine`` with ``isolation_level="AUTOCOMMIT"`` (one proxy per engine, cached: ~30 µs
    to make). For reads of one statement each, or several that need no common snapshot (READ
    COMMITTED gives each statement its own anyway): no BEGIN and no ROLLBACK round trips — a
    checkout and one statement take ~0.5 ms here instead of ~1.0 (2 cores, embedded server;
    issue 28: a search makes four such checkouts)."""
    proxy = _AUTOCOMMIT.get(engine)
    if proxy is None:
        proxy = _AUTOCOMMIT[engine] = engine.execution_options(isolation_level="AUTOCOMMIT")
    return proxy


#: A pooled connection back in the pool for at least this long (seconds) is pinged before it
#: is handed out again; one used more recently is pinged only when its socket says the server
#: closed it (:func:`watch_idle_connections`).
PING_AFTER_IDLE = 10.0

_IDLE_SINCE = "pinlog_idle_since"


def watch_idle_connections(engine: AsyncEngine, *, clock: Callable[[], float] = time.monotonic,
                           idle: float = PING_AFTER_IDLE) -> None:
    """Hand out only live connections, with a round trip only when one may be dead.

    SQLAlchemy's ``pool_pre_ping`` sends ``SELECT 1`` before every checkout: one more round
    trip for each short step (0.53 per context in a batch backfill, one per statement group of
    every search; issues 25, 28) on a connection that, between two steps of the same process, is
    almost always alive. Here a connection is pinged at checkout only when it sat in the pool
    for ``idle`` seconds or more (by ``clock``), or when its socket has something to read
    although no statement is running — the server closed it (a restart,
    ``pg_terminate_backend``, an idle timeout) or sent a notice — or cannot be inspected. A
    ping that fails with a disconnect makes the pool drop every connection older than now and
    hand out a new one (``InvalidatePoolError``, as a failed pre-ping does); any other error of
    the ping propagates. A connection that has just been opened is never pinged. A failure the
    socket does not show (a half-open TCP connection, within ``idle`` seconds of its last use)
    surfaces as the statement's own error instead of being replaced first: the pipeline runs
    the step again (:func:`is_database_unreachable`), the API answers 503
    (:func:`is_database_unavailable`).
    """
    pool = engine.sync_engine.pool
    dialect = engine.sync_engine.dialect

    @event.listens_for(pool, "checkin")
    def _returned(dbapi_connection: Any, record: ConnectionPoolEntry) -> None:
        record.info[_IDLE_SINCE] = clock()

    @event.listens_for(pool, "checkout")
    def _lent(dbapi_connection: Any, record: ConnectionPoolEntry, proxy: Any) -> None:
        since = record.info.get(_IDLE_SINCE)
        if since is None:  # opened for this checkout (the record's info is cleared on connect)
            return
        if clock() - since < idle and not _may_be_closed(dbapi_connection):
            return
        _ping(dialect, dbapi_connection)


def _may_be_closed(dbapi_connection: Any) -> bool:
    """True when an idle connection's socket is readable or in error (the server closed it or
    sent something), or the socket cannot be inspected; False for a quiet open socket."""
    import psycopg  # loaded already: the connection is psycopg's (kept out of import time)

    try:
        socket = dbapi_connection.driver_connection.pgconn.socket  # closed: OperationalError
        poller = select.poll()
        poller.register(socket, select.POLLIN | select.POLLPRI)
        return bool(poller.poll(0))
    except (AttributeError, OSError, ValueError, psycopg.Error):  # no socket: the ping decides
        return True


def _ping(dialect: Dialect, dbapi_connection: Any) -> None:
    """``SELECT 1`` on ``dbapi_connection``; a disconnect raises ``InvalidatePoolError`` (the pool
    replaces the connection and every older one), any other error propagates."""
    try:
        dialect.do_ping(dbapi_connection)
    except dialect.loaded_dbapi.Error as err:
        if dialect.is_disconnect(err, dbapi_connection, None):
            raise exc.InvalidatePoolError() from err
        raise


#: SQLSTATE classes of an unavailable database: connection exception, insufficient resources
#: (too many connections), operator intervention (shutdown), system error (SPEC §6).
UNAVAILABLE_SQLSTATE_CLASSES = ("08", "53", "57", "58")


async def ping(engine: AsyncEngine) -> None:
    """``SELECT 1`` on a pooled connection (``/metrics`` of a process without core). Raises
    whatever the database raises."""
    async with engine.connect() as conn:
        await conn.execute(text("SELECT 1"))


def is_database_unavailable(exc: BaseException) -> bool:
    """True when ``exc`` (or an exception it wraps) means the database cannot be reached or is
    shutting down — the caller should answer 503 and let the client retry, not 500.

    Recognised: SQLAlchemy ``OperationalError``/``InterfaceError``/pool ``TimeoutError``, a
    DBAPI error whose connection was invalidated, psycopg ``OperationalError``, SQLSTATE classes
    08/53/57/58, and OS-level connection errors.
    """
    import psycopg
    from sqlalchemy import exc as sa_exc

    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, (sa_exc.OperationalError, sa_exc.InterfaceError,
                                sa_exc.TimeoutError, psycopg.OperationalError,
                                psycopg.InterfaceError, ConnectionError)):
            return True
        if isinstance(current, sa_exc.DBAPIError) and current.connection_invalidated:
            return True
        sqlstate = getattr(current, "sqlstate", None) or getattr(
            getattr(current, "orig", None), "sqlstate", None)
        if isinstance(sqlstate, str) and sqlstate[:2] in UNAVAILABLE_SQLSTATE_CLASSES:
            return True
        current = getattr(current, "orig", None) or current.__cause__ or current.__context__
    return False


#: SQLSTATEs of a database that cannot be reached right now (narrower than "unavailable"):
#: connection exceptions (class 08), too many connections, and the server shutting down or
#: starting up (admin_shutdown, crash_shutdown, cannot_connect_now).
UNREACHABLE_SQLSTATES = ("53300", "57P01", "57P02", "57P03")


def is_database_unreachable(exc: BaseException) -> bool:
    """True when ``exc`` (or an exception it wraps) means the connection to the database failed
    or was lost — the same statement may well succeed once the database is back. Narrower than
    :func:`is_database_unavailable`: a lock timeout, a serialization failure, a cancelled
    statement or an exhausted pool (the database answered) are not.

    Recognised: SQLSTATE class 08 and :data:`UNREACHABLE_SQLSTATES`; a psycopg
    ``OperationalError``/``InterfaceError`` without SQLSTATE (refused or broken connection); a
    DBAPI error whose connection was invalidated; OS-level connection errors.
    """
    import psycopg
    from sqlalchemy import exc as sa_exc

    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ConnectionError):
            return True
        if isinstance(current, sa_exc.DBAPIError) and current.connection_invalidated:
            return True
        sqlstate = getattr(current, "sqlstate", None)
        if isinstance(sqlstate, str):
            return sqlstate[:2] == "08" or sqlstate in UNREACHABLE_SQLSTATES
        if isinstance(current, (psycopg.OperationalError, psycopg.InterfaceError)):
            return True  # no SQLSTATE: the server never answered
        current = getattr(current, "orig", None) or current.__cause__ or current.__context__
    return False
