"""Personal natural-language search, ai side (SPEC §10).

The whole query is embedded once (``query`` kind, the profile's query prefix; optionally after
an LLM rewrite, :mod:`pinlog.ai.rewrite`), compared by exact cosine against the member's
COMPLETED, not-deleted embeddings of the same profile, one row per record.

**Per-query calibration** (issue 28). A note's cosine to a query is compared with the query's
cosines to a fixed **background** set of unrelated notes (:class:`Background`,
``search_background.yaml``) *in the note's language*: the strength of a context is
``(cosine − μ) / σ`` over the background notes of the language group nearest to the context's
vector (Korean, Latin-script, Japanese, Chinese: each note's group is the background centroid it
is closest to, so nothing about the note's text is needed). Short queries and cross-language
pairs score lower cosines, and so do their background cosines: the strength adapts to each
query instead of one global floor. The vector channel vouches for a record when its best
strength reaches the profile's ``search_strength`` (:class:`SearchCuts`); a profile without a
calibrated strength (``None``) keeps the cosine floors per query length. There is no "keep the
top hit" rule: an off-topic query gets no result.

:func:`search` answers the modes ``vector`` (the records the vector channel vouches for, and
the contexts of ``recordIds`` with their cosine and strength) and ``score`` (only the latter);
mode ``hybrid`` — the ai side's own channels and the shared decision — is
:class:`pinlog.ai.channels.AiSearch`. A filler query (no lexical term: ``ㅎㅎ``, ``?``) answers
nothing without a model call.
"""

from __future__ import annotations

import logging
import re
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

import numpy as np
import yaml
from sqlalchemy import Row
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from pinlog import metrics
from pinlog.ai.calibration import Calibration
from pinlog.ai.candidates import select_candidates
from pinlog.ai.errors import PermanentModelError
from pinlog.ai.ports import EmbeddingProvider
from pinlog.ai.presets import load_snapshot
from pinlog.ai.routing import ProfileSwitched, read_roles
from pinlog.ai.vectors import check_embeddings, to_pgvector
from pinlog.channels.lexical import is_filler
from pinlog.contracts import SearchHit, SearchRequest, SearchResponse
from pinlog.db.sql import Queries
from pinlog.errors import PinlogError

log = logging.getLogger(__name__)
queries = Queries("pinlog.ai", "search.sql")

__all__ = ["NO_CUT", "NO_STRENGTH", "Background", "Calibrated", "ProfileMismatch", "QueryVectors", "SearchCuts",
           "apply_cuts", "background_notes", "is_short_query", "queries", "search", "to_pgvector"]


class ProfileMismatch(PinlogError, ValueError):
    """The request names another embedding profile than the server's (→ 422, SPEC §10)."""

    def __init__(self, requested: str, server: str) -> None:
        super().__init__("embedding profile mismatch")
        self.requested = requested
        self.server = server


@dataclass(frozen=True)
class SearchCuts:
    """Per-profile evidence thresholds of the vector channel (SPEC §10).

    Attributes:
        floor: cosine floor for multi-word queries (``-1``: none).
        short_query_floor: cosine floor for one-word queries (they score lower).
        ratio: keep hits with ``similarity >= ratio × top`` as well (0 keeps every hit of a
            non-negative cosine).
        strength: the calibrated strength a record's best context must reach (per-query
            calibration against the :class:`Background`); ``None``: the profile is not
            calibrated and the floors alone decide.
    """

    floor: float
    short_query_floor: float
    ratio: float
    strength: float | None = None

    @classmethod
    def from_calibration(cls, calibration: Calibration) -> SearchCuts:
        return cls(calibration.search_floor, calibration.search_short_query_floor,
                   calibration.search_ratio, calibration.search_strength)


def is_short_query(query: str) -> bool:
    """One word (whitespace-separated) → the lower floor applies."""
    return len(query.split()) <= 1


def apply_cuts(hits: list[SearchHit], query: str, cuts: SearchCuts) -> list[SearchHit]:
    """The hits the vector channel vouches for: similarity at or above the floor for the query's
    length, at or above ``ratio × top`` and — for a calibrated profile — strength at or above
    ``cuts.strength``. The top hit is cut like any other (SPEC §10: an off-topic query gets
    nothing). Order is preserved; hits are not modified.

    Args:
        hits: ordered best first.
    """
    if not hits:
        return hits
    floor = cuts.short_query_floor if is_short_query(query) else cuts.floor
    top = max(h.similarity for h in hits)
    return [h for h in hits if h.similarity >= floor and h.similarity >= cuts.ratio * top
            and (cuts.strength is None or (h.score is not None and h.score >= cuts.strength))]


