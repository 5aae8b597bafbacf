"""The batch path of the SPEC §5.2 job: many contexts per step (SPEC §5.4; docs/ARCHITECTURE.md
"Batch path").

With a fast model (a GPU embedding server) the per-context orchestration — round trips, status
statements, event rows — sets the pace, not the model. :class:`BatchRunner` runs the job of
many process requests at once with the same rules as :meth:`pinlog.ai.pipeline.Pipeline.run`,
step by step:

1. pre-check and guarded embedding start of every context in one round trip
   (``precheck`` + ``start_stage_batch`` for the embedding: every row repeats the single start's
   predicate, ``FOR UPDATE SKIP LOCKED``, so two batches never claim one row);
2. the started texts embedded through the provider outside any transaction, all queued at
   once, each its own request of the micro-batcher (``MicroBatcher.embed_each``: no coroutine
   per text), which coalesces them into calls of up to its input cap, so one bad text fails
   only itself; that call is each text's first attempt, and a transient failure goes on with
   the live path's attempts, backoff and throttle waits (``Pipeline._embed(failed=…)``), all
   by the stage's one deadline (SPEC §6);
3. as each model call answers, one save transaction for its rows — one save at a time per
   batch (group commit: the answers that arrive while a save runs are saved together by
   the next one; the keyword stage likewise): ``lock_states_batch`` then
   ``save_embeddings_batch`` (multi-row upsert + guarded complete + an event per row) — and
   those rows go on (steps 4-6) while the others are still embedded, so a short note never
   waits for the long notes of its batch; rows with nothing to embed go on at once;
4. the guarded keyword start of these contexts, with the stored vectors they need and the
   presets' fingerprint, in one round trip; one preset snapshot;
   the notes' morphology was analysed meanwhile on the analyser's threads (from step 1 on:
   :func:`pinlog.text.prime`);
5. candidates and judge per context (judge calls concurrently, each under its budget);
6. one save transaction for the batch's keywords (delete, insert, analysis, guarded complete).

Ownership (SPEC §7.3.1): the batch starts record this process as each row's owner and return
each row's :class:`~pinlog.ai.state.Claim`; every later write of a row (its save, its failure or
error record) carries that row's own claim, so a row whose claim was taken over writes nothing
while the others of its batch are saved. Profiles (SPEC §9.1): the embedding save takes the
profile lock shared, stores vectors only under the active profile and the building profile's
vectors beside them when this replica has its provider; rows discarded because an activation
moved the active profile meanwhile go once through the single job's embedding stage (the new
profile's models, the same claim). The keyword stage uses the models of the stored vector's
profile and records it in the analysis row.

Every row keeps its own outcome, events, metrics and error classification (SPEC §5.5): a
cancelled context is discarded by its guard at save while the others are stored; a transient
or permanent failure of one context is recorded for that context only; a failure of a whole
step (the database) is recorded for every context of the step, as the live path would for each.
Per-context lines are logged in the context's own logging context (its request id, context and
record id); the batch's summary line carries neither.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractContextManager, suppress
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import numpy as np
from sqlalchemy.ext.asyncio import AsyncConnection

from pinlog.ai import state
from pinlog.ai.candidates import select_candidates
from pinlog.ai.errors import TransientModelError
from pinlog.ai.pipeline import (NO_CANDIDATES_PROFILE, JobResult, Pipeline, _only_candidates,
                               classify, text_sha256)
from pinlog.ai.ports import EMBED_GROUP, JudgeAnswer, Pick, PresetSnapshot
from pinlog.ai.providers.batching import MicroBatcher
from pinlog.ai.routing import ProfileModels
from pinlog.channels.lexical import place_meta_text
from pinlog.contracts import ProcessRequest
from pinlog.logs import current_log_context, log_context
from pinlog.states import Stage, Status
from pinlog.text import lexical_terms, prime

log = logging.getLogger(__name__)

#: Embedding statuses a batch start may have passed over because the row was locked (a guarded
#: start could claim them): such rows run as the single job (:meth:`BatchRunner._single`).
_MAYBE_LOCKED = frozenset({Status.PENDING, Status.PROCESSING})

T = TypeVar("T")

#: What one text's embedding came to: profile → ``(dim,)`` vector, or its classified failure.
Embedded = dict[str, np.ndarray] | Exception

#: The DEBUG line of a completed stage (the single job's wording).
_COMPLETED = {Stage.EMBEDDING: "embedding completed", Stage.KEYWORD: "keywords completed"}


@dataclass(eq=False)  # compared by identity
class _Row:
    """One context of a batch while it runs: the request, its logging context and what each
    stage did so far."""

    request: ProcessRequest
    context: Mapping[str, object]
    sha: bytes
    embedding: str = "skipped"
    keyword: str = "skipped"
    stopped: str | None = None
    carried: state.StoredEmbedding | None = None
    answer: JudgeAnswer | None = None
    picks: tuple[Pick, ...] = ()
    #: the claims the row's batch starts took (SPEC §7.3.1), None before / when not started
    claims: dict[Stage, state.Claim] = field(default_factory=dict)

    @property
    def context_id(self) -> int:
        return self.request.context_id

    def logging(self) -> AbstractContextManager[Mapping[str, object]]:
        """The row's logging context (as its job would run in: SPEC §12)."""
        return log_context(self.context, context_id=self.request.context_id,
                           record_id=self.request.record_id)

    def result(self) -> JobResult:
        return JobResult(self.embedding, self.keyword, stopped=self.stopped)


