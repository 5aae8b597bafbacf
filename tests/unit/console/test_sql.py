"""The console's reads are planned on the partial indexes migration 0008_operator_console
creates only if their predicates match those indexes' verbatim (no database needed)."""

from __future__ import annotations

import re
from pathlib import Path

from pinlog.db.sql import Queries

MIGRATION = (Path(__file__).parents[3] / "src/pinlog/db/migrations/versions/"
             "0008_operator_console.py").read_text()


def flat(sql: str) -> str:
    return re.sub(r"\s+", " ", sql).strip()


def test_the_ended_failed_fragment_is_the_indexes_predicate():
    queries = Queries("pinlog.console", "console.sql")
    fragment = flat("\n".join(line for line in queries.raw("ended_failed").splitlines()
                              if not line.lstrip().startswith("--")))
    for index in ("context_ai_state_failed_idx", "context_ai_state_failure_reason_idx"):
        block = MIGRATION.split(f"CREATE INDEX IF NOT EXISTS {index}", 1)[1].split(";", 1)[0]
        assert flat(block).endswith("WHERE " + fragment), index
    for name in ("failure_reasons", "failures_for_reason"):
        assert fragment in flat(queries.sql(name)), name
