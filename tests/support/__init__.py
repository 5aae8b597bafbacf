"""Test-support layer (``docs/ARCHITECTURE.md`` §7): fixtures registered once for the whole
suite (:mod:`tests.support.fixtures`), the one fake OpenAI-compatible model server
(:mod:`tests.support.fake_openai`), the one `pinlog serve` runner (:mod:`tests.support.serve`)
and the one in-process app runner (:mod:`tests.support.app`).

Fakes of the model providers live in :mod:`tests.fakes` (faked only at their Protocol); the
fake-profile constants and preset seeding in :mod:`tests.integration.ai.support`.
"""
