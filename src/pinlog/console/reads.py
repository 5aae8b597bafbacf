"""What the console's pages show, read from the database (``console.sql``; issue 29).

Every function returns plain values (dicts, lists) ready for a template or JSON; none returns a
note's body. The overview (:func:`overview`) costs O(what it shows): the counts per stage ×
status are the maintained counts (:func:`pinlog.core.status.state_counts`), the unfinished
summary reads the partial rescan index, failures the partial index of FAILED rows by reason,
the chart the partial index of finished events (only the minutes it has not kept:
:class:`MinuteCounts`), the newest contexts the primary key.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from pinlog.core.status import StatusConfig, state_counts, unfinished_summary
from pinlog.db.process_settings import ProcessInfo, all_differences, live_processes
from pinlog.db.sql import Queries

_q = Queries("pinlog.console", "console.sql")

#: Minutes of the completed-per-minute chart (the last :data:`LIVE_MINUTES` are re-read every
#: time: an event may commit a little after its time); reasons shown on the overview.
CHART_MINUTES = 60
LIVE_MINUTES = 2
TOP_REASONS = 8
RECENT_CONTEXTS = 10
PAGE = 50


def _iso(value: datetime | None) -> str | None:
    return value.isoformat(timespec="seconds") if value is not None else None


class MinuteCounts:
    """The chart's per-minute counts, kept per process: a minute that is over (older than
    :data:`LIVE_MINUTES`) is read once; each overview reads only the minutes since (a few
    hundred index entries, not the hour's). Events are written with the database clock, so
    "now" is the database's minute."""

    def __init__(self) -> None:
        self.final: dict[int, tuple[int, int]] = {}

    async def read(self, conn: AsyncConnection) -> list[dict[str, int]]:
        """``[{"minutes_ago", "completed", "failed"}]`` for the last :data:`CHART_MINUTES`
        minutes, index 0 = the current one."""
        now = int((await conn.execute(_q("clock_minute"))).scalar_one())
        window = [now - 60 * i for i in range(CHART_MINUTES)]
        self.final = {m: v for m, v in self.final.items() if m >= window[-1]}
        since = min((m for m in window if m not in self.final), default=now)
        found = {int(r["minute"]): (int(r["completed"]), int(r["failed"]))
                 for r in (await conn.execute(_q("finished_per_minute"),
                                              {"since": since})).mappings()}
        for m in window:
            if since <= m <= now - 60 * LIVE_MINUTES:
                self.final[m] = found.get(m, (0, 0))
        out = []
        for i, m in enumerate(window):
            completed, failed = self.final.get(m) or found.get(m, (0, 0))
            out.append({"minutes_ago": i, "completed": completed, "failed": failed})
        return out


async def overview(engine: AsyncEngine, status: StatusConfig,
                   minutes: MinuteCounts | None = None) -> dict[str, Any]:
    """The overview, JSON-ready.

    Returns:
        ``{"rows": {stage: {status: n}}, "total": int (state rows), "unfinished": int,
        "exhausted_unfinished": int, "dead_ends": int, "oldest_unfinished_seconds": float|None,
        "reasons": [{"reason", "n", "last_at"}], "per_minute": [{"minutes_ago", "completed",
        "failed"}] (index 0 = the current minute, :data:`CHART_MINUTES` entries),
        "recent": [{"context_id", "member_id", "record_id", "embedding_status",
        "keyword_status", "retry_count", "updated_at", "deleted"}]}``.
    """
    async with engine.connect() as conn:
        rows = await state_counts(conn)
        summary = await unfinished_summary(conn, status)
        reasons = [{"reason": r["reason"], "n": int(r["n"]), "last_at": _iso(r["last_at"])}
                   for r in (await conn.execute(_q("failure_reasons"),
                                                {"limit": TOP_REASONS})).mappings()]
        per_minute = await (minutes or MinuteCounts()).read(conn)
        recent = [{"context_id": int(r["context_id"]),
                   "member_id": r["member_id"], "record_id": r["record_id"],
                   "embedding_status": r["embedding_status"], "keyword_status": r["keyword_status"],
                   "retry_count": int(r["retry_count"]), "updated_at": _iso(r["updated_at"]),
                   "deleted": r["deleted_at"] is not None}
                  for r in (await conn.execute(_q("recent_contexts"),
                                               {"limit": RECENT_CONTEXTS})).mappings()]
    oldest = summary["oldest_unfinished_seconds"]
    return {"rows": rows, "total": sum(next(iter(rows.values())).values()),
            "unfinished": int(summary["unfinished"]),
            "exhausted_unfinished": int(summary["exhausted_unfinished"]),
            "dead_ends": int(summary["dead_ends"]),
            "oldest_unfinished_seconds": float(oldest) if oldest is not None else None,
            "reasons": reasons, "per_minute": per_minute, "recent": recent}


async def failure_reasons(engine: AsyncEngine, limit: int = 100) -> list[dict[str, Any]]:
    """Failures grouped by reason, most frequent first: ``[{"reason", "n", "last_at"}]``."""
    async with engine.connect() as conn:
        return [{"reason": r["reason"], "n": int(r["n"]), "last_at": _iso(r["last_at"])}
                for r in (await conn.execute(_q("failure_reasons"), {"limit": limit})).mappings()]


async def failures_for_reason(engine: AsyncEngine, reason: str, page: int = 0) -> list[dict[str, Any]]:
    """One page (:data:`PAGE` rows, newest first) of the FAILED rows of ``reason``."""
    async with engine.connect() as conn:
        rows = (await conn.execute(_q("failures_for_reason"), {
            "reason": reason, "limit": PAGE, "offset": max(0, page) * PAGE})).mappings()
        return [{**dict(r), "at": _iso(r["at"])} for r in rows]


async def context_timeline(engine: AsyncEngine, context_id: int) -> dict[str, Any] | None:
    """One context's state, owner and events (never its body), or None when it has no state row.

    Returns:
        ``{"state": {…state row, "member_id", "record_id", "created_at", "deleted"},
        "events": [{"id", "stage", "from_status", "to_status", "actor", "reason", "at"}]}``
        (at most 500 events, oldest first).
    """
    async with engine.connect() as conn:
        state = (await conn.execute(_q("context_state"), {"context_id": context_id})).mappings().first()
        if state is None:
            return None
        events = [{**dict(r), "at": _iso(r["at"])} for r in (await conn.execute(
            _q("context_events"), {"context_id": context_id, "limit": 500})).mappings()]
    row = dict(state)
    for key in ("updated_at", "rescanned_at", "last_error_at", "created_at"):
        row[key] = _iso(row[key])
    row["deleted"] = row.pop("deleted_at") is not None
    return {"state": row, "events": events}


def _process(p: ProcessInfo) -> dict[str, Any]:
    return {"label": p.label, "host": p.host, "pid": p.pid, "components": p.components,
            "version": p.version, "started_at": _iso(p.started_at), "seen_at": _iso(p.seen_at),
            "settings": dict(sorted(p.settings.items()))}


async def replicas(engine: AsyncEngine) -> dict[str, Any]:
    """The live processes and every setting they disagree on.

    Returns:
        ``{"processes": [{"label", "host", "pid", "components", "version", "started_at",
        "seen_at", "settings"}], "differences": [str] (one sentence each),
        "versions": [str] (distinct versions)}``.
    """
    try:
        processes = await live_processes(engine)
    except Exception:  # noqa: BLE001 - before migration 0003_process_settings: nothing recorded
        processes = []
    return {"processes": [_process(p) for p in processes],
            "differences": [d.describe() for d in all_differences(processes)],
            "versions": sorted({p.version or "unknown" for p in processes})}


async def profiles(engine: AsyncEngine, active_profile: str, completed: int) -> dict[str, Any]:
    """Embedding profiles with coverage, and the presets with version and picks.

    Args:
        active_profile: the profile this process embeds and searches with.
        completed: state rows whose embedding stage is COMPLETED (the vectors there should be).

    Returns:
        ``{"profiles": [{"profile", "live", "stored", "presets", "coverage" (live ÷ completed,
        0..1, None when nothing is completed), "active"}], "presets": [{"id", "code",
        "display_name", "category", "visibility", "is_active", "version", "picks"}]}``.
    """
    async with engine.connect() as conn:
        coverage = {r["embedding_profile"]: (int(r["live"]), int(r["stored"]))
                    for r in (await conn.execute(_q("profile_coverage"))).mappings()}
        preset_vectors = {r["embedding_profile"]: int(r["presets"])
                          for r in (await conn.execute(_q("preset_profiles"))).mappings()}
        presets = [dict(r) for r in (await conn.execute(_q("presets"))).mappings()]
    names = sorted({active_profile, *coverage, *preset_vectors})
    return {"profiles": [{
        "profile": name, "live": coverage.get(name, (0, 0))[0],
        "stored": coverage.get(name, (0, 0))[1], "presets": preset_vectors.get(name, 0),
        "coverage": (coverage.get(name, (0, 0))[0] / completed) if completed else None,
        "active": name == active_profile} for name in names],
        "presets": [{**p, "picks": int(p["picks"])} for p in presets]}


async def record_action(engine: AsyncEngine, role: str, action: str, params: dict[str, Any],
                        outcome: dict[str, Any], request_id: str | None) -> int:
    """Record a confirmed action (``record_action``); returns its id."""
    async with engine.begin() as conn:
        row = (await conn.execute(_q("record_action"), {
            "role": role, "action": action, "params": json.dumps(params),
            "outcome": json.dumps(outcome), "request_id": request_id})).mappings().one()
    return int(row["id"])


async def finish_action(engine: AsyncEngine, action_id: int, outcome: dict[str, Any]) -> None:
    """Record the outcome of a long action when it ends (``finish_action``)."""
    async with engine.begin() as conn:
        await conn.execute(_q("finish_action"), {"id": action_id, "outcome": json.dumps(outcome)})


async def recent_actions(engine: AsyncEngine, limit: int = 50) -> list[dict[str, Any]]:
    """The action log, newest first: ``[{"id", "at", "role", "action", "params", "outcome"}]``."""
    async with engine.connect() as conn:
        return [{**dict(r), "at": _iso(r["at"])}
                for r in (await conn.execute(_q("recent_actions"), {"limit": limit})).mappings()]
