"""Sample place notes written by the project, shipped for `pinlog demo` (no personal data)."""
