"""Fake model providers for tests, plugged in at exactly the ai Protocols (``pinlog.ai.ports``).

Never a fake database: these only replace the embedding model and the judge. Both count their
calls and offer hooks so a test can hold a call mid-flight (``gate = fake.hold()``; wait for
``await gate.wait_entered()``; do something, e.g. delete the context over another connection;
then ``gate.open()``) and scripted errors (``fake.fail_next(TransientModelError, times=2)``).

Usage::

    provider = FakeEmbeddingProvider()                     # profile "fake-profile-v1", dim 8
    provider = FakeEmbeddingProvider(vectors={"quiet cafe": [1, 0, 0, 0, 0, 0, 0, 0]})
    judge = FakeJudge()                                    # picks the best candidate
    judge = FakeJudge(answer=JudgeAnswer(picks=(), model_profile="fake-judge-v1"))
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Callable, Mapping, Sequence

import numpy as np

from pinlog.ai.errors import ModelError
from pinlog.ai.ports import Candidate, EmbedKind, JudgeAnswer, Pick

__all__ = ["FakeEmbeddingProvider", "FakeJudge", "Gate", "fake_vector"]


def fake_vector(text: str, dimension: int = 8) -> np.ndarray:
    """Deterministic unit vector for ``text``: ``(dimension,)`` float32 from sha256(text)."""
    seed = int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")
    vec = np.random.default_rng(seed).standard_normal(dimension).astype(np.float32)
    return vec / np.linalg.norm(vec)


def unit(values: Sequence[float]) -> np.ndarray:
    """``values`` as an L2-normalised float32 vector."""
    vec = np.asarray(values, dtype=np.float32)
    return vec / np.linalg.norm(vec)


class Gate:
    """Holds one model call until the test opens it.

    ``entered`` is set when the fake call reaches the gate; the call returns only after
    ``open()``. Create it inside the running event loop (``fake.hold()`` does).
    """

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    async def wait_entered(self, timeout: float = 10.0) -> None:
        """Wait until a call is held at the gate (raises TimeoutError after ``timeout`` s)."""
        await asyncio.wait_for(self.entered.wait(), timeout)

    def open(self) -> None:
        self.release.set()

    async def _pass(self, timeout: float = 30.0) -> None:
        self.entered.set()
        await asyncio.wait_for(self.release.wait(), timeout)


class _Scripted:
    """Shared call counting, gates, hooks and scripted errors."""

    def __init__(self) -> None:
        self.calls = 0
        self.gate: Gate | None = None
        #: Awaited (if it returns an awaitable) at the start of every call, with the call args.
        self.on_call: Callable[..., Awaitable[None] | None] | None = None
        self._errors: list[ModelError] = []

    def hold(self) -> Gate:
        """Install a gate that holds the NEXT calls until ``gate.open()``; returns it."""
        self.gate = Gate()
        return self.gate

    def fail_next(self, error: type[ModelError] | ModelError, times: int = 1,
                  message: str = "scripted failure") -> None:
        """Make the next ``times`` calls raise ``error`` (a class or an instance)."""
        for _ in range(times):
            self._errors.append(error(message) if isinstance(error, type) else error)

    async def _enter(self, *args: object) -> None:
        self.calls += 1
        if self.on_call is not None:
            result = self.on_call(*args)
            if asyncio.iscoroutine(result) or isinstance(result, asyncio.Future):
                await result
        if self.gate is not None:
            gate = self.gate
            await gate._pass()
        if self._errors:
            raise self._errors.pop(0)


class FakeEmbeddingProvider(_Scripted):
    """An :class:`pinlog.ai.ports.EmbeddingProvider` for tests.

    Args:
        profile: profile string it claims to produce.
        dimension: vector length it returns.
        vectors: optional ``text → vector`` map (normalised on use) so a test controls
            similarity; other texts get :func:`fake_vector`.
        wrong_dimension: return vectors of this length instead (to test the permanent
            wrong-length error).

    Attributes:
        calls: number of ``embed`` calls; ``texts``: every text embedded, in order;
        kinds: the ``kind`` of each call; ``batches``: the size of each call.
    """

    def __init__(self, profile: str = "fake-profile-v1", dimension: int = 8, *,
                 vectors: Mapping[str, Sequence[float]] | None = None,
                 wrong_dimension: int | None = None) -> None:
        super().__init__()
        self.profile = profile
        self.dimension = dimension
        self.vectors = {k: unit(v) for k, v in (vectors or {}).items()}
        self.wrong_dimension = wrong_dimension
        self.texts: list[str] = []
        self.kinds: list[str] = []
        self.batches: list[int] = []

    def vector_for(self, text: str) -> np.ndarray:
        """The vector this fake returns for ``text`` (``(dimension,)`` float32)."""
        if text in self.vectors:
            return self.vectors[text]
        return fake_vector(text, self.dimension)

    async def embed(self, texts: Sequence[str], kind: EmbedKind) -> np.ndarray:
        """``(len(texts), dimension)`` float32; raises scripted errors first."""
        texts = list(texts)
        self.texts.extend(texts)
        self.kinds.append(kind)
        self.batches.append(len(texts))
        await self._enter(texts, kind)
        if self.wrong_dimension is not None:
            return np.stack([fake_vector(t, self.wrong_dimension) for t in texts])
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return np.stack([self.vector_for(t) for t in texts]).astype(np.float32)


class FakeJudge(_Scripted):
    """A :class:`pinlog.ai.ports.Judge` for tests.

    Args:
        answer: a fixed :class:`JudgeAnswer`, or a callable ``(text, candidates) -> JudgeAnswer``.
            Default: pick the best candidate with confidence 0.9.
        model_profile: reported when the default answer is used.

    Attributes:
        calls: number of ``judge`` calls; ``seen``: ``(text, candidate ids)`` of each call.
    """

    def __init__(self, answer: JudgeAnswer | Callable[[str, Sequence[Candidate]], JudgeAnswer]
                 | None = None, *, model_profile: str = "fake-judge-v1") -> None:
        super().__init__()
        self.answer = answer
        self.model_profile = model_profile
        self.seen: list[tuple[str, tuple[int, ...]]] = []

    async def judge(self, text: str, candidates: Sequence[Candidate]) -> JudgeAnswer:
        self.seen.append((text, tuple(c.preset.id for c in candidates)))
        await self._enter(text, candidates)
        if self.answer is None:
            best = max(candidates, key=lambda c: c.similarity)
            return JudgeAnswer(picks=(Pick(best.preset.id, 0.9),), model_profile=self.model_profile)
        if isinstance(self.answer, JudgeAnswer):
            return self.answer
        return self.answer(text, candidates)
