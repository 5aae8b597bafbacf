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

#: Seconds between heartbeats; a process is live while its heartbeat is younger than
#: :data:`LIVE_SECONDS`; rows older than :data:`FORGET_SECONDS` are deleted.
HEARTBEAT_SECONDS = 30.0
LIVE_SECONDS = 3 * HEARTBEAT_SECONDS
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
    """Records this process's rule-relevant settings, keeps a heartbeat, and reports (ERROR)
    every difference with another live process — at start-up and whenever a new one appears.

    Args:
        engine: the process's engine.
        rules: its rule-relevant settings (:func:`pinlog.composition.replica_rules`).
        components: what it runs (``core``, ``ai``, ``rescan``).
        heartbeat: seconds between heartbeats (tests may shorten it).
    """

    def __init__(self, engine: AsyncEngine, rules: ReplicaRules, components: Iterable[str], *,
                 heartbeat: float = HEARTBEAT_SECONDS) -> None:
        self.engine = engine
        self.components = ",".join(components)
        self.values = rules.values()
        self.process_id = uuid.uuid4().hex
        self.heartbeat = heartbeat
        self.reported: set[tuple[str, str]] = set()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> list[Difference]:
        """Record this process and check the live ones. Never raises: a database that is not
        migrated yet (a core-only server may start first) only skips the registry (WARNING).

        Returns:
            the differences found (also logged at ERROR).
        """
        try:
            async with self.engine.begin() as conn:
                await conn.execute(_q("register"), {
                    "process_id": self.process_id, "host": socket.gethostname()[:200],
                    "pid": os.getpid(), "components": self.components,
                    "settings": json.dumps(self.values), "version": __version__})
            found = await self.check()
        except Exception as exc:  # noqa: BLE001 - the registry must never stop a process
            log.warning("process settings registry unavailable",
                        extra={"error_class": type(exc).__name__})
            return []
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

    async def _beat(self) -> None:
        while True:
            await asyncio.sleep(self.heartbeat)
            try:
                async with self.engine.begin() as conn:
                    await conn.execute(_q("heartbeat"), {"process_id": self.process_id})
                await self.check()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - try again at the next beat
                log.warning("process settings heartbeat failed",
                            extra={"error_class": type(exc).__name__})

    async def stop(self) -> None:
        """Stop the heartbeat and remove this process's row (never raises)."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        try:
            async with self.engine.begin() as conn:
                await conn.execute(_q("unregister"), {"process_id": self.process_id,
                                                      "forget_seconds": FORGET_SECONDS})
        except Exception as exc:  # noqa: BLE001 - shutdown goes on
            log.warning("could not remove the process settings row",
                        extra={"error_class": type(exc).__name__})
