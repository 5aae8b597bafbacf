"""PinLog AI: reliable embeddings and preset keywords for place notes (see SPEC.md)."""

__version__ = "0.1.0"
