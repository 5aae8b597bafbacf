"""The types every search channel shares (SPEC §10), whichever component runs it."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Protocol

from pinlog.contracts import SearchResponse
from pinlog.relevance import ChannelEvidence, Cosines

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

    from pinlog.settings import Settings


@dataclass(frozen=True)
class RelevanceRule:
    """Parameters of the channels and the fusion — one value for core's search and the ai
    side's ``/internal/v1/search`` (the same decision, SPEC §10; built by both components from
    the same settings and profile calibration with :meth:`from_settings`).

    Attributes:
        min_coverage: the lexical channel vouches when a record covers at least this share
            (0..1] of the query's content words (``PINLOG_SEARCH_TEXT_MIN_COVERAGE``).
        doubt_coverage: below this share (and above 0) it doubts the record: another channel's
            vouch needs strength ``doubt_strength`` (``PINLOG_SEARCH_TEXT_DOUBT_COVERAGE``).
        doubt_strength: the vector channel's calibrated strength a doubted record needs (per
            profile, ``PINLOG_SEARCH_DOUBT_STRENGTH``; ``None``: the profile has no calibrated
            strength, so no doubt).
        rrf_k: the reciprocal-rank-fusion constant (``PINLOG_SEARCH_RRF_K``); larger flattens
            the rank differences.
    """

    min_coverage: float = 0.63
    doubt_coverage: float = 0.7
    doubt_strength: float | None = None
    rrf_k: int = 60

    @classmethod
    def from_settings(cls, settings: Settings, *, doubt_strength: float | None) -> RelevanceRule:
        """The rule from the settings and the profile's calibrated doubt strength (the ai
        side's ``Calibration``, handed over as a value)."""
        return cls(min_coverage=settings.search_text_min_coverage,
                   doubt_coverage=settings.search_text_doubt_coverage,
                   doubt_strength=doubt_strength, rrf_k=settings.search_rrf_k)


@dataclass(frozen=True)
class SearchQuery:
    """One search as the channels see it: the member and their own query (1..2000 characters;
    never a rewrite: the optional LLM rewrite happens on the ai side, for its embedding only)."""

    member_id: int
    text: str


class Found(Protocol):
    """What one channel found for one query, before the vector channel's answer."""

    def to_score(self) -> Sequence[int]:
        """Record ids whose contexts the ai side must score (``recordIds``), most wanted first."""
        ...

    def knows(self, record_id: int) -> bool:
        """Whether the channel has something to say about the record (then, if another channel
        vouches for it, every context of it is scored)."""
        ...

    def evidence(self, response: SearchResponse, cosines: Cosines) -> ChannelEvidence:
        """The channel's evidence, given the ai side's answer and every scored context's cosine
        (:func:`pinlog.channels.flow.scored_contexts`)."""
        ...


class Channel(ABC):
    """One evidence source of a search; built per search with the rule in force and the
    engine of the component that runs it (its rows only).

    Attributes:
        names: the ``matchedBy`` values this channel may report, in order (SPEC §10).
    """

    names: ClassVar[tuple[str, ...]]

    def __init__(self, rule: RelevanceRule, engine: AsyncEngine | None = None) -> None:
        self.rule = rule
        self.engine = engine

    @abstractmethod
    async def find(self, query: SearchQuery) -> Found:
        """Read what this channel needs for ``query`` (the member's own rows only)."""
