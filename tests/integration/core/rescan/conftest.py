"""Fixtures for the rescan/finalizer/reprocess integration tests (real PostgreSQL)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from pinlog.core.rescan import RescanConfig, RescanLoop, RoundReport
from pinlog.db.engine import create_engine
from pinlog.settings import Settings
from tests.conftest import make_settings, config_of
from tests.integration.core.rescan.factory import RecordingClient


@pytest.fixture
def make_rescan_settings(tmp_path: Path, db_url: str) -> Callable[..., Settings]:
    """Settings with SPEC §7.1 defaults unless overridden (expiries 300 s / 600 s, max 3)."""

    def build(**overrides: object) -> Settings:
        # short model timeouts so short expiries pass the SPEC §6 budget rule
        values: dict[str, object] = {"embedding_timeout": 5, "llm_timeout": 5}
        values.update(overrides)
        return make_settings(tmp_path, db_url, **values)

    return build


@pytest.fixture
def make_rescan_config(make_rescan_settings: Callable[..., Settings]) -> Callable[..., RescanConfig]:
    """The rescan's config of :func:`make_rescan_settings` (same overrides)."""

    def build(**overrides: object) -> RescanConfig:
        return RescanConfig.from_settings(make_rescan_settings(**overrides))

    return build


@pytest.fixture
def client() -> RecordingClient:
    return RecordingClient()


def run_round_in_thread(settings: Settings, db_url: str, client: object,
                        timeout: float = 15) -> RoundReport:
    """Run one round on a fresh engine in another thread; fail (instead of hanging) when it does
    not finish within ``timeout`` seconds — e.g. if a claim waited on a locked row."""
    box: dict[str, object] = {}

    def target() -> None:
        async def main() -> RoundReport:
            engine = create_engine(db_url, pool_size=4)
            try:
                return await RescanLoop(engine, config_of(settings).core.rescan, client).run_round()  # type: ignore[arg-type]
            finally:
                await engine.dispose()

        try:
            box["report"] = asyncio.run(main())
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            box["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise TimeoutError(f"rescan round did not finish within {timeout} s (waited on a lock?)")
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["report"]  # type: ignore[return-value]