# --- the background of the per-query calibration -------------------------------------------------
#: The fewest background notes a language group needs to be one (fewer: its notes join no group).
MIN_GROUP = 8
_KANA = re.compile("[\u3040-\u30ff]")
_HANGUL = re.compile("[\uac00-\ud7a3]")
_HAN = re.compile("[\u3400-\u4dbf\u4e00-\u9fff]")
_LATIN = re.compile("[A-Za-z\u00c0-\u024f]")


#: The most language groups a background set may have: :func:`script_group` has four, and
#: ``ai/search.sql`` ``nearest_group`` compares one centroid per group, four terms.
MAX_GROUPS = 4


def script_group(text: str) -> str:
    """The language group of a background note by its script: ``kana`` (any kana: Japanese),
    else the most frequent of ``hangul``, ``han`` (Chinese) and ``latin``."""
    if _KANA.search(text):
        return "kana"
    counts = {"hangul": len(_HANGUL.findall(text)), "han": len(_HAN.findall(text)),
              "latin": len(_LATIN.findall(text))}
    return max(counts, key=lambda k: counts[k])


@lru_cache(maxsize=1)
def background_notes() -> tuple[str, ...]:
    """The packaged background notes (``pinlog/ai/search_background.yaml``)."""
    text = resources.files("pinlog.ai").joinpath("search_background.yaml").read_text(encoding="utf-8")
    return tuple(yaml.safe_load(text)["notes"])


@dataclass(frozen=True)
class Calibrated:
    """One query's calibration: per language group, the centroid of its background notes and
    the mean/standard deviation of the query's cosines to them (the statements' parameters)."""

    centroids: tuple[str, ...]  # pgvector text literals
    means: tuple[float, ...]
    sds: tuple[float, ...]

    def floor(self, strength: float) -> float:
        """The lowest cosine at which a context of any group can reach ``strength``."""
        return min(m + strength * s for m, s in zip(self.means, self.sds, strict=True))

    def params(self) -> dict[str, Any]:
        return {"centroids": "{" + ",".join(f'"{c}"' for c in self.centroids) + "}",
                "means": list(self.means), "sds": list(self.sds)}


#: The statements' calibration parameters of an uncalibrated search: no group, strength NULL.
UNCALIBRATED: dict[str, Any] = {"centroids": "{}", "means": [], "sds": []}


class Background:
    """The background set embedded under one profile (module docstring).

    Args:
        vectors: ``(n, dim)`` unit vectors of the background notes.
        groups: each note's language group (:func:`script_group`).

    Raises:
        ValueError: no group has enough notes, or more than :data:`MAX_GROUPS` groups do.
    """

    def __init__(self, vectors: np.ndarray, groups: Sequence[str]) -> None:
        matrix = np.asarray(vectors, dtype=np.float32)
        labels = np.asarray(list(groups))
        self.groups: list[str] = []
        members, centroids = [], []
        for group in dict.fromkeys(groups):
            mask = labels == group
            if int(mask.sum()) < MIN_GROUP:
                continue
            centroid = matrix[mask].mean(axis=0)
            self.groups.append(group)
            members.append(matrix[mask])
            centroids.append(to_pgvector(centroid / np.linalg.norm(centroid)))
        if not self.groups:
            raise ValueError("the background set has no language group")
        if len(self.groups) > MAX_GROUPS:
            raise ValueError(f"the background set has {len(self.groups)} language groups; the "
                             f"search statements compare at most {MAX_GROUPS} (ai/search.sql "
                             "nearest_group)")
        self._members = members
        self._centroids = tuple(centroids)

    @classmethod
    async def embed(cls, provider: EmbeddingProvider, notes: Sequence[str] | None = None) -> Background:
        """Embed the background notes (default: the packaged set) as passages, once.

        Raises:
            pinlog.ai.errors.ModelError: the provider failed or answered degenerate vectors.
        """
        texts = list(notes if notes is not None else background_notes())
        vectors = check_embeddings(await provider.embed(texts, "passage"), len(texts), provider.dimension)
        return cls(vectors, [script_group(t) for t in texts])

    def calibrate(self, query_vector: np.ndarray) -> Calibrated:
        """The query's calibration: per group, mean and standard deviation of its cosines to
        the group's background notes (a zero deviation counts as 1e-6)."""
        q = np.asarray(query_vector, dtype=np.float32)
        means, sds = [], []
        for matrix in self._members:
            cosines = matrix @ q
            means.append(float(cosines.mean()))
            sds.append(max(float(cosines.std()), 1e-6))
        return Calibrated(self._centroids, tuple(means), tuple(sds))


