"""The ``pinlog`` command (SPEC §1): one module per command group, thin typer commands that
call services.

- :mod:`pinlog.cli.app` — the root app, the shared settings/engine helpers, ``main``
- :mod:`pinlog.cli.db` — ``migrate``, ``db url|start|stop|status``
- :mod:`pinlog.cli.ops` — ``serve``, ``rescan``, ``reprocess``, ``status``
- :mod:`pinlog.cli.demo` — ``demo``
- :mod:`pinlog.cli.members` — ``members create``, ``token``
- :mod:`pinlog.cli.search` — ``search``
- :mod:`pinlog.cli.importing` — ``import`` (and the import job ``pinlog demo`` reuses)
- :mod:`pinlog.cli.presets` — ``presets load|list``
- :mod:`pinlog.cli.purge` — ``purge`` (the retention job once, or an erasure)

Every module registers its commands on :data:`pinlog.cli.app.app` when imported (one style:
``@app.command()``, or ``app.add_typer`` for a group).
"""

from __future__ import annotations

from pinlog.cli import (  # noqa: F401 - registers
    db, demo, importing, members, ops, presets, purge, search)
from pinlog.cli.app import app, friendly_error, main

__all__ = ["app", "friendly_error", "main"]
