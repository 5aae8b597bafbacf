"""Composition root: the configuration and the components a process runs (SPEC §1).

This neutral module is the only place that knows both ``pinlog.ai`` and ``pinlog.core``: core
never imports ai.

* :func:`build_config` turns the loaded :class:`~pinlog.settings.Settings` into one frozen
  :class:`Config`, once per process: ``AiConfig.from_settings`` and ``CoreConfig.from_settings``
  build each component's narrow config (core gets the embedding profile in force from the ai
  side's provider config). Components take only their part.
* :func:`running_components` starts the runtimes. When both run in one process, core's process
  client is the ai runtime's in-process ``submit`` (same contract as
  ``POST /internal/v1/context/process``); otherwise core uses HTTP to ``PINLOG_AI_BASE_URL``.
* :func:`replica_rules` is what a process records for the replica-agreement check.
* :func:`profile_models`, :func:`core_texts` — what the profile switch's operations
  (:mod:`pinlog.ai.profiles`: ``pinlog profiles``, the operator console) need from a process:
  a configured profile's models and core's texts (SPEC §9.1).
* :func:`retention_parts` are the parts of the retention job a process runs (issue 31), in the
  loop :func:`running_components` starts (``PINLOG_RETENTION_ENABLED``) and in ``pinlog
  purge``; :func:`erase_member` composes an erasure (core finds the member and its notes, the ai
  side erases their AI data, core erases its rows).
"""

from __future__ import annotations

import gc
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from collections.abc import Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from sqlalchemy.ext.asyncio import AsyncEngine

from pinlog.contracts import SearchRequest, SearchResponse
from pinlog.db.process_settings import ReplicaRules
from pinlog.db.retention import PurgePart, PurgeReport, RetentionLoop, count_purged
from pinlog.settings import Settings, load_settings

if TYPE_CHECKING:  # imported when used: `pinlog --help` need not load the components
    from pinlog.ai.routing import ProfileModels
    from pinlog.ai.runtime import AiConfig, AiRuntime
    from pinlog.core.runtime import CoreConfig, CoreRuntime

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Config:
    """The configuration of one process, built once (:func:`build_config`).

    Attributes:
        settings: the loaded settings — read only by the entry points (database, listen
            address, logging); components never see them.
        ai: the ai component's configuration.
        core: the core component's configuration.
    """

    settings: Settings
    ai: AiConfig
    core: CoreConfig

    @property
    def profile(self) -> str:
        """The embedding profile in force (SPEC §9)."""
        return self.ai.embedding.profile


def build_config(settings: Settings) -> Config:
    """Every component's config from ``settings`` (no I/O).

    Raises:
        SettingsError: an unknown embedding provider or judge name (one line listing the known
            ones), or a provider/judge field its model refuses.
    """
    from pinlog.ai.runtime import AiConfig
    from pinlog.core.runtime import CoreConfig

    ai = AiConfig.from_settings(settings)
    # one relevance rule for core's search and the ai side's hybrid search (SPEC §10)
    return Config(settings=settings, ai=ai,
                  core=CoreConfig.from_settings(settings, profile=ai.embedding.profile,
                                                relevance=ai.relevance))


def load_config(**overrides: object) -> Config:
    """:func:`pinlog.settings.load_settings` then :func:`build_config`.

    Raises:
        SettingsError: as both do.
    """
    return build_config(load_settings(**overrides))


def replica_rules(config: Config, components: Iterable[str]) -> ReplicaRules:
    """The rule-relevant values a process running ``components`` (``core``, ``ai``,
    ``rescan``) records in ``ai.process_settings`` (issue 16 #7): core and rescan the
    expiries and retries of the rescan; ai the processing expiry, model timeouts, attempts,
    backoff and the embedding profile."""
    wanted = set(components)
    rules = ReplicaRules()
    if wanted - {"ai"}:
        rescan = config.core.rescan
        rules = replace(rules, pending_expiry=rescan.pending_expiry.total_seconds(),
                        processing_expiry=rescan.processing_expiry.total_seconds(),
                        max_retries=rescan.max_retries)
    if "ai" in wanted:
        job = config.ai.pipeline
        rules = replace(rules, processing_expiry=job.processing_expiry.total_seconds(),
                        embedding_timeout=job.embedding_timeout, llm_timeout=job.llm_timeout,
                        model_attempts=job.retries.attempts,
                        backoff_base=job.retries.backoff_base,
                        backoff_cap=job.retries.backoff_cap,
                        embedding_profile=config.ai.embedding.profile)
    return rules


