"""The background job of one process request (SPEC §5.2), step by step.

1. Cheap pre-check (no lock): stop when the state row is missing or no stage is unfinished;
   stop on a contract violation (same ``contextId``, different text: SPEC §5.6).
2. Embedding stage: reuse a COMPLETED vector of the current profile; else guarded start (0 rows →
   skip), model call outside any transaction (micro-batched, 3 attempts with capped backoff),
   then a short save transaction: ``FOR UPDATE``, guarded upsert, guarded complete — a failed
   guard rolls back and discards the result.
3. Keyword stage, always attempted: guarded start (needs embedding COMPLETED), vector (carried or
   read), one preset snapshot, candidates, judge outside any transaction (zero candidates → no
   judge), save transaction: ``FOR UPDATE``, delete + insert keyword rows, analysis row, guarded
   complete.
4. The stages commit separately; no network call ever happens inside a transaction.

Errors (SPEC §5.5, §6): transient → the stage stays PROCESSING, ``last_error`` + event row, WARN;
permanent → that stage FAILED (guarded), ``last_error`` + event row, ERROR. 0-row guards,
discarded saves, missing rows, cancellation, zero candidates and zero picks are not errors.
Logs carry ids only, never the text.

Ownership (SPEC §7.3.1): each guarded start records this process (``owner``, its
:class:`~pinlog.db.process_settings.ProcessRegistry` id) and returns a
:class:`~pinlog.ai.state.Claim`; every later write of that stage carries it, so a job whose claim
was taken over (its process looked gone, the rescan or another start took the stage) writes
nothing — the save is discarded (INFO). A step that fails only because the database is
unreachable is run again when the database is back (:meth:`Pipeline._db`, for at most the
processing expiry), with the same claim: the model result is not lost and nobody else can have
saved meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import TypeVar

import numpy as np
import psycopg
from sqlalchemy import exc as sa_exc
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from pinlog import metrics
from pinlog.ai import state
from pinlog.ai.calibration import GENERIC, Calibration
from pinlog.ai.candidates import select_candidates
from pinlog.ai.errors import (
    BudgetExceeded,
    ModelError,
    PermanentModelError,
    TransientModelError,
    is_transient_sqlstate,
    redact,
    with_retries,
)
from pinlog.ai.ports import Candidate, EmbeddingProvider, Judge, JudgeAnswer, Pick, PresetSnapshot
from pinlog.ai.presets import load_snapshot
from pinlog.ai.routing import ProfileModels, ProfileNotServed, ProfileRouter
from pinlog.ai.vectors import check_embeddings
from pinlog.channels.lexical import place_meta_text
from pinlog.db.engine import autocommit
from pinlog.contracts import ProcessRequest
from pinlog.db.engine import is_database_unreachable
from pinlog.settings import RetryPolicy, Settings
from pinlog.states import Stage, Status
from pinlog.text import lexical_terms

log = logging.getLogger(__name__)
T = TypeVar("T")

#: ``model_profile`` of the analysis row when there were zero candidates (no judge answered).
NO_CANDIDATES_PROFILE = "none:no-candidates"
#: First and longest pause (seconds) between two tries of a job's database step while the
#: database is unavailable (:meth:`Pipeline._db`).
DB_RETRY_PAUSE = (0.5, 5.0)


class _Discard(Exception):
    """A guard of a save transaction matched 0 rows: roll back, discard the result (INFO)."""


@dataclass(frozen=True)
class JobResult:
    """What one job did, per stage: ``completed``, ``reused``, ``skipped``, ``discarded``,
    ``transient``, ``permanent``, ``internal``; and ``stopped`` when the pre-check ended the job
    (``missing``, ``finished``, ``contract_violation``, ``transient``)."""

    embedding: str
    keyword: str
    stopped: str | None = None


def text_sha256(text: str) -> bytes:
    """sha256 of the exact text embedded, UTF-8 (SPEC §5.6): the request's text, which the
    contract already put in the one normalised form (:func:`pinlog.text.normalize`)."""
    return hashlib.sha256(text.encode("utf-8")).digest()


def classify(exc: BaseException) -> tuple[str, str]:
    """``(class, redacted reason)`` of a job failure (SPEC §6).

    Classes: ``transient`` (model transient, timeouts, DB SQLSTATE classes 08/40/53/57/58 and
    55P03, lost connections, pool exhaustion), ``permanent`` (model permanent, other SQLSTATEs),
    ``internal`` (anything else: a bug; handled like transient so the rescan can retry, logged
    with its type).
    """
    if isinstance(exc, ModelError):
        return ("transient" if exc.transient else "permanent"), str(exc)
    if isinstance(exc, TimeoutError):
        return "transient", "timeout"
    if isinstance(exc, sa_exc.TimeoutError):
        return "transient", "database pool timeout"
    if isinstance(exc, (sa_exc.DBAPIError, psycopg.Error)):
        orig = exc.orig if isinstance(exc, sa_exc.DBAPIError) else exc
        sqlstate = getattr(orig, "sqlstate", None)
        lost = isinstance(exc, sa_exc.DBAPIError) and exc.connection_invalidated
        no_state_operational = sqlstate is None and isinstance(
            orig, (psycopg.OperationalError, psycopg.InterfaceError))
        if is_transient_sqlstate(sqlstate) or lost or no_state_operational:
            return "transient", f"database error {sqlstate or type(orig).__name__}"
        return "permanent", f"database error {sqlstate or type(orig).__name__}"
    return "internal", f"internal error {type(exc).__name__}"


@dataclass(frozen=True)
class PipelineConfig:
    """What one job reads (SPEC §5.2, §6, §8).

    Attributes:
        processing_expiry: ``PINLOG_PROCESSING_EXPIRY`` (a guarded start may re-claim a stage
            PROCESSING for longer).
        embedding_timeout, llm_timeout: ``PINLOG_EMBEDDING_TIMEOUT`` / ``PINLOG_LLM_TIMEOUT``,
            seconds per model call.
        retries: attempts and backoff of a model call (SPEC §6 budget: ``retries.budget``).
        candidate_top_k: ``PINLOG_CANDIDATE_TOP_K``.
        candidate_floor: the calibrated candidate floor of the configured profile.
        max_picks: most keywords stored per context, whatever the judge answered
            (``PINLOG_JUDGE_MAX_PICKS``, per profile: 3 for the shipped profiles; SPEC §8).
    """

    processing_expiry: timedelta
    embedding_timeout: float
    llm_timeout: float
    retries: RetryPolicy
    candidate_top_k: int
    candidate_floor: float
    max_picks: int = 3

    @classmethod
    def from_settings(cls, settings: Settings, calibration: Calibration) -> PipelineConfig:
        return cls(processing_expiry=settings.processing_expiry,
                   embedding_timeout=settings.embedding_timeout,
                   llm_timeout=settings.llm_timeout, retries=settings.retries,
                   candidate_top_k=settings.candidate_top_k,
                   candidate_floor=calibration.candidate_floor,
                   max_picks=calibration.max_picks)


class Pipeline:
    """Runs the SPEC §5.2 job for one :class:`~pinlog.contracts.ProcessRequest` at a time
    (many jobs may run concurrently on one instance).

    Args:
        engine: async engine; each DB step takes a pooled connection briefly (at most one per job
            at any moment), never across a model call.
        config: expiry, attempts, backoff, timeouts, top-K, candidate floor.
        provider: the (micro-batched) embedding provider; its ``profile`` is the current profile.
        judge: the keyword judge (does its own attempts; bounded here by the budget rule).
        sleep: backoff sleep (tests may record it).
        db_slots: DB steps running at once (default: the engine's pool size minus 2, so the
            API and search always find a connection).
        profiles: this replica's models by profile and its view of the database's roles
            (SPEC §9.1; the ai runtime's). Default: ``provider`` and ``judge`` as the only
            profile, with ``config.candidate_floor`` and ``config.max_picks``. The embedding
            stage uses the active profile's models, and also embeds for the building profile
            when this replica has its provider; the keyword stage uses the models (judge,
            candidate floor, most picks) of the stored vector's profile.
        owner: this process's id (``ProcessRegistry.process_id``) that the guarded starts record
            as the owner of their claims (SPEC §7.3.1); None → recorded as unknown (the expiry
            is then the only backstop).
    """

    def __init__(self, engine: AsyncEngine, config: PipelineConfig, provider: EmbeddingProvider,
                 judge: Judge, *, sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
                 db_slots: int | None = None, profiles: ProfileRouter | None = None,
                 owner: str | None = None) -> None:
        self.config = config
        self.engine = engine
        self.owner = owner
        self.profiles = profiles or ProfileRouter([ProfileModels(
            provider.profile, provider, replace(GENERIC, candidate_floor=config.candidate_floor,
                                                max_picks=config.max_picks), judge)])
        self._sleep = sleep
        self.expiry = config.processing_expiry
        self._snapshot_cache: tuple[str, str, PresetSnapshot] | None = None
        #: Single-statement steps (pre-check, guarded starts, error records, reads) run in
        #: autocommit: one statement is atomic on its own, and BEGIN/COMMIT round trips are
        #: saved (the database CPU competes with the model on small machines, SPEC §5.4).
        self._auto = autocommit(engine)
        pool = getattr(engine.sync_engine.pool, "size", lambda: 10)()
        self._db_slots = asyncio.Semaphore(db_slots or max(1, pool - 2))

    @property
    def profile(self) -> str:
        """The active embedding profile (SPEC §9.1; the profile of the first provider until the
        database records another)."""
        return self.profiles.active_profile

    @property
    def provider(self) -> EmbeddingProvider:
        """The active profile's provider (raises ProfileNotServed when this replica has none)."""
        return self.profiles.active().provider

    @property
    def judge(self) -> Judge:
        """The active profile's judge."""
        judge = self.profiles.active().judge
        assert judge is not None
        return judge

    async def _refresh_profiles(self) -> bool:
        """Re-read the profiles' roles (a guard said they moved). True when they changed."""
        try:
            async with self._connection(autocommit=True) as conn:
                return await self.profiles.refresh(conn)
        except Exception:  # noqa: BLE001 - the caller goes on with the view it has
            return False

    # --- budgets (SPEC §6) -------------------------------------------------------------------
    @property
    def embedding_budget(self) -> float:
        """Longest an embedding stage's model calls may take, seconds: timeout × attempts + backoff."""
        return self.config.retries.budget(self.config.embedding_timeout)

    @property
    def judge_budget(self) -> float:
        """Longest a judge call may take, seconds: llm timeout × attempts + backoff."""
        return self.config.retries.budget(self.config.llm_timeout)

    # --- the job -------------------------------------------------------------------------------
    async def run(self, request: ProcessRequest) -> JobResult:
        """Process one request (SPEC §5.2). Never raises for a classified failure; the outcome of
        each stage is returned, logged and counted. Its lines carry the ids of the logging
        context the job runs in (:class:`pinlog.ai.worker.WorkQueue` sets ``request_id``,
        ``context_id``, ``record_id``: :mod:`pinlog.logs`)."""
        cid = request.context_id
        sha = text_sha256(request.text)
        stage = Stage.EMBEDDING
        step = "pre-check"

        async def first_step() -> tuple[str | None, bool, state.Claim | None]:
            # Step 1 and the embedding stage's guarded start share one short checkout.
            nonlocal step
            step = "pre-check"
            async with self._connection(autocommit=True) as conn:
                pre = await state.precheck(conn, cid)
                stopped = self._stop_reason(pre, sha)
                if stopped is not None:
                    return stopped, False, None
                assert pre is not None
                self.profiles.active()  # ProfileNotServed (SPEC §9.1): no stage is started
                reuse = (pre.embedding_status is Status.COMPLETED
                         and pre.embedding_profile == self.profile)
                if reuse:
                    return None, True, None
                step = "start"
                return None, False, await self._start(cid, stage, conn)

        try:
            stopped, reuse, claim = await self._db(first_step, "pre-check and start")
        except Exception as exc:  # noqa: BLE001 - classified, logged; the rescan recovers
            if step == "pre-check":
                error_class, reason = classify(exc)
                log.warning("pre-check failed; job stopped",
                            extra={"error_class": error_class, "reason": reason})
                return JobResult("skipped", "skipped", stopped=error_class)
            # the start itself failed: no claim is known, so nothing is written for the stage
            embedding_outcome = await self._stage_failed(cid, stage, exc, None)
            return JobResult(embedding_outcome, await self._keyword_stage(request, None))
        if stopped is not None:
            return JobResult("skipped", "skipped", stopped=stopped)

        if reuse:
            self._count(stage, "reused")
            log.debug("embedding reused", extra={"stage": stage.label, "outcome": "reused"})
            embedding_outcome, carried = "reused", None
        elif claim is None:
            embedding_outcome, carried = "skipped", None
        else:
            embedding_outcome, carried = await self._embedding_stage(request, sha, claim)
        keyword_outcome = await self._keyword_stage(request, carried)
        return JobResult(embedding_outcome, keyword_outcome)

    def _stop_reason(self, pre: state.PreCheck | None, sha: bytes) -> str | None:
        """Why the pre-check ends the job (``missing``, ``contract_violation``, ``finished``),
        or None to go on (SPEC §5.2 step 1, §5.6).

        Hash-less embeddings (rows made before an adoption, ``text_sha256`` NULL) are TRUSTED:
        a context id always means the same text (SPEC §5.6), so a COMPLETED vector of the
        current profile is reused for the keyword stage and search as any other; with no hash
        there is nothing to compare, so no contract violation can be reported for it. A
        hash-less vector of another profile is never used (SPEC §9) and is replaced by
        ``pinlog reprocess --profile``; whenever our side embeds a context, the hash is written.
        """
        if (pre is not None and pre.embedding_status is Status.COMPLETED
                and pre.text_sha256 is not None and pre.text_sha256 != sha):
            # SPEC §5.6: checked before "nothing to do" so it is reported even when both
            # stages are finished. Ids only, never the text.
            metrics.CONTRACT_VIOLATIONS.inc()
            log.warning("contract violation: same contextId sent with a different text; "
                        "nothing changed", extra={"reason": "text_sha256 differs"})
            return "contract_violation"
        if pre is None or not pre.has_work:
            reason = "missing" if pre is None else "finished"
            log.debug("nothing to do", extra={"reason": reason})
            for stage in Stage:
                metrics.STAGE_OUTCOMES.labels(stage=stage.label, outcome="skipped").inc()
            return reason
        return None

    # --- stage 2: embedding (after a successful guarded start) ----------------------------------
    async def _embedding_stage(self, request: ProcessRequest, sha: bytes,
                               claim: state.Claim) -> tuple[str, state.StoredEmbedding | None]:
        stage = Stage.EMBEDDING
        cid = request.context_id
        try:
            vectors: dict[str, np.ndarray] = {}
            for _attempt in range(2):  # a second time only when an activation moved the roles
                active = self.profiles.active()
                building = self.profiles.building()
                await self._embed_profiles(request.text, active, building, vectors)
                shadow = {m.profile: vectors[m.profile] for m in (building,)
                          if m is not None and m.profile in vectors}
                saved = await self._save_embedding(request, vectors[active.profile], sha,
                                                   active.profile, shadow, claim)
                if saved:
                    break
                await self._refresh_profiles()  # 0 rows: cancelled, or an activation moved
                if self.profiles.active_profile == active.profile:  # the active profile: a
                    break  # status guard failed (discard); else save under the new profile
        except Exception as exc:  # noqa: BLE001 - every failure is classified and recorded
            return await self._stage_failed(cid, stage, exc, claim), None
        if not saved:
            self._count(stage, "discarded")
            log.info("embedding result discarded: guard failed at save (cancelled, finished, "
                     "or the claim was taken over)",
                     extra={"stage": stage.label, "outcome": "discarded"})
            return "discarded", None
        self._count(stage, "completed")
        log.debug("embedding completed", extra={"stage": stage.label, "outcome": "completed"})
        return "completed", state.StoredEmbedding(vectors[active.profile], active.profile, sha)

    async def _embed_profiles(self, text: str, active: ProfileModels,
                              building: ProfileModels | None,
                              vectors: dict[str, np.ndarray]) -> None:
        """Fill ``vectors`` (profile → ``(dim,)`` vector) for the active profile and, when this
        replica has the building profile's provider, for that one too (SPEC §9.1: a context
        embedded during a build gets a vector in both profiles), concurrently. A failure of the
        building profile's call only leaves its vector out (the backfill makes it; WARNING).

        Raises:
            ModelError: the active profile's call failed (as :meth:`_embed`).
        """
        wanted = [m for m in (active, building) if m is not None and m.profile not in vectors]
        results = await asyncio.gather(*(self._embed(text, m.provider) for m in wanted),
                                       return_exceptions=True)
        for models, result in zip(wanted, results, strict=True):
            if isinstance(result, BaseException):
                if models is active or not isinstance(result, Exception):
                    raise result
                log.warning("building profile's embedding failed; the backfill will make it",
                            extra={"profile": models.profile,
                                   "error_class": classify(result)[0]})
            else:
                vectors[models.profile] = result

    async def _embed(self, text: str, provider: EmbeddingProvider | None = None, *,
                     deadline: float | None = None,
                     failed: TransientModelError | None = None) -> np.ndarray:
        """One ``(dim,)`` float32 vector; attempts/backoff/timeout per SPEC §6.

        ``deadline`` (an event-loop time; default: now + the stage budget) and ``failed`` (the
        transient failure of a first attempt already made, by the batch path's
        :meth:`~pinlog.ai.providers.batching.MicroBatcher.embed_each`) let a stage that began
        elsewhere go on here: ``failed`` counts as the first attempt (or its throttle is waited
        out), and every attempt and wait still ends by the stage's one deadline.

        A throttle's ``Retry-After`` is waited out without spending an attempt, but only while
        the wait ends inside the stage budget (``timeout × attempts + backoff``, which the
        settings keep below the processing expiry): every attempt and every wait of the stage
        ends before a re-claim could duplicate it (SPEC §6 budget rule).

        Raises:
            TransientModelError: all attempts failed transiently (incl. timeouts), or a throttle
                asked for a wait past the budget (:class:`~pinlog.ai.errors.BudgetExceeded`).
            PermanentModelError: at once (wrong vector length, non-finite values or a zero /
                near-zero norm included: :class:`~pinlog.ai.errors.DegenerateVectorError`).
        """
        # A micro-batcher times each provider call itself, scaled to the call's work, and
        # splits a call that timed out; waiting for a batch is then bounded by the stage budget
        # only (SPEC §6: < processing expiry). A bare provider gets the per-attempt timeout,
        # cut to what is left of the budget.
        provider = provider or self.provider
        batched = bool(getattr(provider, "enforces_timeouts", False))
        loop = asyncio.get_running_loop()
        budget = self.embedding_budget
        if deadline is None:
            deadline = loop.time() + budget
        replay = [failed] if failed is not None else []

        async def once() -> np.ndarray:
            if replay:  # the first attempt, made by the batch path: its outcome again
                raise replay.pop()
            timeout = None
            if not batched:
                timeout = min(self.config.embedding_timeout, deadline - loop.time())
                if timeout <= 0:
                    raise BudgetExceeded(f"embedding stage exceeded its budget of {budget:g} s")
            try:
                async with asyncio.timeout(timeout):  # None: no limit (the batch path's own)
                    out = await provider.embed([text], "passage")
            except TimeoutError:
                raise TransientModelError(f"embedding timeout after {timeout:g} s") from None
            # wrong length, non-finite or zero/near-zero norm: permanent, never stored (§9)
            return check_embeddings(out, 1, provider.dimension)[0]

        retries = self.config.retries
        attempts = with_retries(
            once, attempts=retries.attempts, base=retries.backoff_base, cap=retries.backoff_cap,
            sleep=self._sleep, deadline=deadline, clock=loop.time,
            on_wait=metrics.MODEL_THROTTLE_WAIT.labels(kind="embedding").inc)
        if not batched:
            return await attempts
        try:
            async with asyncio.timeout_at(deadline):  # no task of its own (unlike wait_for)
                return await attempts
        except TimeoutError:
            raise TransientModelError(
                f"embedding stage exceeded its budget of {budget:g} s") from None

    async def _save_embedding(self, request: ProcessRequest, vector: np.ndarray, sha: bytes,
                              profile: str, shadow: dict[str, np.ndarray],
                              claim: state.Claim) -> bool:
        """Save transaction (SPEC §5.2 step 2; ``vector`` of the active ``profile``, ``shadow``:
        the building profile's, SPEC §9.1), guarded by ``claim`` (§7.3.1). Returns False when a
        guard discarded it."""
        cid = request.context_id

        async def body(conn: AsyncConnection) -> None:
            # FOR UPDATE lock, guarded upserts (never is_deleted; the lexical terms with the
        # vector, SPEC §10), guarded complete
            if not await state.save_embedding(conn, context_id=cid, user_id=request.user_id,
                                              record_id=request.record_id, vector=vector,
                                              profile=profile, text_sha256=sha, shadow=shadow,
                                              claim=claim, note_terms=lexical_terms(request.text),
                                              place_terms=lexical_terms(
                                                  place_meta_text(request.place_meta))):
                raise _Discard

        return await self._save(body)

    # --- stage 3: keywords ----------------------------------------------------------------------
    async def _keyword_stage(self, request: ProcessRequest,
                             carried: state.StoredEmbedding | None) -> str:
        stage = Stage.KEYWORD
        cid = request.context_id
        claim: state.Claim | None = None

        async def start() -> tuple[state.Claim | None, state.StoredEmbedding | None,
                                   PresetSnapshot | None]:
            async with self._connection(autocommit=True) as conn:
                profile = self.profile
                started, stored, fingerprint = await state.start_keyword_and_read(
                    conn, cid, self.expiry, profile, self.owner)
                if started is None:
                    return None, None, None
                stored = carried or stored
                snapshot = None
                if stored is not None and stored.profile != profile:
                    # SPEC §9.1: an activation may have moved the vector to the new profile
                    # since this replica last read the roles: re-read them before refusing
                    await self.profiles.refresh(conn)
                    if stored.profile == self.profile:
                        profile = self.profile
                        fingerprint = await state.preset_fingerprint(conn, profile)
                if stored is not None and stored.profile == profile:
                    snapshot = await self._snapshot(conn, fingerprint, profile)
                return started, stored, snapshot

        try:
            claim, stored, snapshot = await self._db(start, "keyword start")
            self._note_start(stage, claim)
            if claim is None:
                return "skipped"
            models = self._judging_models(stored, snapshot)
            assert stored is not None and snapshot is not None
            candidates = select_candidates(stored.vector, snapshot,
                                           top_k=self.config.candidate_top_k,
                                           floor=models.calibration.candidate_floor,
                                           text=request.text)
            if candidates:
                assert models.judge is not None
                answer = await self._judge(request.text, candidates, models.judge)
                picks = _only_candidates(answer.picks, candidates,
                                         models.calibration.max_picks)
            else:
                answer = JudgeAnswer(picks=(), model_profile=NO_CANDIDATES_PROFILE)
                picks = ()
            saved = await self._save_keywords(cid, snapshot, answer, picks, claim)
        except Exception as exc:  # noqa: BLE001 - every failure is classified and recorded
            return await self._stage_failed(cid, stage, exc, claim)
        if not saved:
            self._count(stage, "discarded")
            log.info("keyword result discarded: guard failed at save (cancelled, finished, or "
                     "the claim was taken over)",
                     extra={"stage": stage.label, "outcome": "discarded"})
            return "discarded"
        self._count(stage, "completed")
        log.debug("keywords completed", extra={"stage": stage.label, "outcome": "completed",
                                               "count": len(picks)})
        return "completed"

    def _judging_models(self, stored: state.StoredEmbedding | None,
                        snapshot: PresetSnapshot | None) -> ProfileModels:
        """The models that judge a keyword stage (SPEC §9.1): those of the profile of the
        snapshot taken for its stored vector (one rule for the single and the batch path).

        Raises:
            ProfileNotServed: this replica has no models for that profile (transient).
            PermanentModelError: no stored vector, or no snapshot of its profile (a vector of
                another profile than the active one: no judge call).
        """
        models = None
        if snapshot is not None:
            models = self.profiles.models_for(snapshot.profile)
            if models is None:
                raise ProfileNotServed(f"this replica has no provider for the active "
                                       f"embedding profile {snapshot.profile}")
        if stored is None:
            raise PermanentModelError("no stored embedding for the keyword stage")
        if models is None or snapshot is None or stored.profile != snapshot.profile:
            raise PermanentModelError(f"embedding profile mismatch: stored {stored.profile}, "
                                      f"current {self.profile}")
        return models

    async def _snapshot(self, conn: AsyncConnection, fingerprint: str,
                        profile: str) -> PresetSnapshot:
        """The one preset snapshot of this keyword stage: the cached one while the presets'
        ``fingerprint`` for ``profile`` (read by this stage) is unchanged, else freshly loaded
        (and cached)."""
        cached = self._snapshot_cache
        if cached is not None and cached[:2] == (profile, fingerprint):
            return cached[2]
        snapshot = await load_snapshot(conn, profile)
        self._snapshot_cache = (profile, fingerprint, snapshot)
        return snapshot

    @property
    def last_snapshot(self) -> PresetSnapshot | None:
        """The preset snapshot the last keyword stage used (None before the first one)."""
        return self._snapshot_cache[2] if self._snapshot_cache is not None else None

    async def _judge(self, text: str, candidates: list[Candidate],
                     judge: Judge | None = None) -> JudgeAnswer:
        """Judge call outside any transaction, bounded by the budget rule (SPEC §6)."""
        budget = self.judge_budget
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            async with asyncio.timeout(budget):  # no task of its own (unlike wait_for)
                return await (judge or self.judge).judge(text, candidates)
        except TimeoutError:
            raise TransientModelError(f"judge exceeded its budget of {budget:g} s") from None
        finally:
            metrics.MODEL_LATENCY.labels(kind="judge").observe(loop.time() - started)

    async def _save_keywords(self, cid: int, snapshot: PresetSnapshot, answer: JudgeAnswer,
                             picks: tuple[Pick, ...], claim: state.Claim) -> bool:
        """Save transaction (SPEC §5.2 step 3), guarded by ``claim`` (§7.3.1). Returns False when
        a guard discarded it."""

        async def body(conn: AsyncConnection) -> None:
            # FOR UPDATE lock, delete + insert keyword rows, analysis row, guarded complete
            if not await state.save_keywords(
                    conn, cid, picks=[(p.keyword_id, p.confidence) for p in picks],
                    preset_version=snapshot.version,
                    unmatched_concepts=answer.unmatched_concepts,
                    model_profile=answer.model_profile or "unknown",
                    evidence=answer.evidence, embedding_profile=snapshot.profile, claim=claim):
                raise _Discard

        return await self._save(body)

    # --- shared steps --------------------------------------------------------------------------
    async def _start(self, cid: int, stage: Stage,
                     conn: AsyncConnection | None = None) -> state.Claim | None:
        """Guarded start, one autocommit statement (on ``conn`` when given), recording this
        process as the owner; logs/counts a re-claim (SPEC §3, §7.3.1)."""
        if conn is None:
            async with self._connection(autocommit=True) as own:
                claim = await state.start_stage(own, cid, stage, self.expiry, self.owner)
        else:
            claim = await state.start_stage(conn, cid, stage, self.expiry, self.owner)
        self._note_start(stage, claim)
        return claim

    def _note_start(self, stage: Stage, claim: state.Claim | None) -> None:
        """Log/count the outcome of a guarded start: 0 rows (INFO), re-claim (WARNING)."""
        if claim is None:
            self._count(stage, "skipped")
            log.debug("stage not started (0 rows)", extra={"stage": stage.label,
                                                           "outcome": "skipped"})
        elif claim.previous is Status.PROCESSING:
            self._count(stage, "reclaimed")
            log.warning("re-claimed a PROCESSING stage (processing expiry passed, the row's "
                        "retry_count rose since it started, or its owner is gone: SPEC §7.3, "
                        "§7.3.1)",
                        extra={"stage": stage.label, "outcome": "reclaimed",
                               "previous_status": claim.previous.value})

    async def _db(self, step: Callable[[], Awaitable[T]], what: str) -> T:
        """Run one database step of the job; while the database is unavailable
        (:func:`pinlog.db.engine.is_database_unreachable`: refused or lost connections, SQLSTATE
        class 08, the server shutting down or full) run it again when it is back — with capped backoff
        (:data:`DB_RETRY_PAUSE`), for at most the processing expiry (SPEC §7.3.1: work that
        failed only because the database was unreachable is retried when it is back). The step
        keeps the job's claim, so a retried save still writes only what this job owns.

        Raises:
            whatever the step raised, when it is not an unavailable database or the time is up.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.expiry.total_seconds()
        pause, waited = DB_RETRY_PAUSE[0], False
        while True:
            try:
                result = await step()
            except Exception as exc:
                if not is_database_unreachable(exc) or loop.time() + pause > deadline:
                    raise
                if not waited:
                    log.warning("database unavailable; the job waits and runs its step again "
                                "when it is back", extra={"reason": what,
                                                         "error_class": classify(exc)[0]})
                waited = True
                await asyncio.sleep(pause)
                pause = min(DB_RETRY_PAUSE[1], pause * 2)
                continue
            if waited:
                log.info("database back; job step done", extra={"reason": what})
            return result

    @asynccontextmanager
    async def _connection(self, *, autocommit: bool) -> AsyncIterator[AsyncConnection]:
        """A pooled connection for one short DB step, at most ``db_slots`` at once (SPEC §5.4:
        jobs waiting on a model hold none, so more jobs than connections may run)."""
        async with self._db_slots:
            async with (self._auto if autocommit else self.engine).connect() as conn:
                yield conn

    async def _save(self, body: Callable[[AsyncConnection], Awaitable[None]]) -> bool:
        """Run ``body`` in one short transaction; a :class:`_Discard` rolls it back → False. An
        unavailable database rolls it back too and runs it again when it is back (:meth:`_db`)."""

        async def once() -> bool:
            async with self._connection(autocommit=False) as conn:
                transaction = await conn.begin()
                try:
                    await body(conn)
                except _Discard:
                    await transaction.rollback()
                    return False
                except BaseException:
                    with contextlib.suppress(Exception):  # a lost connection cannot roll back
                        await transaction.rollback()
                    raise
                await transaction.commit()
                return True

        return await self._db(once, "save")

    async def _stage_failed(self, cid: int, stage: Stage, exc: BaseException,
                            claim: state.Claim | None) -> str:
        """Record a classified failure (SPEC §5.5): transient/internal → ``last_error`` + event,
        stage stays PROCESSING; permanent → guarded FAILED + event — both only while the job owns
        ``claim`` (§7.3.1; None: the start itself failed, so nothing is written)."""
        error_class, reason = classify(exc)
        message = state.format_error(stage, error_class, redact(reason))
        extra = {"stage": stage.label, "outcome": error_class, "error_class": error_class,
                 "reason": message}

        async def write(conn: AsyncConnection, owned: state.Claim) -> bool:
            if error_class == "permanent":
                return await state.fail_stage(conn, cid, stage, message, owned)
            return await state.record_error(conn, cid, stage, message, owned)

        async def once() -> bool:
            assert claim is not None
            async with self._connection(autocommit=True) as conn:
                return await write(conn, claim)

        changed = False
        try:
            if claim is not None:
                changed = await self._db(once, "error record")
        except Exception as write_exc:  # noqa: BLE001 - the DB may be what failed
            log.warning("could not record the stage error",
                        extra={"stage": stage.label,
                               "error_class": classify(write_exc)[0]})
        self._count(stage, error_class)
        # what happened to the stage: the guarded write says whether it was PROCESSING (ours);
        # a failure before the stage started (its guarded start raised) leaves it PENDING
        left = ("left PROCESSING for the rescan" if changed else
                "the stage was not PROCESSING (not started yet, or no longer this job's) or "
                "the error could not be recorded: nothing written")
        if error_class == "permanent":
            log.error("stage failed permanently" + ("" if changed else " (stage no longer "
                      "PROCESSING; nothing written)"), extra=extra)
        elif error_class == "transient":
            log.warning(f"stage failed transiently; {left}", extra=extra)
        else:
            log.error(f"stage failed with an internal error; {left}", extra=extra, exc_info=exc)
        return error_class

    @staticmethod
    def _count(stage: Stage, outcome: str) -> None:
        metrics.STAGE_OUTCOMES.labels(stage=stage.label, outcome=outcome).inc()


def _only_candidates(picks: tuple[Pick, ...], candidates: list[Candidate],
                     max_picks: int) -> tuple[Pick, ...]:
    """Last line of SPEC §8, for every judge: keep only picks among the candidates, unique ids,
    confidences in [0, 1] or None (judges already map; this guards against a judge that did
    not), and at most ``max_picks`` of them — the highest confidences first (a pick without a
    confidence counts as 0; ties keep the judge's order). Keywords are shown to the owner and,
    for PUBLIC presets, to everyone: a judge that selects every candidate must not store ten
    (issue 23)."""
    allowed = {c.preset.id for c in candidates}
    kept: dict[int, Pick] = {}
    for pick in picks:
        if pick.keyword_id not in allowed:
            metrics.JUDGE_DROPPED_PICKS.labels(reason="not_candidate").inc()
            continue
        if pick.confidence is not None and not 0.0 <= pick.confidence <= 1.0:
            metrics.JUDGE_DROPPED_PICKS.labels(reason="bad_confidence").inc()
            continue
        old = kept.get(pick.keyword_id)
        if old is None or (pick.confidence or 0.0) > (old.confidence or 0.0):
            kept[pick.keyword_id] = pick
    ranked = sorted(kept.values(), key=lambda p: -(p.confidence or 0.0))  # stable: judge order
    if len(ranked) > max_picks:
        metrics.JUDGE_DROPPED_PICKS.labels(reason="max_picks").inc(len(ranked) - max_picks)
    return tuple(ranked[:max(0, max_picks)])
