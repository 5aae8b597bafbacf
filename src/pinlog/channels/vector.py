"""The vector channel (SPEC §10): the meaning match, ``matchedBy`` ``vector``.

The ai side embeds the query and vouches only for records whose best context passes the
profile's test — the per-query calibrated strength (``pinlog.ai.search``: the cosine against
the query's similarity to a fixed background set of notes in the note's language) at or above
the profile's ``search_strength``, or the cosine floors of a profile without calibration; they
are its ``results``. This channel ranks every searchable record — those and the ones other
channels had scored — by its strength (else its best cosine), vouches for the ai side's
results, offers its strength against the other channels' ``doubt`` and would show the
context the ai side matched. It reads nothing before the ai side answers.
"""

from __future__ import annotations

from collections.abc import Sequence

from pinlog.channels.base import Channel, SearchQuery
from pinlog.contracts import SearchResponse
from pinlog.relevance import Cosines, Evidence

VECTOR = "vector"


class VectorFound:
    """Nothing to read before the ai side answers; the evidence comes from its answer."""

    def to_score(self) -> Sequence[int]:
        return ()

    def knows(self, record_id: int) -> bool:
        return False

    def evidence(self, response: SearchResponse, cosines: Cosines) -> dict[int, Evidence]:
        """Every scored record ranked by its strength (best over its scored contexts; its best
        cosine when the answer has none); vouched (with the ai side's context) when the ai side
        returned it in ``results``."""
        vouched = {hit.record_id: hit.context_id for hit in response.results}
        strength: dict[int, float] = {}
        for hit in (*response.scored, *response.results):
            if hit.score is not None:
                strength[hit.record_id] = max(hit.score, strength.get(hit.record_id, hit.score))
        out = {}
        for record_id, scored in cosines.items():
            if not scored:
                continue
            s = strength.get(record_id)
            out[record_id] = Evidence(max(scored.values()) if s is None else s, record_id in vouched,
                                      (VECTOR,), vouched.get(record_id), strength=s)
        return out


class VectorChannel(Channel):
    names = (VECTOR,)

    async def find(self, query: SearchQuery) -> VectorFound:
        return VectorFound()
