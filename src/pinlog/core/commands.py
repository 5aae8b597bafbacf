"""core commands (placeholder)."""

import typer


def register(app: typer.Typer) -> None:
    """Add the core commands to the ``pinlog`` app."""
