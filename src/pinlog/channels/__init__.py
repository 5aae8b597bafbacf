"""Search channels (SPEC §10), shared kernel: the code both components run for a search, so
core's ``POST /v1/search`` and the ai side's ``POST /internal/v1/search`` make the same decision
(SPEC §10 "The same decision for adopters"; issue 28) while neither imports the other.

- :mod:`pinlog.channels.base`: :class:`RelevanceRule` (one value for both components),
  :class:`SearchQuery`, the :class:`Found` protocol and the :class:`Channel` base class;
- :mod:`pinlog.channels.vector`: the vector channel's evidence from the ai side's answer;
- :mod:`pinlog.channels.lexical`: what a query asks for, coverage, the lexical channel's
  evidence, and :class:`LexicalChannel`, whose ``matches`` each component implements over
  its own rows;
- :mod:`pinlog.channels.variants` (+ ``variants.yaml``): the variant table;
- :mod:`pinlog.channels.flow`: one search — channels and vector search side by side, scoring,
  the decision (:func:`pinlog.relevance.decide`) — and :func:`explain`.

Each component keeps its registry (``pinlog.core.channels.CHANNELS``,
``pinlog.ai.channels.CHANNELS``): the channel classes it runs, in ``matchedBy`` order.
"""

from pinlog.channels.base import Channel, Found, RelevanceRule, SearchQuery
from pinlog.channels.flow import (
    Explanation,
    VectorSearch,
    decide,
    explain,
    find_all,
    labels,
    records_to_score,
    scored_contexts,
    search,
)
from pinlog.channels.lexical import LexicalChannel, LexicalFound, LexicalMatch, LexicalQuery, analyse_query
from pinlog.channels.vector import VECTOR, VectorChannel, VectorFound

__all__ = ["VECTOR", "Channel", "Explanation", "Found", "LexicalChannel", "LexicalFound", "LexicalMatch",
           "LexicalQuery", "RelevanceRule", "SearchQuery", "VectorChannel", "VectorFound", "VectorSearch",
           "analyse_query", "decide", "explain", "find_all", "labels", "records_to_score", "scored_contexts", "search"]
