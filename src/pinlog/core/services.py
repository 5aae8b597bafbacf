"""core services: member / record / context lifecycle and keyword views (SPEC §2.1, §4, §8).

Every mutating call is **one** database transaction. Creating a context inserts its state row
(PENDING/PENDING, ``ON CONFLICT DO NOTHING``) in that transaction; deleting or editing runs the
invalidation (both stages CANCELLED unconditionally, embedding ``is_deleted``, event rows) in it
too, so either everything commits or nothing does. Process requests for new contexts are
dispatched **after** the commit, never inside it and never for a rolled-back transaction.

The functions are plain async methods usable outside HTTP (the importer calls them). They raise
the :class:`CoreError` subclasses below; the public API maps them to 4xx responses.

Lock order (no cycles): member row (``FOR SHARE``; withdrawal UPDATEs it) → record row
(``FOR UPDATE``) → state rows (``FOR UPDATE`` inside ``cancel_stages``).
"""

from __future__ import annotations

import logging
import math
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from pinlog.contracts import BIGINT_MAX, ProcessRequest
from pinlog.core.public_ids import PublicIds, key_from_secret
from pinlog.db.sql import Queries
from pinlog.errors import PinlogError
from pinlog.settings import Settings
from pinlog.states import Status
from pinlog.text import identifier_problem, is_blank, lexical_terms, normalize, normalize_line

log = logging.getLogger(__name__)
q = Queries("pinlog.core", "core.sql", fragments_from=("pinlog.db:process_settings.sql",))

#: Longest accepted place strings (characters).
MAX_PLACE_ID_CHARS = 200
MAX_PLACE_NAME_CHARS = 300
MAX_ADDRESS_CHARS = 500
#: Largest id a path may carry (bigint).
MAX_ID = BIGINT_MAX  # ids are PostgreSQL bigint (pinlog.contracts.Id)

AiStatus = Literal["processing", "ready", "failed"]


# ===== errors ===================================================================================

class CoreError(PinlogError):
    """Base of the service errors. ``code`` is a fixed machine-readable string; ``message`` a fixed
    human sentence that never contains member data."""


class NotFound(CoreError):
    """The member, record or context does not exist, is deleted, or belongs to someone else
    (never revealed: SPEC — another member's ids look exactly like missing ones)."""

    code = "NOT_FOUND"


class InvalidInput(CoreError):
    """Bad input (empty/whitespace text, text over the limit, bad coordinates…); nothing written.

    Args:
        field: the offending field in the API's spelling (``text``, ``place.lat``,
            ``externalRef`` …), or None when the problem is not about one field.
        problem: a fixed sentence without input values (``"must not be empty"``).

    The message is ``"<field> <problem>"`` (or ``problem`` alone without a field).
    """

    code = "INVALID_INPUT"

    def __init__(self, field: str | None, problem: str) -> None:
        super().__init__(f"{field} {problem}" if field else problem)
        self.field = field
        self.problem = problem


class MemberExists(CoreError):
    """``external_ref`` is already used by an active member."""

    code = "MEMBER_EXISTS"


class RecordExists(CoreError):
    """The member already has an active record for this place (SPEC §2.1).

    Attributes:
        record_id: the existing active record.
    """

    code = "RECORD_EXISTS"

    def __init__(self, record_id: int) -> None:
        super().__init__("an active record already exists for this place")
        self.record_id = record_id


@dataclass(frozen=True)
class RemovalSummary:
    """What a forced record delete would remove."""

    record_id: int
    place_name: str
    contexts: int


class ForcedDeleteRequired(CoreError):
    """Refused: the caller must confirm a forced record delete.

    Attributes:
        summary: what ``delete_record(force=True)`` would remove (record id, place name, number
            of active contexts).
    """

    def __init__(self, message: str, summary: RemovalSummary) -> None:
        super().__init__(message)
        self.summary = summary


class LastContext(ForcedDeleteRequired):
    """SPEC §4: the context is its record's last active context (HTTP 409 ``LAST_CONTEXT``)."""

    code = "LAST_CONTEXT"


class RecordHasContexts(ForcedDeleteRequired):
    """A non-forced record delete of a record with several active contexts (HTTP 409)."""

    code = "RECORD_HAS_CONTEXTS"


# ===== inputs and views =========================================================================

@dataclass(frozen=True)
class Place:
    """A place: as sent by the client (checked by :func:`validate_place`; the snapshot stored on
    first save, SPEC §2.1) and as shown back (records, search hits) — one type for both.

    ``lat`` in degrees −90..90, ``lng`` in degrees −180..180; strings without NUL characters.
    """

    external_place_id: str
    name: str
    lat: float
    lng: float
    address: str | None = None
    road_address: str | None = None


