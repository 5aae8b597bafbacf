"""Fixtures shared by the acceptance tests (the fake model server ``fake_openai`` is one of the
suite-wide fixtures of ``tests/support/fixtures.py``)."""
