"""Ports of the ai side (pgqueuer-style Protocols): embedding providers and judges, plus the
value types that cross them (SPEC §8, §9).

Implementations live in ``pinlog.ai.providers`` and ``pinlog.ai.judges``; tests plug fakes in
at exactly these interfaces.
"""

from __future__ import annotations

import hashlib
import inspect
import json
from collections.abc import Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np

EmbedKind = Literal["passage", "query"]

#: The batch (SPEC §5.4 batch path) an ``embed`` call is made for: an opaque key, None outside a
#: batch (a single job). :class:`pinlog.ai.batch.BatchRunner` sets it while it submits one
#: batch's texts; a micro-batcher (:class:`pinlog.ai.providers.batching.MicroBatcher`) fills a
#: call with single jobs' requests, then with those of its oldest request's batch, before any
#: other batch's, so a batch of n texts is answered — and saved by the batch path — in
#: ⌈n / cap⌉ parts instead of a fragment per call of every batch queued beside it (issue 25).
#: A hint only: a provider may ignore it, and nothing but the grouping of texts depends on it.
EMBED_GROUP: ContextVar[object | None] = ContextVar("pinlog_embed_group", default=None)

#: A preset category: the reference's COMPANION, ACTIVITY, ATMOSPHERE, SITUATION or any other
#: UPPER_SNAKE_CASE name a preset file defines (SPEC §8).
Category = str
Visibility = Literal["PUBLIC", "PRIVATE_ONLY", "BLOCKED"]


async def close_resource(resource: Any) -> None:
    """Release a provider or judge: await ``aclose()`` if it has one, else call ``close()``
    (awaited when it returns an awaitable); a no-op when it has neither.

    Neither method is part of the :class:`EmbeddingProvider` / :class:`Judge` Protocols, so
    every owner of a built provider or judge closes it through this one function.
    Exceptions raised by the close method propagate.
    """
    for name in ("aclose", "close"):
        closer = getattr(resource, name, None)
        if closer is not None:
            result = closer()
            if inspect.isawaitable(result):
                await result
            return


@runtime_checkable
class EmbeddingProvider(Protocol):
    """Turns texts into vectors of one embedding profile (SPEC §9).

    Attributes:
        profile: the profile string this provider produces (SPEC §9; each provider config declares its default).
        dimension: vector length every returned row must have.

    Optional attribute ``on_this_cpu`` (read with ``getattr``, default ``False``): ``True`` when
    the model computes on this process's CPU (the bundled model, sentence-transformers) — work
    run beside one of its calls competes with it for the cores, so a search embeds its query
    before the channels read (:meth:`pinlog.channels.flow.VectorSearch.prepare`; issue 28).
    """

    profile: str
    dimension: int

    async def embed(self, texts: Sequence[str], kind: EmbedKind) -> np.ndarray:
        """Embed ``texts`` (``passage`` for stored notes, ``query`` for searches).

        Returns:
            ``(len(texts), dimension)`` float32 array.

        Raises:
            pinlog.ai.errors.TransientModelError: worth retrying (timeout, 429, 5xx …).
            pinlog.ai.errors.PermanentModelError: never worth retrying (4xx, bad shape …).
        """
        ...


@dataclass(frozen=True)
class Preset:
    """One row of ``ai.keyword_preset`` (SPEC §2.2, §8)."""

    id: int
    code: str
    display_name: str
    category: Category
    description: str
    examples: tuple[str, ...]
    visibility: Visibility = "PUBLIC"
    is_active: bool = True
    version: int = 1
    #: words/stems that state the preset outright (lexical evidence of the ``similarity``
    #: judge, shown to the ``llm`` judge); Korean cues are matched by lemma (SPEC §8).
    cues: tuple[str, ...] = ()

    def embedding_text(self) -> str:
        """Text embedded for this preset: display name, description and examples (SPEC §8)."""
        return "\n".join([self.display_name, self.description, *self.examples])

    def content(self) -> tuple[object, ...]:
        """Everything a judge may use of this preset: code, name, category, description,
        examples, cues, visibility. A change of any of it is a new preset version (SPEC §8)."""
        return (self.code, self.display_name, self.category, self.description,
                tuple(self.examples), tuple(self.cues), self.visibility)

    def content_hash(self) -> str:
        """sha256 (hex) of :meth:`content`, canonical JSON; stable across processes."""
        blob = json.dumps(self.content(), ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class PresetSnapshot:
    """The usable presets of one profile, taken once per keyword stage (SPEC §5.2 step 3).

    Attributes:
        profile: embedding profile of ``matrix``.
        presets: active, non-BLOCKED presets that have an embedding for ``profile``.
        matrix: ``(len(presets), dim)`` float32, rows L2-normalised, same order as ``presets``.
        version: preset list revision (max ``version``), stored as ``preset_version``.
    """

    profile: str
    presets: tuple[Preset, ...]
    matrix: np.ndarray
    version: int

    def __len__(self) -> int:
        return len(self.presets)

    @cached_property
    def ids(self) -> np.ndarray:
        """``(n,)`` the presets' ids, in ``presets`` order (computed once per snapshot)."""
        return np.array([p.id for p in self.presets])

    @cached_property
    def hubness(self) -> np.ndarray:
        """``(n,)`` :func:`pinlog.ai.candidates.preset_hubness` of ``matrix``, computed once per
        snapshot (the pipeline reuses a snapshot while the presets are unchanged)."""
        from pinlog.ai.candidates import preset_hubness

        return preset_hubness(self.matrix)


@dataclass(frozen=True)
class Candidate:
    """A preset near the context vector: cosine ``similarity`` in [-1, 1] (SPEC §8).

    ``score`` is the per-note calibrated similarity set by
    :func:`pinlog.ai.candidates.select_candidates` (a z-score over all presets of the
    snapshot, unitless; see :func:`pinlog.ai.candidates.calibrated_scores`); ``None`` when the
    candidate was built without it.
    """

    preset: Preset
    similarity: float
    score: float | None = None


@dataclass(frozen=True)
class Pick:
    """One keyword chosen by a judge; ``confidence`` in [0, 1] or None."""

    keyword_id: int
    confidence: float | None


@dataclass(frozen=True)
class JudgeAnswer:
    """What a judge answered, already mapped by the SPEC §8 rules when it leaves ``judge()``.

    Attributes:
        picks: 0..n picks among the candidates, unique ids.
        unmatched_concepts: concepts in the text no candidate covered (analysis only).
        model_profile: the judge/model that actually answered (e.g. ``similarity-v1`` or
            ``llm:gpt-4o-mini``), stored in ``ai.context_keyword_analysis.model_profile``.
        evidence: analysis only (never shown to members): the evidence for each pick and
            near miss (SPEC §8 "the analysis row records the evidence for each pick").
    """

    picks: tuple[Pick, ...]
    unmatched_concepts: tuple[str, ...] = field(default_factory=tuple)
    model_profile: str = ""
    #: why: one JSON-able mapping per pick and per near miss (``code``, ``picked``, ``score``,
    #: ``cues`` hit, ``reason``), stored in ``ai.context_keyword_analysis.evidence``.
    evidence: tuple[dict[str, Any], ...] = field(default_factory=tuple)


@runtime_checkable
class Judge(Protocol):
    """Chooses keywords among candidates only (SPEC §8)."""

    async def judge(self, text: str, candidates: Sequence[Candidate]) -> JudgeAnswer:
        """Pick 0..3 typical keywords for ``text`` among ``candidates`` (never empty here).

        Raises:
            pinlog.ai.errors.TransientModelError / PermanentModelError.
        """
        ...