def configured_profiles(config: Config) -> tuple[str, ...]:
    """The embedding profiles this process has providers for (SPEC §9.1): the first
    provider's (``PINLOG_EMBEDDING_*``), then the next one's (``PINLOG_NEXT_EMBEDDING_*``)."""
    nxt = config.ai.next_embedding
    return (config.profile,) + ((nxt.profile,) if nxt is not None else ())


def profile_models(config: Config, profile: str, *, judge: bool = False) -> ProfileModels:
    """The models of a configured ``profile`` built here — its micro-batched provider, its
    calibration and, with ``judge``, its judge — for the profile switch's operations
    (``pinlog profiles``, the operator console; :mod:`pinlog.ai.profiles`). Close them with
    :func:`close_profile_models`.

    Raises:
        SettingsError: no provider is configured for ``profile`` here.
        ValueError: the provider refuses its settings (``build``).
    """
    from pinlog.ai.judges import build_judge
    from pinlog.ai.providers import build_batched_provider
    from pinlog.ai.routing import ProfileModels
    from pinlog.settings import SettingsError

    ai = config.ai
    for embedding, calibration in ((ai.embedding, ai.calibration),
                                   (ai.next_embedding, ai.next_calibration)):
        if embedding is not None and calibration is not None and embedding.profile == profile:
            batched = build_batched_provider(embedding, ai.batching)
            built = build_judge(ai.judge, batched, calibration) if judge else None
            return ProfileModels(profile, batched, calibration, built)
    raise SettingsError(f"no embedding provider is configured for profile {profile}: set "
                        "PINLOG_NEXT_EMBEDDING_PROVIDER (and its PINLOG_NEXT_EMBEDDING_* "
                        "settings) for it")


async def close_profile_models(models: ProfileModels) -> None:
    """Close what :func:`profile_models` built (provider, judge)."""
    from pinlog.ai.ports import close_resource

    await close_resource(models.provider)
    if models.judge is not None:
        await close_resource(models.judge)


def core_texts(engine: AsyncEngine, config: Config) -> Callable[[Sequence[int]],
                                                                Awaitable[Mapping[int, str]]]:
    """The profile switch's text source in our deployment: core's active contexts
    (``CoreService.context_texts``; SPEC §9.1, core owns the text)."""
    from pinlog.core.services import CoreService

    return CoreService(engine, None, config.core.service).context_texts
def retention_parts(config: Config, engine: AsyncEngine, *, core: bool = True,
                    **hooks: Any) -> list[PurgePart]:
    """The retention job's parts for a process (issue 31): core's (``core``: the process runs
    core; it turns itself off on an adopted database) first, then the ai side's (always: its
    tables are shared by every process, and on an adopted database an ai-only process is the
    only one of ours). ``hooks``: ``on_batch`` for both parts (tests)."""
    from pinlog.ai.retention import AiPurge

    parts: list[PurgePart] = []
    if core:
        from pinlog.core.retention import CorePurge

        parts.append(CorePurge(engine, config.core.retention, **hooks))
    parts.append(AiPurge(engine, config.ai.retention, **hooks))
    return parts