def place_meta(row: Any) -> dict[str, str]:
    """``placeMeta`` of a process request (SPEC §5.1) from a saved place's row
    (``external_place_id``, ``name``, ``address``, ``road_address``): camelCase keys, the
    address keys only when set."""
    meta = {"externalPlaceId": row["external_place_id"], "name": row["name"]}
    if row["address"]:
        meta["address"] = row["address"]
    if row["road_address"]:
        meta["roadAddress"] = row["road_address"]
    return meta


#: Former names of :class:`Place` (a place in, a place shown back): the same type.
PlaceInput = Place
PlaceView = Place


@dataclass(frozen=True)
class ContextView:
    """One active context in the owner view. ``keywords``: display names (SPEC §8 owner view)."""

    context_id: int
    text: str
    ai_status: AiStatus
    keywords: list[str]


@dataclass(frozen=True)
class RecordView:
    """A record in the owner view; ``keywords`` is the union over its active contexts;
    ``public_id`` is what other members use to see its public view (:mod:`pinlog.core.
    public_ids`)."""

    record_id: int
    place: PlaceView
    keywords: list[str]
    contexts: list[ContextView] = field(default_factory=list)
    public_id: str = ""


@dataclass(frozen=True)
class Edited:
    """The outcome of an edit: the context that now holds the text, and whether it is a new
    one (False: the text was already the context's own, nothing changed)."""

    context_id: int
    changed: bool


@dataclass(frozen=True)
class RecordPage:
    """One page of a member's records, newest first (issue 27 #8).

    Attributes:
        records: at most the page's ``limit`` records.
        total: the member's active records in all.
        next_before: the record id the next page starts below (None on the last page).
    """

    records: list[RecordView]
    total: int
    next_before: int | None


@dataclass(frozen=True)
class PublicKeywordsView:
    """What other members may see of a record: PUBLIC keywords only, no text, no context ids
    (``record_id`` is for core's own use; the public API shows ``public_id``)."""

    record_id: int
    place: PlaceView
    keywords: list[str]
    public_id: str = ""


def ai_status(embedding_status: str | None, keyword_status: str | None) -> AiStatus:
    """Member-friendly status of a context: ``ready`` when both stages are COMPLETED, ``failed``
    when either is FAILED, otherwise ``processing`` (CANCELLED contexts are never listed)."""
    if Status.FAILED.value in (embedding_status, keyword_status):
        return "failed"
    if embedding_status == keyword_status == Status.COMPLETED.value:
        return "ready"
    return "processing"


def _check_string(name: str, value: Any, limit: int, *, required: bool,
                  normal: bool = True) -> str | None:
    """A string field: blank means blank after normalisation (invisible characters only counts
    as blank); ``normal`` → returned in :func:`pinlog.text.normalize_line` form (a one-line
    field: bidi and control characters removed, line breaks → spaces); otherwise an identifier,
    kept in its exact form and refused when :func:`pinlog.text.identifier_problem` objects."""
    if value is None:
        if required:
            raise InvalidInput(name, "is required")
        return None
    if not isinstance(value, str):
        raise InvalidInput(name, "must be a string")
    if "\x00" in value:
        raise InvalidInput(name, "must not contain NUL characters")
    if not _utf8_encodable(value):
        raise InvalidInput(name, "must be valid Unicode text")
    if normal:
        value = normalize_line(value)
    if required and is_blank(value):
        raise InvalidInput(name, "must not be empty")
    if not normal and (problem := identifier_problem(value)) is not None:
        raise InvalidInput(name, problem)
    if len(value) > limit:
        raise InvalidInput(name, f"is longer than {limit} characters")
    return value


def validate_text(text: Any, max_chars: int) -> str:
    """A context text, in the one normalised form (:func:`pinlog.text.normalize`: NFC plus
    compatibility folding, invisible characters removed — the form stored, embedded and hashed):
    a string, not blank after normalisation (whitespace or invisible characters only, e.g.
    ``\u3164``, ``\u200b``), at most ``max_chars`` characters once normalised, no NUL.

    Returns:
        the normalised text.

    Raises:
        InvalidInput: with a fixed message naming the rule.
    """
    if not isinstance(text, str):
        raise InvalidInput("text", "must be a string")
    if "\x00" in text:
        raise InvalidInput("text", "must not contain NUL characters")
    if not _utf8_encodable(text):
        raise InvalidInput("text", "must be valid Unicode text")
    text = normalize(text)
    if is_blank(text):
        raise InvalidInput("text", "must not be empty or whitespace")
    if len(text) > max_chars:
        raise InvalidInput("text", f"is longer than {max_chars} characters")
    return text