#: A query rewrite applied before embedding: text in, text out, never raises.
Rewrite = Callable[[str], Awaitable[str]]


class QueryVectors:
    """The vectors of the latest queries (least recently used out first, at most ``size``),
    so the second request of one search (mode ``score``) does not embed the query again.
    Holds query texts in memory only; never logged."""

    def __init__(self, size: int = 256) -> None:
        self.size = size
        self._vectors: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()

    def clear(self) -> None:
        """Forget every vector (the next request of each query embeds it again)."""
        self._vectors.clear()

    async def get(self, provider: EmbeddingProvider, query: str, rewrite: Rewrite | None) -> np.ndarray:
        """The checked query vector of ``query`` under ``provider``'s profile (embedded on a
        miss, after ``rewrite``).

        Raises:
            pinlog.ai.errors.ModelError: the query could not be embedded or its vector is
                degenerate.
        """
        key = (provider.profile, query)
        vector = self._vectors.get(key)
        if vector is not None:
            self._vectors.move_to_end(key)
            return vector
        vector = await embed_query(provider, query, rewrite)
        self._vectors[key] = vector
        while len(self._vectors) > self.size:
            self._vectors.popitem(last=False)
        return vector


async def embed_query(provider: EmbeddingProvider, query: str, rewrite: Rewrite | None) -> np.ndarray:
    """The query's vector: embedded once (after ``rewrite``), checked.

    Raises:
        pinlog.ai.errors.ModelError: including a degenerate vector (SPEC §9/§10: a zero norm,
            NaN or wrong length is a provider error, → 503, never a query).
    """
    text = await rewrite(query) if rewrite is not None else query
    return check_embeddings(await provider.embed([text], "query"), 1, provider.dimension)[0]


#: How many of the query's nearest presets count for ``keywordMatched`` (a context keeps at
#: most 3 keywords, SPEC §8).
QUERY_PRESETS_TOP_K = 3


async def query_presets(conn: AsyncConnection, vector: np.ndarray, profile: str, *,
                        floor: float, top_k: int = QUERY_PRESETS_TOP_K) -> list[int]:
    """The query's own best presets: ids of its ``top_k`` nearest usable presets of
    ``profile`` at cosine ≥ ``floor`` (the profile's candidate floor) — the keyword stage's
    candidate rule applied to the query vector (SPEC §8). Empty when none are loaded."""
    snapshot = await load_snapshot(conn, profile)
    try:
        chosen = select_candidates(vector, snapshot, top_k=top_k, floor=floor)
    except PermanentModelError:  # a zero query vector: no preset is near it
        return []
    return [c.preset.id for c in chosen]


async def mark_keyword_matched(conn: AsyncConnection, hits: list[SearchHit], user_id: int,
                               preset_ids: list[int]) -> list[SearchHit]:
    """``hits`` with ``keyword_matched`` set: True when the hit's record has a keyword among
    ``preset_ids`` (COMPLETED keyword stage, active context, same member)."""
    if not hits or not preset_ids:
        return hits
    matched = set((await conn.execute(queries("keyword_matched_records"), {
        "user_id": user_id, "record_ids": [h.record_id for h in hits],
        "keyword_ids": preset_ids})).scalars())
    return [h.model_copy(update={"keyword_matched": h.record_id in matched}) for h in hits]


