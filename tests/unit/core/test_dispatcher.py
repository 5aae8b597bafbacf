"""The bounded dispatch queue and the outcome classes (SPEC §4)."""

from __future__ import annotations

import asyncio
import logging

import pytest

from pinlog.contracts import ProcessRequest
from pinlog.core.dispatch import Dispatcher, HttpProcessClient, InProcessClient, outcome_for_status
from pinlog.logs import current_log_context, log_context
from tests.conftest import config_of, make_settings
from tests.integration.core.support import dispatch_count


def req(n: int) -> ProcessRequest:
    return ProcessRequest(context_id=n, user_id=1, record_id=1, text="t")


class GatedClient:
    """Holds every send until ``gate`` is set; signals ``entered`` on each send."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.entered = asyncio.Event()
        self.sent: list[int] = []

    async def send(self, request: ProcessRequest) -> int:
        self.entered.set()
        await self.gate.wait()
        self.sent.append(request.context_id)
        return 202


async def test_queue_drops_and_counts_when_full(caplog):
    client = GatedClient()
    dispatcher = Dispatcher(client, queue_size=2, workers=1)
    dispatcher.start()
    before = dispatch_count("dropped")
    assert dispatcher.enqueue(req(1))
    await client.entered.wait()  # the worker holds request 1; the queue is empty again
    assert dispatcher.enqueue(req(2)) and dispatcher.enqueue(req(3))
    with caplog.at_level(logging.WARNING):
        assert dispatcher.enqueue(req(4)) is False
    assert dispatch_count("dropped") == before + 1
    assert any(r.context_id == 4 for r in caplog.records)
    client.gate.set()
    await dispatcher.join()
    assert client.sent == [1, 2, 3]
    await dispatcher.stop()


async def test_enqueue_never_blocks_even_before_start():
    client = GatedClient()
    dispatcher = Dispatcher(client, queue_size=1, workers=1)
    assert dispatcher.enqueue(req(1)) is True
    assert dispatcher.enqueue(req(2)) is False
    client.gate.set()
    dispatcher.start()
    await dispatcher.join()
    assert client.sent == [1]
    await dispatcher.stop()


async def test_a_raising_client_does_not_kill_the_workers():
    class Boom:
        calls = 0

        async def send(self, request):
            Boom.calls += 1
            raise RuntimeError("bug")

    dispatcher = Dispatcher(Boom(), queue_size=5, workers=1)
    dispatcher.start()
    for n in range(3):
        dispatcher.enqueue(req(n + 1))
    await dispatcher.join()
    assert Boom.calls == 3
    await dispatcher.stop()


async def test_stop_abandons_what_it_cannot_drain():
    client = GatedClient()
    dispatcher = Dispatcher(client, queue_size=5, workers=1)
    dispatcher.start()
    dispatcher.enqueue(req(1))
    dispatcher.enqueue(req(2))
    await client.entered.wait()
    await dispatcher.stop(drain_timeout=0.05)  # returns although the client never answers
    assert client.sent == []


async def test_in_process_client_returns_submit_status_and_never_raises():
    async def ok(request):
        return 202

    async def boom(request):
        raise ValueError("x")

    assert await InProcessClient(ok).send(req(1)) == 202
    seen = []

    async def with_id(request):
        seen.append(current_log_context().get("request_id"))
        return 202

    with log_context(request_id="rid-9"):
        assert await InProcessClient(with_id).send(req(1)) == 202
    assert seen == ["rid-9"]
    assert await InProcessClient(boom).send(req(1)) == 0


@pytest.mark.parametrize("status,outcome", [
    (202, "accepted"), (200, "accepted"), (401, "unauthorized"), (403, "unauthorized"),
    (422, "client_error"), (404, "client_error"), (503, "busy"), (500, "server_error"),
    (0, "connection"), (302, "client_error"),
])
def test_outcome_classes(status, outcome):
    assert outcome_for_status(status) == outcome


def test_invalid_sizes_are_refused():
    with pytest.raises(ValueError):
        Dispatcher(GatedClient(), queue_size=0)


async def test_in_process_503_is_counted_busy():
    async def submit(request: ProcessRequest) -> int:
        return 503

    before = dispatch_count("busy")
    client = InProcessClient(submit)
    assert await client.send(ProcessRequest(context_id=1, user_id=1, record_id=1, text="t")) == 503
    assert dispatch_count("busy") == before + 1


async def test_default_timeouts_are_connect_1s_read_3s(tmp_path):
    settings = make_settings(tmp_path)
    client = HttpProcessClient.from_config(
        config_of(settings.model_copy(update={"ai_base_url": "http://x"})).core.dispatch)
    timeout = client._client.timeout
    assert (timeout.connect, timeout.read) == (1.0, 3.0)
    await client.aclose()


async def test_a_request_is_sent_with_the_request_id_of_the_context_it_was_enqueued_in():
    """pinlog.logs: the dispatcher's workers resume the enqueuer's logging context (a public
    request's id), never the context they were started in; without one, each request gets its
    own new id."""
    seen: dict[int, object] = {}

    class Recording:
        async def send(self, request: ProcessRequest) -> int:
            seen[request.context_id] = current_log_context().get("request_id")
            return 202

    dispatcher = Dispatcher(Recording(), queue_size=5, workers=2)
    with log_context(request_id="rid-starter"):
        dispatcher.start()
    with log_context(request_id="rid-public"):
        assert dispatcher.enqueue(req(1))
    assert dispatcher.enqueue(req(2)) and dispatcher.enqueue(req(3))
    await dispatcher.join()
    await dispatcher.stop()
    assert seen[1] == "rid-public"
    assert len({seen[1], seen[2], seen[3], "rid-starter"}) == 4
    assert all(isinstance(seen[c], str) and len(str(seen[c])) == 32 for c in (2, 3))


class BusyThenAccepting:
    """Answers 503 (the ai side's work queue is full) ``busy`` times, then 202."""

    def __init__(self, busy: int) -> None:
        self.busy, self.sent = busy, []

    async def send(self, request: ProcessRequest) -> int:
        self.sent.append(request.context_id)
        return 503 if len(self.sent) <= self.busy else 202


async def test_a_busy_ai_side_gets_the_live_request_again_once_its_queue_has_room():
    """SPEC §5.1/§7.2: a 503 is re-sent with capped backoff (the worker is paced by the ai
    side's queue) instead of leaving the committed row PENDING until the rescan's expiry."""
    client, pauses = BusyThenAccepting(busy=3), []

    async def pause(seconds: float) -> None:  # the hook instead of a real wait
        pauses.append(seconds)

    dispatcher = Dispatcher(client, queue_size=5, workers=1, busy_wait=60.0, sleep=pause)
    dispatcher.start()
    dispatcher.enqueue(req(1))
    await dispatcher.join()
    assert client.sent == [1, 1, 1, 1]  # sent until accepted
    assert pauses == [0.05, 0.1, 0.2]  # BUSY_BACKOFF: 50 ms, doubling
    await dispatcher.stop()


async def test_without_a_busy_wait_a_busy_request_is_sent_once():
    client, pauses = BusyThenAccepting(busy=3), []

    async def pause(seconds: float) -> None:
        pauses.append(seconds)

    dispatcher = Dispatcher(client, queue_size=5, workers=1, busy_wait=0.0, sleep=pause)
    dispatcher.start()
    dispatcher.enqueue(req(1))
    await dispatcher.join()
    assert (client.sent, pauses) == ([1], [])  # left PENDING for the rescan
    await dispatcher.stop()


def test_the_runtime_dispatcher_waits_out_a_busy_ai_side(tmp_path):
    """The live dispatcher gets PINLOG_RESCAN_BUSY_WAIT (one setting for every send)."""
    from pinlog.core.runtime import CoreRuntime

    config = config_of(make_settings(tmp_path, rescan_busy_wait=12.5)).core

    async def submit(request: ProcessRequest) -> int:
        return 202

    runtime = CoreRuntime(None, config, in_process_submit=submit)  # type: ignore[arg-type]
    assert runtime.dispatcher.busy_wait == 12.5


class Clock:
    """A fake monotonic clock that the pause hook advances (no real waiting)."""

    def __init__(self) -> None:
        self.now, self.pauses = 0.0, []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.pauses.append(seconds)
        self.now += seconds


class AlwaysBusy:
    """Answers 503 until ``accepting`` is set; records the ids sent."""

    def __init__(self) -> None:
        self.sent, self.accepting = [], False

    async def send(self, request: ProcessRequest) -> int:
        self.sent.append(request.context_id)
        return 202 if self.accepting else 503


async def test_after_one_full_busy_wait_requests_go_once_until_one_is_accepted():
    """An ai side that stays 503 through a whole busy wait (stopped, or not serving the active
    profile: SPEC §9.1) does not hold the queue a busy wait per request: the next requests are
    sent once each (PENDING for the rescan) until one is accepted; then busy waits resume."""
    client, clock = AlwaysBusy(), Clock()
    dispatcher = Dispatcher(client, queue_size=5, workers=1, busy_wait=10.0, sleep=clock.sleep,
                            clock=clock)
    dispatcher.start()
    dispatcher.enqueue(req(1))
    await dispatcher.join()
    assert set(client.sent) == {1} and len(client.sent) > 3  # paced through the whole wait
    assert sum(clock.pauses) <= 10.0 and dispatcher.busy_gave_up
    client.sent, clock.pauses = [], []
    dispatcher.enqueue(req(2))
    dispatcher.enqueue(req(3))
    await dispatcher.join()
    assert (client.sent, clock.pauses) == ([2, 3], [])  # once each
    client.accepting = True
    dispatcher.enqueue(req(4))
    await dispatcher.join()
    assert not dispatcher.busy_gave_up  # accepted: the next busy request is paced again
    client.accepting, client.sent = False, []
    dispatcher.enqueue(req(5))
    await dispatcher.join()
    assert len(client.sent) > 3
    await dispatcher.stop()


async def test_stop_ends_the_busy_re_sends_instead_of_waiting_them_out():
    """A shutdown does not wait out busy waits: the re-sends end at the next pause and the
    queued requests go once each."""
    client, clock = AlwaysBusy(), Clock()
    paused, release = asyncio.Event(), asyncio.Event()

    async def pause(seconds: float) -> None:
        paused.set()
        await release.wait()
        await clock.sleep(seconds)  # the fake clock: a wait that is not ended ends by itself
        await asyncio.sleep(0)

    dispatcher = Dispatcher(client, queue_size=5, workers=1, busy_wait=3600.0, sleep=pause,
                            clock=clock)
    dispatcher.start()
    dispatcher.enqueue(req(1))
    dispatcher.enqueue(req(2))
    await paused.wait()  # request 1 was refused once and is being paced
    stopping = asyncio.create_task(dispatcher.stop(drain_timeout=3600.0))
    await asyncio.sleep(0)  # stop() has begun (it marks the dispatcher first)
    release.set()
    await stopping  # no drain timeout waited out: the loop left at its pause
    assert client.sent == [1, 1, 2]


async def test_a_paced_busy_send_logs_one_warning_not_one_per_re_send(caplog):
    async def submit(request: ProcessRequest) -> int:
        return 503

    clock = Clock()
    dispatcher = Dispatcher(InProcessClient(submit), queue_size=5, workers=1, busy_wait=5.0,
                            sleep=clock.sleep, clock=clock)
    dispatcher.start()
    before = dispatch_count("busy")
    with caplog.at_level(logging.DEBUG, logger="pinlog.core.dispatch"):
        dispatcher.enqueue(req(1))
        await dispatcher.join()
    await dispatcher.stop()
    sends = dispatch_count("busy") - before
    assert sends > 3  # every refusal is still counted
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert [r.getMessage() for r in warnings] == [
        "process request not delivered: the ai side stayed busy (503) through the busy wait; "
        "the rescan will retry"]
    assert sum(r.levelno == logging.DEBUG and "not delivered" in r.getMessage()
               for r in caplog.records) == sends
