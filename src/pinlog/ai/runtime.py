"""The ai side's runtime (SPEC §5): provider, judge, work queue and the in-process adapter.

``AiRuntime`` is what ``pinlog serve`` (through :mod:`pinlog.composition`) starts for the ai
component. It refuses to start when its tables are missing (run ``pinlog migrate``) or when no
usable preset exists for the current embedding profile (run ``pinlog presets load``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from pydantic import SecretStr
from sqlalchemy.ext.asyncio import AsyncEngine

from pinlog import metrics
from pinlog.ai import state
from pinlog.ai.batch import BatchRunner
from pinlog.ai.calibration import Calibration, calibration_for
from pinlog.ai.errors import SearchTimeout
from pinlog.ai.judges import JudgeConfig, judge_config
from pinlog.ai.pipeline import JobResult, Pipeline, PipelineConfig
from pinlog.ai.ports import EmbeddingProvider, Judge, close_resource
from pinlog.ai.providers import (BatchConfig, EmbeddingProviderConfig, MicroBatcher,
                                 build_batched_provider, embedding_config)
from pinlog.ai.retention import AiRetentionConfig
from pinlog.ai.rewrite import RewriteConfig
from pinlog.ai.worker import Job, WorkQueue, db_slots
from pinlog.contracts import ProcessRequest, SearchRequest, SearchResponse
from pinlog.errors import StartupError
from pinlog.settings import Settings

if TYPE_CHECKING:
    from pinlog.ai.rewrite import QueryRewriter

log = logging.getLogger(__name__)

#: Least seconds between two "work queue full" log lines (:meth:`AiRuntime._log_refusal`).
REFUSAL_LOG_INTERVAL = 10.0


def _dimension_fix(profile: str, what: str, dimension: int) -> str:
    """The one-line refusal of SPEC §9's start-up dimension check."""
    return (f"embedding dimension mismatch under profile {profile}: {what}, expected {dimension} "
            "(PINLOG_EMBEDDING_DIMENSION). A profile names one vector space: set a new "
            "PINLOG_EMBEDDING_PROFILE, then run `pinlog presets load` and "
            "`pinlog reprocess --profile`")

#: The text embedded once at start-up to learn the provider's real output length (SPEC §9).
DIMENSION_PROBE_TEXT = "dimension probe"

#: Seconds a caller is told to wait after a 503 (the rescan recovers the row anyway).
RETRY_AFTER_SECONDS = 5


@dataclass(frozen=True)
class AiConfig:
    """Everything the ai component reads, built once from the settings
    (:func:`pinlog.composition.build_config`).

    Attributes:
        embedding: the configured embedding provider's model (``PINLOG_EMBEDDING_*``; its
            ``profile`` is the profile in force, SPEC §9).
        batching: the micro-batcher's bounds.
        judge: the configured judge's model (``PINLOG_JUDGE``).
        calibration: the thresholds of the configured profile (SPEC §8, §10).
        pipeline: what one job reads.
        rewrite: the optional query rewrite.
        work_queue_size, worker_concurrency: ``PINLOG_WORK_QUEUE_SIZE``,
            ``PINLOG_WORKER_CONCURRENCY`` (SPEC §5.4).
        process_batch_size: ``PINLOG_PROCESS_BATCH_SIZE``, most waiting jobs a worker runs
            together through the batch path (:mod:`pinlog.ai.batch`).
        db_pool_size: ``PINLOG_DB_POOL_SIZE`` (bounds the jobs' database steps).
        max_text_chars: ``PINLOG_MAX_TEXT_CHARS`` (longer texts → 422).
        search_timeout: ``PINLOG_SEARCH_TIMEOUT``, seconds.
        shutdown_grace: ``PINLOG_SHUTDOWN_GRACE``, seconds.
        internal_secrets: ``PINLOG_INTERNAL_SECRETS`` accepted on ``/internal/*``.
        retention: the ai part of the retention job (``PINLOG_RETENTION_*``, issue 31).
    """

    embedding: EmbeddingProviderConfig
    batching: BatchConfig
    judge: JudgeConfig
    calibration: Calibration
    pipeline: PipelineConfig
    rewrite: RewriteConfig
    work_queue_size: int
    worker_concurrency: int
    process_batch_size: int
    db_pool_size: int
    max_text_chars: int
    search_timeout: float
    shutdown_grace: float
    internal_secrets: tuple[SecretStr, ...]
    retention: AiRetentionConfig

    @classmethod
    def from_settings(cls, settings: Settings) -> AiConfig:
        """Raises: SettingsError (an unknown provider or judge name, one line)."""
        embedding = embedding_config(settings)
        calibration = calibration_for(settings, embedding.profile)
        return cls(embedding=embedding, batching=BatchConfig.from_settings(settings),
                   judge=judge_config(settings), calibration=calibration,
                   pipeline=PipelineConfig.from_settings(settings, calibration),
                   rewrite=RewriteConfig.from_settings(settings),
                   work_queue_size=settings.work_queue_size,
                   worker_concurrency=settings.worker_concurrency,
                   process_batch_size=settings.process_batch_size,
                   db_pool_size=settings.db_pool_size, max_text_chars=settings.max_text_chars,
                   search_timeout=settings.search_timeout,
                   shutdown_grace=settings.shutdown_grace,
                   internal_secrets=tuple(settings.internal_secrets),
                   retention=AiRetentionConfig.from_settings(settings))

    def secret_values(self) -> list[str]:
        """The accepted internal secrets' values (compare in constant time; never log them)."""
        return [secret.get_secret_value() for secret in self.internal_secrets]


