"""A cancelled task stops, even when the cancellation arrives inside a database statement: every
stop path (the work queue's workers, the take-over records, the heartbeats, the loops of
:mod:`pinlog.db.background`) cancels a task and then waits for it, so a swallowed cancellation
hangs the process's shutdown for good.

The dependency floor is what makes this hold (``psycopg>=3.3.7``, pyproject.toml): on Python 3.11,
psycopg before 3.3.6 waited on its socket through ``asyncio.wait_for``, which drops a cancellation
that arrives as the wait completes (CPython gh-86296, fixed in 3.12). At ``psycopg==3.1.18`` (the
old floor) about one cancel in five of this test's was lost (3.3.6 with SQLAlchemy 2.0.25: about
one in 1,000 on busy cores), and the lowest-versions tier hung for 300 s in
``test_what_an_ai_process_accepted_over_http_is_released_when_it_stops``. The compatibility tier
runs this test at the floor (``.ci/compat``)."""

from __future__ import annotations

import asyncio
import random

from sqlalchemy import text

TRIES = 200


async def test_a_task_cancelled_inside_a_statement_ends_cancelled(engine):
    """Each try cancels a one-statement task at a different point of its round trip (seeded
    offsets of 0–5 ms: before the checkout, in the statement, in the commit, after); whatever the
    point, the task must end cancelled — never finish its work as if nothing had been asked.
    The offsets only spread the points; no outcome depends on them."""
    offsets = random.Random(25).choices(range(0, 5000), k=TRIES)

    async def one_statement() -> None:
        async with engine.begin() as conn:
            await conn.execute(text("SELECT 1"))

    lost = []
    for n, micros in enumerate(offsets):
        task = asyncio.create_task(one_statement())
        await asyncio.sleep(micros / 1e6)
        if task.done():  # finished before the cancel: nothing asked, nothing to check
            continue
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        if not task.cancelled():
            lost.append(n)
    assert lost == [], f"{len(lost)} of {TRIES} cancellations were swallowed"
