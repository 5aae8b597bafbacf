"""Diagnostics for a hang (a plugin of the suite): a test whose call phase is still running after
:data:`DUMP_AFTER` seconds prints the stack of every task of each running event loop to stderr,
so a CI log shows where an async test waits (pytest's ``faulthandler_timeout`` prints the
threads: an event loop idle in ``select`` hides its tasks). Reads only; changes no outcome (the
300 s ``timeout`` still fails the test)."""

from __future__ import annotations

import asyncio
import gc
import sys
import threading
from collections.abc import Iterator

import pytest

#: Seconds into a test's call phase before its tasks are printed (below pytest's timeout).
DUMP_AFTER = 230.0


def _dump(nodeid: str) -> None:
    loops = [o for o in gc.get_objects() if isinstance(o, asyncio.AbstractEventLoop)
             and o.is_running()]
    print(f"\n=== {nodeid} still running after {DUMP_AFTER:g} s: tasks of {len(loops)} "
          "running event loop(s) ===", file=sys.stderr)
    for loop in loops:
        try:
            tasks = list(asyncio.all_tasks(loop))
        except RuntimeError:  # the set changed while it was read: once more
            tasks = list(asyncio.all_tasks(loop))
        for task in tasks:
            print(f"--- task {task.get_name()}", file=sys.stderr)
            task.print_stack(limit=25, file=sys.stderr)
    sys.stderr.flush()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    timer = threading.Timer(DUMP_AFTER, _dump, args=(item.nodeid,))
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
