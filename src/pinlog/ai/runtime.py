"""The ai side's runtime (SPEC §5): provider, judge, work queue and the in-process adapter.

``AiRuntime`` is what ``pinlog serve`` (through :mod:`pinlog.composition`) starts for the ai
component. It refuses to start when its tables are missing (run ``pinlog migrate``) or when no
usable preset exists for the current embedding profile (run ``pinlog presets load``).
"""

from __future__ import annotations

import asyncio
import logging

from sqlalchemy.ext.asyncio import AsyncEngine

from pinlog import metrics
from pinlog.ai import state
from pinlog.ai.pipeline import JobResult, Pipeline
from pinlog.ai.ports import EmbeddingProvider, Judge, close_resource
from pinlog.ai.providers import MicroBatcher, build_batched_provider
from pinlog.ai.worker import WorkQueue, db_slots
from pinlog.contracts import ProcessRequest, SearchRequest, SearchResponse
from pinlog.errors import StartupError
from pinlog.settings import Settings

log = logging.getLogger(__name__)

#: Seconds a caller is told to wait after a 503 (the rescan recovers the row anyway).
RETRY_AFTER_SECONDS = 5


class AiRuntime:
    """The ai component of one process.

    Args:
        settings: all configuration.
        engine: async engine (its pool bounds the concurrent jobs).
        provider: embedding provider (default: :func:`pinlog.ai.providers.build_provider`);
            always wrapped in a :class:`MicroBatcher` (unless it already is one). Its ``profile``
            is the current embedding profile of this runtime.
        judge: keyword judge (default: ``pinlog.ai.judges.build_judge(settings, provider)``).

    Attributes:
        provider: the micro-batched provider (search embeds queries through it).
        pipeline: the job runner (SPEC §5.2).
        profile: the current embedding profile.
    """

    def __init__(self, settings: Settings, engine: AsyncEngine, *,
                 provider: EmbeddingProvider | None = None, judge: Judge | None = None) -> None:
        self.settings = settings
        self.engine = engine
        self._given_provider = provider
        self._given_judge = judge
        self.provider: MicroBatcher | None = None
        self.judge: Judge | None = None
        self.pipeline: Pipeline | None = None
        self.queue: WorkQueue | None = None
        self.profile: str | None = None

    async def start(self) -> None:
        """Check the database, build provider/judge, start the workers.

        Raises:
            StartupError: the ai tables are missing (``pinlog migrate``), or zero usable presets
                exist for the profile (``pinlog presets load``), or the provider disagrees with
                ``PINLOG_EMBEDDING_DIMENSION``.
        """
        from pinlog.ai.presets import load_snapshot

        async with self.engine.connect() as conn:
            if not await state.ai_tables_present(conn):
                raise StartupError("the ai tables are missing: run `pinlog migrate` first")
        given = self._given_provider
        if isinstance(given, MicroBatcher):
            batched = given
        else:
            batched = build_batched_provider(self.settings, given)
        if given is not None and batched.profile != self.settings.profile:
            log.warning("injected embedding provider's profile differs from the configured one; "
                        "the provider's profile is used", extra={"profile": batched.profile})
        elif given is None and batched.dimension != self.settings.dimension:
            raise StartupError(
                "embedding provider dimension differs from PINLOG_EMBEDDING_DIMENSION")
        self.profile = batched.profile
        try:
            async with self.engine.connect() as conn:
                snapshot = await load_snapshot(conn, self.profile)
            if len(snapshot) == 0:
                raise StartupError(
                    f"no usable keyword presets for embedding profile {self.profile}: "
                    "run `pinlog presets load` first")
            if any(p.cues for p in snapshot.presets):
                # the Korean analyser behind cue matching loads in ~3-5 s: now, not inside
                # the first keyword stage (which would stall while its stage is PROCESSING)
                from pinlog.text import warm_up

                await asyncio.to_thread(warm_up)
            judge = self._given_judge
            if judge is None:
                from pinlog.ai.judges import build_judge

                judge = build_judge(self.settings, batched)
        except BaseException:
            if batched is not given:
                await batched.aclose(close_provider=given is None)
            raise
        self.provider, self.judge = batched, judge
        pool = getattr(self.engine.sync_engine.pool, "size", lambda: self.settings.db_pool_size)()
        self.pipeline = Pipeline(self.settings, self.engine, batched, judge,
                                 db_slots=db_slots(min(pool, self.settings.db_pool_size)))
        self.queue = WorkQueue(self._run_job, capacity=self.settings.work_queue_size,
                               concurrency=self.settings.worker_concurrency)
        self.queue.start()
        log.info("ai runtime started", extra={"profile": self.profile,
                                              "count": self.queue.concurrency})

    async def stop(self) -> None:
        """Stop the workers (queued jobs are left to the rescan) and close the provider."""
        if self.queue is not None:
            await self.queue.stop()
        if self.provider is not None and self._given_provider is not self.provider:
            # our own batcher; the provider inside is closed only if we built it too
            await self.provider.aclose(close_provider=self._given_provider is None)
        if self.judge is not None and self._given_judge is None:
            await close_resource(self.judge)

    async def ready(self) -> bool:
        """True when the database is reachable and presets are loaded for the profile (SPEC §5.1)."""
        if self.profile is None or self.queue is None or not self.queue.running:
            return False
        from pinlog.ai.presets import load_snapshot

        try:
            async with self.engine.connect() as conn:
                return len(await load_snapshot(conn, self.profile)) > 0
        except Exception:  # noqa: BLE001 - not ready, whatever the reason
            return False

    async def submit(self, request: ProcessRequest, *, request_id: str | None = None) -> int:
        """The in-process adapter of ``POST /internal/v1/context/process`` (SPEC §5.1).

        Returns:
            202 accepted (queued), 422 text longer than ``PINLOG_MAX_TEXT_CHARS`` (or empty),
            503 the work queue is full or the runtime is not running (the row stays PENDING; the
            rescan recovers it). Counted in ``pinlog_process_requests_total``.
        """
        if not 1 <= len(request.text) <= self.settings.max_text_chars:
            metrics.PROCESS_REQUESTS.labels(outcome="invalid").inc()
            return 422
        if self.queue is None or not self.queue.offer(request, request_id):
            metrics.PROCESS_REQUESTS.labels(outcome="busy").inc()
            log.warning("work queue full; request refused with 503",
                        extra={"context_id": request.context_id, "request_id": request_id})
            return 503
        metrics.PROCESS_REQUESTS.labels(outcome="accepted").inc()
        return 202

    async def _run_job(self, request: ProcessRequest, request_id: str | None) -> JobResult:
        assert self.pipeline is not None
        return await self.pipeline.run(request, request_id=request_id)

    async def join(self) -> None:
        """Wait until the work queue is drained and every accepted job has finished (tests)."""
        if self.queue is not None:
            await self.queue.join()

    async def search(self, request: SearchRequest) -> SearchResponse:
        """Personal vector search (SPEC §10): embed the query once, exact cosine, cuts.

        Raises:
            pinlog.ai.search.ProfileMismatch: another profile was requested (no model call).
            pinlog.ai.errors.ModelError: the query could not be embedded.
            RuntimeError: the runtime is not started.
        """
        from pinlog.ai.calibration import calibration_for
        from pinlog.ai.search import SearchCuts, search

        if self.provider is None:
            raise RuntimeError("the ai runtime is not started")
        cuts = SearchCuts.from_calibration(calibration_for(self.settings))
        return await search(self.engine, self.provider, request, cuts)
