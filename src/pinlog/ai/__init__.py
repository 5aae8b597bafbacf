"""The AI server (SPEC §1): embedding and keyword stages, presets, judges, personal search.

This package never imports ``pinlog.core`` and its SQL never names a ``core.`` table.
"""
