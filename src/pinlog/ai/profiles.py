"""Switching embedding profiles with no search outage (SPEC §9.1, issue 24): the operations.

One profile is *active* (search, keywords and the embedding stage use it); at most one other is
*building*: its vectors are made beside the active ones by :func:`build_profile`, a resumable
batch fetch–embed–write loop that changes no stage status, into
``ai.context_embedding_shadow`` (keyed ``(context_id, embedding_profile)``;
``ai.context_embedding`` keeps ``context_id`` as its key and the active profile's vectors).
Search keeps answering from the active profile throughout.

* :func:`build_profile` — ``pinlog profiles build NAME``: records NAME as building (the first
  use of the switch records the configured profile as active), embeds the stored presets for
  NAME first, then loops: fetch a batch of contexts whose embedding stage is COMPLETED and that
  have no NAME vector yet (``profiles.sql`` ``build_batch``), read their texts from core's
  :class:`TextSource` (the ai side owns no text), embed them through the micro-batched provider,
  write the vectors and the cursor in one transaction (``write_build_vectors``,
  ``record_build_progress``). Resumable: a restart continues after the stored cursor, and what
  was written is never embedded again (its shadow row exists), so a crash costs at most the
  batch in flight. After the pass, sweeps from the start pick up contexts completed behind the
  cursor (replicas also embed new notes for the building profile: ``ai/state.sql``
  ``upsert_shadow_embedding``).
* :func:`activate_profile` — ``pinlog profiles activate NAME [--force]``: refuses below full
  coverage unless forced; in ONE transaction under the exclusive profile lock it keeps the
  vectors it replaces (``keep_replaced_vectors``: the rollback), copies NAME's vectors of the
  contexts still COMPLETED and not deleted into the active table (``copy_activated_vectors``)
  and switches the roles. A search sees one profile or the other (it reads roles and vectors in
  one snapshot); every replica uses NAME from its next search or save on. Keywords are then
  re-judged in the background by :func:`rejudge_keywords`: the old ones stay shown until each
  is replaced, no status is reset.
* activating the previous (kept) profile again is the rollback while its vectors are kept;
  :func:`drop_profile` deletes an inactive profile's vectors.
* :func:`profile_overview` — ``pinlog profiles``: each profile with its coverage (contexts
  embedded ÷ contexts that should be), rate and ETA.

Invalidation holds for every profile: core's cancel removes the context's shadow vectors in the
same transaction (core's statement ``delete_shadow_vectors``), the backfill writes only under a
``FOR SHARE`` lock of a COMPLETED state row, and activation copies only rows still COMPLETED and
not deleted. These functions are what the CLI (``pinlog.cli.profiles``) and the operator console
call. Texts are never logged.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from pinlog import metrics
from pinlog.ai.candidates import select_candidates
from pinlog.ai.errors import ModelError, PermanentModelError, with_retries
from pinlog.ai.pipeline import NO_CANDIDATES_PROFILE, _only_candidates, classify, text_sha256
from pinlog.ai.ports import JudgeAnswer, Pick
from pinlog.ai.presets import embed_stored_presets, load_snapshot
from pinlog.ai.routing import (ACTIVE, BUILDING, ProfileModels, check_stored_dimensions,
                               probe_dimension)
from pinlog.ai.vectors import check_embeddings, parse_pgvector, to_pgvector
from pinlog.db.sql import Queries
from pinlog.errors import PinlogError
from pinlog.settings import RetryPolicy

log = logging.getLogger(__name__)
q = Queries("pinlog.ai", "profiles.sql", fragments_from=("state.sql",))

#: Contexts per fetch–embed–write batch of the backfill and the re-judge (the micro-batcher
#: splits a batch into model calls of ``PINLOG_EMBEDDING_BATCH_SIZE``).
BATCH_SIZE = 256
#: Sweeps from the start after the backfill's pass (each only while the previous one wrote).
SWEEPS = 3
#: A build whose last batch is older than this is shown as not running (seconds).
ALIVE_SECONDS = 60.0
#: The retry policy of the backfill's model calls when the caller gives none (SPEC §6).
DEFAULT_RETRIES = RetryPolicy(attempts=3, backoff_base=0.5, backoff_cap=4.0)


class ProfileError(PinlogError):
    """A profiles command cannot do what was asked (nothing was changed): the message says why
    and what to do."""


#: The texts of contexts, by id (core owns them; SPEC §1): the active ones only — an id that is
#: deleted or unknown is left out of the answer. ``CoreService.context_texts`` in our
#: deployment (``pinlog.composition.core_texts``); a file the backend exported on an adopted one.
TextSource = Callable[[Sequence[int]], Awaitable[Mapping[int, str]]]


@dataclass
class Progress:
    """One progress report of a loop: ``done`` items of about ``total`` (this run), items/s."""

    profile: str
    done: int
    total: int
    rate: float

    @property
    def eta_seconds(self) -> float | None:
        """Seconds left at the current rate (None before a rate is known)."""
        return max(0, self.total - self.done) / self.rate if self.rate > 0 else None


@dataclass
class BuildReport:
    """What one :func:`build_profile` run did.

    Attributes:
        profile: the building profile.
        embedded: vectors written by this run (model calls = these + failed/skipped ones).
        skipped: contexts left out, by reason (``text missing`` — deleted in core but still
            COMPLETED here; ``text changed`` — its text's hash differs from the stored one;
            ``model refused`` — a permanent model error for that text).
        presets_embedded: preset vectors embedded for the profile first.
        seconds: wall time of this run.
        stopped: why the loop ended early (the profile stopped being the building one), or None.
    """

    profile: str
    embedded: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    presets_embedded: int = 0
    seconds: float = 0.0
    stopped: str | None = None


@dataclass(frozen=True)
class ActivationReport:
    """What :func:`activate_profile` did: ``copied`` vectors moved into the active table,
    ``kept`` vectors of the replaced profile kept for rollback, ``missing`` contexts without a
    vector of the new profile (only with ``force``), ``previous`` the profile that was active."""

    profile: str
    previous: str | None
    copied: int
    kept: int
    missing: int


@dataclass
class RejudgeReport:
    """What one :func:`rejudge_keywords` run did: contexts re-judged, skipped by reason."""

    profile: str
    rejudged: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0


@dataclass(frozen=True)
class ProfileStatus:
    """One row of ``pinlog profiles``.

    Attributes:
        profile, role: ``active``, ``building`` or ``kept``.
        embedded, eligible: contexts with a vector of the profile ÷ contexts that should have
            one (embedding COMPLETED, not deleted).
        keywords_judged, keyword_stages: COMPLETED keyword stages judged with this profile ÷ all
            (the re-judge's progress after an activation).
        rate: vectors/s of the running build (None when not running), ``eta_seconds``.
        build_finished_at, activated_at: when.
    """

    profile: str
    role: str
    embedded: int
    eligible: int
    keywords_judged: int
    keyword_stages: int
    rate: float | None
    eta_seconds: float | None
    build_finished_at: datetime | None
    activated_at: datetime | None
    rejudging: bool

    @property
    def coverage(self) -> float:
        """``embedded / eligible`` (1.0 when nothing should be embedded)."""
        return self.embedded / self.eligible if self.eligible else 1.0


# --- the backfill (SPEC §9.1) ---------------------------------------------------------------

async def build_profile(engine: AsyncEngine, models: ProfileModels, texts: TextSource, *,
                        active: tuple[str, int], batch_size: int = BATCH_SIZE,
                        retries: RetryPolicy = DEFAULT_RETRIES, probe: bool = True,
                        max_rate: float | None = None,
                        progress: Callable[[Progress], None] | None = None,
                        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> BuildReport:
    """Backfill ``models.profile`` beside the active profile (``pinlog profiles build``).

    Args:
        models: the building profile's models (its micro-batched provider).
        texts: where the texts come from (core's).
        active: ``(profile, dimension)`` the replicas serve today — recorded as active when the
            database records none yet (the first use of the switch).
        batch_size: contexts per fetch–embed–write batch.
        retries: attempts and backoff of each model call (SPEC §6).
        probe: embed the dimension probe first (SPEC §9; False when the caller did).
        max_rate: most vectors per second on average (None: as fast as the model and the
            database allow) — a build on a host that also serves searches leaves them CPU.
        progress: called after every batch.
        sleep: the pacing sleep (tests may record it).

    Returns:
        :class:`BuildReport`.

    Raises:
        ProfileError: the profile is the active one, another profile is building, or another
            build is running (nothing changed).
        StartupError: the provider's dimension or the stored vectors of the profile disagree
            with its dimension (SPEC §9), checked before anything is written.
        TransientModelError: a model call failed after its attempts (run the build again: it
            resumes).
    """
    profile = models.profile
    started = time.monotonic()
    report = BuildReport(profile)
    async with engine.connect() as lock_conn:
        if not (await lock_conn.execute(q("try_build_lock"))).scalar():
            raise ProfileError("another `pinlog profiles build` is running against this "
                               "database; wait for it (or stop it) first")
        await lock_conn.commit()
        try:
            if probe:
                await probe_dimension(getattr(models.provider, "provider", models.provider),
                                      profile, models.dimension)
            async with engine.connect() as conn:
                await check_stored_dimensions(conn, profile, models.dimension)
            after = await _begin_build(engine, profile, models.dimension, active)
            presets = await embed_stored_presets(engine, models.provider, retries=retries)
            report.presets_embedded = len(presets.embedded)
            await _backfill(engine, models, texts, after, batch_size, retries, progress, report,
                            max_rate, sleep)
        finally:
            await lock_conn.execute(q("release_build_lock"))
            await lock_conn.commit()
    report.seconds = time.monotonic() - started
    log.info("profile build ended", extra={"profile": profile, "count": report.embedded,
                                           "reason": report.stopped or "finished"})
    return report


async def _begin_build(engine: AsyncEngine, profile: str, dimension: int,
                       active: tuple[str, int]) -> int:
    """Record ``profile`` as building (SPEC §9.1) and return its stored cursor.

    Raises:
        ProfileError: it is the active profile, or another profile is building.
    """
    async with engine.begin() as conn:
        await conn.execute(q("lock_profiles_exclusive"))
        await conn.execute(q("record_active"), {"profile": active[0], "dimension": active[1]})
        rows = {r.profile: r.role for r in await conn.execute(q("lock_roles"))}
        if rows.get(profile) == ACTIVE:
            raise ProfileError(f"profile {profile} is the active profile: nothing to build")
        other = [p for p, role in rows.items() if role == BUILDING and p != profile]
        if other:
            raise ProfileError(f"profile {other[0]} is building: activate or drop it before "
                               f"building {profile}")
        after = (await conn.execute(q("begin_build"), {"profile": profile,
                                                      "dimension": dimension})).scalar_one()
    return int(after)


async def _backfill(engine: AsyncEngine, models: ProfileModels, texts: TextSource, after: int,
                    batch_size: int, retries: RetryPolicy,
                    progress: Callable[[Progress], None] | None, report: BuildReport,
                    max_rate: float | None = None,
                    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
    """The fetch–embed–write loop: the pass after ``after``, then up to :data:`SWEEPS` sweeps
    from the start while the previous one wrote something; paced to ``max_rate`` vectors/s."""
    profile = models.profile
    async with engine.connect() as conn:
        total = int((await conn.execute(q("missing_vectors"), {"profile": profile})).scalar_one())
    skip: set[int] = set()
    loop_started = time.monotonic()
    sweeps, wrote_in_sweep, sweeping = 0, 0, False
    while True:
        async with engine.connect() as conn:
            rows = (await conn.execute(q("build_batch"), {
                "after": after, "profile": profile, "limit": batch_size,
                "skip": sorted(skip)})).all()
        if not rows:
            # the pass (or a sweep) reached the end: sweep again from the start for contexts
            # completed behind the cursor, while the last sweep still found some
            if (sweeping and wrote_in_sweep == 0) or sweeps >= SWEEPS:
                break
            sweeping, sweeps, wrote_in_sweep, after = True, sweeps + 1, 0, 0
            continue
        ids = [int(r.context_id) for r in rows]
        rate = report.embedded / max(time.monotonic() - loop_started, 1e-9)
        written = await _build_batch(engine, models, texts, rows, retries, skip, report,
                                     cursor=0 if sweeping else ids[-1], rate=rate)
        if written is None:
            report.stopped = (f"profile {profile} is no longer the building profile "
                              "(activated or dropped)")
            return
        wrote_in_sweep += written
        after = ids[-1]
        if max_rate:  # pace: on average at most max_rate vectors per second
            ahead = report.embedded / max_rate - (time.monotonic() - loop_started)
            if ahead > 0:
                await sleep(ahead)
        if progress is not None:
            elapsed = max(time.monotonic() - loop_started, 1e-9)
            progress(Progress(profile, report.embedded, total, report.embedded / elapsed))
    async with engine.begin() as conn:
        await conn.execute(q("finish_build"), {"profile": profile})


async def _build_batch(engine: AsyncEngine, models: ProfileModels, texts: TextSource,
                       rows: Sequence[Any], retries: RetryPolicy, skip: set[int],
                       report: BuildReport, *, cursor: int, rate: float) -> int | None:
    """Fetch the texts of one batch, embed them, write the vectors and the cursor (one
    transaction). Returns the vectors written, or None when the profile is no longer building.

    Raises:
        TransientModelError: a model call failed after its attempts (nothing of this batch is
            written; the cursor stays).
    """
    profile = models.profile
    found = await texts([int(r.context_id) for r in rows])
    todo: list[tuple[int, str, bytes]] = []
    for row in rows:
        cid, text = int(row.context_id), found.get(int(row.context_id))
        sha = text_sha256(text) if text is not None else None
        if text is None:
            _skip(report.skipped, skip, cid, "text missing")
        elif row.text_sha256 is not None and bytes(row.text_sha256) != sha:
            # SPEC §5.6: a context id always means the same text; ids only, never the text
            metrics.CONTRACT_VIOLATIONS.inc()
            log.warning("profile build: the text's hash differs from the stored one; skipped",
                        extra={"context_id": cid, "profile": profile})
            _skip(report.skipped, skip, cid, "text changed")
        else:
            assert sha is not None
            todo.append((cid, text, sha))
    vectors = await asyncio.gather(*(_embed_one(models, text, retries) for _, text, _ in todo),
                                   return_exceptions=True)
    ids, embeddings, shas = [], [], []
    for (cid, _, sha), vector in zip(todo, vectors, strict=True):
        if isinstance(vector, PermanentModelError):
            _skip(report.skipped, skip, cid, "model refused")
            continue
        if isinstance(vector, BaseException):
            raise vector
        ids.append(cid)
        embeddings.append(to_pgvector(vector))
        shas.append(sha)
    async with engine.begin() as conn:
        await conn.execute(q("lock_profiles_shared"))
        written = (await conn.execute(q("write_build_vectors"), {
            "profile": profile, "context_ids": ids, "embeddings": embeddings,
            "text_sha256s": shas})).rowcount if ids else 0
        still = (await conn.execute(q("record_build_progress"), {
            "profile": profile, "after": cursor, "written": written,
            "rate": rate if rate > 0 else None})).first()
        if still is None:  # activated or dropped meanwhile: this batch is not written
            await conn.rollback()
            return None
    report.embedded += written
    return written


def _skip(counts: dict[str, int], skip: set[int], context_id: int, reason: str) -> None:
    counts[reason] = counts.get(reason, 0) + 1
    skip.add(context_id)


async def _embed_one(models: ProfileModels, text: str, retries: RetryPolicy) -> np.ndarray:
    """One passage vector through the (micro-batched) provider, attempts per SPEC §6.

    Raises:
        PermanentModelError: at once (a degenerate vector included, never stored).
        TransientModelError: all attempts failed.
    """
    async def once() -> np.ndarray:
        out = await models.provider.embed([text], "passage")
        return check_embeddings(out, 1, models.dimension)[0]

    return await with_retries(once, attempts=retries.attempts, base=retries.backoff_base,
                              cap=retries.backoff_cap)


# --- activation, rollback, drop (SPEC §9.1) ----------------------------------------------------

async def activate_profile(engine: AsyncEngine, profile: str, *, current: tuple[str, int],
                           force: bool = False) -> ActivationReport:
    """Make ``profile`` the active profile, atomically for every replica (``pinlog profiles
    activate``). Activating the kept previous profile is the rollback.

    In one transaction under the exclusive profile lock (vector writes by role wait): refuse
    unless presets are embedded for ``profile`` and (without ``force``) every context that
    should have a vector has one of ``profile``; keep the vectors that are replaced; copy
    ``profile``'s vectors of the contexts still COMPLETED and not deleted into the active
    table; the old active profile becomes ``kept``; the keyword re-judge is due
    (:func:`rejudge_keywords`).

    Args:
        current: ``(profile, dimension)`` the replicas serve while the database records no
            active profile (the first use of the switch).
        force: activate below full coverage (contexts without a vector of ``profile`` keep
            their old vector, which search on ``profile`` does not find until they are
            re-embedded, e.g. by ``pinlog reprocess --profile``).

    Raises:
        ProfileError: already active, no presets for it, coverage below 100 % without
            ``force``, or its stored vectors disagree in length (nothing changed).
    """
    async with engine.begin() as conn:
        await conn.execute(q("lock_profiles_exclusive"))
        await conn.execute(q("record_active"), {"profile": current[0], "dimension": current[1]})
        rows = {r.profile: r for r in await conn.execute(q("lock_roles"))}
        previous = next((p for p, r in rows.items() if r.role == ACTIVE), None)
        if previous == profile:
            raise ProfileError(f"profile {profile} is already the active profile")
        usable = int((await conn.execute(q("usable_presets"), {"profile": profile})).scalar_one())
        if usable == 0:
            raise ProfileError(f"no keyword presets are embedded for profile {profile}: run "
                               f"`pinlog profiles build {profile}` (or `pinlog presets load` "
                               "with that profile) first")
        missing = int((await conn.execute(q("missing_vectors"),
                                          {"profile": profile})).scalar_one())
        if missing and not force:
            raise ProfileError(f"profile {profile} is not fully built: {missing} contexts have "
                               f"no vector of it yet (run `pinlog profiles build {profile}`, or "
                               "--force to activate anyway)")
        dims = [int(r.dims) for r in await conn.execute(q("shadow_dimensions"),
                                                         {"profile": profile})]
        recorded = rows[profile].dimension if profile in rows else None
        if len(dims) > 1 or (dims and recorded is not None and dims[0] != recorded):
            raise ProfileError(f"profile {profile}'s stored vectors have lengths {dims}, "
                               f"expected {recorded}: drop it and build it again")
        kept = (await conn.execute(q("keep_replaced_vectors"), {"profile": profile})).rowcount
        copied = (await conn.execute(q("copy_activated_vectors"), {"profile": profile})).rowcount
        await conn.execute(q("delete_profile_vectors"), {"profile": profile})
        await conn.execute(q("demote_active"), {"profile": profile})
        await conn.execute(q("promote"), {"profile": profile,
                                          "dimension": recorded or (dims[0] if dims else None)})
    log.info("embedding profile activated", extra={"profile": profile, "count": copied,
                                                   "reason": f"previous {previous}"})
    return ActivationReport(profile, previous, copied, kept, missing)


async def drop_profile(engine: AsyncEngine, profile: str) -> int:
    """Delete an inactive profile's vectors (contexts' and presets') and forget it
    (``pinlog profiles drop``). A build of it that is running stops at its next batch.

    Returns:
        the context vectors deleted.

    Raises:
        ProfileError: it is the active profile, or nothing of it is stored.
    """
    async with engine.begin() as conn:
        await conn.execute(q("lock_profiles_exclusive"))
        rows = {r.profile: r.role for r in await conn.execute(q("lock_roles"))}
        if rows.get(profile) == ACTIVE:
            raise ProfileError(f"profile {profile} is the active profile: activate another "
                               "one first")
        deleted = (await conn.execute(q("delete_profile_vectors"), {"profile": profile})).rowcount
        presets = (await conn.execute(q("delete_preset_vectors"), {"profile": profile})).rowcount
        forgotten = (await conn.execute(q("delete_profile_row"), {"profile": profile})).rowcount
        if not (deleted or presets or forgotten):
            raise ProfileError(f"nothing is stored for profile {profile}")
    log.info("embedding profile dropped", extra={"profile": profile, "count": deleted})
    return int(deleted)


# --- the keyword re-judge after an activation (SPEC §9.1) -----------------------------------------

async def rejudge_keywords(engine: AsyncEngine, models: ProfileModels, texts: TextSource, *,
                           top_k: int, batch_size: int = BATCH_SIZE,
                           progress: Callable[[Progress], None] | None = None) -> RejudgeReport:
    """Re-judge the keywords of the active profile ``models.profile`` that were judged with
    another one, without changing any status: each context's keyword rows and analysis row are
    replaced in one short transaction under its state row's lock, only while its keyword stage
    is still COMPLETED on the active profile's vector (``profiles.sql`` ``lock_rejudged`` and
    the statements after it), so the old keywords stay shown until then and a deleted context
    gets nothing. Resumable (cursor ``rejudge_after``; a context re-judged records the profile).

    Returns:
        :class:`RejudgeReport` (nothing when no re-judge is due for the profile).

    Raises:
        ProfileError: ``models`` has no judge.
    """
    profile = models.profile
    judge = models.judge
    if judge is None:
        raise ProfileError("re-judging keywords needs the judge of the active profile")
    started = time.monotonic()
    report = RejudgeReport(profile)
    async with engine.connect() as conn:
        cursor = (await conn.execute(q("rejudge_cursor"), {"profile": profile})).scalar()
    if cursor is None:
        return report
    async with engine.connect() as conn:
        total = int((await conn.execute(q("rejudge_due"), {"profile": profile,
                                                           "skip": []})).scalar_one())
    after, skip, swept = int(cursor), set[int](), False
    while True:
        async with engine.connect() as conn:
            rows = (await conn.execute(q("rejudge_batch"), {
                "after": after, "profile": profile, "limit": batch_size,
                "skip": sorted(skip)})).all()
            snapshot = await load_snapshot(conn, profile) if rows else None
        if not rows:
            if swept:
                break
            swept, after = True, 0
            continue
        assert snapshot is not None
        found = await texts([int(r.context_id) for r in rows])
        for row in rows:
            cid, text = int(row.context_id), found.get(int(row.context_id))
            if text is None:
                _skip(report.skipped, skip, cid, "text missing")
                continue
            try:
                vector = parse_pgvector(row.embedding)
                candidates = select_candidates(vector, snapshot, top_k=top_k,
                                               floor=models.calibration.candidate_floor,
                                               text=text)
                answer = (await judge.judge(text, candidates) if candidates else
                          JudgeAnswer(picks=(), model_profile=NO_CANDIDATES_PROFILE))
            except ModelError as exc:
                log.warning("keyword re-judge failed for a context; skipped",
                            extra={"context_id": cid, "error_class": classify(exc)[0]})
                _skip(report.skipped, skip, cid, "judge failed")
                continue
            picks = (_only_candidates(answer.picks, candidates, models.calibration.max_picks)
                     if candidates else ())
            if await _write_rejudged(engine, cid, profile, snapshot.version, answer, picks):
                report.rejudged += 1
            else:
                _skip(report.skipped, skip, cid, "no longer COMPLETED")
        after = int(rows[-1].context_id)
        if not swept:
            async with engine.begin() as conn:
                await conn.execute(q("record_rejudge_progress"), {"profile": profile,
                                                                  "after": after})
        if progress is not None:
            elapsed = max(time.monotonic() - started, 1e-9)
            progress(Progress(profile, report.rejudged, total, report.rejudged / elapsed))
    async with engine.begin() as conn:
        await conn.execute(q("finish_rejudge"), {"profile": profile})
    report.seconds = time.monotonic() - started
    return report


async def _write_rejudged(engine: AsyncEngine, context_id: int, profile: str,
                          preset_version: int, answer: JudgeAnswer,
                          picks: Sequence[Pick]) -> bool:
    """Replace one context's keywords and analysis (guarded; no status change). Returns False
    when the guard matched nothing (deleted, edited, re-embedded meanwhile: nothing written)."""
    params = {"context_id": context_id, "profile": profile}
    async with engine.begin() as conn:
        await conn.execute(q("lock_profiles_shared"))
        if (await conn.execute(q("lock_rejudged"), params)).first() is None:
            return False
        await conn.execute(q("delete_rejudged_keywords"), params)
        if picks:
            await conn.execute(q("insert_rejudged_keywords"), {
                **params, "preset_version": preset_version,
                "keyword_ids": [int(p.keyword_id) for p in picks],
                "confidences": [None if p.confidence is None else round(float(p.confidence), 3)
                                for p in picks]})
        await conn.execute(q("upsert_rejudged_analysis"), {
            **params, "preset_version": preset_version,
            "unmatched_concepts": json.dumps(list(answer.unmatched_concepts), ensure_ascii=False),
            "model_profile": answer.model_profile or "unknown",
            "evidence": json.dumps([dict(e) for e in answer.evidence], ensure_ascii=False)})
    return True


# --- pinlog profiles (SPEC §9.1) -----------------------------------------------------------------

async def profile_overview(engine: AsyncEngine, *, current: str) -> list[ProfileStatus]:
    """Every profile the switch knows, with its coverage, rate and ETA (``pinlog profiles``).
    While no profile is recorded, ``current`` (the configured one) is shown as active.

    Raises:
        sqlalchemy.exc.ProgrammingError: the ai tables are missing (not migrated).
    """
    async with engine.connect() as conn:
        rows: list[Any] = list(await conn.execute(q("profile_rows"),
                                                  {"alive_seconds": ALIVE_SECONDS}))
        coverage = {r.profile: r for r in await conn.execute(q("coverage"))}
        eligible, stages = await _totals(conn, coverage)
    if not any(r.role == ACTIVE for r in rows):
        rows.insert(0, _Implicit(current))
    out = []
    for row in rows:
        counts = coverage.get(row.profile)
        embedded = int(counts.embedded) if counts is not None else 0
        rate = float(row.build_rate) if row.build_alive and row.build_rate else None
        out.append(ProfileStatus(
            profile=row.profile, role=row.role, embedded=embedded, eligible=eligible,
            keywords_judged=int(counts.keywords_judged) if counts is not None else 0,
            keyword_stages=stages, rate=rate,
            eta_seconds=(eligible - embedded) / rate if rate else None,
            build_finished_at=row.build_finished_at, activated_at=row.activated_at,
            rejudging=row.rejudge_after is not None))
    return out


async def _totals(conn: AsyncConnection, coverage: Mapping[str, Any]) -> tuple[int, int]:
    """(contexts that should have a vector, COMPLETED keyword stages among them)."""
    for row in coverage.values():
        return int(row.eligible), int(row.keyword_stages)
    return 0, 0


@dataclass(frozen=True)
class _Implicit:
    """The configured profile shown as active before the switch records any."""

    profile: str
    role: str = ACTIVE
    build_rate: float | None = None
    build_alive: bool = False
    build_finished_at: datetime | None = None
    activated_at: datetime | None = None
    rejudge_after: int | None = None
