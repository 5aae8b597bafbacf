"""Operator commands: rescan, reprocess, status (placeholder, issue 5)."""

import typer


def register(app: typer.Typer) -> None:
    """Add the operator commands to the ``pinlog`` app."""
