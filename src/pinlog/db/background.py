"""Stopping a background loop task (the rescan loop, the retention loop): one way for all."""

from __future__ import annotations

import asyncio


async def stop_task(task: asyncio.Task[None] | None, stopping: asyncio.Event,
                    grace: float) -> None:
    """Set ``stopping`` and give ``task`` ``grace`` seconds to end by itself (a loop checks the
    event between rounds and batches), then cancel it and wait for it. Nothing to do for None.
    If the caller is cancelled meanwhile, the task is cancelled too."""
    if task is None:
        return
    stopping.set()
    try:
        await asyncio.wait_for(asyncio.shield(task), timeout=grace)
    except (TimeoutError, asyncio.TimeoutError):
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
    except asyncio.CancelledError:
        task.cancel()
        raise
