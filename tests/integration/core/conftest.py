"""Fixtures for core integration tests (real PostgreSQL from tests/conftest.py)."""

from __future__ import annotations

import pytest

from pinlog.core.dispatch import Dispatcher
from pinlog.core.services import CoreService, PlaceInput
from tests.integration.core.support import RecordingClient
from tests.conftest import config_of


def place(n: int = 1, name: str = "카페 온다") -> PlaceInput:
    return PlaceInput(external_place_id=f"kakao-{n}", name=name, lat=37.5, lng=127.0,
                      address="서울 중구")


@pytest.fixture
def client(db_url: str) -> RecordingClient:
    return RecordingClient(db_url=db_url)


@pytest.fixture
async def dispatcher(client: RecordingClient):
    d = Dispatcher(client, queue_size=100, workers=2)
    d.start()
    yield d
    await d.stop()


@pytest.fixture
def service(engine, dispatcher, settings) -> CoreService:
    return CoreService(engine, dispatcher, config_of(settings).core.service)
