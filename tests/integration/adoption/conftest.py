"""Fixtures of the adoption tests: a fresh database shaped like the reference deployment."""

from __future__ import annotations

import psycopg
import pytest

from tests.conftest import create_database
from tests.integration.adoption.reference import build_reference_database


@pytest.fixture
def reference_url(pg_server_url: str) -> str:
    """A new database built by the reference's own SQL (1536-dimension shape), not migrated."""
    url = create_database(pg_server_url, "pinlog_ref")
    with psycopg.connect(url, autocommit=True) as conn:
        build_reference_database(conn)
    return url
