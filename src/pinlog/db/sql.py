"""Named SQL statements loaded from ``.sql`` files (one visible place per component).

File format::

    -- name: start_stage
    -- Rule: SPEC §3 ... (comment lines kept as documentation)
    UPDATE ...;

Statements may contain ``{stage}`` (and ``{other}``), which is only ever replaced by the
value of a :class:`pinlog.states.Stage` — the one thing interpolated into SQL (SPEC §3).
Everything else is a bound parameter (``:name``).
"""

from __future__ import annotations

import re
from importlib import resources

from sqlalchemy import TextClause, text

from pinlog.states import Stage

_NAME = re.compile(r"^--\s*name:\s*([a-z_][a-z0-9_]*)\s*$", re.MULTILINE)


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
