"""core's search channels (SPEC §10): the registry of the channels core runs.

The channels' rules are the shared kernel's (:mod:`pinlog.channels`: the vector channel's
evidence from the ai side's answer, the lexical channel's coverage and evidence, the variant
table, the flow and the decision), so core's ``POST /v1/search`` and the ai side's
``POST /internal/v1/search`` decide the same way. core brings the data: its lexical channel
(:class:`pinlog.core.channels.lexical.LexicalChannel`) reads the member's own notes and saved
places from ``core.*``.

:data:`CHANNELS` is in ``matchedBy`` order and from the most general evidence to the most
specific (the last vouching channel's context is shown). Adding a channel: one module here and
one entry in :data:`CHANNELS` (docs/ARCHITECTURE.md, "Add a search channel").
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.ext.asyncio import AsyncEngine

from pinlog.channels import Channel, Found, RelevanceRule, SearchQuery, decide, records_to_score, scored_contexts
from pinlog.channels import find_all as find_all_channels
from pinlog.channels.vector import VectorChannel
from pinlog.core.channels.lexical import LexicalChannel

__all__ = ["CHANNELS", "MATCHED_BY", "Channel", "Found", "RelevanceRule", "SearchQuery", "build",
           "decide", "find_all", "records_to_score", "scored_contexts"]

#: The registry, in ``matchedBy`` order, most general evidence first.
CHANNELS: tuple[type[Channel], ...] = (VectorChannel, LexicalChannel)

#: Every ``matchedBy`` value, in order (the public API's description lists them).
MATCHED_BY: tuple[str, ...] = tuple(dict.fromkeys(n for c in CHANNELS for n in c.names))


def build(engine: AsyncEngine, rule: RelevanceRule,
          channels: Sequence[type[Channel]] = CHANNELS) -> list[Channel]:
    """The channels of one search, bound to core's engine and the rule in force."""
    return [channel(rule, engine) for channel in channels]


async def find_all(engine: AsyncEngine, query: SearchQuery, rule: RelevanceRule,
                   channels: Sequence[type[Channel]] = CHANNELS) -> list[Found]:
    """Each channel's findings for ``query``, in channel order."""
    return await find_all_channels(build(engine, rule, channels), query)
