"""Keyword presets: the preset file, loading into ``ai.keyword_preset`` and snapshots (SPEC §8).

* :func:`load_preset_file` reads and validates a preset YAML file — the project's own
  ``presets_default.yaml`` or any file in the shared format ``{presets: [{id, code, …}]}``.
* :func:`upsert_presets` embeds the presets with an :class:`EmbeddingProvider` and upserts
  them idempotently for that provider's profile (``pinlog presets load``).
* :func:`load_snapshot` reads the usable presets of one profile as one matrix (SPEC §5.2
  step 3); the pipeline reuses it while the presets' fingerprint
  (:func:`pinlog.ai.state.preset_fingerprint`, read by each keyword stage) is unchanged.

Preset embedding strategy (measured with ``bench/calibrate_keywords.py``, see
:data:`PRESET_EMBEDDING_STRATEGY`): how a preset becomes one vector is this module's business,
not the profile's — the profile string describes how *context* texts are embedded. Changing the
strategy means re-running ``pinlog presets load --reembed``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, get_args

import numpy as np
import yaml
from pgvector.sqlalchemy import VECTOR
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    StrictStr,
    ValidationError,
    model_validator,
)
from sqlalchemy import bindparam
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from pinlog.ai.errors import PermanentModelError, with_retries
from pinlog.ai.ports import EmbeddingProvider, Preset, PresetSnapshot
from pinlog.ai.vectors import check_embeddings
from pinlog.db.sql import Queries
from pinlog.errors import PinlogError
from pinlog.settings import RetryPolicy
from pinlog.text import normalize

if TYPE_CHECKING:
    from pinlog.ai.providers import BatchConfig, EmbeddingProviderConfig

log = logging.getLogger(__name__)
q = Queries("pinlog.ai", "presets.sql")

#: The reference's four categories (SPEC §8). A preset file may define more (the reference
#: is moving to seven): any UPPER_SNAKE_CASE name is a category; the judge treats all alike.
CATEGORIES = ("COMPANION", "ACTIVITY", "ATMOSPHERE", "SITUATION")
MAX_CATEGORY_CHARS = 40
Visibility = Literal["PUBLIC", "PRIVATE_ONLY", "BLOCKED"]
VISIBILITIES: tuple[str, ...] = get_args(Visibility)
MIN_EXAMPLES, MAX_EXAMPLES = 2, 5
#: most cues per preset, longest cue (characters)
MAX_CUES, MAX_CUE_CHARS = 100, 40
_CODE = re.compile(r"^[A-Z][A-Z0-9_]*$")

#: How a preset becomes one vector:
#: ``"single"`` — one passage: display name, description and examples joined by newlines
#: (``Preset.embedding_text()``);
#: ``"mean"`` — the L2-normalised mean of several passages (``"name: description"`` and one
#: per example).
#: Measured on keyword_samples.jsonl with both preset files (bench/calibrate_keywords.py);
#: see the numbers next to the defaults in ``pinlog.ai.calibration``.
PRESET_EMBEDDING_STRATEGY: Literal["single", "mean"] = "mean"


class PresetFileError(PinlogError, ValueError):
    """A preset file (or preset list) is invalid; one line per problem, each naming the file,
    the entry (``preset id N``, or ``preset #i`` with its code when the id itself is wrong) and
    the field."""


def default_preset_path() -> Path:
    """Path of the packaged default preset file (``pinlog/ai/presets_default.yaml``)."""
    return Path(str(resources.files("pinlog.ai").joinpath("presets_default.yaml")))


# --- the preset file format (SPEC §8): pydantic models ----------------------------------------

def _collapsed(value: str) -> str:
    """Whitespace runs become one space, ends trimmed; blank → refused."""
    if not value.strip():
        raise ValueError("blank")
    return " ".join(value.split())


def _upper_snake(value: str) -> str:
    if not _CODE.match(value):
        raise ValueError("not UPPER_SNAKE_CASE")
    return value


def _cue(value: str) -> str:
    """A cue in the form the evidence matcher sees (:func:`pinlog.text.normalize`, whitespace
    collapsed); one with nothing visible left (e.g. only a zero-width space) is refused."""
    return _collapsed(normalize(value))


def _distinct(values: list[str]) -> list[str]:
    return list(dict.fromkeys(values))


_PositiveInt = Annotated[StrictInt, Field(gt=0)]
_Text = Annotated[StrictStr, AfterValidator(_collapsed)]
_Cue = Annotated[StrictStr, Field(max_length=MAX_CUE_CHARS), AfterValidator(_cue)]


class PresetEntry(BaseModel):
    """One entry of a preset file (SPEC §8), validated strictly: YAML ``"301"`` is not an id,
    ``true`` not a version. Text fields are stored whitespace-collapsed.

    ``cues`` absent → None (the caller's fallback applies); ``cues: null`` or ``[]`` → none.
    ``version`` absent → the file's ``version`` (filled in by :class:`PresetDocument`).
    """

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    id: _PositiveInt
    code: Annotated[StrictStr, AfterValidator(_collapsed), AfterValidator(_upper_snake)]
    display_name: _Text
    category: Annotated[StrictStr, Field(max_length=MAX_CATEGORY_CHARS),
                        AfterValidator(_upper_snake)]
    description: _Text
    examples: Annotated[list[_Text], Field(min_length=MIN_EXAMPLES, max_length=MAX_EXAMPLES)]
    visibility: Visibility = "PUBLIC"
    version: _PositiveInt = 1
    cues: Annotated[list[_Cue], Field(max_length=MAX_CUES), AfterValidator(_distinct)] | None = None

    def preset(self, cue_fallback: Mapping[str, tuple[str, ...]] | None) -> Preset:
        """The entry as a :class:`Preset` (active); cues from ``cue_fallback[code]`` when the
        entry has no ``cues`` key."""
        if "cues" in self.model_fields_set:
            cues = tuple(self.cues or ())
        else:
            cues = tuple((cue_fallback or {}).get(self.code, ()))
        return Preset(id=self.id, code=self.code, display_name=self.display_name,
                      category=self.category, description=self.description,
                      examples=tuple(self.examples), visibility=self.visibility, is_active=True,
                      version=self.version, cues=cues)


class PresetDocument(BaseModel):
    """A whole preset file: ``{presets: [...], version?: int}`` (``version``: the default of
    every entry that has none)."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    version: _PositiveInt = 1
    presets: Annotated[list[PresetEntry], Field(min_length=1)]

    @model_validator(mode="before")
    @classmethod
    def _entries_default_to_the_file_version(cls, data: Any) -> Any:
        if not isinstance(data, dict) or not isinstance(data.get("presets"), list):
            return data
        version = data.get("version", 1)
        if not isinstance(version, int) or isinstance(version, bool) or version < 1:
            return data  # refused as the file's version; the entries keep their default
        return {**data, "presets": [{"version": version, **e} if isinstance(e, dict) else e
                                    for e in data["presets"]]}


#: Why each field is refused ("<entry>: <field> <rule>"); ``name[]`` is the rule of one item.
_RULES: dict[str, str] = {
    "id": "must be a positive integer",
    "code": "must be a non-empty UPPER_SNAKE_CASE string",
    "display_name": "must be a non-empty string",
    "category": (f"must be an UPPER_SNAKE_CASE name of at most {MAX_CATEGORY_CHARS} characters "
                 f"(e.g. {', '.join(CATEGORIES)})"),
    "description": "must be a non-empty string",
    "visibility": f"must be one of {', '.join(VISIBILITIES)}",
    "examples": f"must be a list of {MIN_EXAMPLES}–{MAX_EXAMPLES} strings",
    "examples[]": "must be non-empty strings",
    "version": "must be a positive integer",
    "cues": f"must be a list of at most {MAX_CUES} strings",
    "cues[]": f"must be non-empty strings of at most {MAX_CUE_CHARS} characters",
}


def _shown(value: object) -> str:
    """A short description of a refused value for an error line (preset files hold no
    personal data; long text is cut)."""
    if isinstance(value, list):
        return f"a list of {len(value)}"
    if isinstance(value, dict):
        return "a mapping"
    if value is None:
        return "null"
    text = repr(value)
    return text if len(text) <= 45 else text[:42] + "…"


def _entry_label(index: int, entry: object) -> str:
    """``preset id 301`` — or, when the id itself is wrong, ``preset #3`` (1-based position)
    with the entry's code when it has one."""
    if isinstance(entry, dict):
        ident, code = entry.get("id"), entry.get("code")
        if isinstance(ident, int) and not isinstance(ident, bool) and ident > 0:
            return f"preset id {ident}"
        if isinstance(code, str) and code.strip():
            return f"preset #{index + 1} (code {_shown(code.strip())})"
    return f"preset #{index + 1}"


def _problem_line(problem: Any) -> str:
    """``<field> <rule> (got …)`` for one problem of one entry (``loc`` after the entry)."""
    field, rest = str(problem["loc"][0]), problem["loc"][1:]
    if problem["type"] == "missing":
        return f"{field} {_RULES[field]} (missing)"
    if rest:  # one item of examples / cues
        return (f"{field} {_RULES[field + '[]']} "
                f"(item {int(rest[0]) + 1}: got {_shown(problem['input'])})")
    return f"{field} {_RULES[field]} (got {_shown(problem['input'])})"


def _error_lines(error: ValidationError, entries: Sequence[Any]) -> list[str]:
    """One line per problem of a :class:`PresetDocument` validation: the document's first,
    then each entry's in file order; an entry's unknown fields share one line."""
    document: list[str] = []
    by_entry: dict[int, list[Any]] = {}
    for problem in error.errors():
        loc = problem["loc"]
        if loc[:1] == ("presets",) and len(loc) > 1:
            by_entry.setdefault(int(loc[1]), []).append({**problem, "loc": loc[2:]})
        elif problem["type"] == "extra_forbidden":
            document.append(f"unknown top-level key {loc[0]!r} (allowed: presets, version)")
        elif loc == ("version",):
            document.append(f"version {_RULES['version']} (got {_shown(problem['input'])})")
        else:  # not a mapping / a list, or `presets` missing, empty or not a list
            document.append("expected a non-empty list under 'presets'")
    lines = list(dict.fromkeys(document))
    allowed = ", ".join(PresetEntry.model_fields)
    for index, problems in sorted(by_entry.items()):
        where = _entry_label(index, entries[index])
        unknown = sorted(str(p["loc"][0]) for p in problems if p["type"] == "extra_forbidden")
        if unknown:
            lines.append(f"{where}: unknown fields {unknown} (allowed: {allowed})")
        for problem in problems:
            if not problem["loc"]:
                lines.append(f"{where}: expected a mapping (got {_shown(problem['input'])})")
            elif problem["type"] != "extra_forbidden":
                lines.append(f"{where}: {_problem_line(problem)}")
    return lines


def _duplicate_lines(entries: Sequence[PresetEntry]) -> list[str]:
    """An id and a code appear once per file: one line per entry that repeats one, naming the
    entry it repeats."""
    lines: list[str] = []
    ids: dict[int, int] = {}
    codes: dict[str, int] = {}
    for position, entry in enumerate(entries, start=1):
        if entry.id in ids:
            lines.append(f"preset id {entry.id}: duplicate id (entries #{ids[entry.id]} and "
                         f"#{position})")
        ids.setdefault(entry.id, position)
        if entry.code in codes:
            first = codes[entry.code]
            lines.append(f"preset id {entry.id}: duplicate code {entry.code} (also preset id "
                         f"{entries[first - 1].id}, entry #{first})")
        codes.setdefault(entry.code, position)
    return lines


def _file_error(source: str, lines: Sequence[str]) -> PresetFileError:
    return PresetFileError("\n".join(f"{source}: {line}" for line in lines))


def parse_presets(document: object, *, source: str = "<presets>",
                  cue_fallback: Mapping[str, tuple[str, ...]] | None = None) -> list[Preset]:
    """Validate a parsed preset document (:class:`PresetDocument`) and return its presets in
    file order.

    Accepts ``{presets: [...], version?: int}`` (the shared format; ``version`` is the default
    revision of every entry) or a bare list of entries.

    ``cues`` is optional per entry. An entry *without* the key takes the cues of
    ``cue_fallback[code]`` when given (``load_preset_file`` passes the packaged file's cues:
    codes are stable concepts across preset files), else none; ``cues: []`` means none.

    Raises:
        PresetFileError: not a list of presets; unknown/missing fields; duplicate id or code;
            category not an UPPER_SNAKE_CASE name; visibility outside the allowed set; empty
            description; fewer than 2 or more than 5 examples; cues not a list of short
            non-empty strings. Every problem is reported, one line each:
            ``<source>: preset id 301: category must be … (got 'good mood')``.
    """
    if isinstance(document, list):
        document = {"presets": document}
    entries = document.get("presets") if isinstance(document, dict) else None
    try:
        parsed = PresetDocument.model_validate(document)
    except ValidationError as exc:
        raise _file_error(source, _error_lines(exc, entries if isinstance(entries, list) else [])
                          ) from None
    duplicates = _duplicate_lines(parsed.presets)
    if duplicates:
        raise _file_error(source, duplicates)
    return [entry.preset(cue_fallback) for entry in parsed.presets]


def _read_document(path: Path) -> object:
    try:
        return yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise PresetFileError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except yaml.YAMLError as exc:
        raise PresetFileError(f"{path}: invalid YAML ({exc})") from None


def default_cues() -> dict[str, tuple[str, ...]]:
    """Cues of the packaged presets by code (the fallback for preset files without cues)."""
    presets = parse_presets(_read_document(default_preset_path()),
                            source=str(default_preset_path()))
    return {p.code: p.cues for p in presets}


def load_preset_file(path: Path | None = None, *, inherit_cues: bool = True) -> list[Preset]:
    """Read and validate a preset YAML file (SPEC §8).

    Args:
        path: the file; ``None`` → the packaged ``presets_default.yaml``.
        inherit_cues: an entry without a ``cues`` key takes the cues of the packaged preset
            with the same code (:func:`default_cues`; e.g. ``presets_ko.yaml`` has no cues and
            shares every code with the packaged file). False → such entries have no cues.

    Returns:
        the presets in file order (``is_active=True``).

    Raises:
        PresetFileError: unreadable file, invalid YAML, or an invalid entry (see
            :func:`parse_presets`); the message names the file and the entry id.
    """
    path = path or default_preset_path()
    document = _read_document(path)
    fallback = None
    if inherit_cues and Path(path).resolve() != default_preset_path().resolve():
        fallback = default_cues()
    return parse_presets(document, source=str(path), cue_fallback=fallback)


# --- embedding ------------------------------------------------------------------------------

def preset_passages(preset: Preset, strategy: str = PRESET_EMBEDDING_STRATEGY) -> list[str]:
    """The passage texts whose (normalised mean) vector represents ``preset``.

    ``single`` → ``[preset.embedding_text()]``; ``mean`` → ``"name: description"`` plus one
    passage per example.
    """
    if strategy == "single":
        return [preset.embedding_text()]
    if strategy == "mean":
        return [f"{preset.display_name}: {preset.description}", *preset.examples]
    raise ValueError(f"unknown preset embedding strategy {strategy!r}")


def _normalise_rows(matrix: np.ndarray) -> np.ndarray:
    matrix = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return (matrix / norms).astype(np.float32)


async def embed_presets(
    presets: Sequence[Preset],
    provider: EmbeddingProvider,
    *,
    strategy: str = PRESET_EMBEDDING_STRATEGY,
    retries: RetryPolicy | None = None,
    budget: float | None = None,
) -> np.ndarray:
    """Embed ``presets`` (kind ``passage``) in one ``embed`` call (a micro-batcher cuts it into
    calls the server accepts: its input cap, issue 23).

    Args:
        retries: attempts and backoff of that call (SPEC §6; None: one attempt); a throttle's
            ``Retry-After`` is waited out without spending an attempt while it ends within
            ``budget`` seconds.

    Returns:
        ``(len(presets), provider.dimension)`` float32, rows L2-normalised.

    Raises:
        PermanentModelError: the provider returned the wrong shape, non-finite values or a
            zero / near-zero norm row
            (SPEC §9: a wrong-length vector is never stored).
        TransientModelError / PermanentModelError: from the provider.
    """
    if not presets:
        return np.zeros((0, provider.dimension), dtype=np.float32)
    groups = [preset_passages(p, strategy) for p in presets]
    texts = [t for group in groups for t in group]

    async def call() -> np.ndarray:
        return np.asarray(await provider.embed(texts, "passage"), dtype=np.float32)

    if retries is None:
        raw = await call()
    else:
        import asyncio

        loop = asyncio.get_running_loop()
        raw = await with_retries(
            call, attempts=retries.attempts, base=retries.backoff_base, cap=retries.backoff_cap,
            deadline=None if budget is None else loop.time() + budget, clock=loop.time)
    if raw.ndim != 2 or raw.shape != (len(texts), provider.dimension):
        raise PermanentModelError(
            f"embedding provider returned shape {tuple(raw.shape)}, expected "
            f"({len(texts)}, {provider.dimension}) for profile {provider.profile}"
        )
    raw = check_embeddings(raw, len(texts), provider.dimension)  # zero/NaN rows: never stored
    raw = _normalise_rows(raw)
    rows, start = [], 0
    for group in groups:
        rows.append(raw[start:start + len(group)].mean(axis=0))
        start += len(group)
    return _normalise_rows(np.vstack(rows))


# --- loading --------------------------------------------------------------------------------

@dataclass
class PresetLoadReport:
    """What :func:`upsert_presets` did, by preset id (SPEC §8 idempotent load).

    ``changed`` is False when a load wrote nothing (the idempotency check of a second load).
    """

    profile: str
    inserted: list[int] = field(default_factory=list)
    updated: list[int] = field(default_factory=list)
    retired: list[int] = field(default_factory=list)
    unchanged: list[int] = field(default_factory=list)
    embedded: list[int] = field(default_factory=list)
    #: the preset list version after the load (max version of the loaded presets)
    version: int = 0

    @property
    def changed(self) -> bool:
        return bool(self.inserted or self.updated or self.retired or self.embedded)

    def summary(self) -> str:
        """One line for humans, e.g. ``inserted 27, updated 0, retired 0, unchanged 0, …``."""
        return (f"profile {self.profile}: inserted {len(self.inserted)}, updated "
                f"{len(self.updated)}, retired {len(self.retired)}, unchanged "
                f"{len(self.unchanged)}, embedded {len(self.embedded)}, "
                f"preset version {self.version}")


def _row_preset(row: Any) -> Preset:
    return Preset(
        id=row.id, code=row.code, display_name=row.display_name, category=row.category,
        description=row.description, examples=tuple(row.examples), visibility=row.visibility,
        is_active=row.is_active, version=row.version, cues=tuple(row.cues or ()),
    )


def versions_for(presets: Sequence[Preset], stored: Mapping[int, Preset]) -> dict[int, int]:
    """The version each preset is written with (SPEC §8: a content change is a new version).

    * unchanged content (and still active): ``max(stored version, file version)`` — never
      lower than what is stored;
    * new id, changed content (:meth:`Preset.content`: name, category, description, examples,
      cues, visibility) or a retired id coming back: one new list revision for the whole load,
      ``max(every stored version) + 1`` (at least the file's version), so the list's version —
      the max over active presets, stored as ``preset_version`` — rises and
      ``pinlog reprocess --presets`` finds the contexts judged with the old content;
    * into an empty table: the file's version (default 1).
    """
    top = max((p.version for p in stored.values()), default=0)
    out: dict[int, int] = {}
    for preset in presets:
        old = stored.get(preset.id)
        if old is None and not stored:
            out[preset.id] = preset.version
        elif old is None or not old.is_active or old.content() != preset.content():
            out[preset.id] = max(top + 1, preset.version)
        else:
            out[preset.id] = max(old.version, preset.version)
    return out


def _check_codes(presets: Iterable[Preset], stored: dict[int, Preset]) -> None:
    """Refuse to change the code of an existing id, or to give an id a code another id owns."""
    owner = {p.code: p.id for p in stored.values()}
    for preset in presets:
        old = stored.get(preset.id)
        if old is not None and old.code != preset.code:
            raise PresetFileError(
                f"preset id {preset.id}: code is immutable (stored {old.code}, file {preset.code})"
            )
        other = owner.get(preset.code)
        if other is not None and other != preset.id:
            raise PresetFileError(
                f"preset id {preset.id}: code {preset.code} already belongs to preset id {other}"
            )


async def upsert_presets(
    engine: AsyncEngine,
    presets: Sequence[Preset],
    provider: EmbeddingProvider,
    *,
    retire_missing: bool = True,
    reembed: bool = False,
    retries: RetryPolicy | None = None,
    budget: float | None = None,
) -> PresetLoadReport:
    """Embed and upsert ``presets`` for ``provider.profile`` idempotently (``pinlog presets load``).

    ``retries`` / ``budget``: the embedding call's attempts and the seconds its throttle waits
    must end within (:func:`embed_presets`).

    * ``ai.keyword_preset``: new ids inserted; changed rows updated (a retired id present again
      is re-activated); the code of an existing id is immutable.
    * ``ai.keyword_preset_embedding``: a preset is embedded (one provider call, outside any
      transaction) only when it is new, its embedding text changed, or it has no vector for
      this profile yet — or always with ``reembed=True`` (after a strategy change). When the
      text changed, vectors of other profiles are deleted (they describe the old text).
    * ``retire_missing``: active presets absent from ``presets`` become ``is_active=false``
      (never deleted: SPEC §2.2).
    * versions: computed by :func:`versions_for` — a preset whose content changed gets a new
      list revision without anybody editing ``version:`` (SPEC §8).
    A second load of the same list writes nothing (``report.changed is False``).

    Raises:
        PresetFileError: empty list, duplicate ids/codes, or a code change of an existing id
            (nothing is written).
        PermanentModelError: wrong vector length from the provider (SPEC §9; nothing written).
        TransientModelError: from the provider.
    """
    presets = list(presets)
    if not presets:
        raise PresetFileError("no presets to load")
    if len({p.id for p in presets}) != len(presets) or len({p.code for p in presets}) != len(presets):
        raise PresetFileError("duplicate preset id or code in the list")
    profile = provider.profile
    async with engine.connect() as conn:
        stored = {row.id: _row_preset(row) for row in await conn.execute(q("all_presets"))}
        have_vector = {row.preset_id for row in
                       await conn.execute(q("embedded_preset_ids"), {"profile": profile})}
    _check_codes(presets, stored)

    def text_changed(p: Preset) -> bool:
        old = stored.get(p.id)
        return old is None or old.embedding_text() != p.embedding_text()

    to_embed = [p for p in presets if reembed or p.id not in have_vector or text_changed(p)]
    vectors = (await embed_presets(to_embed, provider, retries=retries, budget=budget)
               if to_embed else None)

    report = PresetLoadReport(profile=profile)
    upsert_vector = q("upsert_preset_embedding").bindparams(bindparam("embedding", type_=VECTOR))
    async with engine.begin() as conn:
        await conn.execute(q("lock_preset_load"))
        # Re-check under the lock: another load may have run while we were embedding.
        stored_now = {row.id: _row_preset(row) for row in await conn.execute(q("all_presets"))}
        _check_codes(presets, stored_now)
        versions = versions_for(presets, stored_now)
        report.version = max(versions.values())
        for preset in presets:
            result = (await conn.execute(q("upsert_preset"), {
                "id": preset.id, "code": preset.code, "display_name": preset.display_name,
                "category": preset.category, "description": preset.description,
                "examples": list(preset.examples), "visibility": preset.visibility,
                "version": versions[preset.id], "cues": list(preset.cues),
            })).first()
            if result is None:
                report.unchanged.append(preset.id)
            elif result.inserted:
                report.inserted.append(preset.id)
            else:
                report.updated.append(preset.id)
        for preset, vector in zip(to_embed, vectors if vectors is not None else [], strict=True):
            if text_changed(preset) and preset.id in stored:
                await conn.execute(q("delete_other_profile_embeddings"),
                                   {"preset_id": preset.id, "profile": profile})
            await conn.execute(upsert_vector, {"preset_id": preset.id, "profile": profile,
                                               "embedding": vector})
            report.embedded.append(preset.id)
        if retire_missing:
            retired = await conn.execute(q("retire_missing_presets"),
                                         {"ids": [p.id for p in presets]})
            report.retired = sorted(row.id for row in retired)
    log.info("presets loaded: %s", report.summary())
    return report


async def load_presets(engine: AsyncEngine, presets: Sequence[Preset],
                       embedding: EmbeddingProviderConfig, batching: BatchConfig,
                       retries: RetryPolicy, *, retire_missing: bool = True,
                       reembed: bool = False,
                       provider: EmbeddingProvider | None = None) -> PresetLoadReport:
    """``pinlog presets load`` (and the demo): :func:`upsert_presets` with the configured
    provider behind the same micro-batcher every embedding call goes through — its input cap
    (``PINLOG_EMBEDDING_MAX_INPUTS``, lowered when the server refuses too many: TEI's 32,
    Azure's 16), adaptive concurrency and per-call timeouts — and the SPEC §6 retries, waiting
    out a throttle within ``retries.budget(PINLOG_EMBEDDING_TIMEOUT)``.

    Args:
        embedding: the provider's config (:class:`pinlog.ai.providers.EmbeddingProviderConfig`).
        batching: the micro-batcher's bounds (:class:`pinlog.ai.providers.BatchConfig`).
        provider: a provider to use instead of ``embedding.build()`` (not closed here).

    Raises:
        ValueError: incomplete provider settings (``embedding.build``).
        (and what :func:`upsert_presets` raises)
    """
    from pinlog.ai.providers import build_batched_provider

    batched = build_batched_provider(embedding, batching, provider)
    try:
        return await upsert_presets(engine, presets, batched, retire_missing=retire_missing,
                                    reembed=reembed, retries=retries,
                                    budget=retries.budget(batching.timeout))
    finally:
        await batched.aclose(close_provider=provider is None)


async def load_snapshot(conn: AsyncConnection, profile: str) -> PresetSnapshot:
    """The candidate pool for ``profile`` (SPEC §5.2 step 3, §8).

    Only active, non-BLOCKED presets (SPEC §11 #15) that have a vector of exactly ``profile``.

    Returns:
        :class:`PresetSnapshot` with ``matrix`` ``(n, dim)`` float32, rows L2-normalised, in
        preset-id order; ``version`` = max preset version (0 when empty). An empty snapshot
        has a ``(0, 0)`` matrix.

    Raises:
        PermanentModelError: stored vectors of this profile disagree in length.
    """
    stmt = q("snapshot_presets").columns(embedding=VECTOR())
    rows = (await conn.execute(stmt, {"profile": profile})).all()
    if not rows:
        return PresetSnapshot(profile=profile, presets=(),
                              matrix=np.zeros((0, 0), dtype=np.float32), version=0)
    lengths = {len(row.embedding) for row in rows}
    if len(lengths) != 1:
        raise PermanentModelError(
            f"preset vectors of profile {profile} have different lengths {sorted(lengths)}"
        )
    matrix = _normalise_rows(np.vstack([np.asarray(row.embedding, dtype=np.float32)
                                        for row in rows]))
    presets = tuple(_row_preset(row) for row in rows)
    return PresetSnapshot(profile=profile, presets=presets, matrix=matrix,
                          version=max(p.version for p in presets))


async def preset_overview(engine: AsyncEngine, profile: str) -> list[Any]:
    """Every preset (``pinlog presets list``) in id order: rows with ``id``, ``code``,
    ``display_name``, ``category``, ``visibility``, ``is_active``, ``version`` and ``embedded``
    (a vector of ``profile`` is stored).

    Raises:
        sqlalchemy.exc.ProgrammingError: the ai tables are missing (not migrated).
    """
    async with engine.connect() as conn:
        return list((await conn.execute(q("preset_overview"), {"profile": profile})).all())
