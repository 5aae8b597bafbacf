"""core's lexical channel (SPEC §10): the member's own words in ``core.*``, ``matchedBy``
``text`` and ``place``.

core owns the text, so core matches the query against the terms of the member's active notes
and of their records' saved places (name and address; statement ``lexical_matches`` of
``core/search.sql``: the member's rows only, the rows with most search terms first, bounded).
The rules — what the query asks for, coverage, the evidence — are the shared kernel's
(:mod:`pinlog.channels.lexical`), the same the ai side applies to its own lexical evidence.
"""

from __future__ import annotations

from pinlog.channels.lexical import MAX_MATCHED_ROWS, LexicalMatch, LexicalQuery, matches_from_rows, tsquery
from pinlog.channels.lexical import LexicalChannel as SharedLexicalChannel
from pinlog.db.engine import autocommit
from pinlog.db.sql import Queries

queries = Queries("pinlog.core", "search.sql")


def lexical_params(member_id: int, query: LexicalQuery) -> dict[str, object]:
    """The parameters of ``lexical_matches`` for ``query``'s search terms: the terms, their
    ``tsquery``, the same terms keyed by the member as ``core.member_terms`` keys the rows
    (``'<member id> <term>'``, migration ``0012_member_terms_index``) and the row bound."""
    terms = list(query.search_terms)
    return {"member_id": member_id, "terms": terms, "tsquery": tsquery(query),
            "member_terms": [f"{member_id} {term}" for term in terms],
            "max_rows": MAX_MATCHED_ROWS}


class LexicalChannel(SharedLexicalChannel):
    """The lexical channel over core's notes and places."""

    async def matches(self, member_id: int, query: LexicalQuery) -> dict[int, LexicalMatch]:
        """record id → the search terms found in each of the member's active notes and in its
        active records' places (``core/search.sql`` → ``lexical_matches``)."""
        assert self.engine is not None
        if not query.search_terms:
            return {}
        async with autocommit(self.engine).connect() as conn:  # one read (issue 28)
            rows = (await conn.execute(queries("lexical_matches"),
                                       lexical_params(member_id, query))).all()
        return matches_from_rows(rows, query)