async def erase_member(config: Config, engine: AsyncEngine, who: str, *,
                       dry_run: bool = False) -> tuple[list[int], PurgeReport]:
    """Erase a withdrawn member now (``pinlog purge --member``, issue 31): for each member
    ``who`` names (``id:N``, ``ref:X`` or a bare value), the ai side erases the AI data of its
    notes (:meth:`pinlog.ai.retention.AiPurge.erase_contexts`; their CANCELLED state rows stay
    until the regular purge takes them, past the retention and the late-result window), then
    core its notes, records and member row
    (:meth:`pinlog.core.retention.CorePurge.erase_member`). Safe to run again after a failure
    (the ai part first: core still knows the notes).

    Returns:
        ``(member ids, report)``; rows counted in ``pinlog_purged_rows_total`` unless ``dry_run``.

    Raises:
        CoreNotOurs, NotFound, InvalidInput, MemberActive: see
            :meth:`pinlog.core.retention.CorePurge.withdrawn_members` (nothing changed).
    """
    from pinlog.ai.retention import AiPurge
    from pinlog.core.retention import CorePurge

    core = CorePurge(engine, config.core.retention)
    ai = AiPurge(engine, config.ai.retention)
    members = await core.withdrawn_members(who)
    report = PurgeReport(dry_run=dry_run)
    for member_id in members:
        report.merge(await ai.erase_contexts(await core.member_context_ids(member_id),
                                             dry_run=dry_run))
        report.merge(await core.erase_member(member_id, dry_run=dry_run))
    count_purged(report)
    return members, report


@dataclass
class Components:
    """The running runtimes of this process (either may be None) and the retention loop
    (None when ``PINLOG_RETENTION_ENABLED`` is off or the command is one-shot)."""

    ai: AiRuntime | None
    core: CoreRuntime | None
    retention: RetentionLoop | None = None


class InProcessSearch:
    """core's search client when both components run in this process (SPEC §10).

    Calls ``AiRuntime.search`` and maps its errors with the HTTP route's map
    (:func:`pinlog.ai.api.search_error`), then as :class:`pinlog.core.search.HttpSearchClient`
    does, so core sees the same outcomes either way: a profile mismatch → ``SearchRejected``
    (the route's 422, with both profiles), a model error → ``SearchUnavailable`` (the route's
    503). :meth:`prepare_request` is core's optional hook (``SearchFn``): the query embedded
    before core's channels read, when the model computes on this CPU (issue 28).
    """

    def __init__(self, ai_runtime: AiRuntime) -> None:
        self._runtime = ai_runtime

    async def __call__(self, request: SearchRequest) -> SearchResponse:
        with self._mapped():
            return await self._runtime.search(request)

    async def prepare_request(self, request: SearchRequest) -> None:
        with self._mapped():
            await self._runtime.prepare_search(request)

    @contextmanager
    def _mapped(self) -> Iterator[None]:
        from pinlog.ai.api import search_error
        from pinlog.ai.errors import ModelError
        from pinlog.ai.search import ProfileMismatch
        from pinlog.core.search import SearchRejected, SearchUnavailable

        try:
            yield
        except (ProfileMismatch, ModelError) as exc:
            status, answer = search_error(exc)
            if status == 422:
                raise SearchRejected(dict(answer)) from None
            raise SearchUnavailable("search unavailable") from None


def in_process_search(ai_runtime: AiRuntime) -> InProcessSearch:
    """core's search client over ``ai_runtime`` in this process (:class:`InProcessSearch`)."""
    return InProcessSearch(ai_runtime)


@contextmanager
def tuned_collector(threshold: int) -> Iterator[None]:
    """Python's cyclic garbage collector while components run (``PINLOG_GC_THRESHOLD``, issue
    25): the objects that exist when the block starts (modules, the analyser, presets, caches)
    are frozen out of every later collection (``gc.freeze``), and a young collection runs every
    ``threshold`` net allocations instead of the interpreter's 700 (older generations keep
    their ratios). Measured on a 3,000-context backfill (Protocol fake, 2 cores, 4 alternating
    rounds, ``bench_backfill``'s ``backfill``): collections took 0.32–0.36 s of ~3.1 s at 700,
    0.13 s at 10,000; 963 → 1,062 contexts/s (median). On exit the previous thresholds are
    restored and the objects unfrozen (by the last of overlapping blocks). ``threshold`` 0:
    nothing is changed.

    Garbage is still collected (only less often): a cycle lives at most ``threshold``
    allocations longer."""
    if threshold <= 0:
        yield
        return
    if not _TUNED:  # the first of overlapping blocks (replicas in one process) tunes it
        before = gc.get_threshold()
        gc.freeze()
        gc.set_threshold(threshold, *before[1:])
        _BEFORE[:] = before
    _TUNED.append(threshold)
    try:
        yield
    finally:
        _TUNED.pop()
        if not _TUNED:  # the last one out restores it
            gc.set_threshold(*_BEFORE)
            gc.unfreeze()


