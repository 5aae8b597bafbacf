"""The core side of the retention job (issue 31): hard-deletes, past ``PINLOG_RETENTION_DELETED``,
the text of deleted and superseded notes (with their lexical terms, columns of the same rows),
deleted records and withdrawn members; and erases one withdrawn member now on request.
SQL: ``core/retention.sql``.

Only when core is ours: on an adopted database (``pinlog.db.migrate.owns_core`` False) the
backend owns ``core`` — :meth:`CorePurge.purge` reports itself off and
:meth:`CorePurge.withdrawn_members` refuses (:class:`CoreNotOurs`).

:meth:`CorePurge.purge`, in batches of ``PINLOG_RETENTION_BATCH_SIZE`` (one short transaction
each, ``FOR UPDATE SKIP LOCKED``): due notes (deleted past the retention, their AI state
CANCELLED or absent — core never purges what it has not invalidated), then due records (no note
row left), then due members (no record or note row left). A deleted note whose state is not
CANCELLED is kept and counted in ``report.kept``.

The erasure (``pinlog purge --member``) is composed by :func:`pinlog.composition.erase_member`:
:meth:`~CorePurge.withdrawn_members` (refuses an active member), then the ai side erases the
notes' AI data (:meth:`pinlog.ai.retention.AiPurge.erase_contexts`), then
:meth:`~CorePurge.erase_member` the core rows, in one transaction.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from pinlog.core.services import MAX_ID, CoreError, InvalidInput, NotFound
from pinlog.db.retention import BatchHook, PurgeReport, RetentionConfig, keyset_batches
from pinlog.db.sql import Queries

Q = Queries("pinlog.core", "retention.sql")

#: ``(statement, table)`` of the regular purge, in the order foreign keys need.
PURGE_STEPS = (("purge_contexts", "core.context"), ("purge_records", "core.record"),
               ("purge_members", "core.member"))
#: What :meth:`CorePurge.purge` reports when core is not ours.
OFF_ADOPTED = "core: off (an adopted database: core.* is the backend's)"


class MemberActive(CoreError):
    """An erasure was asked for a member that has not withdrawn (refused; nothing changed).

    Attributes:
        member_ids: the active members named.
    """

    code = "MEMBER_ACTIVE"

    def __init__(self, member_ids: Sequence[int]) -> None:
        ids = ", ".join(f"id:{i}" for i in member_ids)
        super().__init__(f"member {ids} is active: `pinlog purge --member` erases a withdrawn "
                         "member only (the member withdraws first: DELETE /v1/me); nothing "
                         "was changed")
        self.member_ids = list(member_ids)


class CoreNotOurs(CoreError):
    """The database was adopted: its ``core`` schema is the backend's (issue 14)."""

    code = "CORE_NOT_OURS"


@dataclass(frozen=True)
class CoreRetentionConfig(RetentionConfig):
    """What the core part of the retention job reads (issue 31): the shared
    :class:`~pinlog.db.retention.RetentionConfig` alone (``deleted``: how long deleted notes,
    records and withdrawn members are kept)."""


