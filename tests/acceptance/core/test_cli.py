"""`pinlog members create` and `pinlog token` as real subprocesses (output alone on stdout)."""

from __future__ import annotations

import pytest

from pinlog.core.api.auth import verify_token
from tests.conftest import TEST_JWT_SECRET, TEST_SECRET, config_of
from tests.helpers import pinlog_env, run_pinlog

pytestmark = pytest.mark.slow


def test_members_create_and_token(tmp_path, db_url, settings, sync_conn):
    env = pinlog_env(tmp_path / "data", PINLOG_DATABASE_URL=db_url,
                     PINLOG_INTERNAL_SECRETS=TEST_SECRET, PINLOG_JWT_SECRET=TEST_JWT_SECRET)
    plain = run_pinlog(["members", "create"], env, timeout=60)
    assert plain.returncode == 0, plain.stderr
    with_ref = run_pinlog(["members", "create", "--external-ref", "user-77"], env, timeout=60)
    assert with_ref.returncode == 0, with_ref.stderr
    first, second = int(plain.stdout.strip()), int(with_ref.stdout.strip())
    assert plain.stdout == f"{first}\n" and with_ref.stdout == f"{second}\n"
    assert sync_conn.execute("SELECT id, external_ref FROM core.member ORDER BY id").fetchall() == [
        (first, None), (second, "user-77")]

    taken = run_pinlog(["members", "create", "--external-ref", "user-77"], env, timeout=60)
    assert taken.returncode == 1 and taken.stdout == ""

    for who, expected in ((str(first), first), ("user-77", second), (str(second), second)):
        token = run_pinlog(["token", "--member", who], env, timeout=60)
        assert token.returncode == 0, token.stderr
        assert token.stdout.count("\n") == 1
        assert verify_token(config_of(settings).core.auth, token.stdout.strip()) == expected
    missing = run_pinlog(["token", "--member", "nobody"], env, timeout=60)
    assert missing.returncode == 1 and missing.stdout == ""
    assert db_url not in missing.stderr + taken.stderr
