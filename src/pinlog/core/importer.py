"""`pinlog import`: load JSONL place notes through the same core service functions the public
API uses, so state rows and dispatch take the real path.

File format (one JSON object a line, the format of ``shared/data/place_notes.jsonl``)::

    {"member": "member1", "record": "rain",
     "place": {"name": "…", "external_place_id": "ext-1", "address": "…", "lat": 37.5, "lng": 126.9},
     "context": "the note text"}

``member`` is the member's ``external_ref`` (created when missing); ``record`` is the line's
key for reports (optional). A member + place (``external_place_id``) that already had an active
record before the import is skipped, so re-importing a file never duplicates records; a second
line for a place whose record this same import created adds a context to it. Malformed lines
are reported with their line numbers and skipped; nothing of a malformed line is written.

A line is checked by the same models as the public API's requests (:mod:`pinlog.core.inputs`:
strict types, so ``"lat": "37.5"`` is refused by both) with the file's snake_case keys; keys the
format does not know are ignored (the API refuses them). Problems are fixed sentences naming the
field (:func:`pinlog.http.problem`), never the input or an internal class name.
"""

from __future__ import annotations

import asyncio
import codecs
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel
from sqlalchemy.ext.asyncio import AsyncEngine

from pinlog.core.inputs import NonBlank, PlaceIn
from pinlog.core.services import (MAX_PLACE_ID_CHARS, CoreError, CoreService, InvalidInput,
                                  MemberExists, PlaceInput, RecordExists, validate_external_ref,
                                  validate_place, validate_text)
from pinlog.db.sql import Queries
from pinlog.http import problem, problem_field

queries = Queries("pinlog.core", "importer.sql")


class ImportPlace(PlaceIn):
    """``place`` of an import line: the public API's :class:`~pinlog.core.inputs.PlaceIn`
    (same fields, types and limits) under the file's snake_case keys (``external_place_id``;
    the camelCase ones work too); unknown keys are ignored."""

    # populate_by_name (not validate_by_name, pydantic >= 2.11): the lowest allowed pydantic too
    model_config = ConfigDict(alias_generator=to_camel, extra="ignore", strict=True,
                              populate_by_name=True, loc_by_alias=False)


class ImportLine(BaseModel):
    """One valid import line (strict types like the API's requests)."""

    model_config = ConfigDict(extra="ignore", strict=True, loc_by_alias=False)
    member: str = Field(min_length=1, max_length=MAX_PLACE_ID_CHARS)
    record: str | None = Field(None, max_length=200)
    place: ImportPlace
    context: NonBlank = Field(min_length=1)


@dataclass
class ParsedFile:
    """Valid lines (with their 1-based line numbers), per-line errors, and how many non-blank
    lines were read (``read`` = valid + malformed)."""

    lines: list[tuple[int, ImportLine]] = field(default_factory=list)
    errors: list[tuple[int, str]] = field(default_factory=list)
    read: int = 0


#: The services' field names → the import file's (error messages name the file's fields).
_FILE_FIELDS = {"text": "context", "externalRef": "member",
                "place.externalPlaceId": "place.external_place_id",
                "place.roadAddress": "place.road_address"}


