"""SQL text without comments, for the few tests that assert on a statement's text.

A statement's own comment often names its rule ("FOR UPDATE SKIP LOCKED (several rescan loops
…)"), so ``"FOR UPDATE SKIP LOCKED" in sql`` on the raw text can never fail. Every SQL-text
assertion goes through :func:`sql_code` first.
"""

from __future__ import annotations

import re

# A quoted literal or identifier (kept as is), a line comment, or a block comment.
_TOKEN = re.compile(r"""('(?:[^']|'')*'|"(?:[^"]|"")*")|--[^\n]*|/\*.*?\*/""", re.S)


def sql_code(sql: str) -> str:
    """``sql`` with every ``--`` line comment and ``/* */`` block comment removed (quoted
    literals and identifiers are kept, so ``'--'`` inside a string survives); lines left empty
    by the removal are dropped and trailing spaces trimmed."""
    stripped = _TOKEN.sub(lambda m: m.group(1) or "", sql)
    lines = (line.rstrip() for line in stripped.splitlines())
    return "\n".join(line for line in lines if line.strip())