class _Coalescer(Generic[T]):
    """Group commit for one step of a batch: ``step(items)`` runs for the items :meth:`add`
    gave, one run at a time; the items added while a run is in flight go together into the
    next run (none waits for more than the run in flight). A run's exception ends the drain
    and is raised by :meth:`join`.

    Args:
        step: a coroutine function of a list of items (a save, a keyword stage)."""

    def __init__(self, step: Callable[[list[T]], Awaitable[None]]) -> None:
        self.step = step
        self.backlog: list[T] = []
        #: every drain task started (the caller cancels the ones left when it stops)
        self.tasks: list[asyncio.Task[None]] = []

    def add(self, items: Sequence[T]) -> None:
        """Queue ``items`` for the next run; start it now when no run is in flight."""
        self.backlog.extend(items)
        if not self.tasks or self.tasks[-1].done():
            self.tasks.append(asyncio.create_task(self._drain()))

    async def _drain(self) -> None:
        while self.backlog:
            items, self.backlog = self.backlog, []
            await self.step(items)

    async def join(self) -> None:
        """Wait until every item added so far (and those added meanwhile) went through a run.

        Raises:
            whatever a run raised."""
        while self.tasks and not all(task.done() for task in self.tasks):
            await asyncio.gather(*self.tasks)
        for task in self.tasks:
            task.result()