async def search(
    engine: AsyncEngine,
    provider: EmbeddingProvider,
    request: SearchRequest,
    cuts: SearchCuts,
    *,
    apply: bool = True,
    rewrite: Rewrite | None = None,
    keyword_floor: float | None = None,
    accepted_profiles: Collection[str] | None = None,
    background: Background | None = None,
    vectors: QueryVectors | None = None,
) -> SearchResponse:
    """The vector channel's answer to one request (modes ``vector`` and ``score``; a request
    of mode ``hybrid`` gets the ``vector`` answer here). With ``keyword_floor`` (the profile's
    candidate floor) each result's ``keywordMatched`` is set (:func:`query_presets`,
    :func:`mark_keyword_matched`).

    The profile (SPEC §9.1): the query is embedded with ``provider`` (the active profile's, as
    this replica last read the roles); the roles and the vectors are then read in ONE
    REPEATABLE READ snapshot, so the vectors searched are all of the profile the query was
    embedded with, and an activation committed in between is noticed instead of searching an
    empty space (:class:`~pinlog.ai.routing.ProfileSwitched`).

    Args:
        apply: apply the vector-evidence cuts (False: every hit, for calibration/benchmarks).
        rewrite: optional query rewrite before embedding (must fall back to the query itself
            on any failure; :class:`pinlog.ai.rewrite.QueryRewriter` does).
        accepted_profiles: the profiles a request may name (this replica's configured ones,
            SPEC §9.1: a backend keeps naming its profile through a switch); default
            ``provider.profile`` only.
        background: the profile's embedded background set (per-query calibration; ``None``:
            no strength, the cosine floors decide — a profile without ``search_strength``).
        vectors: the recent query vectors (``None``: embed every time).

    Raises:
        ProfileMismatch: ``request.embedding_profile`` is not accepted (checked before any
            model call).
        ProfileSwitched: the database's active profile is not ``provider.profile`` (the caller
            re-reads the roles and searches again).
        pinlog.ai.errors.ModelError: the query could not be embedded, or its vector is
            degenerate (:class:`~pinlog.ai.errors.DegenerateVectorError`).
    """
    if request.embedding_profile not in (accepted_profiles or (provider.profile,)):
        metrics.SEARCH_REQUESTS.labels("profile_mismatch").inc()
        raise ProfileMismatch(request.embedding_profile, provider.profile)
    if is_filler(request.query):  # nothing asked: no model call (issue 27)
        metrics.SEARCH_REQUESTS.labels("ok").inc()
        return SearchResponse(results=[])
    vector = await (vectors.get(provider, request.query, rewrite) if vectors is not None
                    else embed_query(provider, request.query, rewrite))
    calibrated = background.calibrate(vector) if background is not None and cuts.strength is not None else None
    params = {"query_vector": to_pgvector(vector), "user_id": request.user_id,
              "profile": provider.profile, **(calibrated.params() if calibrated else UNCALIBRATED)}
    hits: list[SearchHit] = []
    kept: list[SearchHit] = []
    async with engine.connect() as conn:
        # SPEC §9.1: one snapshot for the roles and the vectors (read-only: never a conflict)
        await conn.execution_options(isolation_level="REPEATABLE READ")
        active = (await read_roles(conn)).active
        if active is not None and active != provider.profile:
            raise ProfileSwitched(active)
        if request.mode != "score":
            # the floor this query's hits must reach (apply_cuts) bounds the statement's work
            floor = cuts.short_query_floor if is_short_query(request.query) else cuts.floor
            strength = cuts.strength if apply and calibrated is not None else NO_STRENGTH
            if calibrated is not None and cuts.strength is not None:
                floor = max(floor, calibrated.floor(cuts.strength))
            if not apply:
                floor = NO_CUT
            rows = (await conn.execute(queries("search_member"), {
                **params, "limit": request.limit, "min_similarity": floor,
                "min_strength": strength})).all()
            hits = [_hit(r) for r in rows]
            kept = apply_cuts(hits, request.query, cuts) if apply else hits
            if keyword_floor is not None and kept:
                presets = await query_presets(conn, vector, provider.profile, floor=keyword_floor)
                kept = await mark_keyword_matched(conn, kept, request.user_id, presets)
        scored_rows = (await conn.execute(queries("score_records"), {
            **params, "record_ids": list(request.record_ids)})).all() if request.record_ids else []
    metrics.SEARCH_REQUESTS.labels("ok").inc()
    log.info("search", extra={"user_id": request.user_id, "count": len(kept),
                              "scored": len(scored_rows)})
    return SearchResponse(results=kept, scored=[_hit(r) for r in scored_rows])


#: ``min_similarity`` that cuts nothing (cosine similarity is at least -1).
NO_CUT = -2.0
#: ``min_strength`` that cuts nothing.
NO_STRENGTH = -1e9


def _hit(row: Row[Any]) -> SearchHit:
    strength = row.strength
    return SearchHit(record_id=row.record_id, context_id=row.context_id,
                     similarity=round(float(row.similarity), 6),
                     score=None if strength is None else round(float(strength), 4))
