"""The one SQL loader: named statements from ``.sql`` files (one visible place per component).

File format::

    -- name: start_stage
    -- Rule: SPEC §3 ... (comment lines kept as documentation)
    UPDATE ...;

A statement may contain two kinds of ``{marker}``, both resolved from static text only — never
from data (SPEC §3):

- ``{stage}`` / ``{other}``: replaced by the value of a :class:`pinlog.states.Stage` (the one
  runtime value ever interpolated into SQL); ``{label}`` by its label (``embedding`` /
  ``keyword``, the prefix of the per-stage columns such as ``embedding_start_retry``);
- ``{fragment}``: the name of another block of the same file (e.g. core's ``{expired}``
  predicate in ``rescan.sql``) or of a file named in ``fragments_from``, spliced in
  recursively without its comment lines, so a predicate shared by several statements (and
  files) is written once;
- ``{@fragment}``: the stage's own variant of a fragment, the block ``<label>_fragment`` (e.g.
  ``{@startable}`` → ``embedding_startable`` / ``keyword_startable``), so one statement serves
  both stages where only a per-stage guard differs (needs a Stage, as ``{stage}``).

Markers are resolved in SQL lines only; in a comment line (``-- …``) they stay as written, so a
comment may name the fragment a statement uses.

Everything else is a bound parameter (``:name``). :meth:`Queries.native` gives the psycopg form
(``%(name)s``) for statements sent on the driver connection (pipelines, see
:func:`driver_connection`).
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
_MARKER = re.compile(r"\{(@?[a-z_]+)\}")
_PARAM = re.compile(r"(?<![:\w]):([A-Za-z_][A-Za-z0-9_]*)")
_COMMENT = re.compile(r"^\s*--.*$", re.MULTILINE)
_STAGE_MARKERS = ("stage", "other", "label")


class Queries:
    """The named statements of one ``.sql`` file.

    Args:
        package: package holding the file, e.g. ``"pinlog.ai"``.
        filename: e.g. ``"state.sql"``.
        fragments_from: other files whose blocks may be spliced in as ``{fragment}``: a file
            name of ``package`` (``status.sql`` reuses ``rescan.sql``'s ``{unfinished}``) or
            ``"other.package:file.sql"`` (the kernel's ``pinlog.db:process_settings.sql``
            defines process liveness once for both components); they are not statements of
            this file.

    Raises:
        ValueError: a name is defined twice.
    """

    def __init__(self, package: str, filename: str, *, fragments_from: tuple[str, ...] = ()) -> None:
        self.source_name = f"{package}/{filename}"
        self._raw = self._blocks(package, filename)
        self._fragments: dict[str, str] = {}
        for other in fragments_from:
            owner, _, name = other.rpartition(":")
            self._fragments.update(self._blocks(owner or package, name))
        self._cache: dict[tuple[str, Stage | None], TextClause] = {}
        self._native: dict[tuple[str, Stage | None], str] = {}

    @staticmethod
    def _blocks(package: str, filename: str) -> dict[str, str]:
        source = resources.files(package).joinpath(filename).read_text(encoding="utf-8")
        blocks: dict[str, str] = {}
        parts = _NAME.split(source)
        for i in range(1, len(parts), 2):
            name, body = parts[i], parts[i + 1].strip()
            if name in blocks:
                raise ValueError(f"{package}/{filename}: query {name!r} defined twice")
            blocks[name] = body.rstrip(";").strip()
        return blocks

    def names(self) -> list[str]:
        """All statement names in file order."""
        return list(self._raw)

    def raw(self, name: str) -> str:
        """The SQL text of ``name`` (with comments), before any marker is resolved."""
        return self._raw[name]

    def sql(self, name: str, stage: Stage | None = None, _depth: int = 0) -> str:
        """The SQL text of ``name`` with every marker resolved (see the module docstring).

        Raises:
            KeyError: unknown name, or a ``{fragment}`` naming no block of the file.
            TypeError: the statement uses ``{stage}``/``{other}``/``{label}``/``{@fragment}`` and
                ``stage`` is not a Stage.
            ValueError: fragments nested more than 8 deep.
        """
        if _depth > 8:
            raise ValueError(f"fragment nesting too deep at {name!r}")
        raw = self._raw[name] if not _depth or name in self._raw else self._fragments[name]
        if _depth:  # a spliced fragment: drop its comment lines, keep the SQL
            raw = "\n".join(line for line in raw.splitlines()
                            if not line.lstrip().startswith("--")).strip()

        def resolve(match: re.Match[str]) -> str:
            marker = match.group(1)
            if marker in _STAGE_MARKERS or marker.startswith("@"):
                if not isinstance(stage, Stage):
                    raise TypeError(f"{name} needs a Stage, got {type(stage).__name__}")
                if marker.startswith("@"):  # the stage's own fragment: <label>_<name>
                    return self.sql(f"{stage.label}_{marker[1:]}", stage, _depth + 1)
                if marker == "label":
                    return stage.label
                return stage.value if marker == "stage" else stage.other.value
            return self.sql(marker, stage, _depth + 1)

        # comment lines keep their text: a marker named in a comment is documentation
        return "\n".join(line if line.lstrip().startswith("--") else _MARKER.sub(resolve, line)
                         for line in raw.split("\n"))

    def __call__(self, name: str, stage: Stage | None = None) -> TextClause:
        """The statement ``name`` as a SQLAlchemy ``TextClause`` (cached).

        Args:
            stage: required when the statement uses ``{stage}``; only a ``Stage`` is accepted.

        Raises:
            KeyError, TypeError: as :meth:`sql`.
        """
        key = (name, stage)
        if key not in self._cache:
            self._cache[key] = text(self.sql(name, stage))
        return self._cache[key]

    def native(self, name: str, stage: Stage | None = None) -> str:
        """The statement for psycopg (cached): comments dropped, markers resolved,
        ``:param`` → ``%(param)s``."""
        key = (name, stage)
        if key not in self._native:
            sql = _COMMENT.sub("", self.sql(name, stage))
            self._native[key] = _PARAM.sub(r"%(\1)s", sql).strip()
        return self._native[key]


#: Former name of :class:`Queries` for files with fragments (one loader now).
SqlStatements = Queries


async def driver_connection(conn: AsyncConnection) -> psycopg.AsyncConnection[Any]:
    """The psycopg connection under ``conn`` (same transaction), for pipelined statements.

    Raises:
        RuntimeError: ``conn`` is closed or not a psycopg connection.
    """
    driver = (await conn.get_raw_connection()).driver_connection
    if not isinstance(driver, psycopg.AsyncConnection):
        raise RuntimeError("not a psycopg async connection")
    return driver
