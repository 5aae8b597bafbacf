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
from typing import Any, Literal

import numpy as np
import yaml
from pgvector.sqlalchemy import VECTOR
from sqlalchemy import bindparam
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from pinlog.ai.errors import PermanentModelError
from pinlog.ai.ports import EmbeddingProvider, Preset, PresetSnapshot
from pinlog.ai.vectors import check_embeddings
from pinlog.db.sql import Queries
from pinlog.errors import PinlogError
from pinlog.text import normalize

log = logging.getLogger(__name__)
q = Queries("pinlog.ai", "presets.sql")

#: The reference's four categories (SPEC §8). A preset file may define more (the reference
#: is moving to seven): any UPPER_SNAKE_CASE name is a category; the judge treats all alike.
CATEGORIES = ("COMPANION", "ACTIVITY", "ATMOSPHERE", "SITUATION")
MAX_CATEGORY_CHARS = 40
VISIBILITIES = ("PUBLIC", "PRIVATE_ONLY", "BLOCKED")
MIN_EXAMPLES, MAX_EXAMPLES = 2, 5
#: most cues per preset, longest cue (characters)
MAX_CUES, MAX_CUE_CHARS = 100, 40
_CODE = re.compile(r"^[A-Z][A-Z0-9_]*$")
_ENTRY_KEYS = {"id", "code", "display_name", "category", "description", "examples",
               "visibility", "version", "cues"}

#: How a preset becomes one vector:
#: ``"single"`` — one passage: display name, description and examples joined by newlines
#: (``Preset.embedding_text()``);
#: ``"mean"`` — the L2-normalised mean of several passages (``"name: description"`` and one
#: per example).
#: Measured on keyword_samples.jsonl with both preset files (bench/calibrate_keywords.py);
#: see the numbers next to the defaults in ``pinlog.ai.calibration``.
PRESET_EMBEDDING_STRATEGY: Literal["single", "mean"] = "mean"


class PresetFileError(PinlogError, ValueError):
    """A preset file (or preset list) is invalid; the message names the entry id and field."""


def default_preset_path() -> Path:
    """Path of the packaged default preset file (``pinlog/ai/presets_default.yaml``)."""
    return Path(str(resources.files("pinlog.ai").joinpath("presets_default.yaml")))


def _entry_error(index: int, entry: object, message: str) -> PresetFileError:
    ident = entry.get("id") if isinstance(entry, dict) else None
    where = f"preset id {ident}" if ident is not None else f"preset #{index + 1}"
    return PresetFileError(f"{where}: {message}")


def _text(entry: dict[str, Any], key: str, index: int) -> str:
    value = entry.get(key)
    if not isinstance(value, str) or not value.strip():
        raise _entry_error(index, entry, f"{key} must be a non-empty string")
    return " ".join(value.split())


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _cues(entry: dict[str, Any], index: int) -> tuple[str, ...] | None:
    """The entry's ``cues`` (None when the key is absent): a list of 0..MAX_CUES non-empty
    strings of at most MAX_CUE_CHARS characters, whitespace collapsed, duplicates dropped."""
    if "cues" not in entry:
        return None
    value = entry["cues"]
    if value is None:
        value = []
    if not isinstance(value, list) or len(value) > MAX_CUES:
        raise _entry_error(index, entry, f"cues must be a list of at most {MAX_CUES} strings")
    cues: list[str] = []
    for cue in value:
        if not isinstance(cue, str) or not cue.strip() or len(cue) > MAX_CUE_CHARS:
            raise _entry_error(index, entry, "cues must be non-empty strings of at most "
                                             f"{MAX_CUE_CHARS} characters")
        cleaned = " ".join(normalize(cue).split())
        if cleaned not in cues:
            cues.append(cleaned)
    return tuple(cues)


