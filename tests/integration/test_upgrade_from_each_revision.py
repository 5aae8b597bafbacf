"""A database at ANY earlier revision of ours upgrades to head with ``pinlog migrate`` (issue 22
#5: the migration files were renamed, the revision ids they store were kept): through our version
table ``ai.alembic_version`` and through the legacy ``public.alembic_version``; rows written at
that revision survive and the schema ends exactly as a fresh migration's (SPEC §2). The adopted
path is in ``tests/integration/adoption/test_adopt_migrate.py``."""

from __future__ import annotations

import psycopg
import pytest

from pinlog.db import migrate
from tests.conftest import create_database
from tests.integration.test_migrations import EXPECTED_COLUMNS, _columns

#: every revision but head (read from the scripts: no database at collection)
OLD_REVISIONS = list(migrate.revision_chain()[:-1])
#: revisions with a data step: the lexical terms backfill; the PROCESSING stages' start retry
LEXICAL, START_RETRY = "0002_issue10_lexical", "0002_issue14_adopt"


def _seed(conn: psycopg.Connection) -> None:
    """One member, place, record and note with its state row (columns of revision 0001)."""
    conn.execute("INSERT INTO core.member DEFAULT VALUES")
    conn.execute("INSERT INTO core.place (external_place_id, name, lat, lng) "
                 "VALUES ('p1', '카페 온다', 37.5, 127.0)")
    conn.execute("INSERT INTO core.record (member_id, place_id) VALUES (1, 1)")
    conn.execute("INSERT INTO core.context (record_id, member_id, body) "
                 "VALUES (1, 1, '창가 자리가 조용했다')")
    conn.execute("INSERT INTO ai.context_ai_state (context_id, embedding_status) "
                 "VALUES (1, 'PROCESSING')")


def _move_history_to_public(conn: psycopg.Connection) -> None:
    """Our history as it was kept before the version table moved into ``ai``."""
    conn.execute("CREATE TABLE public.alembic_version (version_num varchar(32) PRIMARY KEY)")
    conn.execute("INSERT INTO public.alembic_version SELECT version_num FROM ai.alembic_version")
    conn.execute("DROP TABLE ai.alembic_version")


@pytest.mark.parametrize("legacy", [False, True], ids=["ai_version_table", "legacy_public"])
@pytest.mark.parametrize("revision", OLD_REVISIONS)
def test_a_database_at_each_old_revision_upgrades_to_head(pg_server_url, revision, legacy):
    url = create_database(pg_server_url, "pinlog_at")
    migrate.upgrade(url, revision)
    with psycopg.connect(url, autocommit=True) as conn:
        _seed(conn)
        if legacy:
            _move_history_to_public(conn)
    assert migrate.current_revision(url) == revision

    migrate.upgrade(url)

    applied = migrate.revision_chain()[migrate.revision_chain().index(revision) + 1:]
    assert migrate.current_revision(url) == migrate.head()
    with psycopg.connect(url) as conn:
        assert _columns(conn) == EXPECTED_COLUMNS
        assert conn.execute("SELECT version_num FROM ai.alembic_version").fetchall() == \
            [(migrate.head(),)]
        assert conn.execute("SELECT to_regclass('public.alembic_version')").fetchone()[0] is None
        # the rows survive; the data steps of the revisions this upgrade ran filled them in
        assert conn.execute("SELECT body, lexemes IS NOT NULL FROM core.context").fetchall() == \
            [("창가 자리가 조용했다", LEXICAL in applied)]
        assert conn.execute("SELECT embedding_status, keyword_status, embedding_start_retry "
                            "FROM ai.context_ai_state").fetchall() == \
            [("PROCESSING", "PENDING", 0 if START_RETRY in applied else None)]
