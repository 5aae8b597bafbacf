"""The ai side's runtime (SPEC §5): provider, judge, work queue and the in-process adapter.

``AiRuntime`` is what ``pinlog serve`` (through :mod:`pinlog.composition`) starts for the ai
component. It refuses to start when its tables are missing (run ``pinlog migrate``) or when no
usable preset exists for the current embedding profile (run ``pinlog presets load``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from pydantic import SecretStr
from sqlalchemy.ext.asyncio import AsyncEngine

from pinlog import metrics
from pinlog.ai import state
from pinlog.ai.batch import BatchRunner
from pinlog.ai.calibration import Calibration, calibration_defaults, calibration_for
from pinlog.ai.errors import SearchTimeout
from pinlog.ai.judges import JudgeConfig, judge_config
from pinlog.ai.pipeline import JobResult, Pipeline, PipelineConfig
from pinlog.ai.ports import EmbeddingProvider, Judge, close_resource
from pinlog.ai.providers import (BatchConfig, EmbeddingProviderConfig, MicroBatcher,
                                 build_batched_provider, embedding_config, next_embedding_config)
from pinlog.ai.retention import AiRetentionConfig
from pinlog.ai.rewrite import RewriteConfig
from pinlog.ai.routing import (DIMENSION_PROBE_TEXT, ProfileModels, ProfileRouter,
                               ProfileSwitched, check_stored_dimensions, probe_dimension)
from pinlog.ai.worker import Job, WorkQueue, db_slots
from pinlog.db.background import every
from pinlog.db.process_settings import HEARTBEAT_SECONDS
from pinlog.channels.base import RelevanceRule
from pinlog.contracts import ProcessRequest, SearchRequest, SearchResponse
from pinlog.errors import StartupError
from pinlog.settings import Settings

if TYPE_CHECKING:
    from pinlog.ai.channels import AiSearch
    from pinlog.ai.rewrite import QueryRewriter
    from pinlog.ai.search import Background

log = logging.getLogger(__name__)

#: Least seconds between two "work queue full" log lines (:meth:`AiRuntime._log_refusal`).
REFUSAL_LOG_INTERVAL = 10.0


__all__ = ["DIMENSION_PROBE_TEXT", "RETRY_AFTER_SECONDS", "AiConfig", "AiRuntime"]

#: Seconds a caller is told to wait after a 503 (the rescan recovers the row anyway).
RETRY_AFTER_SECONDS = 5


@dataclass(frozen=True)
class AiConfig:
    """Everything the ai component reads, built once from the settings
    (:func:`pinlog.composition.build_config`).

    Attributes:
        embedding: the configured embedding provider's model (``PINLOG_EMBEDDING_*``; its
            ``profile`` is the profile in force while the database records no other, SPEC §9).
        next_embedding: the next profile's provider model (``PINLOG_NEXT_EMBEDDING_*``, SPEC
            §9.1), or None.
        next_calibration: the next profile's thresholds (its per-profile defaults; the
            ``PINLOG_SEARCH_*``/``PINLOG_CANDIDATE_*``/``PINLOG_JUDGE_*`` overrides belong to
            the first provider's profile), or None.
        batching: the micro-batcher's bounds.
        judge: the configured judge's model (``PINLOG_JUDGE``).
        calibration: the thresholds of the configured profile (SPEC §8, §10).
        relevance: the search decision's parameters — the settings' lexical thresholds and the
            profile's calibrated strengths; core's search gets this same value (SPEC §10: one
            decision for ``/v1/search`` and ``/internal/v1/search``).
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
    relevance: RelevanceRule
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
    next_embedding: EmbeddingProviderConfig | None = None
    next_calibration: Calibration | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> AiConfig:
        """Raises: SettingsError (an unknown provider or judge name, one line; the next
        profile's settings, :func:`pinlog.ai.providers.next_embedding_config`)."""
        embedding = embedding_config(settings)
        calibration = calibration_for(settings, embedding.profile)
        next_embedding = next_embedding_config(settings)
        next_calibration = None
        if next_embedding is not None:
            next_calibration = calibration_defaults(next_embedding.profile)
        return cls(embedding=embedding, next_embedding=next_embedding,
                   next_calibration=next_calibration, batching=BatchConfig.from_settings(settings),
                   judge=judge_config(settings), calibration=calibration,
                   relevance=RelevanceRule.from_settings(
                       settings, doubt_strength=calibration.search_doubt_strength),
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


#: Stop reasons (:class:`~pinlog.ai.pipeline.JobResult` ``stopped``) after which a row has no
#: PENDING work to take over: ``None`` (the job ran) is one of them.
_NOTHING_TO_OWN = frozenset({None, "missing", "finished"})


class AiRuntime:
    """The ai component of one process.

    Args:
        config: the ai configuration.
        engine: async engine (its pool bounds the concurrent jobs).
        provider: embedding provider (default: ``config.embedding.build()``);
            always wrapped in a :class:`MicroBatcher` (unless it already is one). Its ``profile``
            is the first profile of this runtime.
        judge: keyword judge (default: ``pinlog.ai.judges.build_judge(config.judge, …)`` per
            profile; a given judge serves every profile).
        next_provider: the next profile's provider (default: ``config.next_embedding.build()``
            when the next profile is configured; SPEC §9.1).
        profile_refresh: seconds between two reads of the profiles' roles (default: the
            process heartbeat, ``pinlog.db.process_settings.HEARTBEAT_SECONDS``).
        owner: this process's id (``ProcessRegistry.process_id``): the owner its guarded starts
            record (SPEC §7.3.1); None → claims record no owner (the expiry is the backstop).

    Attributes:
        provider: the first profile's micro-batched provider.
        profiles: this replica's models by profile and its view of the database's roles
            (SPEC §9.1): search, keywords and the embedding stage use the active profile's.
        pipeline: the job runner (SPEC §5.2).
        profile: the active embedding profile (None before start).
    """

    def __init__(self, engine: AsyncEngine, config: AiConfig, *,
                 provider: EmbeddingProvider | None = None, judge: Judge | None = None,
                 next_provider: EmbeddingProvider | None = None,
                 profile_refresh: float | None = None, owner: str | None = None) -> None:
        self.config = config
        self.engine = engine
        self.owner = owner
        self._given_provider = provider
        self._given_judge = judge
        self._given_next = next_provider
        self.profile_refresh = HEARTBEAT_SECONDS if profile_refresh is None else profile_refresh
        self.provider: MicroBatcher | None = None
        self.profiles: ProfileRouter | None = None
        self.pipeline: Pipeline | None = None
        self.batches: BatchRunner | None = None
        self.queue: WorkQueue | None = None
        self.rewriter: QueryRewriter | None = None  # when PINLOG_SEARCH_REWRITE=llm
        self._owned: list[tuple[object, bool]] = []  # (batcher or judge, close its provider?)
        self._watch: asyncio.Task[None] | None = None
        # SPEC §10 / issue 28: each calibrated profile's embedded background, and the searches
        # by profile (built once per profile and background)
        self.backgrounds: dict[str, Background | None] = {}
        self.searchers: dict[str, AiSearch] = {}
        self._background_lock = asyncio.Lock()
        self._refused = 0  # 503s since the last "work queue full" log line
        self._refused_logged_at: float | None = None  # time.monotonic() of that line
        # SPEC §7.3.1: ids accepted over HTTP whose sending this process takes over, recorded
        # in batches by a background task (state.take_over_sending)
        self._taken: list[int] = []
        self._take_over_wake = asyncio.Event()
        # held while a take_over_sending statement runs (for the ids in _taking); a worker whose
        # batch shares ids with it takes it briefly to wait for its commit
        self._take_over_lock = asyncio.Lock()
        self._taking: frozenset[int] = frozenset()
        self._take_over_task: asyncio.Task[None] | None = None

    @property
    def profile(self) -> str | None:
        """The active embedding profile (SPEC §9.1), None before start."""
        return self.profiles.active_profile if self.profiles is not None else None

    @property
    def judge(self) -> Judge | None:
        """The active profile's judge (None before start or when it is not served)."""
        if self.profiles is None or not self.profiles.serves_active():
            return None
        return self.profiles.active().judge

    async def start(self) -> None:
        """Check the database, build provider/judge per configured profile, start the workers.

        Raises:
            StartupError: the ai tables are missing (``pinlog migrate``), or zero usable presets
                exist for the active profile (``pinlog presets load``), or a provider's real
                output length (probed once when the runtime builds the provider), the preset
                vectors or the stored vectors of its profile disagree with its dimension
                (SPEC §9: a new profile + ``pinlog reprocess --profile`` is the fix; the next
                profile's too, SPEC §9.1).
        """
        from pinlog.ai.presets import load_snapshot
        from pinlog.ai.rewrite import build_rewriter
        from pinlog.ai.routing import read_roles

        async with self.engine.connect() as conn:
            if not await state.ai_tables_present(conn):
                raise StartupError("the ai tables are missing: run `pinlog migrate` first")
        try:
            self.rewriter = build_rewriter(self.config.rewrite)
        except ValueError as exc:
            raise StartupError(str(exc)) from None
        try:
            models = [await self._models(self.config.embedding, self.config.calibration,
                                         self._given_provider)]
            if self.config.next_embedding is not None:
                assert self.config.next_calibration is not None
                models.append(await self._models(self.config.next_embedding,
                                                 self.config.next_calibration, self._given_next))
            async with self.engine.connect() as conn:
                router = ProfileRouter(models)
                router.update(await read_roles(conn))  # ERROR when the active one is not served
                snapshot = None
                if router.serves_active():
                    snapshot = await load_snapshot(conn, router.active_profile)
            if snapshot is not None and len(snapshot) == 0:
                raise StartupError(
                    f"no usable keyword presets for embedding profile {router.active_profile}: "
                    "run `pinlog presets load` first")
            # the Korean analyser behind cue matching and the lexical channel of search loads
            # in ~3-5 s: now, not inside the first keyword stage (which would stall while its
            # stage is PROCESSING) nor inside the first search (against its deadline)
            from pinlog.text import warm_up

            await asyncio.to_thread(warm_up)
        except BaseException:
            await self._close_owned()
            raise
        self.profiles = router
        self.provider = models[0].provider  # type: ignore[assignment]
        if router.serves_active():
            await self._embed_background(router.active(), at_start=True)
        config = self.config
        pool = getattr(self.engine.sync_engine.pool, "size", lambda: config.db_pool_size)()
        judge = models[0].judge
        assert judge is not None
        self.pipeline = Pipeline(self.engine, config.pipeline, models[0].provider, judge,
                                 db_slots=db_slots(min(pool, config.db_pool_size)),
                                 profiles=router, owner=self.owner)
        self.batches = BatchRunner(self.pipeline)
        self.queue = WorkQueue(self._run_job, capacity=config.work_queue_size,
                               concurrency=config.worker_concurrency,
                               batch_handler=self._run_batch,
                               batch_size=config.process_batch_size)
        self.queue.start()
        self._watch = asyncio.create_task(self._watch_profiles(), name="embedding-profile-roles")
        if self.owner is not None:
            self._take_over_task = asyncio.create_task(self._record_take_overs(),
                                                       name="ai-take-over-sending")
        log.info("ai runtime started", extra={"profile": self.profile,
                                              "count": self.queue.concurrency})

    async def _embed_background(self, models: ProfileModels, *,
                                at_start: bool = False) -> Background | None:
        """The background set of ``models``' profile for the per-query calibration of search
        (SPEC §10, issue 28), embedded once per profile — only for a calibrated profile
        (``search_strength``). At start-up a transient failure (endpoint briefly down) only
        defers it (WARNING): the first search embeds it then, and answers 503 while that fails.

        Raises:
            pinlog.ai.errors.ModelError: not at start-up, the background could not be embedded.
        """
        from pinlog.ai.errors import ModelError
        from pinlog.ai.search import Background

        if models.calibration.search_strength is None:
            return None
        async with self._background_lock:
            if self.backgrounds.get(models.profile) is None:
                try:
                    self.backgrounds[models.profile] = await Background.embed(models.provider)
                except ModelError as exc:
                    if not at_start or not exc.transient:
                        raise
                    log.warning("search background not embedded yet: provider unavailable",
                                extra={"error_class": "transient", "profile": models.profile})
        return self.backgrounds.get(models.profile)

    async def _searcher(self, models: ProfileModels, accepted: Sequence[str]) -> AiSearch:
        """The search of ``models``' profile (its provider, cuts, background, doubt strength;
        ``accepted``: the profiles a request may name, SPEC §9.1), rebuilt when its background
        appeared."""
        from pinlog.ai.channels import AiSearch
        from pinlog.ai.search import SearchCuts

        background = await self._embed_background(models)
        searcher = self.searchers.get(models.profile)
        if searcher is None or searcher.background is not background:
            calibration = models.calibration
            rule = replace(self.config.relevance,
                           doubt_strength=calibration.search_doubt_strength)
            searcher = AiSearch(self.engine, models.provider,
                                SearchCuts.from_calibration(calibration), rule,
                                background=background, rewrite=self.rewriter,
                                keyword_floor=calibration.candidate_floor,
                                accepted_profiles=accepted)
            self.searchers[models.profile] = searcher
        return searcher

    async def _models(self, embedding: EmbeddingProviderConfig, calibration: Calibration,
                      given: EmbeddingProvider | None) -> ProfileModels:
        """One profile's models: its micro-batched provider (probed when built here; SPEC §9),
        the stored vectors of the profile checked against its dimension, its judge.

        Raises:
            StartupError: as :meth:`start`.
        """
        if isinstance(given, MicroBatcher):
            batched = given
        else:
            try:
                batched = build_batched_provider(embedding, self.config.batching, given)
            except ValueError as exc:  # e.g. local-e5 with PINLOG_EMBEDDING_DIMENSION=256
                raise StartupError(f"embedding provider refused the settings: {exc} (a model "
                                   "change needs a new PINLOG_EMBEDDING_PROFILE, then `pinlog "
                                   "presets load` and `pinlog reprocess --profile`)") from None
            self._owned.append((batched, given is None))
        if given is not None and batched.profile != embedding.profile:
            log.warning("injected embedding provider's profile differs from the configured one; "
                        "the provider's profile is used", extra={"profile": batched.profile})
        elif given is None and batched.dimension != embedding.dimension:
            raise StartupError(
                "embedding provider dimension differs from PINLOG_EMBEDDING_DIMENSION")
        if given is None:
            await probe_dimension(batched.provider, batched.profile, embedding.dimension)
        async with self.engine.connect() as conn:
            await check_stored_dimensions(conn, batched.profile, batched.dimension)
        judge = self._given_judge
        if judge is None:
            from pinlog.ai.judges import build_judge

            judge = build_judge(self.config.judge, batched, calibration)
            self._owned.append((judge, False))
        return ProfileModels(batched.profile, batched, calibration, judge)

    async def _close_owned(self) -> None:
        """Close the batchers and judges this runtime built (never raises)."""
        owned, self._owned = self._owned, []
        for resource, close_provider in reversed(owned):
            try:
                if isinstance(resource, MicroBatcher):
                    await resource.aclose(close_provider=close_provider)
                else:
                    await close_resource(resource)
            except Exception:  # noqa: BLE001 - shutdown goes on
                log.exception("closing a model resource failed")

    async def _watch_profiles(self) -> None:
        """Re-read the profiles' roles every :attr:`profile_refresh` seconds (SPEC §9.1: no
        replica keeps the old profile for more than one heartbeat; the guards make even that
        window safe). A failed read is retried at the next beat."""
        await every(self.profile_refresh, self.refresh_profiles,
                    failure="embedding profile roles could not be read", log=log)

    async def refresh_profiles(self) -> bool:
        """Re-read the profiles' roles now. Returns True when they changed."""
        if self.profiles is None:
            return False
        async with self.engine.connect() as conn:
            return await self.profiles.refresh(conn)

    async def stop(self) -> None:
        """Stop the workers and close the providers. Queued jobs are dropped and running ones
        get the shutdown grace (:meth:`WorkQueue.stop`); what is left is this process's work
        (recorded owner: the rows it sent or took over, the stages it started), released to
        every live process's rescan when the process registry ends its lease — after this
        (SPEC §7.3.1). The last take-over records are written first."""
        if self._watch is not None:
            self._watch.cancel()
            await asyncio.gather(self._watch, return_exceptions=True)
            self._watch = None
        if self.queue is not None:
            await self.queue.stop(grace=self.config.shutdown_grace)
        if self._take_over_task is not None:
            self._take_over_task.cancel()
            await asyncio.gather(self._take_over_task, return_exceptions=True)
            self._take_over_task = None
            await self._flush_take_overs()
        await self._close_owned()
        if self.rewriter is not None:
            await close_resource(self.rewriter)

    async def ready(self) -> bool:
        """True when the database is reachable, this replica serves the active profile and
        presets are loaded for it (SPEC §5.1, §9.1)."""
        if self.profiles is None or self.queue is None or not self.queue.running:
            return False
        if not self.profiles.serves_active():
            return False
        from pinlog.ai.presets import load_snapshot

        try:
            async with self.engine.connect() as conn:
                return len(await load_snapshot(conn, self.profiles.active_profile)) > 0
        except Exception:  # noqa: BLE001 - not ready, whatever the reason
            return False

    async def submit(self, request: ProcessRequest, *, take_over: bool = False) -> int:
        """The in-process adapter of ``POST /internal/v1/context/process`` (SPEC §5.1).

        Args:
            take_over: the request came over HTTP (another process sent it): once accepted, this
                process records itself as the owner of the row's PENDING work, in batches
                (SPEC §7.3.1), so that its death or stop releases the row at once. In-process
                submits need nothing: the sender is this process.

        Returns:
            202 accepted (queued), 422 text longer than ``PINLOG_MAX_TEXT_CHARS`` (or empty),
            503 the work queue is full, the runtime is not running, or this replica has no
            provider for the database's active profile (SPEC §9.1) — the row stays PENDING;
            the rescan recovers it. Counted in ``pinlog_process_requests_total``. The job's log
            lines carry the caller's logging context (its ``request_id``: :mod:`pinlog.logs`).
        """
        if not 1 <= len(request.text) <= self.config.max_text_chars:
            metrics.PROCESS_REQUESTS.labels(outcome="invalid").inc()
            return 422
        if self.profiles is None or not self.profiles.serves_active() \
                or self.queue is None or not self.queue.offer(request):
            metrics.PROCESS_REQUESTS.labels(outcome="busy").inc()
            self._log_refusal(request)
            return 503
        metrics.PROCESS_REQUESTS.labels(outcome="accepted").inc()
        if take_over and self._take_over_task is not None:
            self._taken.append(request.context_id)
            self._take_over_wake.set()
        return 202

    async def _record_take_overs(self) -> None:
        """Write the take-over records as they come: one statement per batch (whatever was
        accepted while the previous one ran)."""
        while True:
            await self._take_over_wake.wait()
            self._take_over_wake.clear()
            await self._flush_take_overs()

    async def _flush_take_overs(self) -> None:
        """One ``take_over_sending`` for the ids accepted since the last one. A failure only
        loses the records (the sender's record and the expiry stay the backstop; WARNING)."""
        async with self._take_over_lock:
            ids, self._taken = self._taken, []
            if not ids or self.owner is None:
                return
            self._taking = frozenset(ids)
            try:
                async with self.engine.begin() as conn:
                    await state.take_over_sending(conn, ids, self.owner)
            except asyncio.CancelledError:  # stopping: the final flush in stop() writes them
                self._taken[:0] = ids
                raise
            except Exception as exc:  # noqa: BLE001 - an optimisation of recovery, never fatal
                log.warning("could not record the requests this process took over",
                            extra={"count": len(ids), "error_class": type(exc).__name__})
            finally:
                self._taking = frozenset()

    async def _before_batch_start(self, jobs: Sequence[Job]) -> set[int]:
        """Before a worker's batch start claims ``jobs``' rows (SPEC §7.3.1, docs/ARCHITECTURE.md
        "Re-claim by owner"): a ``take_over_sending`` statement in flight for any of them commits
        first — its row locks would make the batch start's ``SKIP LOCKED`` pass those rows over,
        and each would run alone as a single job (never wrong, but one model call and one write
        per context) — and then their ids leave the take-over list, since the claim records this
        process as the owner itself. A worker cancelled while it waits leaves them listed (the
        final flush of :meth:`stop` writes them).

        Returns:
            the ids taken off the list (:meth:`_after_batch` lists again those whose rows the
            batch left PENDING without a claim).
        """
        if not self._taken and not self._taking:
            return set()
        claimed = {job.request.context_id for job in jobs}
        if self._taking & claimed:
            async with self._take_over_lock:  # the statement in flight: wait for its commit
                pass
        # no suspension since the wait: the next flush cannot take the list in between
        return self._unlist(claimed)

    def _unlist(self, claimed: set[int]) -> set[int]:
        """Take ``claimed`` off the take-over list; returns those that were on it."""
        dropped = claimed.intersection(self._taken)
        if dropped:
            self._taken = [cid for cid in self._taken if cid not in dropped]
        return dropped

    def _after_batch(self, dropped: set[int], jobs: Sequence[Job],
                     results: Sequence[JobResult] | None) -> None:
        """List again for the take-over the ``dropped`` ids whose job stopped without a claim,
        their row still PENDING (the batch's pre-check failed — a database failure, or this
        replica not serving the active profile, SPEC §9.1 — or a contract violation), or all of
        them when the batch raised or was cancelled (``results`` None): this process accepted
        them, so it records itself as their owner as the single path does (the statement skips
        rows whose work is no longer PENDING). Not the ``missing`` and ``finished`` ones: no
        PENDING work is left to own."""
        if not dropped:
            return
        if results is None:
            again = list(dropped)
        else:
            again = [job.request.context_id for job, result in zip(jobs, results, strict=True)
                     if result.stopped not in _NOTHING_TO_OWN
                     and job.request.context_id in dropped]
        if again:
            self._taken.extend(again)
            self._take_over_wake.set()

    async def submit_batch(self, requests: Sequence[ProcessRequest], *,
                           take_over: bool = False) -> list[int]:
        """The in-process adapter of ``POST /internal/v1/context/process-batch``
        (docs/ARCHITECTURE.md "Batch path"): :meth:`submit` for each request, in order, without
        yielding in between, so waiting workers then take them together as batches
        (``PINLOG_PROCESS_BATCH_SIZE`` at a time). ``take_over`` as for :meth:`submit` (the
        batch came over HTTP: this process records itself as the owner of what it accepts,
        SPEC §7.3.1).

        Returns:
            one status per request: 202 accepted, 422 text longer than
            ``PINLOG_MAX_TEXT_CHARS`` (or empty), 503 the work queue was full when its turn
            came (its row stays PENDING). Each is counted as :meth:`submit` counts it; the
            refusals are logged as one line (:meth:`_log_refusal`).
        """
        # submit() never suspends: the whole batch is queued before any worker runs
        return [await self.submit(request, take_over=take_over) for request in requests]

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
        dropped = await self._before_batch_start(jobs)
        try:
            results = await self.batches.run([job.request for job in jobs],
                                             [job.log_context for job in jobs])
        except BaseException:  # crashed or cancelled (a stop): the final flush writes them
            self._after_batch(dropped, jobs, None)
            raise
        self._after_batch(dropped, jobs, results)
        return results

    async def join(self) -> None:
        """Wait until the work queue is drained and every accepted job has finished (tests)."""
        if self.queue is not None:
            await self.queue.join()

    async def search(self, request: SearchRequest) -> SearchResponse:
        """Personal search (SPEC §10) by the request's mode (:class:`pinlog.ai.channels.AiSearch`):
        ``hybrid`` — the ai side's channels and the shared decision; ``vector`` — the records
        the vector channel vouches for; ``score`` — the cosines of ``recordIds``' contexts. The
        query is embedded once (and reused by the second request of one search) — with the
        active profile's models (SPEC §9.1). The vectors are read in the same snapshot as the
        roles; when an activation committed since this replica last read them, the query is
        embedded again with the new active profile (once), so a search sees one profile or the
        other, never a mix and never nothing.

        Raises:
            pinlog.ai.search.ProfileMismatch: the request names a profile this replica does not
                serve (no model call).
            pinlog.ai.errors.ModelError: the query could not be embedded;
                :class:`~pinlog.ai.errors.SearchTimeout` when the whole search took longer than
                ``PINLOG_SEARCH_TIMEOUT`` (the query has its own embedding lane, ahead of the
                background backlog, so this means the model or the database is overloaded);
                :class:`~pinlog.ai.routing.ProfileNotServed` when this replica has no provider
                for the active profile.
            RuntimeError: the runtime is not started.
        """
        router = self._started_router()

        async def run() -> SearchResponse:
            for attempt in range(2):
                searcher = await self._searcher(router.active(), router.served)
                try:
                    return await searcher(request)
                except ProfileSwitched:
                    if attempt:
                        raise
                    await self.refresh_profiles()
            raise AssertionError("unreachable")

        async with self._search_deadline():
            return await run()

    async def prepare_search(self, request: SearchRequest) -> None:
        """Embed ``request``'s query now, ahead of the search's requests, when the active
        profile's model computes on this machine's CPU (:meth:`pinlog.ai.channels.AiSearch.
        prepare`: the in-process search client's hook, so core's channels read after the
        embedding instead of competing with it); by ``PINLOG_SEARCH_TIMEOUT``.

        Raises:
            pinlog.ai.errors.ModelError: as :meth:`search` (including its timeout).
            RuntimeError: the runtime is not started.
        """
        router = self._started_router()
        async with self._search_deadline():
            searcher = await self._searcher(router.active(), router.served)
            await searcher.prepare_request(request)

    def _started_router(self) -> ProfileRouter:
        """The profile router of the started runtime.

        Raises:
            RuntimeError: the runtime is not started.
        """
        router = self.profiles
        if router is None:
            raise RuntimeError("the ai runtime is not started")
        return router

    @contextlib.asynccontextmanager
    async def _search_deadline(self) -> AsyncIterator[None]:
        """The block, bounded by ``PINLOG_SEARCH_TIMEOUT`` (seconds).

        Raises:
            SearchTimeout: the deadline passed (counted as a ``timeout`` search request).
        """
        deadline = self.config.search_timeout
        try:
            async with asyncio.timeout(deadline):
                yield
        except TimeoutError:
            metrics.SEARCH_REQUESTS.labels("timeout").inc()
            raise SearchTimeout(f"search exceeded PINLOG_SEARCH_TIMEOUT ({deadline:g} s)") from None
