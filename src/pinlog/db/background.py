"""Background loop tasks: stopping one (the rescan loop, the retention loop) and running a step
periodically (heartbeats, the state-count compaction, the profile roles' re-read): one way for
all."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable


async def every(seconds: float, step: Callable[[], Awaitable[object]], *, failure: str,
                log: logging.Logger) -> None:
    """Run ``step`` every ``seconds`` (the first time after one interval) until cancelled. A
    failed step is logged as WARNING ``failure`` with its error class only (never its message:
    it may carry data) and tried again at the next tick; cancellation ends the loop."""
    while True:
        await asyncio.sleep(seconds)
        try:
            await step()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - try again at the next tick
            log.warning(failure, extra={"error_class": type(exc).__name__})


async def stop_task(task: asyncio.Task[None] | None, stopping: asyncio.Event,
                    grace: float) -> None:
    """Set ``stopping`` and give ``task`` ``grace`` seconds to end by itself (a loop checks the
    event between rounds and batches), then cancel it and wait for it. Nothing to do for None.
    If the caller is cancelled meanwhile, the task is cancelled too."""
    if task is None:
        return
    stopping.set()
    try:
        async with asyncio.timeout(grace):
            await asyncio.shield(task)
    except (TimeoutError, asyncio.TimeoutError):
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
    except asyncio.CancelledError:
        task.cancel()
        raise
