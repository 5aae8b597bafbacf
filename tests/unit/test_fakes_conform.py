"""Port conformance: every fake stands in for a real port with the port's exact interface, so a
test passing against a fake says something about the code that runs against the real thing
(fakes only at a Protocol: tests/fakes.py, the core↔ai process client)."""

from __future__ import annotations

import inspect

import pytest

from pinlog.ai.ports import EmbeddingProvider, Judge
from pinlog.contracts import ProcessClient
from tests.fakes import FakeEmbeddingProvider, FakeJudge
from tests.integration.core.support import RecordingClient as CoreRecordingClient
from tests.integration.core.rescan.factory import RecordingClient as RescanRecordingClient


def _signature(function: object) -> list[tuple[str, inspect._ParameterKind]]:
    """Parameter names and kinds without ``self`` (annotations are compared by name only)."""
    return [(p.name, p.kind) for p in inspect.signature(function).parameters.values()
            if p.name != "self"]


CASES = [  # (port, fake instance, methods of the port)
    (EmbeddingProvider, FakeEmbeddingProvider(), ["embed"]),
    (Judge, FakeJudge(), ["judge"]),
    (ProcessClient, CoreRecordingClient(), ["send"]),
    (ProcessClient, RescanRecordingClient(), ["send"]),
]


@pytest.mark.parametrize(("port", "fake", "methods"), CASES,
                         ids=[f"{type(c[1]).__module__}.{type(c[1]).__name__}" for c in CASES])
def test_each_fake_has_its_ports_interface(port, fake, methods):
    for name in methods:
        assert inspect.iscoroutinefunction(getattr(fake, name)) == \
            inspect.iscoroutinefunction(getattr(port, name)), name
        assert _signature(getattr(fake, name)) == _signature(getattr(port, name)), name
    for attribute in getattr(port, "__annotations__", {}):
        assert hasattr(fake, attribute), attribute


def test_runtime_checkable_ports_accept_the_fakes():
    assert isinstance(FakeEmbeddingProvider(), EmbeddingProvider)
    assert isinstance(FakeJudge(), Judge)


def test_the_check_catches_a_wrong_signature():
    class Wrong:
        async def embed(self, texts: list[str]) -> None: ...

    assert _signature(Wrong.embed) != _signature(EmbeddingProvider.embed)
