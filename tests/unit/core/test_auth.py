"""Member tokens (PyJWT, HS256, sub = member id, exp required)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import jwt
import pytest

from pinlog.core.api.auth import InvalidToken, issue_token, verify_token
from tests.conftest import TEST_JWT_SECRET, make_settings, config_of


@pytest.fixture
def settings(tmp_path):
    return make_settings(tmp_path, "postgresql://u@localhost/x")


def test_round_trip(settings):
    token = issue_token(config_of(settings).core.auth, 42)
    assert verify_token(config_of(settings).core.auth, token) == 42
    claims = jwt.decode(token, TEST_JWT_SECRET, algorithms=["HS256"])
    assert claims["sub"] == "42" and claims["exp"] > claims["iat"]


@pytest.mark.parametrize("claims,key,alg", [
    ({"sub": "1", "exp": datetime.now(UTC) - timedelta(seconds=5)}, TEST_JWT_SECRET, "HS256"),
    ({"sub": "1"}, TEST_JWT_SECRET, "HS256"),  # no exp
    ({"exp": datetime.now(UTC) + timedelta(hours=1)}, TEST_JWT_SECRET, "HS256"),  # no sub
    ({"sub": "abc", "exp": datetime.now(UTC) + timedelta(hours=1)}, TEST_JWT_SECRET, "HS256"),
    ({"sub": "0", "exp": datetime.now(UTC) + timedelta(hours=1)}, TEST_JWT_SECRET, "HS256"),
    ({"sub": "1", "exp": datetime.now(UTC) + timedelta(hours=1)}, "another-key-0123456789-abcdefghijk", "HS256"),
    ({"sub": "1", "exp": datetime.now(UTC) + timedelta(hours=1)}, TEST_JWT_SECRET, "HS512"),
])
@pytest.mark.filterwarnings("ignore:The HMAC key")
def test_rejected(settings, claims, key, alg):
    with pytest.raises(InvalidToken):
        verify_token(config_of(settings).core.auth, jwt.encode(claims, key, algorithm=alg))


def test_unsigned_and_garbage_tokens_are_rejected(settings):
    unsigned = jwt.encode({"sub": "1", "exp": datetime.now(UTC) + timedelta(hours=1)}, None,
                          algorithm="none")
    for token in (unsigned, "", "not.a.token", "a.b"):
        with pytest.raises(InvalidToken):
            verify_token(config_of(settings).core.auth, token)
