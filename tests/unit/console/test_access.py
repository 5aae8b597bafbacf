"""Console access without a database: tokens, sessions, CSRF, signed dry-runs (issue 29)."""

from __future__ import annotations

import time
from datetime import timedelta

import jwt
import pytest
from pydantic import SecretStr

from pinlog.console.access import ConsoleConfig, Session, csrf_ok, csrf_token, issue_session, read_session
from pinlog.console.access import role_for_token, session_key, sign, signed_ok
from pinlog.settings import SettingsError
from tests.conftest import make_settings

ADMIN, READ = "admin-token-0123456789abc", "read-token-0123456789abc"


def config(admin: str | None = ADMIN, read: str | None = READ, ttl: float = 3600) -> ConsoleConfig:
    return ConsoleConfig(SecretStr(admin) if admin else None, SecretStr(read) if read else None,
                         timedelta(seconds=ttl), 5.0, SecretStr("jwt-secret-" + "x" * 40))


def test_off_unless_a_token_is_configured():
    assert not config(None, None).enabled
    assert config(None, READ).enabled and config(ADMIN, None).enabled


def test_the_token_decides_the_role():
    c = config()
    assert role_for_token(c, ADMIN) == "admin" and role_for_token(c, READ) == "read"
    for wrong in ("", ADMIN[:-1], ADMIN + "x", READ.upper(), "admin"):
        assert role_for_token(c, wrong) is None
    assert role_for_token(config(None, READ), ADMIN) is None


def test_a_session_is_signed_expires_and_dies_with_its_token():
    c = config()
    cookie, session = issue_session(c, "read")
    assert read_session(c, cookie) == session and not session.admin
    assert read_session(c, cookie[:-3] + "abc") is None
    assert read_session(c, None) is None and read_session(c, "not.a.jwt") is None
    assert read_session(config(read="another-read-token-987654"), cookie) is None
    # a cookie claiming the admin role, signed with the read key: refused
    forged = jwt.encode({"role": "admin", "sid": session.sid, "exp": int(time.time()) + 60},
                        session_key(c, "read"), algorithm="HS256")
    assert read_session(c, forged) is None
    expired = jwt.encode({"role": "read", "sid": session.sid, "exp": int(time.time()) - 1},
                         session_key(c, "read"), algorithm="HS256")
    assert read_session(c, expired) is None
    no_exp = jwt.encode({"role": "read", "sid": session.sid}, session_key(c, "read"),
                        algorithm="HS256")
    assert read_session(c, no_exp) is None
    assert read_session(config(read=None), cookie) is None  # the role is switched off


def test_csrf_and_signed_values_are_bound_to_the_session():
    c = config()
    session, other = Session("admin", "sid-1"), Session("admin", "sid-2")
    token = csrf_token(c, session)
    assert csrf_ok(c, session, token)
    assert not csrf_ok(c, other, token) and not csrf_ok(c, session, None)
    assert not csrf_ok(c, session, token[:-1] + ("0" if token[-1] != "0" else "1"))
    signature = sign(c, session, "presets:2:1")
    assert signed_ok(c, session, "presets:2:1", signature)
    assert not signed_ok(c, session, "presets:3:1", signature)
    assert not signed_ok(c, other, "presets:2:1", signature)
    assert not signed_ok(c, session, "presets:2:1", None)


def test_console_settings_are_checked(tmp_path):
    with pytest.raises(SettingsError, match="PINLOG_CONSOLE_ADMIN_TOKEN: must be at least 16"):
        make_settings(tmp_path, console_admin_token="short")
    with pytest.raises(SettingsError, match="must differ"):
        make_settings(tmp_path, console_admin_token=ADMIN, console_read_token=ADMIN)
    with pytest.raises(SettingsError, match="PINLOG_SERVER_URL"):
        make_settings(tmp_path, server_url="ftp://example")
    with pytest.raises(SettingsError, match="PINLOG_CONSOLE_SESSION_TTL"):
        make_settings(tmp_path, console_session_ttl="0")
    ok = make_settings(tmp_path, console_admin_token=ADMIN, console_session_ttl="PT1H")
    assert ConsoleConfig.from_settings(ok).session_ttl == timedelta(hours=1)
    assert ADMIN not in repr(ok)