#: Prefixes that say how a member is named (``id:7``, ``ref:alice``: :meth:`CoreService.
#: resolve_member`); an external ref starting with one could only be reached as ``ref:id:7``.
MEMBER_NAME_PREFIXES = ("id:", "ref:")


def validate_external_ref(value: Any) -> str:
    """A member's external ref (SPEC §2.1 ``core.member.external_ref``), an identifier kept
    exactly as sent: a string of 1..200 characters, not blank, no NUL, control or bidi
    characters, no leading/trailing whitespace (``" 공백 "`` is refused, not silently
    trimmed), not starting with ``id:`` or ``ref:`` (:data:`MEMBER_NAME_PREFIXES`).

    Returns:
        ``value`` unchanged.

    Raises:
        InvalidInput: field ``externalRef``, a fixed sentence naming the rule.
    """
    checked = _check_string("externalRef", value, MAX_PLACE_ID_CHARS, required=True,
                            normal=False)
    assert checked is not None  # required
    if checked.casefold().startswith(MEMBER_NAME_PREFIXES):
        raise InvalidInput("externalRef", "must not start with id: or ref: (those prefixes say "
                                          "how a member is named: pinlog token --member id:7)")
    return checked


def _utf8_encodable(value: str) -> bool:
    """False for lone surrogates (``\\ud800``), which PostgreSQL cannot store (→ 422, not 500)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def validate_place(place: PlaceInput) -> PlaceInput:
    """Check a place's strings and coordinates (finite, lat −90..90, lng −180..180).

    Returns:
        the place with name, address and road address in normalised form
        (:func:`pinlog.text.normalize`); ``externalPlaceId`` is an identifier and kept exact.

    Raises:
        InvalidInput: with a fixed message naming the field.
    """
    _check_string("place.externalPlaceId", place.external_place_id, MAX_PLACE_ID_CHARS,
                  required=True, normal=False)
    name = _check_string("place.name", place.name, MAX_PLACE_NAME_CHARS, required=True)
    assert name is not None  # required
    address = _check_string("place.address", place.address, MAX_ADDRESS_CHARS, required=False)
    road = _check_string("place.roadAddress", place.road_address, MAX_ADDRESS_CHARS,
                         required=False)
    for name_, value, bound in (("place.lat", place.lat, 90.0), ("place.lng", place.lng, 180.0)):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise InvalidInput(name_, "must be a number")
        if not math.isfinite(value) or not -bound <= value <= bound:
            raise InvalidInput(name_, f"must be between {-bound:g} and {bound:g}")
    return replace(place, name=name, address=address, road_address=road)


def _check_id(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= MAX_ID:
        raise NotFound(f"{name} not found")
    return value


# ===== the service ==============================================================================

class DispatchQueue(Protocol):
    """Where committed context ids are queued after commit (SPEC §4):
    :class:`pinlog.core.dispatch.Dispatcher`. ``enqueue`` never blocks; False = dropped (the
    row stays PENDING for the rescan)."""

    def enqueue(self, request: ProcessRequest) -> bool: ...


@dataclass(frozen=True)
class ServiceConfig:
    """What :class:`CoreService` reads: ``max_text_chars`` (``PINLOG_MAX_TEXT_CHARS``), the
    longest note text accepted (characters, after normalisation); ``public_id_key`` (bytes,
    derived from ``PINLOG_JWT_SECRET``: :func:`pinlog.core.public_ids.key_from_secret`)."""

    max_text_chars: int
    public_id_key: bytes = field(default=b"", repr=False)

    @classmethod
    def from_settings(cls, settings: Settings) -> ServiceConfig:
        return cls(max_text_chars=settings.max_text_chars,
                   public_id_key=key_from_secret(settings.jwt_secret))


class CoreService:
    """The lifecycle operations of SPEC §4 and the views of SPEC §8.

    Args:
        engine: async engine on the shared database.
        dispatcher: where committed context ids are queued (``enqueue(request) -> bool``); None
            → no dispatch (rows stay PENDING; the rescan sends them after the PENDING expiry).
        config: the text limit.
        owner: this process's id (``ProcessRegistry.process_id``), recorded as the owner of the
            state rows it creates — the sender of their PENDING work (SPEC §7.3.1); None → no
            owner (the PENDING expiry is the backstop).
    """

    def __init__(self, engine: AsyncEngine, dispatcher: DispatchQueue | None,
                 config: ServiceConfig, *, owner: str | None = None) -> None:
        self.engine = engine
        self.dispatcher = dispatcher
        self.config = config
        self.owner = owner
        self.public_ids = PublicIds(config.public_id_key)

    # --- members ---------------------------------------------------------------------------
    async def create_member(self, external_ref: str | None = None) -> int:
        """Create a member; returns its id.

        Raises:
            InvalidInput: ``external_ref`` breaks :func:`validate_external_ref`.
            MemberExists: an active member already has ``external_ref``.
        """
        if external_ref is not None:
            external_ref = validate_external_ref(external_ref)
        async with self.engine.begin() as conn:
            member_id = (await conn.execute(q("insert_member"),
                                            {"external_ref": external_ref})).scalar()
        if member_id is None:
            raise MemberExists("an active member already uses this external reference")
        log.info("member created", extra={"member_id": member_id})
        return int(member_id)

    async def resolve_member(self, id_or_ref: str) -> int:
        """The active member named by ``id_or_ref``: ``id:N`` (member id), ``ref:X`` (external
        ref), or a bare value that matches exactly one of the two.

        A bare number can be both a member id and another member's external ref (upstream
        systems often use numeric keys); then nothing is guessed.

        Raises:
            NotFound: no such active member.
            InvalidInput: a bare value matches two different members (use ``id:``/``ref:``).
        """
        kind, _, value = id_or_ref.partition(":")
        if kind not in ("id", "ref") or not value:
            kind, value = "", id_or_ref
        async with self.engine.connect() as conn:
            by_id = by_ref = None
            if kind in ("", "id") and value.isascii() and value.isdigit() and len(value) <= 19 \
                    and 0 < int(value) <= MAX_ID:
                by_id = (await conn.execute(q("active_member_by_id"),
                                            {"member_id": int(value)})).scalar()
            if kind in ("", "ref"):
                by_ref = (await conn.execute(q("active_member_by_ref"),
                                             {"external_ref": value})).scalar()
        if by_id is not None and by_ref is not None and by_id != by_ref:
            raise InvalidInput(None, f"{value!r} is both a member id and another member's "
                                     f"external ref: say id:{value} or ref:{value}")
        found = by_id if by_id is not None else by_ref
        if found is None:
            raise NotFound("member not found")
        return int(found)

    async def member_is_active(self, member_id: int) -> bool:
        """True when ``member_id`` exists and has not withdrawn."""
        if isinstance(member_id, bool) or not 0 < member_id <= MAX_ID:
            return False
        async with self.engine.connect() as conn:
            found = (await conn.execute(q("active_member_by_id"), {"member_id": member_id})).scalar()
        return found is not None

    async def withdraw_member(self, member_id: int) -> None:
        """SPEC §4 member withdrawal, one transaction: soft-delete the member, its records and
        contexts, CANCEL both stages of every context that was active, and mark every embedding
        of the member ``is_deleted``.

        Raises:
            NotFound: no such active member.
        """
        _check_id("member", member_id)
        async with self.engine.begin() as conn:
            if (await conn.execute(q("soft_delete_member"), {"member_id": member_id})).scalar() is None:
                raise NotFound("member not found")
            records = (await conn.execute(q("soft_delete_member_records"),
                                          {"member_id": member_id})).scalars().all()
            contexts = list((await conn.execute(q("soft_delete_member_contexts"),
                                                {"member_id": member_id})).scalars().all())
            await self._invalidate(conn, contexts, reason="member withdrawn")
            await conn.execute(q("mark_member_embeddings_deleted"), {"member_id": member_id})
        log.info("member withdrawn: %d records, %d contexts invalidated", len(records),
                 len(contexts), extra={"member_id": member_id, "count": len(contexts)})

    # --- records ---------------------------------------------------------------------------
    async def find_active_record(self, member_id: int, external_place_id: str) -> int | None:
        """The member's active record for the place ``external_place_id``, or None."""
        async with self.engine.connect() as conn:
            found = (await conn.execute(q("active_record_for_place"), {
                "member_id": member_id, "external_place_id": external_place_id})).scalar()
        return None if found is None else int(found)

    async def create_record(self, member_id: int, place: PlaceInput, text: str) -> tuple[int, int]:
        """Create a record with its first context (SPEC §4), one transaction; dispatch after commit.

        The place is upserted by ``external_place_id`` (first snapshot kept, never updated).

        Returns:
            ``(record_id, context_id)``.

        Raises:
            InvalidInput: bad text or place (nothing written).
            NotFound: the member does not exist or has withdrawn.
            RecordExists: the member already has an active record for this place
                (``.record_id``); nothing written.
        """
        text = validate_text(text, self.config.max_text_chars)
        place = validate_place(place)
        _check_id("member", member_id)
        async with self.engine.begin() as conn:
            await self._share_lock_member(conn, member_id)
            place_id = await self._upsert_place(conn, place)
            record_id = (await conn.execute(q("insert_record"),
                                            {"member_id": member_id, "place_id": place_id})).scalar()
            if record_id is None:
                existing = (await conn.execute(q("active_record_for_place"), {
                    "member_id": member_id, "external_place_id": place.external_place_id})).scalar_one()
                raise RecordExists(int(existing))
            context_id = await self._insert_context(conn, record_id, member_id, text, "created")
            meta = await self._place_meta(conn, record_id)
        log.info("record created", extra={"member_id": member_id, "record_id": record_id,
                                          "context_id": context_id})
        self._dispatch([self._request(context_id, member_id, record_id, text, meta)])
        return int(record_id), context_id

    async def delete_record(self, member_id: int, record_id: int, *, force: bool = False) -> int:
        """Delete a record and all its active contexts (SPEC §4), one transaction, with the
        invalidation of every one of those contexts.

        Semantics of ``force``: a record with a single active context is deleted either way
        (deleting it is what the member asked for); a record with **several** active contexts
        is deleted only with ``force=True`` — otherwise :class:`RecordHasContexts` tells the
        caller what would be removed, so a client can confirm first.

        Returns:
            the number of contexts removed.

        Raises:
            NotFound: no such active record of this member.
            RecordHasContexts: several active contexts and ``force`` is False (nothing written).
        """
        _check_id("record", record_id)
        async with self.engine.begin() as conn:
            await self._lock_record(conn, member_id, record_id)
            if not force:
                summary = await self._summary(conn, record_id)
                if summary.contexts > 1:
                    raise RecordHasContexts(
                        "the record has several contexts; delete it with force=true", summary)
            contexts = await self._delete_record_rows(conn, record_id)
        log.info("record deleted", extra={"member_id": member_id, "record_id": record_id,
                                          "count": len(contexts)})
        return len(contexts)

    # --- contexts --------------------------------------------------------------------------
    async def add_context(self, member_id: int, record_id: int, text: str) -> int:
        """Add a context to the member's active record (SPEC §4); dispatch after commit.

        Returns:
            the new context id.

        Raises:
            InvalidInput: bad text (nothing written).
            NotFound: no such active record of this member.
        """
        text = validate_text(text, self.config.max_text_chars)
        async with self._member_write(member_id, "record", record_id) as conn:
            await self._lock_record(conn, member_id, record_id)
            context_id = await self._insert_context(conn, record_id, member_id, text, "created")
            await conn.execute(q("touch_record"), {"record_id": record_id})
            meta = await self._place_meta(conn, record_id)
        log.info("context added", extra={"member_id": member_id, "record_id": record_id,
                                         "context_id": context_id})
        self._dispatch([self._request(context_id, member_id, record_id, text, meta)])
        return context_id

    async def edit_context(self, member_id: int, context_id: int, text: str) -> int:
        """:meth:`edit`; returns the id of the context that holds the text (the new one, or
        ``context_id`` when the text did not change).

        Raises:
            InvalidInput: bad text (nothing written).
            NotFound: no such active context of this member.
        """
        return (await self.edit(member_id, context_id, text)).context_id

    async def edit(self, member_id: int, context_id: int, text: str) -> Edited:
        """Edit = a new context (SPEC §4), one transaction: lock the record; insert the **new**
        context and its PENDING state row first; then soft-delete the old context and
        invalidate it (both stages CANCELLED, embedding ``is_deleted``). Nothing is inherited.
        The new id is dispatched after commit. A text equal to the context's own (after
        normalisation) is no edit (issue 27 #11): nothing is written or dispatched, and the
        answer says so (``changed`` False, the same id).

        Raises:
            InvalidInput: bad text (nothing written).
            NotFound: no such active context of this member.
        """
        text = validate_text(text, self.config.max_text_chars)
        async with self._member_write(member_id, "context", context_id) as conn:
            record_id, body = await self._lock_context_record(conn, member_id, context_id)
            if body == text:
                log.info("context edit with its own text: nothing changed",
                         extra={"member_id": member_id, "record_id": record_id,
                                "context_id": context_id})
                return Edited(context_id, changed=False)
            new_id = await self._insert_context(conn, record_id, member_id, text,
                                                f"created by edit of context {context_id}")
            deleted = (await conn.execute(q("soft_delete_contexts"),
                                          {"context_ids": [context_id]})).scalars().all()
            await self._invalidate(conn, list(deleted), reason=f"edited: replaced by context {new_id}")
            await conn.execute(q("touch_record"), {"record_id": record_id})
            meta = await self._place_meta(conn, record_id)
        log.info("context edited", extra={"member_id": member_id, "record_id": record_id,
                                          "context_id": new_id, "reason": f"replaces {context_id}"})
        self._dispatch([self._request(new_id, member_id, record_id, text, meta)])
        return Edited(new_id, changed=True)

    async def delete_context(self, member_id: int, context_id: int) -> None:
        """Delete a context (SPEC §4), one transaction: soft-delete, CANCEL both stages
        unconditionally, mark the embedding ``is_deleted``.

        Raises:
            NotFound: no such active context of this member.
            LastContext: it is the record's last active context; ``.summary`` says what a forced
                record delete would remove. Nothing written.
        """
        _check_id("context", context_id)
        async with self.engine.begin() as conn:
            record_id, _ = await self._lock_context_record(conn, member_id, context_id)
            remaining = (await conn.execute(q("count_active_contexts"),
                                            {"record_id": record_id})).scalar_one()
            if remaining <= 1:
                raise LastContext("this is the record's last context; delete the record instead "
                                  "(force=true)", await self._summary(conn, record_id))
            deleted = (await conn.execute(q("soft_delete_contexts"),
                                          {"context_ids": [context_id]})).scalars().all()
            await self._invalidate(conn, list(deleted), reason="context deleted")
            await conn.execute(q("touch_record"), {"record_id": record_id})
        log.info("context deleted", extra={"member_id": member_id, "record_id": record_id,
                                           "context_id": context_id})

    # --- views -----------------------------------------------------------------------------
    async def get_record(self, member_id: int, record_id: int) -> RecordView:
        """The member's active record with its active contexts, statuses and owner-view
        keywords (SPEC §8).

        Raises:
            NotFound: no such active record of this member (also for another member's record).
        """
        _check_id("record", record_id)
        async with self.engine.connect() as conn:
            row = (await conn.execute(q("member_record"),
                                      {"member_id": member_id, "record_id": record_id})).mappings().first()
            if row is None:
                raise NotFound("record not found")
            return (await self._record_views(conn, [row]))[0]

    async def list_records(self, member_id: int, *, limit: int = 100, offset: int = 0) -> list[RecordView]:
        """The member's active records, newest first (``limit`` 1..500, ``offset`` ≥ 0)."""
        return (await self.record_page(member_id, limit=limit, offset=offset)).records

    async def record_page(self, member_id: int, *, limit: int = 100, offset: int = 0,
                          before: int | None = None) -> RecordPage:
        """One page of the member's active records, newest first (by record id), with the
        total and where the next page starts (issue 27 #8).

        Args:
            limit: records per page, 1..500.
            offset: records to skip (the older way to page; with ``before`` it counts from
                there).
            before: only records with an id below this (the cursor of the previous page).
        """
        limit = max(1, min(int(limit), 500))
        offset = max(0, int(offset))
        async with self.engine.connect() as conn:
            rows = (await conn.execute(q("member_records"), {
                "member_id": member_id, "limit": limit + 1, "offset": offset,
                "before": before})).mappings().all()
            total = int((await conn.execute(q("member_record_count"),
                                            {"member_id": member_id})).scalar_one())
            views = await self._record_views(conn, rows[:limit])
        more = len(rows) > limit
        return RecordPage(records=views, total=total,
                          next_before=views[-1].record_id if more and views else None)

    def public_id(self, record_id: int) -> str:
        """The public id of ``record_id`` (:mod:`pinlog.core.public_ids`)."""
        return self.public_ids.encode(record_id)

    async def public_record(self, public_id: str) -> PublicKeywordsView:
        """The public view of the active record a public id names (issue 27 #7): what any
        member may see — place and PUBLIC keywords (SPEC §8). A public id cannot be made from a
        record id without the key, so the view cannot be walked by counting.

        Raises:
            NotFound: not a valid public id (forged, malformed, another key's), or no such
                active record — the same answer for all.
        """
        record_id = self.public_ids.decode(public_id)
        if record_id is None:
            raise NotFound("record not found")
        return await self.public_keywords(record_id)

    async def public_keywords(self, record_id: int) -> PublicKeywordsView:
        """What any member may see of an active record: PUBLIC keywords of COMPLETED keyword
        stages of its active contexts (SPEC §8). No text, no context ids.

        Raises:
            NotFound: no such active record.
        """
        _check_id("record", record_id)
        async with self.engine.connect() as conn:
            row = (await conn.execute(q("active_record"), {"record_id": record_id})).mappings().first()
            if row is None:
                raise NotFound("record not found")
            names = (await conn.execute(q("public_keywords"),
                                        {"record_id": record_id})).scalars().all()
        return PublicKeywordsView(record_id=record_id, place=_place(row), keywords=list(names),
                                  public_id=self.public_id(record_id))

    # --- internals -------------------------------------------------------------------------
    @asynccontextmanager
    async def _member_write(self, member_id: int, target: Literal["record", "context"],
                            target_id: int) -> AsyncIterator[AsyncConnection]:
        """The write transaction of a change to one of the member's ``target`` rows (SPEC §4):
        ``target_id`` is checked before anything opens, then the member row is share-locked
        (``share_lock_member``: a concurrent withdrawal waits for the change) and the open
        connection is yielded; the transaction commits when the block ends.

        Raises:
            NotFound: ``"<target> not found"`` when ``target_id`` is no positive BIGINT or the
                member does not exist or has withdrawn (``"member not found"`` for a
                ``member_id`` that is no positive BIGINT).
        """
        _check_id(target, target_id)
        async with self.engine.begin() as conn:
            await self._share_lock_member(conn, member_id, not_found=f"{target} not found")
            yield conn

    async def _share_lock_member(self, conn: AsyncConnection, member_id: int, *,
                                 not_found: str = "member not found") -> None:
        _check_id("member", member_id)
        if (await conn.execute(q("share_lock_member"), {"member_id": member_id})).scalar() is None:
            raise NotFound(not_found)

    async def _upsert_place(self, conn: AsyncConnection, place: PlaceInput) -> int:
        params = {"external_place_id": place.external_place_id, "name": place.name,
                  "address": place.address, "road_address": place.road_address,
                  "lat": float(place.lat), "lng": float(place.lng),
                  "lexemes": lexical_terms(" ".join(
                      part for part in (place.name, place.address, place.road_address) if part))}
        place_id = (await conn.execute(q("upsert_place"), params)).scalar()
        if place_id is None:  # inserted concurrently after this statement's snapshot
            place_id = (await conn.execute(q("place_by_external_id"),
                                           {"external_place_id": place.external_place_id})).scalar_one()
        return int(place_id)

    async def _lock_record(self, conn: AsyncConnection, member_id: int, record_id: int) -> None:
        found = (await conn.execute(q("lock_record"),
                                    {"record_id": record_id, "member_id": member_id})).scalar()
        if found is None:
            raise NotFound("record not found")

    async def _lock_context_record(self, conn: AsyncConnection, member_id: int,
                                   context_id: int) -> tuple[int, str]:
        """Lock the record of the member's active context; re-read the context under the lock
        (a concurrent edit/delete that committed meanwhile makes it NotFound). Returns the
        record id and the context's text."""
        record_id = (await conn.execute(q("context_record"),
                                        {"context_id": context_id, "member_id": member_id})).scalar()
        if record_id is None:
            raise NotFound("context not found")
        await self._lock_record(conn, member_id, record_id)
        still = (await conn.execute(q("active_context_in_record"),
                                    {"context_id": context_id, "record_id": record_id})).first()
        if still is None:
            raise NotFound("context not found")
        return int(record_id), str(still.body)

    async def _insert_context(self, conn: AsyncConnection, record_id: int, member_id: int,
                              text: str, reason: str) -> int:
        context_id = int((await conn.execute(q("insert_context"), {
            "record_id": record_id, "member_id": member_id, "body": text,
            "lexemes": lexical_terms(text)})).scalar_one())
        await conn.execute(q("insert_state"), {"context_id": context_id, "reason": reason,
                                               "owner": self.owner})
        return context_id

    async def _invalidate(self, conn: AsyncConnection, context_ids: Sequence[int], *, reason: str) -> None:
        """SPEC §4 invalidation inside the caller's transaction: both stages CANCELLED
        (unconditionally), ``updated_at`` bumped, event rows, embedding ``is_deleted``, and the
        vectors of every other profile removed (SPEC §9.1)."""
        if not context_ids:
            return
        ids = [int(i) for i in context_ids]
        await conn.execute(q("cancel_stages"), {"context_ids": ids, "reason": reason})
        await conn.execute(q("mark_embeddings_deleted"), {"context_ids": ids})
        await conn.execute(q("delete_shadow_vectors"), {"context_ids": ids})

    async def context_texts(self, context_ids: Sequence[int]) -> dict[int, str]:
        """The texts of the ``context_ids`` that are still active (context, record and member
        not deleted), by id — the ai side's backfill and keyword re-judge read texts through
        this (SPEC §9.1: core owns the text). A deleted or unknown id is absent. Never logged."""
        if not context_ids:
            return {}
        async with self.engine.connect() as conn:
            rows = await conn.execute(q("active_context_texts"),
                                      {"context_ids": [int(i) for i in context_ids]})
            return {int(r.context_id): r.body for r in rows}

    async def _delete_record_rows(self, conn: AsyncConnection, record_id: int) -> list[int]:
        contexts = list((await conn.execute(q("soft_delete_record_contexts"),
                                            {"record_id": record_id})).scalars().all())
        await self._invalidate(conn, contexts, reason="record deleted")
        await conn.execute(q("soft_delete_record"), {"record_id": record_id})
        return contexts

    async def _summary(self, conn: AsyncConnection, record_id: int) -> RemovalSummary:
        row = (await conn.execute(q("record_removal_summary"),
                                  {"record_id": record_id})).mappings().one()
        return RemovalSummary(record_id=int(row["record_id"]), place_name=row["place_name"],
                              contexts=int(row["contexts"]))

    async def _record_views(self, conn: AsyncConnection, rows: Sequence[Any]) -> list[RecordView]:
        if not rows:
            return []
        record_ids = [int(r["record_id"]) for r in rows]
        contexts = (await conn.execute(q("record_contexts"),
                                       {"record_ids": record_ids})).mappings().all()
        keywords: dict[int, list[str]] = {}
        if contexts:
            kw_rows = (await conn.execute(q("owner_keywords"), {
                "context_ids": [int(c["context_id"]) for c in contexts]})).mappings().all()
            for kw in kw_rows:
                keywords.setdefault(int(kw["context_id"]), []).append(kw["display_name"])
        by_record: dict[int, list[ContextView]] = {}
        for c in contexts:
            by_record.setdefault(int(c["record_id"]), []).append(ContextView(
                context_id=int(c["context_id"]), text=c["body"],
                ai_status=ai_status(c["embedding_status"], c["keyword_status"]),
                keywords=keywords.get(int(c["context_id"]), [])))
        views = []
        for r in rows:
            ctx = by_record.get(int(r["record_id"]), [])
            union: list[str] = []
            for view in ctx:
                union.extend(k for k in view.keywords if k not in union)
            views.append(RecordView(record_id=int(r["record_id"]), place=_place(r),
                                    keywords=union, contexts=ctx,
                                    public_id=self.public_id(int(r["record_id"]))))
        return views

    @staticmethod
    async def _place_meta(conn: AsyncConnection, record_id: int) -> dict[str, str] | None:
        """The record's saved place as ``placeMeta`` (``externalPlaceId``, ``name`` and, when
        set, ``address``/``roadAddress``): sent with every process request so the ai side can
        keep its own lexical evidence (SPEC §10, issue 28)."""
        row = (await conn.execute(q("record_place"), {"record_id": record_id})).mappings().first()
        return place_meta(row) if row is not None else None

    def _request(self, context_id: int, member_id: int, record_id: int, text: str,
                 meta: dict[str, str] | None) -> ProcessRequest:
        return ProcessRequest(context_id=context_id, user_id=member_id, record_id=record_id,
                              text=text, place_meta=meta)

    def _dispatch(self, requests: Sequence[ProcessRequest]) -> None:
        """Queue process requests of **committed** contexts (never raises)."""
        if self.dispatcher is None:
            return
        for request in requests:
            try:
                self.dispatcher.enqueue(request)
            except Exception:  # noqa: BLE001 - the transaction has committed; the rescan recovers
                log.exception("dispatch enqueue failed", extra={"context_id": request.context_id})


def _place(row: Any) -> Place:
    return Place(external_place_id=row["external_place_id"], name=row["name"],
                 address=row["address"], road_address=row["road_address"],
                 lat=float(row["lat"]), lng=float(row["lng"]))
