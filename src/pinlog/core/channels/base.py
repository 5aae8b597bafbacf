"""The types every search channel of core shares (:mod:`pinlog.core.channels`, SPEC §10)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Protocol

from sqlalchemy.ext.asyncio import AsyncEngine

from pinlog.contracts import SearchResponse
from pinlog.relevance import ChannelEvidence, Cosines


@dataclass(frozen=True)
class RelevanceRule:
    """Parameters of the channels and the fusion.

    Attributes:
        min_coverage: lexical evidence threshold — share (0..1] of the query's distinct
            lexical terms found in the record's notes and place (``PINLOG_SEARCH_TEXT_MIN_COVERAGE``).
        rrf_k: the reciprocal-rank-fusion constant (``PINLOG_SEARCH_RRF_K``); larger flattens
            the rank differences.
    """

    min_coverage: float = 0.35
    rrf_k: int = 60


@dataclass(frozen=True)
class SearchQuery:
    """One search as the channels see it: the member and their own query (1..2000 characters;
    never a rewrite: the optional LLM rewrite happens on the ai side, for its embedding only)."""

    member_id: int
    text: str


class Found(Protocol):
    """What one channel found for one query, before the ai side answered."""

    def to_score(self) -> Sequence[int]:
        """Record ids whose contexts the ai side must score (``recordIds``), most wanted first."""
        ...

    def evidence(self, response: SearchResponse, cosines: Cosines) -> ChannelEvidence:
        """The channel's evidence, given the ai side's answer and every scored context's cosine
        (:func:`scored_contexts`)."""
        ...


class Channel(ABC):
    """One evidence source of core's search; built per search with the rule in force.

    Attributes:
        names: the ``matchedBy`` values this channel may report, in order (SPEC §10).
    """

    names: ClassVar[tuple[str, ...]]

    def __init__(self, rule: RelevanceRule) -> None:
        self.rule = rule

    @abstractmethod
    async def find(self, engine: AsyncEngine, query: SearchQuery) -> Found:
        """Read what this channel needs for ``query`` (the member's own rows only)."""
