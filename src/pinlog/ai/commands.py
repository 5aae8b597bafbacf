"""ai commands (placeholder)."""

import typer


def register(app: typer.Typer) -> None:
    """Add the ai commands to the ``pinlog`` app."""
