"""Named SQL statements loaded from ``.sql`` files (one visible place per component).

File format::

    -- name: start_stage
    -- Rule: SPEC §3 ... (comment lines kept as documentation)
    UPDATE ...;

Statements may contain ``{stage}`` (and ``{other}``), which is only ever replaced by the
value of a :class:`pinlog.states.Stage` — the one thing interpolated into SQL (SPEC §3).
Everything else is a bound parameter (``:name``).

:class:`SqlStatements` (core's rescan, reprocess and status files) instead splices named
*fragments* of the same file (``{expired}``): static SQL text from the file, never data; it does
not take a Stage.
"""

from __future__ import annotations

import re
from importlib import resources
from typing import Any

import psycopg
from sqlalchemy import TextClause, text
from sqlalchemy.ext.asyncio import AsyncConnection

from pinlog.states import Stage

_NAME = re.compile(r"^--\s*name:\s*([a-z_][a-z0-9_]*)\s*$", re.MULTILINE)
_MARKER = re.compile(r"\{([a-z_]+)\}")


class Queries:
    """The named statements of one ``.sql`` file.

    Args:
        package: package holding the file, e.g. ``"pinlog.ai"``.
        filename: e.g. ``"state.sql"``.

    Raises:
        ValueError: a name is defined twice.
    """

    def __init__(self, package: str, filename: str) -> None:
        source = resources.files(package).joinpath(filename).read_text(encoding="utf-8")
        self.source_name = f"{package}/{filename}"
        self._raw: dict[str, str] = {}
        parts = _NAME.split(source)
        for i in range(1, len(parts), 2):
            name, body = parts[i], parts[i + 1].strip()
            if name in self._raw:
                raise ValueError(f"{self.source_name}: query {name!r} defined twice")
            self._raw[name] = body.rstrip(";").strip()
        self._cache: dict[tuple[str, Stage | None], TextClause] = {}

    def names(self) -> list[str]:
        """All statement names in file order."""
        return list(self._raw)

    def raw(self, name: str) -> str:
        """The SQL text of ``name`` (with comments), before stage substitution."""
        return self._raw[name]

    def __call__(self, name: str, stage: Stage | None = None) -> TextClause:
        """The statement ``name`` as a SQLAlchemy ``TextClause``.

        Args:
            stage: required when the statement uses ``{stage}``; only a ``Stage`` is accepted.

        Raises:
            KeyError: unknown name.
            TypeError: ``stage`` is not a ``Stage``.
        """
        key = (name, stage)
        if key not in self._cache:
            sql = self._raw[name]
            if "{stage}" in sql or "{other}" in sql:
                if not isinstance(stage, Stage):
                    raise TypeError(f"{name} needs a Stage, got {type(stage).__name__}")
                sql = sql.replace("{stage}", stage.value).replace("{other}", stage.other.value)
            self._cache[key] = text(sql)
        return self._cache[key]


class SqlStatements:
    """Named statements of one ``.sql`` file with named *fragments* spliced in.

    A statement may contain ``{fragment}`` markers naming another block of the same file (e.g.
    ``{expired}``); they are replaced by that block's text, recursively, when the statement is
    first used. Only static SQL from the file is spliced — never a runtime value (SPEC §3).

    Raises:
        KeyError: a marker names no block of the file.
    """

    def __init__(self, package: str, filename: str) -> None:
        self._queries = Queries(package, filename)
        self._cache: dict[str, TextClause] = {}

    def sql(self, name: str, _depth: int = 0) -> str:
        """The SQL text of ``name`` with every fragment marker resolved."""
        if _depth > 8:
            raise ValueError(f"fragment nesting too deep at {name!r}")
        raw = self._queries.raw(name)
        if _depth:  # a spliced fragment: drop its comment lines, keep the SQL
            raw = "\n".join(line for line in raw.splitlines()
                            if not line.lstrip().startswith("--")).strip()

        def splice(match: re.Match[str]) -> str:
            return self.sql(match.group(1), _depth + 1)

        return _MARKER.sub(splice, raw)

    def __call__(self, name: str) -> TextClause:
        if name not in self._cache:
            self._cache[name] = text(self.sql(name))
        return self._cache[name]


async def driver_connection(conn: AsyncConnection) -> psycopg.AsyncConnection[Any]:
    """The psycopg connection under ``conn`` (same transaction), for pipelined statements.

    Raises:
        RuntimeError: ``conn`` is closed or not a psycopg connection.
    """
    driver = (await conn.get_raw_connection()).driver_connection
    if not isinstance(driver, psycopg.AsyncConnection):
        raise RuntimeError("not a psycopg async connection")
    return driver
