"""The ``pinlog`` command (SPEC §1): one module per command group, thin typer commands that
call services.

- :mod:`pinlog.cli.app` — the root app, the shared settings/engine helpers, ``main``
- :mod:`pinlog.cli.db` — ``migrate``, ``db url|start|stop|status``
- :mod:`pinlog.cli.ops` — ``serve``, ``rescan``, ``reprocess``, ``status``
- :mod:`pinlog.cli.demo` — ``demo``
- :mod:`pinlog.cli.members` — ``members create``, ``token``, ``records``
- :mod:`pinlog.cli.search` — ``search``
- :mod:`pinlog.cli.importing` — ``import`` (and the import job ``pinlog demo`` reuses)
- :mod:`pinlog.cli.presets` — ``presets load|list``
- :mod:`pinlog.cli.purge` — ``purge`` (the retention job once, or an erasure)
- :mod:`pinlog.cli.remote` — asking a running server (``search``, ``records``, ``status``)

Every module registers its commands on :data:`pinlog.cli.app.app` when imported (one style:
``@app.command()``, or ``app.add_typer`` for a group). :func:`main` imports them all — except for
the commands that may ask a running server (:data:`SERVER_COMMANDS`): then only that command's
module, so ``pinlog search`` answered by a server loads no model, database driver or ai module.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

#: The group modules, in the order ``pinlog --help`` lists their commands.
GROUPS = ("db", "demo", "importing", "members", "ops", "presets", "purge", "search")
#: Commands that ask a running server when there is one → the one module they need.
SERVER_COMMANDS = {"search": "search", "records": "members", "status": "ops"}


def load(groups: tuple[str, ...] = GROUPS) -> Any:
    """Import the command modules of ``groups`` (registering their commands); the root app."""
    for group in groups:
        importlib.import_module(f"pinlog.cli.{group}")
    from pinlog.cli.app import app

    return app


def main() -> None:
    """Console-script entry point (:func:`pinlog.cli.app.main` over the commands it needs)."""
    args = sys.argv[1:]
    wanted = SERVER_COMMANDS.get(args[0]) if args else None
    load((wanted,) if wanted and "--help" not in args else GROUPS)
    from pinlog.cli.app import main as run

    run()


__all__ = ["GROUPS", "SERVER_COMMANDS", "load", "main"]