class AiRuntime:
    """The ai component of one process.

    Args:
        config: the ai configuration.
        engine: async engine (its pool bounds the concurrent jobs).
        provider: embedding provider (default: ``config.embedding.build()``);
            always wrapped in a :class:`MicroBatcher` (unless it already is one). Its ``profile``
            is the current embedding profile of this runtime.
        judge: keyword judge (default: ``pinlog.ai.judges.build_judge(config.judge, …)``).

    Attributes:
        provider: the micro-batched provider (search embeds queries through it).
        pipeline: the job runner (SPEC §5.2).
        profile: the current embedding profile.
    """

    def __init__(self, engine: AsyncEngine, config: AiConfig, *,
                 provider: EmbeddingProvider | None = None, judge: Judge | None = None) -> None:
        self.config = config
        self.engine = engine
        self._given_provider = provider
        self._given_judge = judge
        self.provider: MicroBatcher | None = None
        self.judge: Judge | None = None
        self.pipeline: Pipeline | None = None
        self.batches: BatchRunner | None = None
        self.queue: WorkQueue | None = None
        self.profile: str | None = None
        self.rewriter: QueryRewriter | None = None  # when PINLOG_SEARCH_REWRITE=llm
        self._refused = 0  # 503s since the last "work queue full" log line
        self._refused_logged_at: float | None = None  # time.monotonic() of that line

    async def start(self) -> None:
        """Check the database, build provider/judge, start the workers.

        Raises:
            StartupError: the ai tables are missing (``pinlog migrate``), or zero usable presets
                exist for the profile (``pinlog presets load``), or the provider's real output
                length (probed once when the runtime builds the provider), the preset vectors
                or the stored embeddings of the profile disagree with the dimension (SPEC §9:
                a new profile + ``pinlog reprocess --profile`` is the fix).
        """
        from pinlog.ai.presets import load_snapshot
        from pinlog.ai.rewrite import build_rewriter

        async with self.engine.connect() as conn:
            if not await state.ai_tables_present(conn):
                raise StartupError("the ai tables are missing: run `pinlog migrate` first")
        try:
            self.rewriter = build_rewriter(self.config.rewrite)
        except ValueError as exc:
            raise StartupError(str(exc)) from None
        given = self._given_provider
        if isinstance(given, MicroBatcher):
            batched = given
        else:
            try:
                batched = build_batched_provider(self.config.embedding, self.config.batching,
                                                 given)
            except ValueError as exc:  # e.g. local-e5 with PINLOG_EMBEDDING_DIMENSION=256
                raise StartupError(f"embedding provider refused the settings: {exc} (a model "
                                   "change needs a new PINLOG_EMBEDDING_PROFILE, then `pinlog "
                                   "presets load` and `pinlog reprocess --profile`)") from None
        if given is not None and batched.profile != self.config.embedding.profile:
            log.warning("injected embedding provider's profile differs from the configured one; "
                        "the provider's profile is used", extra={"profile": batched.profile})
        elif given is None and batched.dimension != self.config.embedding.dimension:
            raise StartupError(
                "embedding provider dimension differs from PINLOG_EMBEDDING_DIMENSION")
        self.profile = batched.profile
        try:
            if given is None:
                await self._probe_dimension(batched)
            async with self.engine.connect() as conn:
                await self._check_stored_dimensions(conn, batched)
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

                judge = build_judge(self.config.judge, batched, self.config.calibration)
        except BaseException:
            if batched is not given:
                await batched.aclose(close_provider=given is None)
            raise
        self.provider, self.judge = batched, judge
        config = self.config
        pool = getattr(self.engine.sync_engine.pool, "size", lambda: config.db_pool_size)()
        self.pipeline = Pipeline(self.engine, config.pipeline, batched, judge,
                                 db_slots=db_slots(min(pool, config.db_pool_size)))
        self.batches = BatchRunner(self.pipeline)
        self.queue = WorkQueue(self._run_job, capacity=config.work_queue_size,
                               concurrency=config.worker_concurrency,
                               batch_handler=self._run_batch,
                               batch_size=config.process_batch_size)
        self.queue.start()
        log.info("ai runtime started", extra={"profile": self.profile,
                                              "count": self.queue.concurrency})

    async def _probe_dimension(self, batched: MicroBatcher) -> None:
        """Embed one probe text with the configured provider and compare the real output length
        with ``PINLOG_EMBEDDING_DIMENSION`` (SPEC §9). A transient failure (endpoint briefly
        down) only skips the probe (WARNING): every later answer is length-checked anyway.

        Raises:
            StartupError: the provider answers with another length (one line naming the fix).
        """
        from pinlog.ai.errors import ModelError

        try:
            out = await batched.provider.embed([DIMENSION_PROBE_TEXT], "passage")
            got = int(np.asarray(out).shape[-1])
        except ModelError as exc:
            if exc.transient:
                log.warning("embedding dimension probe skipped: provider unavailable",
                            extra={"error_class": "transient"})
                return
            if "vector length" not in str(exc):
                raise StartupError(f"embedding provider refused the start-up probe: {exc}") from None
            raise StartupError(_dimension_fix(self.profile or "", f"provider says {exc}",
                                              self.config.embedding.dimension)) from None
        if got != self.config.embedding.dimension:
            raise StartupError(_dimension_fix(self.profile or "", f"the provider returns {got}",
                                              self.config.embedding.dimension))

    async def _check_stored_dimensions(self, conn: object, batched: MicroBatcher) -> None:
        """Preset vectors and context embeddings stored for the profile must have the provider's
        dimension (SPEC §9).

        Raises:
            StartupError: one line naming what differs and the fix.
        """
        presets, other = await state.stored_dimensions(conn, batched.profile,  # type: ignore[arg-type]
                                                       batched.dimension)
        wrong = [d for d in presets if d != batched.dimension]
        if wrong:
            raise StartupError(_dimension_fix(batched.profile, f"stored preset vectors have {wrong[0]}",
                                              batched.dimension))
        if other is not None:
            raise StartupError(_dimension_fix(batched.profile, f"stored embeddings have {other}",
                                              batched.dimension))

    async def stop(self) -> None:
        """Stop the workers (queued jobs are left to the rescan) and close the provider."""
        if self.queue is not None:
            await self.queue.stop(grace=self.config.shutdown_grace)
        if self.provider is not None and self._given_provider is not self.provider:
            # our own batcher; the provider inside is closed only if we built it too
            await self.provider.aclose(close_provider=self._given_provider is None)
        if self.judge is not None and self._given_judge is None:
            await close_resource(self.judge)
        if self.rewriter is not None:
            await close_resource(self.rewriter)

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

    async def submit(self, request: ProcessRequest) -> int:
        """The in-process adapter of ``POST /internal/v1/context/process`` (SPEC §5.1).

        Returns:
            202 accepted (queued), 422 text longer than ``PINLOG_MAX_TEXT_CHARS`` (or empty),
            503 the work queue is full or the runtime is not running (the row stays PENDING; the
            rescan recovers it). Counted in ``pinlog_process_requests_total``. The job's log
            lines carry the caller's logging context (its ``request_id``: :mod:`pinlog.logs`).
        """
        if not 1 <= len(request.text) <= self.config.max_text_chars:
            metrics.PROCESS_REQUESTS.labels(outcome="invalid").inc()
            return 422
        if self.queue is None or not self.queue.offer(request):
            metrics.PROCESS_REQUESTS.labels(outcome="busy").inc()
            self._log_refusal(request)
            return 503
        metrics.PROCESS_REQUESTS.labels(outcome="accepted").inc()
        return 202

    async def submit_batch(self, requests: Sequence[ProcessRequest]) -> list[int]:
        """The in-process adapter of ``POST /internal/v1/context/process-batch``
        (docs/ARCHITECTURE.md "Batch path"): :meth:`submit` for each request, in order, without
        yielding in between, so waiting workers then take them together as batches
        (``PINLOG_PROCESS_BATCH_SIZE`` at a time).

        Returns:
            one status per request: 202 accepted, 422 text longer than
            ``PINLOG_MAX_TEXT_CHARS`` (or empty), 503 the work queue was full when its turn
            came (its row stays PENDING). Each is counted as :meth:`submit` counts it; the
            refusals are logged as one line (:meth:`_log_refusal`).
        """
        # submit() never suspends: the whole batch is queued before any worker runs
        return [await self.submit(request) for request in requests]

    def _log_refusal(self, request: ProcessRequest) -> None:
        """One WARNING per :data:`REFUSAL_LOG_INTERVAL` seconds while the work queue refuses
        requests, with the number refused since the previous line (``count``); every refusal
        is counted in ``pinlog_process_requests_total{outcome="busy"}``. A backlog re-sent
        faster than it is processed (an import, a rescan round) would otherwise log one line
        per context, thousands a minute, and take CPU from the model."""
        self._refused += 1
        now = time.monotonic()
        if self._refused_logged_at is not None and \
                now - self._refused_logged_at < REFUSAL_LOG_INTERVAL:
            return
        log.warning("work queue full; requests refused with 503 (the rows stay PENDING)",
                    extra={"context_id": request.context_id, "count": self._refused})
        self._refused, self._refused_logged_at = 0, now

    async def _run_job(self, request: ProcessRequest) -> JobResult:
        assert self.pipeline is not None
        return await self.pipeline.run(request)

    async def _run_batch(self, jobs: Sequence[Job]) -> list[JobResult]:
        assert self.batches is not None
        return await self.batches.run([job.request for job in jobs],
                                      [job.log_context for job in jobs])

    async def join(self) -> None:
        """Wait until the work queue is drained and every accepted job has finished (tests)."""
        if self.queue is not None:
            await self.queue.join()

    async def search(self, request: SearchRequest) -> SearchResponse:
        """Personal vector search (SPEC §10): embed the query once, exact cosine, cuts.

        Raises:
            pinlog.ai.search.ProfileMismatch: another profile was requested (no model call).
            pinlog.ai.errors.ModelError: the query could not be embedded;
                :class:`~pinlog.ai.errors.SearchTimeout` when the whole search took longer than
                ``PINLOG_SEARCH_TIMEOUT`` (the query has its own embedding lane, ahead of the
                background backlog, so this means the model or the database is overloaded).
            RuntimeError: the runtime is not started.
        """
        from pinlog.ai.search import SearchCuts, search

        if self.provider is None:
            raise RuntimeError("the ai runtime is not started")
        calibration = self.config.calibration
        cuts = SearchCuts.from_calibration(calibration)
        deadline = self.config.search_timeout
        try:
            return await asyncio.wait_for(search(self.engine, self.provider, request, cuts,
                                                 rewrite=self.rewriter,
                                                 keyword_floor=calibration.candidate_floor),
                                          deadline)
        except TimeoutError:
            metrics.SEARCH_REQUESTS.labels("timeout").inc()
            raise SearchTimeout(f"search exceeded PINLOG_SEARCH_TIMEOUT ({deadline:g} s)") from None
