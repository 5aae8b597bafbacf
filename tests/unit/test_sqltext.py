"""The comment stripper used by every SQL-text assertion (tests/sqltext.py)."""

from __future__ import annotations

from tests.sqltext import sql_code


def test_sql_code_removes_comments_but_keeps_literals():
    sql = ("-- name: x\n-- FOR UPDATE SKIP LOCKED\nSELECT '--not a comment', \"a--b\" -- tail\n"
           "FROM t /* FOR UPDATE */ WHERE s = 'it''s'\n")
    code = sql_code(sql)
    assert code == "SELECT '--not a comment', \"a--b\"\nFROM t  WHERE s = 'it''s'"
    assert "SKIP LOCKED" not in code and "FOR UPDATE" not in code