def parse_import_file(path: Path, *, max_text_chars: int) -> ParsedFile:
    """Parse and validate a JSONL file (UTF-8, an optional BOM); never raises for a bad line.

    A line is valid only if the core services would accept it (``validate_place``,
    ``validate_text``, the ``external_ref`` rules), so a valid line is never refused half-way
    through its writes and nothing of a malformed line (not even its member) is written.
    Error messages name the field and the problem, never the note text (personal data).
    Blank lines are skipped; line numbers are 1-based physical lines.

    Raises:
        OSError: the file cannot be read.
    """
    parsed = ParsedFile()
    with path.open("rb") as fh:
        for number, raw_bytes in enumerate(fh, start=1):
            if number == 1 and raw_bytes.startswith(codecs.BOM_UTF8):
                raw_bytes = raw_bytes[len(codecs.BOM_UTF8):]  # a file saved "UTF-8 with BOM"
            try:
                raw = raw_bytes.decode("utf-8")
            except UnicodeDecodeError as exc:  # one bad line, not a crash of the whole import
                parsed.errors.append((number, f"not valid UTF-8 (byte {exc.start + 1})"))
                continue
            if not raw.strip():
                continue
            parsed.read += 1
            try:  # parsed as the API parses a body (json.loads), then the same strict models
                line = ImportLine.model_validate(json.loads(raw))
            except (json.JSONDecodeError, RecursionError) as exc:
                reason = exc.msg if isinstance(exc, json.JSONDecodeError) else "nested too deeply"
                parsed.errors.append((number, f"not valid JSON ({reason})"))
                continue
            except ValidationError as exc:
                first = exc.errors()[0]
                where = problem_field(first)
                parsed.errors.append((number, f"{where}: {problem(first)}" if where
                                      else f"the line {problem(first)}"))
                continue
            try:  # the services' own rules, so no line is refused half-way through its writes
                validate_external_ref(line.member)
                validate_place(_place(line.place))
                validate_text(line.context, max_text_chars)
            except InvalidInput as exc:
                name = _FILE_FIELDS.get(exc.field or "", exc.field)
                parsed.errors.append((number, f"{name}: {exc.problem}" if name else exc.message))
                continue
            parsed.lines.append((number, line))
    return parsed


@dataclass
class ImportReport:
    """What an import did."""

    members_created: int = 0
    records_created: int = 0
    records_existing: int = 0  # distinct records that were already active before this import
    lines_skipped: int = 0  # lines whose member + place already had an active record
    context_ids: list[int] = field(default_factory=list)
    record_keys: dict[tuple[str, str], int] = field(default_factory=dict)  # (member, record key) → id
    member_ids: dict[str, int] = field(default_factory=dict)
    errors: list[tuple[int, str]] = field(default_factory=list)


ProgressFn = Callable[[int], None]


async def import_lines(service: CoreService, parsed: ParsedFile,
                       progress: ProgressFn | None = None,
                       throttle: Callable[[], Awaitable[None]] | None = None) -> ImportReport:
    """Create members, records and contexts for ``parsed.lines`` through the core services
    (one transaction each, dispatched after commit, SPEC §4).

    Args:
        progress: called with 1 after each line.
        throttle: awaited after each line (back-pressure, e.g. wait for the dispatch queue
            to drain so a bulk import does not overflow it).

    Returns:
        the report; ``errors`` holds the parse errors plus lines the services refused.
    """
    report = ImportReport(errors=list(parsed.errors))
    created_here: dict[tuple[int, str], int] = {}
    existing_seen: set[int] = set()
    for number, line in parsed.lines:
        try:
            member_id = report.member_ids.get(line.member)
            if member_id is None:
                member_id = await _member(service, line.member, report)
                report.member_ids[line.member] = member_id
            key = (member_id, line.place.external_place_id)
            record_key = (line.member, line.record or line.place.external_place_id)
            if key in created_here:
                record_id = created_here[key]
                report.context_ids.append(await service.add_context(member_id, record_id, line.context))
            else:
                existing = await service.find_active_record(member_id, line.place.external_place_id)
                if existing is not None:
                    record_id = existing
                    report.lines_skipped += 1
                    if record_id not in existing_seen:
                        existing_seen.add(record_id)
                        report.records_existing += 1
                else:
                    try:
                        record_id, context_id = await service.create_record(
                            member_id, _place(line.place), line.context)
                        created_here[key] = record_id
                        report.records_created += 1
                        report.context_ids.append(context_id)
                    except RecordExists as exc:  # created concurrently by someone else
                        record_id = exc.record_id
                        report.lines_skipped += 1
                        if record_id not in existing_seen:
                            existing_seen.add(record_id)
                            report.records_existing += 1
            report.record_keys[record_key] = record_id
        except CoreError as exc:
            report.errors.append((number, exc.message))
        finally:
            if progress is not None:
                progress(1)
        if throttle is not None:
            await throttle()
    report.errors.sort()
    return report


