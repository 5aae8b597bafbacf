"""``pinlog purge`` as a real subprocess on a real PostgreSQL (issue 31): ``--dry-run`` counts
and changes nothing; ``--member`` refuses an active member and erases a withdrawn one; a plain
run purges what is due. The output is counts per table — never a note's text."""

from __future__ import annotations

import json

import pytest

from pinlog.ai.pipeline import Pipeline
from pinlog.core.services import CoreService
from tests.conftest import TEST_JWT_SECRET, TEST_SECRET, config_of
from tests.helpers import pinlog_env, run_pinlog
from tests.integration.ai.support import DIM, PROFILE, ai_settings_for
from tests.integration.retention.support import QuietProvider, build_world, marker, set_back
from tests.integration.retention.test_purge import snapshot

pytestmark = pytest.mark.slow


async def test_purge_dry_run_member_erasure_and_purge(tmp_path, db_url, engine, judge, presets,
                                                     sync_conn):
    config = config_of(ai_settings_for(tmp_path, db_url))
    core = CoreService(engine, None, config.core.service)
    provider = QuietProvider(PROFILE, DIM)
    world = await build_world(core, Pipeline(engine, config.ai.pipeline, provider, judge))
    alice, bob = world.members_active[0], world.members_withdrawn[0]
    env = pinlog_env(tmp_path / "data", PINLOG_DATABASE_URL=db_url,
                     PINLOG_INTERNAL_SECRETS=TEST_SECRET, PINLOG_JWT_SECRET=TEST_JWT_SECRET)
    texts = [marker(n) for n in world.dead + world.live]

    def pinlog(*args: str):
        result = run_pinlog(["purge", *args], env, timeout=120)
        assert not any(t in result.stdout + result.stderr for t in texts)
        assert db_url not in result.stdout + result.stderr
        return result

    before = snapshot(sync_conn)
    refused = pinlog("--member", f"id:{alice}")
    assert refused.returncode == 1 and f"id:{alice} is active" in refused.stderr
    assert snapshot(sync_conn) == before

    erased = pinlog("--member", f"id:{bob}")
    assert erased.returncode == 0, erased.stderr
    assert "erasure of member" in erased.stdout and "11 row(s) removed" in erased.stdout
    assert sync_conn.execute("SELECT count(*) FROM core.member WHERE id = %s",
                             (bob,)).fetchone()[0] == 0

    set_back(sync_conn, 31 * 86400.0)
    before = snapshot(sync_conn)
    dry = pinlog("--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    counted = json.loads(dry.stdout.strip().splitlines()[-1])
    assert counted["dryRun"] is True and snapshot(sync_conn) == before
    # alice's four deleted notes and one deleted record; bob's two tombstone state rows
    assert counted["removed"] == {
        "core.context": 4, "core.record": 1, "core.member": 0, "ai.context_embedding": 4,
        "ai.context_keyword": 4, "ai.context_keyword_analysis": 4, "ai.context_ai_state": 6,
        "ai.context_ai_event": 0}

    done = pinlog()
    assert done.returncode == 0, done.stderr
    assert f"{counted['total']} row(s) removed" in done.stdout
    assert "oldest deleted row kept in core.context: none kept" in done.stdout
    assert sync_conn.execute("SELECT count(*) FROM core.context WHERE deleted_at IS NOT NULL"
                             ).fetchone()[0] == 0
