"""The wire contract between core and ai (SPEC §5.1, §10), shared by both sides.

Neither side owns it: core builds these requests, ai validates and serves them, over HTTP
(``/internal/v1/...``) or through the in-process adapter with exactly the same semantics.
JSON is camelCase. Requests keep strict types (no coercion) but IGNORE unknown fields, each
field name logged once per process (a backend that adds a field must not fail every call:
issue 14); responses carry the reference system's names too (``keywordMatched``).
"""

from __future__ import annotations

import functools
import hmac
import logging
import threading
from collections.abc import Sequence
from typing import Annotated, Any, Literal, Protocol, runtime_checkable

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from pinlog.text import is_blank, normalize

PROCESS_PATH = "/internal/v1/context/process"
PROCESS_BATCH_PATH = "/internal/v1/context/process-batch"
SEARCH_PATH = "/internal/v1/search"
SECRET_HEADER = "X-Internal-Secret"
REQUEST_ID_HEADER = "X-Request-Id"


def secret_ok(presented: str | None, accepted: list[str]) -> bool:
    """Constant-time comparison of ``presented`` with every accepted secret (no early exit):
    the ``X-Internal-Secret`` check of every route that takes it (SPEC §5.1; the ai side's
    internal API, core's operator API)."""
    if not presented or not accepted:
        return False
    given = presented.encode("utf-8")
    match = False
    for secret in accepted:
        match |= hmac.compare_digest(given, secret.encode("utf-8"))
    return match


#: Ids are PostgreSQL ``bigint``: an id outside 1..2^63-1 is a 422, never a failed save.
BIGINT_MAX = 2**63 - 1

#: A row id (``core.member`` / ``core.context`` / ``core.record``): a positive PostgreSQL
#: ``bigint``, validated once here for every model that carries one (outside 1..2^63-1 → 422).
Id = Annotated[int, Field(gt=0, le=BIGINT_MAX)]
MemberId = Id
ContextId = Id
RecordId = Id


