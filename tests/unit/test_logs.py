"""The logging context (``pinlog.logs``, SPEC §12): ids set once per edge reach every record
made inside it; only ``ALLOWED_FIELDS`` can enter it and only they ever reach a line."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest

from pinlog import logs
from pinlog.logs import JsonFormatter, current_log_context, log_context, neutral_context

NOTE = "조용히 책 읽기 좋은 카페"
log = logging.getLogger("tests.logs")


def line(record: logging.LogRecord) -> dict:
    return json.loads(JsonFormatter().format(record))


def test_only_allowed_fields_can_enter_the_logging_context():
    for fields in ({"text": NOTE}, {"request_id": "r-1", "body": NOTE}):
        with pytest.raises(ValueError) as raised, log_context(**fields):
            pass  # never reached
        assert NOTE not in str(raised.value) and "not a loggable field" in str(raised.value)
    with pytest.raises(ValueError), log_context({"text": NOTE}):  # nor through a base
        pass
    assert current_log_context() == {}  # a refused context leaves nothing behind


def test_a_field_outside_the_allowed_list_never_reaches_a_line_from_the_context(caplog):
    caplog.set_level(logging.INFO, logger="tests.logs")
    with log_context(request_id="r-ctx"):
        token = logs._CONTEXT.set({**current_log_context(), "text": NOTE})  # bypassing the check
        try:
            log.info("one line")
        finally:
            logs._CONTEXT.reset(token)
    [record] = caplog.records
    emitted = line(record)
    assert emitted["request_id"] == "r-ctx" and "text" not in emitted and NOTE not in json.dumps(emitted)


def test_records_carry_the_context_and_their_own_extra_wins(caplog):
    caplog.set_level(logging.INFO, logger="tests.logs")
    with log_context(request_id="r-1", context_id=5):
        with log_context(round_id="abc"):
            log.info("inner")
        log.info("own extra", extra={"context_id": 6})
    log.info("outside")
    inner, own, outside = caplog.records
    assert (inner.request_id, inner.context_id, inner.round_id) == ("r-1", 5, "abc")
    assert (own.request_id, own.context_id) == ("r-1", 6) and not hasattr(own, "round_id")
    assert line(own)["context_id"] == 6 and line(inner)["round_id"] == "abc"
    assert "request_id" not in line(outside) and not hasattr(outside, "request_id")


async def test_tasks_see_the_context_they_were_created_in_and_a_neutral_one_sees_none():
    seen: dict[str, dict] = {}

    async def look(name: str) -> None:
        seen[name] = dict(current_log_context())

    with log_context(request_id="r-task"):
        inherited = asyncio.create_task(look("inherited"))
        neutral = asyncio.create_task(look("neutral"), context=neutral_context())
    await asyncio.gather(inherited, neutral)
    assert seen == {"inherited": {"request_id": "r-task"}, "neutral": {}}