def parse_presets(document: object, *, source: str = "<presets>",
                  cue_fallback: Mapping[str, tuple[str, ...]] | None = None) -> list[Preset]:
    """Validate a parsed preset document and return its presets in file order.

    Accepts ``{presets: [...], version?: int}`` (the shared format; ``version`` is the default
    revision of every entry) or a bare list of entries.

    ``cues`` is optional per entry. An entry *without* the key takes the cues of
    ``cue_fallback[code]`` when given (``load_preset_file`` passes the packaged file's cues:
    codes are stable concepts across preset files), else none; ``cues: []`` means none.

    Raises:
        PresetFileError: not a list of presets; unknown/missing fields; duplicate id or code;
            category not an UPPER_SNAKE_CASE name; visibility outside the
            allowed set; empty description; fewer than 2 or
            more than 5 examples; cues not a list of short non-empty strings. The message
            names the entry id.
    """
    file_version: int = 1
    if isinstance(document, dict):
        unknown = set(document) - {"presets", "version"}
        if unknown:
            raise PresetFileError(f"{source}: unknown top-level keys {sorted(unknown)}")
        if "version" in document:
            file_version = _int(document["version"]) or 0
            if file_version < 1:
                raise PresetFileError(f"{source}: version must be a positive integer")
        entries = document.get("presets")
    else:
        entries = document
    if not isinstance(entries, list) or not entries:
        raise PresetFileError(f"{source}: expected a non-empty list under 'presets'")

    presets: list[Preset] = []
    seen_ids: set[int] = set()
    seen_codes: dict[str, int] = {}
    for index, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise PresetFileError(f"preset #{index + 1}: expected a mapping")
        unknown = set(entry) - _ENTRY_KEYS
        if unknown:
            raise _entry_error(index, entry, f"unknown fields {sorted(unknown)}")
        preset_id = _int(entry.get("id"))
        if preset_id is None or preset_id <= 0:
            raise _entry_error(index, entry, "id must be a positive integer")
        if preset_id in seen_ids:
            raise _entry_error(index, entry, "duplicate id")
        code = _text(entry, "code", index)
        if not _CODE.match(code):
            raise _entry_error(index, entry, f"code {code!r} must be UPPER_SNAKE_CASE")
        if code in seen_codes:
            raise _entry_error(index, entry, f"duplicate code {code} (also id {seen_codes[code]})")
        category = entry.get("category")
        if (not isinstance(category, str) or not _CODE.match(category)
                or len(category) > MAX_CATEGORY_CHARS):
            raise _entry_error(
                index, entry, f"category must be an UPPER_SNAKE_CASE name of at most "
                f"{MAX_CATEGORY_CHARS} characters (e.g. {', '.join(CATEGORIES)})")
        visibility = entry.get("visibility", "PUBLIC")
        if visibility not in VISIBILITIES:
            raise _entry_error(index, entry,
                               f"visibility must be one of {', '.join(VISIBILITIES)}")
        examples = entry.get("examples")
        if not isinstance(examples, list) or not (MIN_EXAMPLES <= len(examples) <= MAX_EXAMPLES):
            raise _entry_error(index, entry,
                               f"examples must be a list of {MIN_EXAMPLES}–{MAX_EXAMPLES} strings")
        if not all(isinstance(e, str) and e.strip() for e in examples):
            raise _entry_error(index, entry, "examples must be non-empty strings")
        version = entry.get("version", file_version)
        if _int(version) is None or version < 1:
            raise _entry_error(index, entry, "version must be a positive integer")
        cues = _cues(entry, index)
        if cues is None:
            cues = tuple((cue_fallback or {}).get(code, ()))
        presets.append(Preset(
            id=preset_id,
            code=code,
            display_name=_text(entry, "display_name", index),
            category=category,
            description=_text(entry, "description", index),
            examples=tuple(" ".join(e.split()) for e in examples),
            visibility=visibility,
            is_active=True,
            version=version,
            cues=cues,
        ))
        seen_ids.add(preset_id)
        seen_codes[code] = preset_id
    return presets


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
    try:
        return parse_presets(document, source=str(path), cue_fallback=fallback)
    except PresetFileError as exc:
        raise PresetFileError(f"{path}: {exc}") from None


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
) -> np.ndarray:
    """Embed ``presets`` (kind ``passage``) in one provider call.

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
    raw = np.asarray(await provider.embed(texts, "passage"), dtype=np.float32)
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
) -> PresetLoadReport:
    """Embed and upsert ``presets`` for ``provider.profile`` idempotently (``pinlog presets load``).

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
    vectors = await embed_presets(to_embed, provider) if to_embed else None

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
