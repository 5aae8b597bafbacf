"""Candidate search and the mapping of judge answers (SPEC §8).

Candidates are computed in memory: cosine between the context vector and every row of the
preset snapshot (both L2-normalised, so cosine = dot product), top-K first, then the
per-profile similarity floor. Judges may only pick among candidates; :func:`map_picks` applies
the SPEC §8 mapping rules to whatever a judge answered.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np

from pinlog import metrics
from pinlog.ai.errors import PermanentModelError
from pinlog.ai.ports import Candidate, Pick, PresetSnapshot


def select_candidates(
    vector: np.ndarray,
    snapshot: PresetSnapshot,
    *,
    top_k: int,
    floor: float,
) -> list[Candidate]:
    """The presets nearest to ``vector`` (SPEC §8).

    Args:
        vector: the context vector, ``(dim,)`` (normalised here; any scale accepted).
        snapshot: active, non-BLOCKED presets of the context's profile (``matrix`` ``(n, dim)``,
            rows L2-normalised).
        top_k: keep at most this many, best first.
        floor: then drop candidates with cosine similarity below this (per-profile setting).

    Returns:
        candidates sorted by similarity descending (ties: lower preset id first); may be empty.

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
    ids = np.array([p.id for p in snapshot.presets])
    order = np.lexsort((ids, -sims))[:top_k]  # similarity desc, then id asc (deterministic)
    return [Candidate(preset=snapshot.presets[i], similarity=float(sims[i]))
            for i in order if float(sims[i]) >= floor]


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
