"""The pool hands out live connections with a round trip only when one may be dead
(``pinlog.db.engine.watch_idle_connections``, issue 25: the pre-ping sent ``SELECT 1`` before every
checkout, 0.53 per context of a batch backfill). Real PostgreSQL; the idle time is moved by the
engine's clock hook, the server closes a connection through ``pg_terminate_backend``."""

from __future__ import annotations

import select
from contextlib import AsyncExitStack
from types import SimpleNamespace

import psycopg
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from pinlog.db.engine import PING_AFTER_IDLE, _may_be_closed, create_engine


class Clock:
    """The engine's monotonic clock, moved by hand (seconds)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def pool_size() -> int:
    return 1


@pytest.fixture
async def pings(monkeypatch: pytest.MonkeyPatch, migrated_db_url: str, clock: Clock,
                pool_size: int):
    """``(engine, calls)``: an engine of ``pool_size`` connections on ``clock`` whose pings are
    counted."""
    engine = create_engine(migrated_db_url, pool_size=pool_size, clock=clock)
    dialect = engine.sync_engine.dialect
    calls: list[object] = []
    ping = dialect.do_ping

    def counted(dbapi_connection: object) -> bool:
        calls.append(dbapi_connection)
        return ping(dbapi_connection)

    monkeypatch.setattr(dialect, "do_ping", counted)
    try:
        yield engine, calls
    finally:
        await engine.dispose()


def terminate(url: str, pid: int, fd: int) -> None:
    """End backend ``pid`` from another session and wait for the event itself (not a time
    margin): the pooled connection's socket ``fd`` reports the close."""
    with psycopg.connect(url, autocommit=True) as admin:
        assert admin.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone() == (True,)
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    assert poller.poll(30_000), "the server did not close the terminated connection"


async def backend(engine: AsyncEngine) -> tuple[int, int]:
    """``(backend pid, socket fd)`` of the pooled connection a checkout gets."""
    async with engine.connect() as conn:
        pid = (await conn.execute(text("SELECT pg_backend_pid()"))).scalar_one()
        raw = await conn.get_raw_connection()
        return int(pid), raw.driver_connection.pgconn.socket


async def test_a_connection_used_moments_ago_is_not_pinged_one_idle_long_enough_is(pings, clock):
    engine, calls = pings
    first, _ = await backend(engine)
    assert calls == []  # just opened: nothing to check
    for _ in range(3):
        clock.now += PING_AFTER_IDLE / 2  # back in the pool for less than the idle time
        assert (await backend(engine))[0] == first
    assert calls == []

    clock.now += PING_AFTER_IDLE
    assert (await backend(engine))[0] == first  # pinged, alive: the same connection
    assert len(calls) == 1


async def test_a_connection_the_server_closed_is_replaced_before_it_is_used(pings, clock,
                                                                         migrated_db_url):
    engine, calls = pings
    pid, fd = await backend(engine)
    terminate(migrated_db_url, pid, fd)

    # no time has passed on the engine's clock: only the socket says the connection is dead
    replacement, _ = await backend(engine)
    assert replacement != pid
    assert len(calls) == 1  # the one ping that found it closed; the new connection is not pinged


@pytest.mark.parametrize("pool_size", [2])
async def test_a_disconnect_found_by_a_ping_replaces_every_older_connection_too(
        pings, clock, migrated_db_url):
    engine, calls = pings

    async def both() -> set[int]:
        """The backend pids of the pool's two connections, both checked out at once."""
        async with AsyncExitStack() as stack:
            conns = [await stack.enter_async_context(engine.connect()) for _ in range(2)]
            return {int((await c.execute(text("SELECT pg_backend_pid()"))).scalar_one())
                    for c in conns}

    first = await both()
    assert len(first) == 2
    pid, fd = await backend(engine)  # the connection handed out first: the terminated one
    terminate(migrated_db_url, pid, fd)

    second = await both()  # the live one may be lent before the dead one is found
    assert pid not in second and len(calls) == 1
    # the other connection is alive, but older than the disconnect: replaced too at its next
    # checkout (as the pre-ping does: after a restart every pooled connection is dead)
    assert not (await both()) & first
    assert len(calls) == 1


async def test_a_ping_error_that_is_not_a_disconnect_propagates(pings, clock, monkeypatch):
    engine, _ = pings
    await backend(engine)
    dialect = engine.sync_engine.dialect

    def refused(dbapi_connection: object) -> bool:
        raise psycopg.errors.InsufficientPrivilege("permission denied")

    monkeypatch.setattr(dialect, "do_ping", refused)
    clock.now += PING_AFTER_IDLE  # idle long enough to be pinged
    with pytest.raises(Exception) as raised:
        await backend(engine)
    assert isinstance(raised.value, psycopg.errors.InsufficientPrivilege) or isinstance(
        raised.value.__cause__, psycopg.errors.InsufficientPrivilege), raised.value


async def test_a_connection_that_cannot_be_inspected_counts_as_maybe_closed(migrated_db_url):
    closed = await psycopg.AsyncConnection.connect(migrated_db_url)
    await closed.close()
    assert _may_be_closed(SimpleNamespace(driver_connection=closed))  # no socket any more
    assert _may_be_closed(SimpleNamespace(driver_connection=None))  # no socket to look at
    live = await psycopg.AsyncConnection.connect(migrated_db_url)
    try:
        assert not _may_be_closed(SimpleNamespace(driver_connection=live))  # quiet open socket
    finally:
        await live.close()
