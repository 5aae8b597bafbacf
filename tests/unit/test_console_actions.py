"""The console's background actions (pinlog.console.routes.BackgroundActions): one per name,
stopped — cancelled and waited for — by the app's shutdown (issue 29 actions)."""

from __future__ import annotations

import asyncio

from pinlog.console.routes import BackgroundActions


async def test_stop_cancels_a_running_action_and_waits_for_its_cleanup():
    entered, cleaned = asyncio.Event(), []

    async def work() -> None:
        entered.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            await asyncio.sleep(0)  # its cleanup awaits too (a database write)
            cleaned.append("stopped")
            raise

    actions = BackgroundActions()
    actions.start("reprocess", work())
    await entered.wait()
    assert actions.busy("reprocess") and actions.names() == ["reprocess"]
    await actions.stop()
    assert cleaned == ["stopped"] and not actions.busy("reprocess") and actions.names() == []
    await actions.stop()  # idempotent


async def test_a_finished_action_is_not_busy_and_stop_leaves_it_alone():
    done = []

    async def work() -> None:
        done.append(1)

    actions = BackgroundActions()
    actions.start("reprocess", work())
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert done == [1] and not actions.busy("reprocess") and actions.names() == []
    await actions.stop()
    assert not actions.busy("never-started")
