"""Route modules of the public API (``/v1``)."""