#: :func:`tuned_collector`'s state: one entry per open block, and the thresholds before the first.
_TUNED: list[int] = []
_BEFORE: list[int] = []


@asynccontextmanager
async def running_components(
    config: Config,
    engine: AsyncEngine,
    *,
    ai: bool = True,
    core: bool = True,
    rescan: bool | None = None,
    retention: bool | None = None,
    ai_kwargs: dict[str, Any] | None = None,
    core_kwargs: dict[str, Any] | None = None,
    owner: str | None = None,
) -> AsyncIterator[Components]:
    """Start the ai runtime (if ``ai``), then the core runtime (if ``core``), then the
    retention loop over :func:`retention_parts`; stop in reverse.

    Args:
        rescan: whether core runs its rescan loop (default ``PINLOG_RESCAN_ENABLED``); one-shot
            commands pass False.
        owner: this process's id in ``ai.process_settings`` (its
            :class:`~pinlog.db.process_settings.ProcessRegistry`, started before and stopped
            after the components): what the rows it creates, claims and starts record as their
            owner (SPEC §7.3.1). None (one-shot commands) → no owner; the expiries are the
            backstop.
        retention: whether the retention loop runs (default ``PINLOG_RETENTION_ENABLED``);
            one-shot commands pass False.
        ai_kwargs: extra keyword arguments for ``AiRuntime`` (tests pass fake providers).
        core_kwargs: extra keyword arguments for ``CoreRuntime``.

    Raises:
        whatever a runtime's ``start()`` raises (e.g. ai tables missing, no presets).
    """
    with tuned_collector(config.settings.gc_threshold):
        async with _running_components(config, engine, ai=ai, core=core, rescan=rescan,
                                       retention=retention, ai_kwargs=ai_kwargs,
                                       core_kwargs=core_kwargs, owner=owner) as components:
            yield components


@asynccontextmanager
async def _running_components(config: Config, engine: AsyncEngine, *, ai: bool, core: bool,
                              rescan: bool | None, retention: bool | None,
                              ai_kwargs: dict[str, Any] | None, core_kwargs: dict[str, Any] | None,
                              owner: str | None) -> AsyncIterator[Components]:
    """:func:`running_components` without the collector's tuning."""
    started: list[AiRuntime | CoreRuntime | RetentionLoop] = []
    ai_runtime: AiRuntime | None = None
    core_runtime: CoreRuntime | None = None
    loop: RetentionLoop | None = None
    try:
        if ai:
            from pinlog.ai.runtime import AiRuntime

            ai_runtime = AiRuntime(engine, config.ai, owner=owner, **(ai_kwargs or {}))
            await ai_runtime.start()
            started.append(ai_runtime)
        if core:
            from pinlog.core.runtime import CoreRuntime

            local = ai_runtime if config.core.dispatch.ai_base_url is None else None
            core_runtime = CoreRuntime(
                engine, config.core,
                in_process_submit=local.submit if local is not None else None,
                in_process_submit_batch=local.submit_batch if local is not None else None,
                in_process_search=in_process_search(local) if local is not None else None,
                rescan=rescan, owner=owner, **(core_kwargs or {}),
            )
            await core_runtime.start()
            started.append(core_runtime)
        if (config.ai.retention.enabled if retention is None else retention) and (ai or core):
            loop = RetentionLoop(retention_parts(config, engine, core=core),
                                 config.ai.retention.interval)
            await loop.start()
            started.append(loop)
        yield Components(ai=ai_runtime, core=core_runtime, retention=loop)
    finally:
        for runtime in reversed(started):
            try:
                await runtime.stop()
            except Exception:  # noqa: BLE001 - shutdown must go on
                log.exception("component stop failed")
