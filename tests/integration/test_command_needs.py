"""One way for a CLI command to get what it needs (issue 22): ``run_command`` hands the command
an engine, core's services and, on request, the running components — one-shot by default, so a
command never starts a rescan loop unless it asks for one (SPEC §7). Real PostgreSQL; the ai
side is "elsewhere" (``PINLOG_AI_BASE_URL``), so no model runs."""

from __future__ import annotations

from pinlog.cli.app import Needs
from pinlog.core.dispatch import HttpProcessClient
from tests.conftest import config_of, make_settings


async def test_running_is_one_shot_unless_asked(tmp_path, db_url, engine):
    config = config_of(make_settings(tmp_path, db_url, rescan_enabled=True,
                                     ai_base_url="http://127.0.0.1:9"))
    assert config.core.rescan.enabled
    needs = Needs(config, engine)
    async with needs.running() as parts:
        assert parts.ai is None  # PINLOG_AI_BASE_URL: the ai side runs elsewhere
        assert parts.core is not None and isinstance(parts.core.client, HttpProcessClient)
        assert parts.core.rescan is None  # one-shot: only the command's own rounds run
    async with needs.running(one_shot=False) as parts:
        assert parts.core is not None and parts.core.rescan is not None
    assert parts.core.rescan is None  # stopped on exit


async def test_service_dispatches_nothing(tmp_path, db_url, engine):
    needs = Needs(config_of(make_settings(tmp_path, db_url)), engine)
    assert needs.service is needs.service and needs.service.dispatcher is None
    member = await needs.service.create_member("needs-1")
    assert await needs.service.resolve_member("ref:needs-1") == member
