"""The vector channel (SPEC §10): the ai side's meaning match, ``matchedBy`` ``vector``.

The ai side embeds the query and vouches only for records whose best cosine reaches the
embedding profile's calibrated floor for the query's length (``pinlog.ai.search.apply_cuts``);
they are its ``results``. This channel ranks every searchable record — those and the ones other
channels had scored — by its best cosine, vouches for the ai side's results and would show the
context the ai side matched. It reads nothing before the ai side answers.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.ext.asyncio import AsyncEngine

from pinlog.contracts import SearchResponse
from pinlog.core.channels.base import Channel, SearchQuery
from pinlog.relevance import Cosines, Evidence

VECTOR = "vector"


class VectorFound:
    """Nothing to read before the ai side answers; the evidence comes from its answer."""

    def to_score(self) -> Sequence[int]:
        return ()

    def evidence(self, response: SearchResponse, cosines: Cosines) -> dict[int, Evidence]:
        """Every scored record ranked by its best cosine; vouched (with the ai side's context)
        when the ai side returned it in ``results``."""
        vouched = {hit.record_id: hit.context_id for hit in response.results}
        return {record_id: Evidence(max(scored.values()), record_id in vouched, (VECTOR,),
                                    vouched.get(record_id))
                for record_id, scored in cosines.items() if scored}


class VectorChannel(Channel):
    names = (VECTOR,)

    async def find(self, engine: AsyncEngine, query: SearchQuery) -> VectorFound:
        return VectorFound()
