"""A database adopted by an older pinlog (``migrate --adopt`` then stopped at that release's
head) upgrades to today's head (issue 22 #5: the migration files were renamed, the revision ids
kept): with ``pinlog migrate`` and with ``pinlog migrate --adopt`` again. The backend's ``core``
stays untouched at every step and the ai side ends as a direct adoption's."""

from __future__ import annotations

import psycopg
import pytest

from pinlog.db import migrate
from tests.conftest import create_database
from tests.integration.adoption.reference import REF_DIM, backend_snapshot, build_reference_database

OLD_REVISIONS = list(migrate.revision_chain()[:-1])


def _ai_shape(conn: psycopg.Connection) -> dict[str, list[tuple[object, ...]]]:
    """The ai side's columns (type, nullability, default) and constraints."""
    columns = conn.execute(
        "SELECT table_name, column_name, data_type, is_nullable, column_default "
        "FROM information_schema.columns WHERE table_schema = 'ai' ORDER BY 1, 2").fetchall()
    constraints = conn.execute(
        "SELECT conrelid::regclass::text, pg_get_constraintdef(oid) FROM pg_constraint "
        "WHERE connamespace = 'ai'::regnamespace ORDER BY 1, 2").fetchall()
    return {"columns": columns, "constraints": constraints}


@pytest.fixture(scope="module")
def adopted_at_head(pg_server_url: str) -> dict[str, list[tuple[object, ...]]]:
    """The ai side's shape of a reference database adopted straight to head."""
    url = create_database(pg_server_url, "pinlog_ref_head")
    with psycopg.connect(url, autocommit=True) as conn:
        build_reference_database(conn)
    migrate.adopt(url, REF_DIM)
    with psycopg.connect(url) as conn:
        return _ai_shape(conn)


def _adopt_up_to(url: str, revision: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``migrate --adopt`` as a release whose head was ``revision`` ran it."""
    upgrade = migrate.command.upgrade
    with monkeypatch.context() as patch:
        patch.setattr(migrate.command, "upgrade", lambda config, _head: upgrade(config, revision))
        migrate.adopt(url, REF_DIM)


@pytest.mark.parametrize("again", ["migrate", "migrate --adopt"])
@pytest.mark.parametrize("revision", OLD_REVISIONS)
def test_a_database_adopted_at_each_old_revision_upgrades_to_head(
        reference_url, revision, again, adopted_at_head, monkeypatch):
    with psycopg.connect(reference_url, autocommit=True) as conn:
        backend = backend_snapshot(conn)
    _adopt_up_to(reference_url, revision, monkeypatch)
    assert migrate.current_revision(reference_url) == revision

    if again == "migrate":
        migrate.upgrade(reference_url)
    else:
        assert migrate.adopt(reference_url, REF_DIM).kind == "ours"

    assert migrate.current_revision(reference_url) == migrate.head()
    with psycopg.connect(reference_url, autocommit=True) as conn:
        assert backend_snapshot(conn) == backend
        assert _ai_shape(conn) == adopted_at_head
