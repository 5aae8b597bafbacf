"""Test-support layer: fixtures registered once for the whole suite (:mod:`tests.support.fixtures`).

Fakes live in :mod:`tests.fakes` (model providers faked only at their Protocol); the fake-profile
constants and preset seeding in :mod:`tests.integration.ai.support`.
"""
