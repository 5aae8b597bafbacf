"""Unit tests run without a database (issue 22 #9): the hook in ``tests/conftest.py`` fails a
test under ``tests/unit`` whose fixtures include the database server before that server starts;
tests elsewhere may request it."""

from __future__ import annotations

import pytest

from tests.conftest import DATABASE_FIXTURE, UNIT_TESTS, needs_the_database


def test_a_unit_test_that_requests_the_database_is_caught():
    unit = UNIT_TESTS / "core" / "test_example.py"
    assert needs_the_database(unit, ["tmp_path", "db_url", DATABASE_FIXTURE])
    assert not needs_the_database(unit, ["tmp_path", "provider"])
    integration = UNIT_TESTS.parent / "integration" / "core" / "test_example.py"
    assert not needs_the_database(integration, ["db_url", DATABASE_FIXTURE])


def test_no_collected_unit_test_requests_the_database(request: pytest.FixtureRequest):
    """Over this session's tests (all of tests/unit when the tier runs): the guard's rule holds
    at collection, so a unit run never starts the embedded server."""
    offenders = [item.nodeid for item in request.session.items
                 if needs_the_database(item.path, getattr(item, "fixturenames", ()))]
    assert offenders == []