class BatchRunner:
    """Runs the job of many :class:`~pinlog.contracts.ProcessRequest` as one batch per step
    (module docstring), reusing the steps of ``pipeline`` (its provider, judge, budgets, preset
    snapshot, database slots, error classification and metrics).

    Args:
        pipeline: the live path's job runner (same configuration, same models).
    """

    def __init__(self, pipeline: Pipeline) -> None:
        self.pipeline = pipeline

    async def run(self, requests: Sequence[ProcessRequest],
                  contexts: Sequence[Mapping[str, object]] | None = None) -> list[JobResult]:
        """Process ``requests`` (SPEC §5.2, per context; module docstring).

        Args:
            requests: any number; a context id given twice is processed once (the later
                copies are skipped, as a duplicate request that lost the guarded start).
            contexts: the logging context of each request (its request id), same order;
                default: the current one.

        Returns:
            one :class:`~pinlog.ai.pipeline.JobResult` per request, in order. Never raises for
            a classified failure (recorded per context, like the live path).
        """
        if contexts is None:
            contexts = [current_log_context()] * len(requests)
        rows: dict[int, _Row] = {}
        duplicates: set[int] = set()  # positions of a context id seen earlier in the batch
        for position, (request, context) in enumerate(zip(requests, contexts, strict=True)):
            if request.context_id in rows:
                duplicates.add(position)
                continue
            rows[request.context_id] = _Row(request, context, text_sha256(request.text))
        if rows:
            await self._run(list(rows.values()))
        out: list[JobResult] = []
        for position, request in enumerate(requests):
            if position in duplicates:
                for stage in Stage:
                    self.pipeline._count(stage, "skipped")
                out.append(JobResult("skipped", "skipped"))
            else:
                out.append(rows[request.context_id].result())
        return out

    async def _run(self, rows: list[_Row]) -> None:
        p = self.pipeline
        # --- step 1: pre-check + guarded embedding start, one round trip ----------------------
        async def first_step() -> tuple[dict[int, state.PreCheck], dict[int, state.Claim]]:
            p.profiles.active()  # ProfileNotServed (SPEC §9.1): no stage is started
            async with p._connection(autocommit=True) as conn:
                return await state.precheck_and_start_embedding_batch(
                    conn, [r.context_id for r in rows], p.expiry, p.owner)

        try:
            prechecks, started = await p._db(first_step, "batch pre-check and start")
        except Exception as exc:  # noqa: BLE001 - classified, logged; the rescan recovers
            error_class, reason = classify(exc)
            log.warning("batch pre-check failed; batch stopped",
                        extra={"error_class": error_class, "reason": reason, "batch": len(rows)})
            for row in rows:
                row.stopped = error_class
            return
        to_embed: list[_Row] = []
        passed_over: list[_Row] = []
        for row in rows:
            with row.logging():
                pre = prechecks.get(row.context_id)
                row.stopped = p._stop_reason(pre, row.sha)
                if row.stopped is not None:
                    continue
                assert pre is not None
                if pre.embedding_status is Status.COMPLETED and pre.embedding_profile == p.profile:
                    row.embedding = "reused"
                    p._count(Stage.EMBEDDING, "reused")
                    log.debug("embedding reused", extra={"stage": "embedding", "outcome": "reused"})
                    continue
                claim = started.get(row.context_id)
                if claim is None and pre.embedding_status in _MAYBE_LOCKED:
                    passed_over.append(row)  # SKIP LOCKED passed it over: the single job decides
                    continue
                p._note_start(Stage.EMBEDDING, claim)
                if claim is not None:
                    row.claims[Stage.EMBEDDING] = claim
                    to_embed.append(row)
        if passed_over:
            await asyncio.gather(*(self._single(row) for row in passed_over))
        live = [r for r in rows if r.stopped is None and r not in passed_over]
        # the notes' morphology (the keyword stage's cue evidence) on the analyser's threads,
        # while this thread embeds and saves (pinlog.text.prime: the same results, analysed
        # ahead) — unless the presets have no cue (then no note is analysed at all)
        snapshot = p.last_snapshot
        texts = [r.request.text for r in live]
        if snapshot is not None and not any(preset.cues for preset in snapshot.presets):
            texts = []
        primed = asyncio.create_task(asyncio.to_thread(prime, texts))
        active, building = p.profiles.active(), p.profiles.building()
        # this batch's texts fill model calls together (EMBED_GROUP: the micro-batcher's fill
        # takes the head's batch before other batches), so its answers are saved in ⌈n / cap⌉
        # transactions, not in fragments of other batches' calls (issue 25); each task copies
        # the context here, and the worker's later single jobs run without the group again
        group = object()
        batch_group = EMBED_GROUP.set(group)
        try:
            embedding, first = self._start_embedding(to_embed, active, building)
        finally:
            EMBED_GROUP.reset(batch_group)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + p.embedding_budget  # the stage budget of every row (SPEC §6)
        # one save at a time per stage (group commit): the answers that arrive while a save
        # runs are saved together by the next one, so a serial or slow model's one-text
        # answers are not one transaction each, and a ready answer waits for one save at most
        keywords: _Coalescer[_Row] = _Coalescer(lambda ready: self._keyword_stage(ready, primed))
        saves: _Coalescer[tuple[_Row, Embedded]] = _Coalescer(
            lambda answered: self._embedded(answered, keywords, active, building))
        try:
            # rows with nothing to embed (reused, or their start matched 0 rows) go on at once
            ready = [r for r in live if r not in to_embed]
            if ready:
                keywords.add(ready)
            # the others as their model calls answer: each answer's rows are saved and go on
            # together, so a short note never waits for the long ones of its batch
            waiting = set(embedding)
            while waiting:
                done, waiting = await asyncio.wait(waiting, timeout=max(0.0, deadline - loop.time()),
                                                   return_when=asyncio.FIRST_COMPLETED)
                answered: list[tuple[_Row, Embedded]] = []
                if not done:  # the stage budget is over for the texts still queued
                    answered = self._over_budget(waiting, embedding, p.embedding_budget)
                    waiting = set()
                for future in done:
                    row, outcome = embedding[future], self._outcome(future, active)
                    if future in first and isinstance(outcome, TransientModelError):
                        token = EMBED_GROUP.set(group)
                        try:  # the single path's attempts, backoff and budget go on from here
                            retry = asyncio.ensure_future(self._retry(row, outcome, active,
                                                                      deadline))
                        finally:
                            EMBED_GROUP.reset(token)
                        embedding[retry] = row
                        waiting.add(retry)
                        continue
                    answered.append((row, outcome))
                if answered:
                    saves.add(answered)
            await saves.join()
            await keywords.join()
        finally:
            for task in (*embedding, *saves.tasks, *keywords.tasks, primed):
                if not task.done():
                    task.cancel()
        self._summary(rows)

    async def _single(self, row: _Row) -> None:
        """The whole job of a row the batch's embedding start passed over while it could be
        startable (PENDING, or PROCESSING that may be re-claimable): ``FOR UPDATE SKIP LOCKED``
        skips a row another transaction holds — a take-over record, a cancellation, a
        concurrent start — which the single job's guarded start waits for and then decides on
        (SPEC §3), so an accepted request is never left waiting for the rescan because of a
        lock. Two batches still never claim one row: the waiting start finds it PROCESSING."""
        with row.logging():
            result = await self.pipeline.run(row.request)
        row.embedding, row.keyword, row.stopped = result.embedding, result.keyword, result.stopped

    async def _single_keyword(self, row: _Row) -> None:
        """The single keyword stage (its guarded start waits for a row lock) for a row the
        batch's keyword start did not claim: not startable (0 rows, skipped) or passed over by
        ``SKIP LOCKED`` (see :meth:`_single`)."""
        with row.logging():
            row.keyword = await self.pipeline._keyword_stage(row.request, row.carried)

    # --- steps 2-3: embed outside any transaction, one save at a time for what has answered ----
    def _start_embedding(self, rows: Sequence[_Row], active: ProfileModels,
                         building: ProfileModels | None,
                         ) -> tuple[dict[asyncio.Future[Any], _Row], set[asyncio.Future[Any]]]:
        """Start embedding ``rows``' texts; returns each pending future's row, and the futures
        that are a first attempt only (whose transient failure the caller retries).

        Without a building profile and with a micro-batcher in front of the active provider,
        every text is queued at once (:meth:`MicroBatcher.embed_each`: its first attempt; a
        future resolves to a ``(1, dim)`` row, or to that text's own exception), with no
        coroutine per text (issue 25). Otherwise each text runs the single job's attempts
        (:meth:`_embed`: a task resolving to profile → ``(dim,)`` vector)."""
        provider = active.provider
        if building is None and isinstance(provider, MicroBatcher):
            futures = provider.embed_each([row.request.text for row in rows], "passage")
            return dict(zip(futures, rows, strict=True)), set(futures)
        return {asyncio.ensure_future(self._embed(row.request.text, active, building)): row
                for row in rows}, set()

    @staticmethod
    def _outcome(future: asyncio.Future[Any], active: ProfileModels) -> Embedded:
        """A finished embedding future as profile → ``(dim,)`` vector, or its exception (a
        ``(1, dim)`` row of :meth:`MicroBatcher.embed_each` is the active profile's vector; a
        transient exception of such a first attempt is retried by the caller).

        Raises:
            BaseException: a cancellation or exit that is no ``Exception`` (never recorded)."""
        if future.cancelled():
            raise asyncio.CancelledError
        error = future.exception()
        if error is not None:
            if not isinstance(error, Exception):
                raise error
            return error
        value = future.result()
        if isinstance(value, dict):
            return value
        return {active.profile: value[0]}

    def _over_budget(self, waiting: set[asyncio.Future[Any]],
                     embedding: dict[asyncio.Future[Any], _Row],
                     budget: float) -> list[tuple[_Row, Embedded]]:
        """The stage budget ended (SPEC §6) while ``waiting`` texts were still queued or
        running: each is withdrawn (the micro-batcher drops a withdrawn text it has not sent)
        and its row fails transiently (it stays PROCESSING for the rescan)."""
        for future in waiting:
            future.cancel()
        return [(embedding[future], TransientModelError(
            f"embedding stage exceeded its budget of {budget:g} s")) for future in waiting]

    async def _retry(self, row: _Row, failed: TransientModelError, active: ProfileModels,
                     deadline: float) -> dict[str, np.ndarray]:
        """The rest of one text's embedding stage after its first attempt (in the batch's
        model calls) failed transiently: the single path's attempts, backoff and throttle
        waits (:meth:`Pipeline._embed`), ``failed`` counting as the first, by the batch's
        ``deadline`` (SPEC §6). Returns profile → ``(dim,)`` vector.

        Raises:
            ModelError: as :meth:`Pipeline._embed`."""
        vector = await self.pipeline._embed(row.request.text, active.provider, deadline=deadline,
                                            failed=failed)
        return {active.profile: vector}

    async def _embed(self, text: str, active: ProfileModels,
                     building: ProfileModels | None) -> dict[str, np.ndarray]:
        """The vectors of one text: profile → ``(dim,)`` vector for the active profile and,
        when this replica has the building profile's provider, that one too (SPEC §9.1; the
        single job's :meth:`~pinlog.ai.pipeline.Pipeline._embed_profiles`).

        Raises:
            ModelError: the active profile's call failed.
        """
        vectors: dict[str, np.ndarray] = {}
        await self.pipeline._embed_profiles(text, active, building, vectors)
        return vectors

    async def _embedded(self, group: Sequence[tuple[_Row, Embedded]], keywords: _Coalescer[_Row],
                        active: ProfileModels, building: ProfileModels | None) -> None:
        """The rows of the answers that arrived since the last save: their embedding save,
        then they join the batch's next keyword stage."""
        await self._save_embeddings(group, active, building)
        keywords.add([row for row, _ in group])

    async def _save_embeddings(self, group: Sequence[tuple[_Row, Embedded]],
                               active: ProfileModels, building: ProfileModels | None) -> None:
        """Save the vectors of ``group`` in one transaction (SPEC §5.2 step 2, §9.1), each row
        under its own claim (§7.3.1); a row whose embedding failed gets its classified failure
        recorded (SPEC §5.5, that row only). Rows discarded while an activation moved the active
        profile go once through the single job's embedding stage (the new profile, same claim)."""
        p = self.pipeline
        stage = Stage.EMBEDDING
        embedded: list[tuple[_Row, state.EmbeddingRow]] = []
        for row, vectors in group:
            if isinstance(vectors, BaseException):
                await self._row_failed(row, stage, vectors)
                continue
            request = row.request
            shadow = vectors.get(building.profile) if building is not None else None
            embedded.append((row, state.EmbeddingRow(
                request.context_id, request.user_id, request.record_id, vectors[active.profile],
                row.sha, row.claims[stage], shadow, note_terms=lexical_terms(request.text),
                place_terms=lexical_terms(place_meta_text(request.place_meta)))))
        if not embedded:
            return
        saved: set[int] = set()

        async def body(conn: AsyncConnection) -> None:
            saved.clear()
            saved.update(await state.save_embeddings_batch(
                conn, [e for _, e in embedded], profile=active.profile,
                dimension=active.dimension,
                shadow_profile=building.profile if building is not None else None,
                shadow_dimension=building.dimension if building is not None else None))

        try:
            await p._save(body)
        except Exception as exc:  # noqa: BLE001 - the step failed for every row of it
            await self._fail_all([row for row, _ in embedded], stage, exc)
            return
        unsaved = [row for row, _ in embedded if row.context_id not in saved]
        moved: list[_Row] = []
        if unsaved:  # 0 rows: cancelled / taken over — or an activation moved the active profile
            await p._refresh_profiles()
            if p.profiles.active_profile != active.profile:
                moved = unsaved
        vectors_by_id = {row.context_id: item.vector for row, item in embedded}
        for row in self._settle([row for row, _ in embedded if row not in moved], stage, saved):
            row.carried = state.StoredEmbedding(vectors_by_id[row.context_id], active.profile,
                                                row.sha)
        for row in moved:  # the single job's stage: the new active profile's models
            with row.logging():
                row.embedding, row.carried = await p._embedding_stage(row.request, row.sha,
                                                                      row.claims[stage])

    # --- steps 4-6: keyword start + reads, candidates and judge, one save transaction ----------
    async def _keyword_stage(self, rows: list[_Row], primed: asyncio.Task[None]) -> None:
        p = self.pipeline
        stage = Stage.KEYWORD
        with suppress(Exception):  # a failed priming only means analysing in line
            await asyncio.shield(primed)
        read = [r.context_id for r in rows if r.carried is None]

        async def start() -> tuple[dict[int, state.Claim], dict[int, state.StoredEmbedding],
                                   PresetSnapshot | None]:
            async with p._connection(autocommit=True) as conn:
                profile = p.profile
                started, stored, fingerprint = await state.start_keyword_batch_and_read(
                    conn, [r.context_id for r in rows], p.expiry, profile, read, p.owner)
                vectors = [r.carried or stored.get(r.context_id) for r in rows
                           if r.context_id in started]
                if any(v is not None and v.profile != profile for v in vectors):
                    # SPEC §9.1: an activation may have moved the vectors to the new profile
                    # since this replica last read the roles: re-read them before refusing
                    await p.profiles.refresh(conn)
                    if p.profile != profile:
                        profile = p.profile
                        fingerprint = await state.preset_fingerprint(conn, profile)
                snapshot = None
                if any(v is not None and v.profile == profile for v in vectors):
                    snapshot = await p._snapshot(conn, fingerprint, profile)
                return started, stored, snapshot

        try:
            started, stored, snapshot = await p._db(start, "batch keyword start")
        except Exception as exc:  # noqa: BLE001 - the step failed for every row of it
            await self._fail_all(rows, stage, exc)  # no claim known: nothing is written
            return
        judged: list[_Row] = []
        passed_over: list[_Row] = []
        for row in rows:
            claim = started.get(row.context_id)
            if claim is None:
                passed_over.append(row)  # not startable, or SKIP LOCKED passed it over
                continue
            with row.logging():
                p._note_start(stage, claim)
            row.claims[stage] = claim
            judged.append(row)
        if passed_over:  # the single keyword stage's guarded start waits for a lock, decides
            await asyncio.gather(*(self._single_keyword(row) for row in passed_over))
        if not judged:
            return
        outcomes = await asyncio.gather(
            *(self._judge(r, r.carried or stored.get(r.context_id), snapshot) for r in judged),
            return_exceptions=True)
        to_save: list[_Row] = []
        for row, outcome in zip(judged, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                await self._row_failed(row, stage, outcome)
                continue
            to_save.append(row)
        if not to_save:
            return
        assert snapshot is not None
        saved: set[int] = set()

        async def body(conn: AsyncConnection) -> None:
            saved.clear()
            saved.update(await state.save_keywords_batch(conn, [
                state.KeywordRow(r.context_id, [(k.keyword_id, k.confidence) for k in r.picks],
                                 r.answer.unmatched_concepts if r.answer else (),
                                 (r.answer.model_profile if r.answer else None) or "unknown",
                                 r.claims[stage], r.answer.evidence if r.answer else (),
                                 snapshot.profile)
                for r in to_save], preset_version=snapshot.version))

        try:
            await p._save(body)
        except Exception as exc:  # noqa: BLE001 - the step failed for every row of it
            await self._fail_all(to_save, stage, exc)
            return
        self._settle(to_save, stage, saved)

    async def _fail_all(self, rows: list[_Row], stage: Stage, exc: BaseException) -> None:
        """A step failed for every row of it: record the classified failure of each (SPEC §5.5,
        as the live path would for each job) under the row's own claim of ``stage`` (§7.3.1;
        none when the stage's start itself failed: then nothing is written), in the row's
        logging context."""
        for row in rows:
            await self._failed(row, stage, exc, row.claims.get(stage))

    async def _row_failed(self, row: _Row, stage: Stage, error: BaseException) -> None:
        """``row``'s own failure of ``stage`` (SPEC §5.5, that row only; its batch goes on) under
        the claim its start took (§7.3.1). A ``BaseException`` that is no ``Exception``
        (cancellation, exit) is re-raised, never recorded."""
        if not isinstance(error, Exception):
            raise error
        await self._failed(row, stage, error, row.claims[stage])

    async def _failed(self, row: _Row, stage: Stage, exc: BaseException,
                      claim: state.Claim | None) -> None:
        """Record ``exc`` as ``row``'s classified failure of ``stage`` (the pipeline's
        ``_stage_failed``: SPEC §5.5) under ``claim`` (§7.3.1; None: nothing is written), in
        the row's logging context; the row's outcome of the stage is what it answers."""
        with row.logging():
            setattr(row, stage.label, await self.pipeline._stage_failed(row.context_id, stage, exc,
                                                                        claim))

    def _settle(self, rows: list[_Row], stage: Stage, saved: set[int]) -> list[_Row]:
        """Each row's save outcome (SPEC §5.2): ``completed`` when its guards matched (in
        ``saved``), else ``discarded`` (INFO: cancelled, finished or the claim was taken over
        meanwhile) — counted and logged in the
        row's logging context. Returns the completed rows."""
        p = self.pipeline
        debug = log.isEnabledFor(logging.DEBUG)
        done = []
        for row in rows:
            outcome = "completed" if row.context_id in saved else "discarded"
            setattr(row, stage.label, outcome)
            p._count(stage, outcome)
            if outcome == "completed":
                done.append(row)
                if debug:
                    with row.logging():
                        log.debug(_COMPLETED[stage], extra={
                            "stage": stage.label, "outcome": outcome, "count": len(row.picks)})
                continue
            with row.logging():
                log.info(f"{stage.label} result discarded: guard failed at save (cancelled, "
                     "finished, or the claim was taken over)",
                         extra={"stage": stage.label, "outcome": outcome})
        return done

    async def _judge(self, row: _Row, stored: state.StoredEmbedding | None,
                     snapshot: PresetSnapshot | None) -> None:
        """Candidates and judge of one context (SPEC §5.2 step 3, §8), outside any transaction;
        sets ``row.answer`` / ``row.picks``.

        Raises:
            PermanentModelError: no stored vector, or one of another profile (no judge call);
            ProfileNotServed: this replica has no models for the profile judged (transient);
                whatever candidates and the judge raise.
        """
        p = self.pipeline
        models = p._judging_models(stored, snapshot)  # the stored vector's profile's models
        assert stored is not None and snapshot is not None
        candidates = select_candidates(stored.vector, snapshot, top_k=p.config.candidate_top_k,
                                       floor=models.calibration.candidate_floor,
                                       text=row.request.text)
        if candidates:
            assert models.judge is not None
            with row.logging():
                answer = await p._judge(row.request.text, candidates, models.judge)
            row.answer, row.picks = answer, _only_candidates(answer.picks, candidates,
                                                             models.calibration.max_picks)
        else:
            row.answer = JudgeAnswer(picks=(), model_profile=NO_CANDIDATES_PROFILE)

    def _summary(self, rows: list[_Row]) -> None:
        """One INFO line per batch (no context's ids): outcomes per stage."""
        embedding = Counter(r.embedding for r in rows if r.stopped is None)
        keyword = Counter(r.keyword for r in rows if r.stopped is None)
        stopped = Counter(r.stopped for r in rows if r.stopped is not None)
        with log_context({}):
            log.info("batch processed", extra={
                "batch": len(rows), "count": keyword.get("completed", 0),
                "reason": "; ".join(
                    f"{name} " + ", ".join(f"{k} {n}" for k, n in sorted(c.items()))
                    for name, c in (("embedding", embedding), ("keyword", keyword),
                                    ("stopped", stopped)) if c)})
