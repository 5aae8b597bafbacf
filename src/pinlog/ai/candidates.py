"""Candidate search and the mapping of judge answers (SPEC §8).

Candidates are computed in memory: cosine between the context vector and every row of the
preset snapshot (both L2-normalised, so cosine = dot product), top-K first, then the
per-profile similarity floor. Judges may only pick among candidates; :func:`map_picks` applies
the SPEC §8 mapping rules to whatever a judge answered.

Each candidate also carries a per-note calibrated ``score`` (:func:`calibrated_scores`) for the
``similarity`` judge: e5 cosines are compressed and note-dependent (an unrelated note still
scores 0.90–0.94 against every preset), so an absolute cosine threshold cannot tell a clear
match in a long note from noise in a short one.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np

from pinlog import metrics
from pinlog.ai.cues import cue_hits
from pinlog.ai.errors import PermanentModelError
from pinlog.ai.ports import Candidate, Pick, PresetSnapshot


def preset_hubness(matrix: np.ndarray) -> np.ndarray:
    """Mean cosine of each preset to the other presets of the snapshot.

    Args:
        matrix: ``(n, dim)`` float32, rows L2-normalised.

    Returns:
        ``(n,)`` float64; zeros when ``n < 2``. A preset whose text is close to many others
        (a "hub", e.g. a generic food preset) scores high against every note; subtracting this
        removes that bias.
    """
    n = matrix.shape[0]
    if n < 2:
        return np.zeros(n)
    gram = np.asarray(matrix, dtype=np.float64) @ np.asarray(matrix, dtype=np.float64).T
    return (gram.sum(axis=1) - np.diag(gram)) / (n - 1)


def calibrated_scores(sims: np.ndarray, matrix: np.ndarray,
                      hubness: np.ndarray | None = None) -> np.ndarray:
    """Per-note calibrated similarity of every preset (SPEC §8, ``similarity`` judge).

    ``adjusted = cosine − hubness`` (:func:`preset_hubness`), then z-scored over all presets of
    the snapshot for this one note: ``(adjusted − mean) / std``. Unitless and comparable across
    notes and profiles; deterministic (depends only on the note vector and the snapshot).

    Args:
        sims: ``(n,)`` cosines of the note to each preset row.
        matrix: the snapshot's ``(n, dim)`` preset matrix.
        hubness: its :func:`preset_hubness`, when already known (``PresetSnapshot.hubness``).

    Returns:
        ``(n,)`` float64; all zeros when the adjusted scores do not vary (or ``n < 2``).
    """
    hubs = preset_hubness(matrix) if hubness is None else hubness
    adjusted = np.asarray(sims, dtype=np.float64) - hubs
    std = float(adjusted.std())
    if adjusted.shape[0] < 2 or not math.isfinite(std) or std < 1e-9:
        return np.zeros_like(adjusted)
    return (adjusted - adjusted.mean()) / std


def select_candidates(
    vector: np.ndarray,
    snapshot: PresetSnapshot,
    *,
    top_k: int,
    floor: float,
    text: str | None = None,
) -> list[Candidate]:
    """The presets nearest to ``vector`` (SPEC §8), plus the presets whose cues ``text`` states.

    Args:
        vector: the context vector, ``(dim,)`` (normalised here; any scale accepted).
        snapshot: active, non-BLOCKED presets of the context's profile (``matrix`` ``(n, dim)``,
            rows L2-normalised).
        top_k: keep at most this many, best first.
        floor: then drop candidates with cosine similarity below this (per-profile setting).
        text: the note; when given, every preset whose cue the note states
            (:func:`pinlog.ai.cues.cue_hits`) is a candidate too, even outside the
            top-K or below the floor — a long note's cosines sit low against every preset, and
            a note that says "생일" should let the judge consider ANNIVERSARY.

    Returns:
        candidates sorted by similarity descending (ties: lower preset id first), each with
        its :func:`calibrated_scores` ``score`` (computed over the whole snapshot, before
        top-K and floor); may be empty.

    Raises:
        PermanentModelError: ``vector`` length differs from the snapshot's dimension, or it is
            zero / non-finite.
    """
    if len(snapshot) == 0 or top_k <= 0:
        return []
    vec = np.asarray(vector, dtype=np.float32).reshape(-1)
    if vec.shape[0] != snapshot.matrix.shape[1]:
        raise PermanentModelError(
            f"context vector has {vec.shape[0]} dimensions, presets of profile "
            f"{snapshot.profile} have {snapshot.matrix.shape[1]}"
        )
    norm = float(np.linalg.norm(vec))
    if not math.isfinite(norm) or norm == 0.0:
        raise PermanentModelError("context vector is zero or not finite")
    sims = snapshot.matrix @ (vec / norm)
    ranking = np.lexsort((snapshot.ids, -sims))  # similarity desc, then id asc (deterministic)
    scores = calibrated_scores(sims, snapshot.matrix, snapshot.hubness)
    chosen = [int(i) for i in ranking[:top_k] if float(sims[i]) >= floor]
    if text:
        hits = cue_hits(text, [p.cues for p in snapshot.presets])
        extra = {i for i, found in enumerate(hits) if found} - set(chosen)
        if extra:
            every = extra.union(chosen)
            chosen = [int(i) for i in ranking if int(i) in every]
    return [Candidate(preset=snapshot.presets[i], similarity=float(sims[i]),
                      score=round(float(scores[i]), 6))
            for i in chosen]


def _as_int(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value.strip())
    return None


def _as_confidence(value: object) -> float | None:
    """A finite number in [0, 1], else None (no clamping: SPEC §8)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = float(value)
    if not math.isfinite(number) or not 0.0 <= number <= 1.0:
        return None
    return number


def map_picks(
    raw: Iterable[tuple[object, object]],
    candidates: Sequence[Candidate],
) -> tuple[Pick, ...]:
    """Apply the SPEC §8 mapping rules to a judge's raw ``(keyword id, confidence)`` pairs.

    * ids that were not among ``candidates`` are dropped and counted
      (``pinlog_judge_dropped_picks_total{reason="not_candidate"}``);
    * confidences that are not numbers or lie outside 0..1 are dropped, never clamped
      (``reason="bad_confidence"``);
    * duplicates collapse to their maximum confidence.

    Returns:
        picks in first-seen order, unique keyword ids, confidences in [0, 1].
    """
    allowed = {c.preset.id for c in candidates}
    best: dict[int, float] = {}
    for keyword, confidence in raw:
        keyword_id = _as_int(keyword)
        if keyword_id is None or keyword_id not in allowed:
            metrics.JUDGE_DROPPED_PICKS.labels(reason="not_candidate").inc()
            continue
        value = _as_confidence(confidence)
        if value is None:
            metrics.JUDGE_DROPPED_PICKS.labels(reason="bad_confidence").inc()
            continue
        best[keyword_id] = max(value, best.get(keyword_id, value))
    return tuple(Pick(keyword_id=k, confidence=v) for k, v in best.items())