class _Camel(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


log = logging.getLogger(__name__)

#: Unknown request field names already logged (bounded: a caller cannot grow it without limit).
_SEEN_UNKNOWN: set[tuple[str, str]] = set()
_SEEN_LOCK = threading.Lock()
_SEEN_MAX = 256


@functools.cache
def _known_fields(model: type[BaseModel]) -> frozenset[str]:
    """The field names and aliases of ``model`` (computed once per model)."""
    return frozenset(model.model_fields) | {f.alias for f in model.model_fields.values() if f.alias}


def _note_unknown_fields(model: type[BaseModel], data: object) -> None:
    """Log each unknown field name of ``model`` once per process (WARNING; the name only,
    truncated to 64 characters, never a value)."""
    if not isinstance(data, dict):
        return
    known = _known_fields(model)
    for key in data:
        if not isinstance(key, str) or key in known:
            continue
        name = key[:64]
        with _SEEN_LOCK:
            if (model.__name__, name) in _SEEN_UNKNOWN or len(_SEEN_UNKNOWN) >= _SEEN_MAX:
                continue
            _SEEN_UNKNOWN.add((model.__name__, name))
        log.warning("unknown field in an internal request ignored (logged once per name)",
                    extra={"request_model": model.__name__, "field": name})


class _StrictCamel(_Camel):
    """Requests: no type coercion (``"1"``, ``true`` or ``1.0`` for an id is a 422); unknown
    fields are ignored and logged once per field name (:func:`_note_unknown_fields`)."""

    model_config = ConfigDict(strict=True, extra="ignore")

    @model_validator(mode="before")
    @classmethod
    def _unknown_fields(cls, data: Any) -> Any:
        _note_unknown_fields(cls, data)
        return data


def _storable_text(value: str) -> str:
    """Text must be encodable as UTF-8 (no lone surrogates) and free of NUL: PostgreSQL and
    the text hash (SPEC §5.6) could not take it, and a request that can never succeed must be
    refused up front (422) instead of failing a real context later."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("must be valid Unicode text") from None
    if "\x00" in value:
        raise ValueError("must not contain NUL characters")
    return value


def _normal_text(value: str) -> str:
    """Text as it enters the ai side: storable (see above), in the one normalised form
    (:func:`pinlog.text.normalize` — what is embedded and hashed, SPEC §5.6, so a sender's NFD
    or NFC copy of a note is the same text), and not blank once normalised (whitespace or
    invisible characters only → 422)."""
    value = normalize(_storable_text(value))
    if is_blank(value):
        raise ValueError("must not be blank")
    return value


#: Text as it enters the ai side (note text, a query): non-empty, storable, normalised, not
#: blank once normalised (:func:`_normal_text`); a length limit is the field's own.
NormalText = Annotated[str, Field(min_length=1), AfterValidator(_normal_text)]


class ProcessRequest(_StrictCamel):
    """Body of ``POST /internal/v1/context/process`` (SPEC §5.1).

    ``text`` length (1..``PINLOG_MAX_TEXT_CHARS`` characters) is checked by the ai side, whose
    limit is configurable; ``placeMeta`` is never embedded (it would change the profile): its
    name and address keys are the ai side's lexical terms of the place (SPEC §10 adopters,
    :func:`pinlog.channels.lexical.place_meta_text`). core sends the record's saved place.
    """

    context_id: ContextId
    user_id: MemberId
    record_id: RecordId
    text: NormalText
    place_meta: dict[str, Any] | None = None


#: Most contexts in one ``POST /internal/v1/context/process-batch`` (more → 422).
MAX_BATCH_CONTEXTS = 1000


class ProcessBatchRequest(_StrictCamel):
    """Body of ``POST /internal/v1/context/process-batch``: ``{"contexts": [<process request>,
    …]}`` with 1..:data:`MAX_BATCH_CONTEXTS` items, each exactly a
    :class:`ProcessRequest` body. The items are validated one by one (:meth:`items`), so an
    invalid item is refused alone (its status 422) and never fails the others.
    """

    contexts: list[Any] = Field(min_length=1, max_length=MAX_BATCH_CONTEXTS)

    def items(self) -> list[ProcessRequest | None]:
        """Each item as a :class:`ProcessRequest`, or None when it is not a valid one (or
        repeats the ``contextId`` of an earlier item of this batch)."""
        out: list[ProcessRequest | None] = []
        seen: set[int] = set()
        for item in self.contexts:
            try:
                request = ProcessRequest.model_validate(item)
            except ValueError:  # pydantic's ValidationError is a ValueError
                out.append(None)
                continue
            if request.context_id in seen:
                out.append(None)
                continue
            seen.add(request.context_id)
            out.append(request)
        return out


class ProcessBatchResponse(_Camel):
    """``{"statuses": [202, 422, 503, …]}``: one status per item of the request, in order —
    202 accepted (queued), 422 invalid item (or a repeated ``contextId``), 503 not accepted
    because the work queue is full (its row stays PENDING; send it again later)."""

    statuses: list[int]


#: Most records a search may ask the ai side to score besides its own hits (SPEC §10).
MAX_SCORED_RECORDS = 1000


#: What ``POST /internal/v1/search`` answers (:attr:`SearchRequest.mode`).
SearchMode = Literal["hybrid", "vector", "score"]


class SearchRequest(_StrictCamel):
    """Body of ``POST /internal/v1/search`` (SPEC §10).

    ``mode`` (optional):

    - ``"hybrid"`` (the default; what a reference backend gets): the ai side's own channels —
      its vector search and its lexical evidence from the text and ``placeMeta`` of the process
      requests — and the same decision as core's search (SPEC §10 "The same decision for
      adopters"); ``results`` are the records to show, each with ``matchedBy``.
    - ``"vector"`` (core, which brings its own lexical channel): ``results`` are the records the
      vector channel vouches for, each with its calibrated ``score``.
    - ``"score"``: only ``scored`` for ``recordIds`` (core's second call of a search; the
      query's vector is reused when this replica embedded it moments before).

    ``recordIds`` (optional, at most :data:`MAX_SCORED_RECORDS`): records whose contexts the ai
    side returns in ``scored`` with their cosine and strength (same filters as the search:
    member, not deleted, COMPLETED, profile), whether or not the vector channel vouches for
    them (modes ``vector`` and ``score``).

    ``withDoubtStrength`` (optional, default false; modes ``vector`` and ``score``): answer with
    :attr:`SearchResponse.doubt_strength` too. Asked for, not sent unasked, so a core of the
    previous release (which refuses unknown answer fields) keeps working against this ai side
    during a rolling upgrade, and an ai side of the previous release ignores the question.
    """

    user_id: MemberId
    query: NormalText = Field(max_length=2000)
    limit: int = Field(20, ge=1, le=100)
    embedding_profile: str = Field(min_length=1)
    record_ids: list[RecordId] = Field(default_factory=list, max_length=MAX_SCORED_RECORDS)
    mode: SearchMode = "hybrid"
    with_doubt_strength: bool = False

    @field_validator("limit", "record_ids", "mode", "with_doubt_strength", mode="before")
    @classmethod
    def _null_is_absent(cls, value: Any, info: ValidationInfo) -> Any:
        """A JSON ``null`` for an optional field means "not given": the default applies (a
        backend that serialises absent fields as null, e.g. Jackson's default, is not refused)."""
        if value is None and info.field_name is not None:
            return cls.model_fields[info.field_name].get_default(call_default_factory=True)
        return value


class SearchHit(_Camel):
    """One record of a search: its best-matching context and that context's cosine
    similarity to the query (in [-1, 1], higher is closer; SPEC §10).

    ``keyword_matched`` (``keywordMatched``, the reference's field): True when the hit's record
    has a keyword (COMPLETED keyword stage, active context) among the query's own best presets
    (:func:`pinlog.ai.search.query_presets`).

    ``score``: the vector channel's calibrated strength for this context (unitless; the cosine
    against the query's similarity to a background set of notes, ``pinlog.ai.search``); absent
    for a profile without calibration. ``matched_by`` (``matchedBy``, mode ``hybrid`` only):
    the channels that matched (``vector``, ``text``, ``place``; SPEC §10).
    """

    record_id: int
    context_id: int
    similarity: float
    keyword_matched: bool = False
    score: float | None = None
    matched_by: list[str] | None = None


class SearchResponse(_Camel):
    """``{"results": [...], "scored": [...]}``.

    ``results``: one hit per record, best first — mode ``hybrid``: the records the decision
    shows (with ``matchedBy``); mode ``vector``: only records the vector channel vouches for;
    mode ``score``: none. An off-topic or filler query gets none. ``scored``: one entry per
    searchable context of the requested ``recordIds``, with its cosine and strength (any order).

    ``doubt_strength`` (``doubtStrength``, modes ``vector`` and ``score``, when the request asks
    ``withDoubtStrength``): the strength a record
    the lexical channel doubts needs, under the profile whose vectors answered (its calibration;
    ``null``: that profile has no calibrated strength, so no doubt). The strengths in ``score``
    are that profile's, so the caller's decision takes the doubt from here, not from its own
    start-up rule, and stays right through a profile switch (SPEC §9.1, §10). Absent (an older
    ai side): the caller's rule.
    """

    results: list[SearchHit]
    scored: list[SearchHit] = Field(default_factory=list)
    doubt_strength: float | None = None

    @property
    def carries_doubt_strength(self) -> bool:
        """The answer says whose doubt strength its strengths need: ``doubt_strength`` was set,
        even to ``null`` ("this profile has none"); unset when the request did not ask for it
        (SPEC §10, a previous-release peer)."""
        return "doubt_strength" in self.model_fields_set

    def doubt_or(self, fallback: float | None) -> float | None:
        """``doubt_strength`` when the answer carries one (even ``null``), else ``fallback``."""
        return self.doubt_strength if self.carries_doubt_strength else fallback


class ProcessClient(Protocol):
    """How core reaches the ai side's process endpoint (HTTP client or in-process adapter).

    ``send`` returns the HTTP status the ai side answered (202 accepted, 401, 422, 503 …) and
    never raises for an ai-side failure: timeouts/connection errors are reported as status 0
    with the outcome class logged and counted by the implementation. The ``X-Request-Id`` is
    the ``request_id`` of the caller's logging context (:mod:`pinlog.logs`), or a new one.
    """

    async def send(self, request: ProcessRequest) -> int: ...


@runtime_checkable
class BatchProcessClient(ProcessClient, Protocol):
    """A process client that can also send many contexts in one call: HTTP
    ``POST /internal/v1/context/process-batch`` or the in-process adapter's ``submit_batch``
    (docs/ARCHITECTURE.md "Batch path"). ``send_batch`` returns one status per request, in
    order, with the meaning of :meth:`ProcessClient.send` (202, 401, 422, 503 …, 0 = no answer)
    and never raises for an ai-side failure. Callers that hold a plain :class:`ProcessClient`
    send one request per context instead (``isinstance(client, BatchProcessClient)``)."""

    async def send_batch(self, requests: Sequence[ProcessRequest]) -> list[int]: ...
