"""`pinlog db url` never prints a password (SPEC §6)."""

import pytest

from pinlog.db.engine import redacted_url


@pytest.mark.parametrize("url, expected", [
    ("postgresql://pinlog:SuperSecretPw@db:5432/pinlog", "postgresql://pinlog@db:5432/pinlog"),
    ("postgres://u:p%40ss@h/d?sslmode=require", "postgres://u@h/d?sslmode=require"),
    ("postgresql+psycopg://u:pw@h/d", "postgresql+psycopg://u@h/d"),
    ("postgresql://:onlypw@h/d", "postgresql://h/d"),
    ("postgresql://postgres@/pinlog?host=/tmp/x", "postgresql://postgres@/pinlog?host=/tmp/x"),
])
def test_password_is_removed(url, expected):
    assert redacted_url(url) == expected
    assert "SuperSecretPw" not in redacted_url(url)