class CorePurge:
    """The core part of the retention job (a :class:`pinlog.db.retention.PurgePart`) and the
    core side of an erasure.

    Args:
        engine: async engine on the shared database.
        config: retention settings.
        on_batch: optional :data:`~pinlog.db.retention.BatchHook` (tests), called with the
            table (``core.context``, ``core.record``, ``core.member``) or ``erase``.
    """

    name = "core"

    def __init__(self, engine: AsyncEngine, config: CoreRetentionConfig, *,
                 on_batch: BatchHook | None = None) -> None:
        self.engine, self.config, self.on_batch = engine, config, on_batch

    async def ours(self) -> bool:
        """True unless the database was adopted (``owns_core``)."""
        from pinlog.db.migrate import owns_core  # alembic: loaded only when the job runs

        async with self.engine.connect() as conn:
            return bool(await conn.run_sync(owns_core))

    async def purge(self, *, dry_run: bool = False,
                    stop: asyncio.Event | None = None) -> PurgeReport:
        """Purge (or, ``dry_run``, count) the due notes, records and members; batches until
        nothing is left or ``stop`` is set. Off (``report.off``) on an adopted database."""
        report = PurgeReport(dry_run=dry_run)
        if not await self.ours():
            report.off.append(OFF_ADOPTED)
            return report
        retention = self.config.deleted
        for statement, table in PURGE_STEPS:
            report.add(table, await keyset_batches(
                self.engine, Q(statement), {"retention": retention},
                batch_size=self.config.batch_size, dry_run=dry_run, stop=stop, step=table,
                on_batch=self.on_batch))
        async with self.engine.connect() as conn:
            kept = (await conn.execute(Q("kept_not_invalidated"),
                                       {"retention": retention})).scalar_one()
        report.keep("core.context: deleted but its AI state is not CANCELLED", int(kept))
        return report

    async def oldest_retained(self) -> dict[str, float | None]:
        """Ages in seconds of the oldest soft-deleted note, record and member still kept
        (``core.context``, ``core.record``, ``core.member``; None: none); ``{}`` when core is
        not ours."""
        if not await self.ours():
            return {}
        async with self.engine.connect() as conn:
            row = (await conn.execute(Q("oldest_deleted"))).mappings().one()
        return {f"core.{name}": None if row[name] is None else float(row[name])
                for name in ("context", "record", "member")}

    # --- erasure ---------------------------------------------------------------------------
    async def withdrawn_members(self, who: str) -> list[int]:
        """The withdrawn members ``who`` names: ``id:N``, ``ref:X`` (every withdrawn member
        with that external ref) or a bare value (an id or a ref).

        Raises:
            CoreNotOurs: the database was adopted (its members are the backend's).
            NotFound: no member matches (already erased, or never existed).
            InvalidInput: a bare value is one member's id and another's ref (say ``id:``/``ref:``).
            MemberActive: a named member has not withdrawn (nothing changed).
        """
        if not await self.ours():
            raise CoreNotOurs("this database was adopted: core.* and its members are the "
                              "backend's, so an erasure goes through the backend (our ai rows "
                              "of the notes it cancels go with the retention job)")
        kind, _, value = who.partition(":")
        if kind not in ("id", "ref") or not value:
            kind, value = "", who
        member_id = (int(value) if kind in ("", "id") and value.isascii() and value.isdigit()
                     and len(value) <= 19 and 0 < int(value) <= MAX_ID else None)
        ref = value if kind in ("", "ref") else None
        async with self.engine.connect() as conn:
            rows = (await conn.execute(Q("named_members"), {
                "member_id": member_id, "external_ref": ref})).all()
        by_id = [r for r in rows if r.id == member_id]
        by_ref = [r for r in rows if r.id != member_id]
        if by_id and by_ref:
            raise InvalidInput(None, f"{value!r} is one member's id and another member's "
                                     f"external ref: say id:{value} or ref:{value}")
        if not rows:
            raise NotFound("no such member (nothing to erase)")
        active = [int(r.id) for r in rows if not r.withdrawn]
        if active:
            raise MemberActive(active)
        return [int(r.id) for r in rows]

    async def member_context_ids(self, member_id: int) -> list[int]:
        """Every note id of the member (deleted ones included)."""
        async with self.engine.connect() as conn:
            return await self._member_contexts(conn, member_id)

    async def erase_member(self, member_id: int, *, dry_run: bool = False) -> PurgeReport:
        """Erase the withdrawn member's core rows now, in one transaction: its erasable notes
        (deleted, AI state CANCELLED or absent), its records no note refers to any more, then
        the member row itself. Notes whose state is not CANCELLED stay (``report.kept``), and
        with them their record and the member row.

        Raises:
            NotFound: the member is not (or no longer) a withdrawn member.
        """
        report = PurgeReport(dry_run=dry_run)
        params = {"member_id": member_id, "apply": not dry_run}
        async with self.engine.connect() as conn:
            transaction = await conn.begin()
            if (await conn.execute(Q("lock_withdrawn_member"), params)).scalar() is None:
                await transaction.rollback()
                raise NotFound("no such withdrawn member (nothing to erase)")
            if self.on_batch is not None:
                await self.on_batch("erase", [member_id])
            before = len(await self._member_contexts(conn, member_id))
            for statement, table in (("erase_member_contexts", "core.context"),
                                     ("erase_member_records", "core.record"),
                                     ("erase_member", "core.member")):
                report.add(table, int((await conn.execute(Q(statement), params)).scalar_one()))
            report.keep("core.context: deleted but its AI state is not CANCELLED",
                        before - report.removed["core.context"])
            await (transaction.rollback() if dry_run else transaction.commit())
        return report

    @staticmethod
    async def _member_contexts(conn: AsyncConnection, member_id: int) -> list[int]:
        return [int(i) for i in (await conn.execute(
            Q("member_context_ids"), {"member_id": member_id})).scalars()]
