"""Replicas must agree on the settings the rules depend on (issue 16 #7, SPEC §6/§7).

A replica with a shorter ``PINLOG_PROCESSING_EXPIRY`` (or longer timeouts) than another
re-claims the other's live work, which then ends FAILED. So each process records its
rule-relevant settings in ``ai.process_settings`` at start-up and refreshes a heartbeat; when its
values differ from those of another live process (heartbeat within :data:`LIVE_SECONDS`), it
logs an ERROR naming the settings and both values, and ``pinlog status`` shows the live
processes and every difference. Nothing is refused: the operator fixes the configuration.

Only values of settings the process's components use are recorded (core: expiries and retries;
ai: processing expiry, timeouts, attempts, backoff, embedding profile) and only settings both
processes record are compared. No secret is ever recorded. The values are the typed fields of
:class:`ReplicaRules`, filled from the components' configs by
:func:`pinlog.composition.replica_rules`.

The same row is the heartbeat of the owner rule (SPEC §7.3.1): its lease ``alive_until`` is
extended by every heartbeat (every third of ``PINLOG_HEARTBEAT_TIMEOUT``) by the process's own
timeout, and ended at once by a clean stop (:meth:`ProcessRegistry.stop`, after the components
stopped). Claims record :attr:`ProcessRegistry.process_id` as their owner; the rescan and the
guarded start treat the work of a process whose lease ended as released
(``process_settings.sql``: ``live_owner``, ``gone_owners``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import socket
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from pinlog import __version__
from pinlog.db.sql import Queries

log = logging.getLogger(__name__)
_q = Queries("pinlog.db", "process_settings.sql")

#: Default lease of a process (``PINLOG_HEARTBEAT_TIMEOUT``), seconds: it is gone when it has not
#: heartbeat for this long. Heartbeats come every :data:`BEATS_PER_LEASE`-th of it.
HEARTBEAT_TIMEOUT_SECONDS = 30.0
BEATS_PER_LEASE = 3
#: Seconds between heartbeats by default (a third of the default lease).
HEARTBEAT_SECONDS = HEARTBEAT_TIMEOUT_SECONDS / BEATS_PER_LEASE
#: A failed heartbeat (database unreachable) is retried after at most this many seconds, so the
#: lease is renewed as soon as the database is back.
RETRY_SECONDS = 1.0
#: Settings comparison: a process counts while its heartbeat is younger than this (rows of an
#: older version have no lease); rows older than :data:`FORGET_SECONDS` are deleted.
LIVE_SECONDS = 90.0
FORGET_SECONDS = 24 * 3600.0

@dataclass(frozen=True)
class ReplicaRules:
    """The rule-relevant settings one process records (SPEC §6/§7): each field is named after
    its ``PINLOG_*`` variable (lower case, no prefix); None = not used by this process's
    components (not recorded, never compared). Durations in seconds.

    core / rescan: ``pending_expiry``, ``processing_expiry``, ``max_retries``;
    ai: ``processing_expiry``, ``embedding_timeout``, ``llm_timeout``, ``model_attempts``,
    ``backoff_base``, ``backoff_cap``, ``embedding_profile``.
    """

    pending_expiry: float | None = None
    processing_expiry: float | None = None
    max_retries: int | None = None
    embedding_timeout: float | None = None
    llm_timeout: float | None = None
    model_attempts: int | None = None
    backoff_base: float | None = None
    backoff_cap: float | None = None
    embedding_profile: str | None = None

    def values(self) -> dict[str, Any]:
        """The recorded values, JSON-ready (the fields that are not None)."""
        return {key: value for key, value in asdict(self).items() if value is not None}


@dataclass(frozen=True)
class ProcessInfo:
    """One live process as recorded: id, host, pid, components (comma-separated), settings,
    start and last heartbeat (database clock), and the ``pinlog`` version it runs (None for a
    process of a version before the column existed)."""

    process_id: str
    host: str
    pid: int
    components: str
    settings: dict[str, Any]
    started_at: datetime
    seen_at: datetime
    version: str | None = None

    @property
    def label(self) -> str:
        return f"{self.host}:{self.pid} ({self.components})"


@dataclass(frozen=True)
class Difference:
    """A setting whose value differs between two live processes."""

    setting: str
    first: ProcessInfo
    first_value: Any
    second: ProcessInfo
    second_value: Any

    def describe(self) -> str:
        return (f"PINLOG_{self.setting.upper()}: {self.first_value} on {self.first.label} vs "
                f"{self.second_value} on {self.second.label}")


def profile_drift(active: str | None, served: Iterable[str]) -> str | None:
    """The drift between the database's active embedding profile (``ai.embedding_profile``,
    SPEC §9.1) and the profiles a replica has providers for, as the ERROR line to log — or None
    when the replica can serve it (or no active profile is recorded yet: then each replica's
    first provider is active, as before the profile switch existed).

    A replica that cannot serve the active profile refuses search and stage work (the ai side's
    ``ProfileRouter``) instead of answering from the wrong vector space; activation is atomic
    for every replica, so this is a configuration to fix, never a state to wait out."""
    served = tuple(served)
    if active is None or active in served:
        return None
    return (f"the database's active embedding profile is {active}, but this replica only has "
            f"providers for {', '.join(served)}: it refuses search and stage work until "
            f"PINLOG_EMBEDDING_* or PINLOG_NEXT_EMBEDDING_* configures {active} (or "
            f"`pinlog profiles activate` switches back)")


def differences(mine: Mapping[str, Any], me: ProcessInfo | None,
                others: Iterable[ProcessInfo]) -> list[Difference]:
    """Settings present in both ``mine`` and another process whose values differ."""
    out = []
    for other in others:
        for key in sorted(set(mine) & set(other.settings)):
            if mine[key] != other.settings[key]:
                out.append(Difference(key, other, other.settings[key],
                                      me or other, mine[key]))
    return out


def all_differences(processes: list[ProcessInfo]) -> list[Difference]:
    """Every pairwise difference between live processes (for ``pinlog status``)."""
    out = []
    for i, first in enumerate(processes):
        for second in processes[i + 1:]:
            for key in sorted(set(first.settings) & set(second.settings)):
                if first.settings[key] != second.settings[key]:
                    out.append(Difference(key, first, first.settings[key], second,
                                          second.settings[key]))
    return out


async def live_processes(engine: AsyncEngine) -> list[ProcessInfo]:
    """The live processes, oldest first (empty when the table does not exist yet)."""
    async with engine.connect() as conn:
        rows = (await conn.execute(_q("live_processes"), {"live_seconds": LIVE_SECONDS})).mappings()
        return [ProcessInfo(r["process_id"], r["host"], int(r["pid"]), r["components"],
                            dict(r["settings"]), r["started_at"], r["seen_at"], r["version"])
                for r in rows]


class ProcessRegistry:
    """Records this process's rule-relevant settings, keeps a heartbeat (the lease of the owner
    rule, SPEC §7.3.1), and reports (ERROR) every difference with another live process — at
    start-up and whenever a new one appears.

    Args:
        engine: the process's engine.
        rules: its rule-relevant settings (:func:`pinlog.composition.replica_rules`).
        components: what it runs (``core``, ``ai``, ``rescan``).
        lease: ``PINLOG_HEARTBEAT_TIMEOUT``, seconds: the process is gone when it has not
            heartbeat for this long.
        heartbeat: seconds between heartbeats (default a third of ``lease``; tests may change it).

    Attributes:
        process_id: this process's id (32 hex digits): what its claims record as their owner.
    """

    def __init__(self, engine: AsyncEngine, rules: ReplicaRules, components: Iterable[str], *,
                 lease: float = HEARTBEAT_TIMEOUT_SECONDS,
                 heartbeat: float | None = None) -> None:
        self.engine = engine
        self.components = ",".join(components)
        self.values = rules.values()
        self.process_id = uuid.uuid4().hex
        self.lease = lease
        self.heartbeat = heartbeat if heartbeat is not None else lease / BEATS_PER_LEASE
        self.reported: set[tuple[str, str]] = set()
        self._task: asyncio.Task[None] | None = None
        self._failing = False

    async def start(self) -> list[Difference]:
        """Record this process and check the live ones. Never raises: a database that is not
        migrated yet (a core-only server may start first) only skips the registry (WARNING).

        Returns:
            the differences found (also logged at ERROR).
        """
        found: list[Difference] = []
        try:
            await self._register()
            found = await self.check()
        except Exception as exc:  # noqa: BLE001 - the registry must never stop a process
            # the heartbeat keeps trying: it registers as soon as the database allows
            self._failing = True
            log.warning("process settings registry unavailable",
                        extra={"error_class": type(exc).__name__})
        self._task = asyncio.create_task(self._beat(), name="process-settings-heartbeat")
        return found

    async def check(self) -> list[Difference]:
        """Compare with the other live processes; log each new difference at ERROR."""
        others = [p for p in await live_processes(self.engine) if p.process_id != self.process_id]
        found = differences(self.values, None, others)
        for diff in found:
            key = (diff.first.process_id, diff.setting)
            if key in self.reported:
                continue
            self.reported.add(key)
            log.error("rule-relevant setting differs from another live process: %s "
                      "(replicas must agree, or one re-claims the other's live work; "
                      "see `pinlog status`)",
                      f"PINLOG_{diff.setting.upper()}: {diff.second_value} here vs "
                      f"{diff.first_value} on {diff.first.label}",
                      extra={"setting": diff.setting})
        return found

    async def _register(self) -> None:
        async with self.engine.begin() as conn:
            await conn.execute(_q("register"), {
                "process_id": self.process_id, "host": socket.gethostname()[:200],
                "pid": os.getpid(), "components": self.components,
                "settings": json.dumps(self.values), "version": __version__,
                "lease_seconds": self.lease})

    async def beat(self) -> None:
        """One heartbeat: extend the lease (register again when the row is gone).

        Raises:
            whatever the database raises.
        """
        async with self.engine.begin() as conn:
            renewed = (await conn.execute(_q("heartbeat"), {
                "process_id": self.process_id, "lease_seconds": self.lease})).first()
        if renewed is None:
            await self._register()

    async def _beat(self) -> None:
        delay = self.heartbeat
        while True:
            await asyncio.sleep(delay)
            try:
                await self.beat()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - try again soon: the lease runs out
                delay = min(self.heartbeat, RETRY_SECONDS)
                if not self._failing:  # one line per outage, not one per retry
                    log.warning("process settings heartbeat failed; retrying every "
                                f"{delay:g} s", extra={"error_class": type(exc).__name__})
                self._failing = True
                continue
            if self._failing:
                log.info("process settings heartbeat works again")
                self._failing = False
            delay = self.heartbeat
            try:
                await self.check()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - compared again at the next beat
                log.warning("process settings comparison failed",
                            extra={"error_class": type(exc).__name__})

    async def stop(self) -> None:
        """Stop the heartbeat and end this process's lease (SPEC §7.3.1: what it still owns is
        released at once); old rows of other processes are deleted. Never raises (when the
        database is unreachable the lease simply runs out)."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        try:
            async with self.engine.begin() as conn:
                await conn.execute(_q("unregister"), {"process_id": self.process_id,
                                                      "forget_seconds": FORGET_SECONDS})
        except Exception as exc:  # noqa: BLE001 - shutdown goes on
            log.warning("could not end this process's lease (its work is released when the "
                        "lease runs out)", extra={"error_class": type(exc).__name__})