async def _member(service: CoreService, ref: str, report: ImportReport) -> int:
    """The active member whose ``external_ref`` is ``ref``, created when missing.

    Never resolves ``ref`` as a member id: a file's member key "42" is an external ref, not
    member 42 (``CoreService.resolve_member`` would prefer the id).
    """
    for _ in range(2):
        async with service.engine.connect() as conn:
            found = (await conn.execute(queries("member_by_external_ref"),
                                        {"external_ref": ref})).scalar()
        if found is not None:
            return int(found)
        try:
            member_id = await service.create_member(ref)
        except MemberExists:  # created concurrently by someone else: read it again
            continue
        report.members_created += 1
        return member_id
    raise MemberExists("an active member already uses this external reference")


def _place(place: ImportPlace) -> PlaceInput:
    return place.to_input()


async def wait_for_stages(engine: AsyncEngine, context_ids: list[int], *, timeout: float,
                          progress: Callable[[int], None] | None = None,
                          nudge: Callable[[list[int]], Awaitable[object]] | None = None,
                          nudge_after: float = 5.0, poll: float = 0.2) -> bool:
    """Wait until no given context has a PENDING/PROCESSING stage (or ``timeout`` seconds).

    Polls the state table (the only shared truth between processes). ``progress`` receives the
    number of finished contexts after each poll. When nothing finished for ``nudge_after``
    seconds, ``nudge`` is called with the contexts that still have a PENDING stage (a dropped
    dispatch, a 503 from a full ai queue): re-sending is safe because the ai side's guarded
    start lets only one job own a stage (SPEC §5.3). It spends no retry budget.

    Returns:
        True when everything finished, False on timeout.
    """
    deadline = time.monotonic() + timeout
    last_change, last_unfinished = time.monotonic(), -1
    while True:
        async with engine.connect() as conn:
            unfinished = int((await conn.execute(queries("unfinished_count"),
                                                 {"context_ids": context_ids})).scalar_one())
            if nudge is not None and unfinished and unfinished == last_unfinished \
                    and time.monotonic() - last_change >= nudge_after:
                pending = list((await conn.execute(queries("pending_ids"),
                                                   {"context_ids": context_ids})).scalars())
            else:
                pending = []
        if unfinished != last_unfinished:
            last_change, last_unfinished = time.monotonic(), unfinished
        if progress is not None:
            progress(len(context_ids) - unfinished)
        if unfinished == 0:
            return True
        if time.monotonic() >= deadline:
            return False
        if pending and nudge is not None:
            await nudge(pending)
            last_change = time.monotonic()
        await asyncio.sleep(poll)


@dataclass
class StageSummary:
    """Final picture of a set of contexts: counts per stage × status, keywords, failures."""

    contexts: int
    embedding: dict[str, int]
    keyword: dict[str, int]
    keywords_assigned: int
    failures: list[tuple[int, str, str, str | None]]

    @property
    def all_completed(self) -> bool:
        return (self.embedding.get("COMPLETED", 0) == self.contexts
                and self.keyword.get("COMPLETED", 0) == self.contexts)


async def summarize(engine: AsyncEngine, context_ids: list[int]) -> StageSummary:
    """Counts per stage and status, keywords assigned, and the failures with ``last_error``."""
    async with engine.connect() as conn:
        params = {"context_ids": context_ids}
        counts = (await conn.execute(queries("status_counts"), params)).all()
        keywords = (await conn.execute(queries("keyword_count"), params)).scalar_one()
        failures = (await conn.execute(queries("failures"), params)).all()
    summary = StageSummary(contexts=len(context_ids), embedding={}, keyword={},
                           keywords_assigned=int(keywords),
                           failures=[(r.context_id, r.embedding_status, r.keyword_status,
                                      r.last_error) for r in failures])
    for stage, status, n in counts:
        getattr(summary, stage)[status] = int(n)
    return summary


async def active_context_ids(engine: AsyncEngine, record_ids: list[int]) -> list[int]:
    """Ids of the active contexts of ``record_ids`` (ascending)."""
    async with engine.connect() as conn:
        return [int(i) for i in (await conn.execute(
            queries("active_context_ids"), {"record_ids": record_ids})).scalars()]
