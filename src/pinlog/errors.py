"""Errors shared by every component."""


class StartupError(RuntimeError):
    """A component refused to start; the message says what to do (e.g. ``run `pinlog migrate```).

    The message is written for operators and contains no secrets or configuration values.
    """
