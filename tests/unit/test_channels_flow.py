"""One search in the shared kernel (SPEC §10, issue 28: ``pinlog.channels.flow``): the channels
read while the vector search embeds (side by side, not one after the other), the records the
channels name are scored in a second request, a filler query asks nothing, and ``explain``
shows each channel's evidence with the same decisions. Fake channels and a fake vector search,
no database."""

from __future__ import annotations

import asyncio

import pytest

from pinlog.channels import Channel, RelevanceRule, SearchQuery, explain, search
from pinlog.channels.vector import VectorChannel
from pinlog.contracts import SearchHit, SearchResponse
from pinlog.relevance import Evidence

RULE = RelevanceRule()


def hit(record_id, context_id, similarity, score=None):
    return SearchHit(record_id=record_id, context_id=context_id, similarity=similarity, score=score)


class Words(Channel):
    """A reading channel: waits until the vector search has started, then names record 7."""

    names = ("words",)
    started: asyncio.Event

    async def find(self, query):
        await asyncio.wait_for(self.started.wait(), 5)  # would time out if run one after the other
        return WordsFound()


class WordsFound:
    def to_score(self):
        return [7]

    def knows(self, record_id):
        return record_id in (7, 1)

    def evidence(self, response, cosines):
        return {7: Evidence(1.0, True, Words.names, 71)}


class FakeVector:
    def __init__(self, started):
        self.started, self.calls = started, []

    async def prepare(self, query):  # a remote model: nothing to do first
        pass

    async def candidates(self, query, limit):
        self.calls.append(("candidates", query.text, limit))
        self.started.set()
        return SearchResponse(results=[hit(1, 10, 0.9, 4.0)])

    async def score(self, query, record_ids):
        self.calls.append(("score", query.text, tuple(record_ids)))
        return SearchResponse(results=[], scored=[hit(7, 71, 0.5, 1.0), hit(7, 72, 0.6, 1.5),
                                                  hit(1, 10, 0.9, 4.0)])


def channels(started):
    words = Words(RULE)
    words.started = started
    return [VectorChannel(RULE), words]


async def test_channels_read_beside_the_vector_search_then_the_named_records_are_scored():
    started = asyncio.Event()
    vector = FakeVector(started)
    out = await search(SearchQuery(1, "조용한 카페"), channels(started), vector, RULE, 20)
    # 7 is asked by the channel; 1 is a vector result the channel knows (scored whole)
    assert vector.calls == [("candidates", "조용한 카페", 20), ("score", "조용한 카페", (7, 1))]
    # RRF: 7 is ranked by both channels (words 1st, vector 2nd), 1 by the vector channel only
    assert [(d.record_id, d.context_id, d.matched_by) for d in out] == [
        (7, 71, ("words",)), (1, 10, ("vector",))]


@pytest.mark.parametrize("query", ["ㅎㅎ", "?", "..."])
async def test_a_filler_query_asks_nothing(query):
    started = asyncio.Event()
    vector = FakeVector(started)
    assert await search(SearchQuery(1, query), channels(started), vector, RULE, 20) == []
    assert vector.calls == []
    nothing = await explain(SearchQuery(1, query), channels(started), vector, RULE, 20)
    assert (nothing.decisions, nothing.records, vector.calls) == ([], [], [])
    assert nothing.channels == ("vector", "words")


async def test_explain_shows_each_channels_evidence_and_the_same_decisions():
    started = asyncio.Event()
    shown = await search(SearchQuery(1, "카페"), channels(started), FakeVector(started), RULE, 20)
    started = asyncio.Event()
    why = await explain(SearchQuery(1, "카페"), channels(started), FakeVector(started), RULE, 20)
    assert why.decisions == shown  # the decision itself (pinlog.relevance.explain runs decide)
    assert why.channels == ("vector", "words")
    by_id = {r.record_id: r for r in why.records}
    vector_1, _ = by_id[1].evidence
    vector_7, words_7 = by_id[7].evidence
    assert vector_1.strength == 4.0 and vector_7.vouched is False and words_7.context_id == 71
    assert by_id[7].counted == (False, True) and by_id[7].decision.similarity == 0.5
    assert [r.position for r in why.records if r.decision] == [1, 2]
    assert why.lexical is None  # no lexical channel among these


async def test_a_failing_channel_cancels_the_vector_search_and_raises_as_it_is():
    class Broken(Channel):
        names = ("broken",)

        async def find(self, query):
            raise LookupError("database gone")

    class Slow:
        cancelled = False

        async def prepare(self, query):
            pass

        async def candidates(self, query, limit):
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                Slow.cancelled = True
                raise

    with pytest.raises(LookupError, match="database gone"):
        await search(SearchQuery(1, "카페"), [Broken(RULE)], Slow(), RULE, 20)
    assert Slow.cancelled


class DoubtSeen(Channel):
    """Records the doubt strength of the answer its evidence is given."""

    names = ("words",)
    seen: list

    async def find(self, query):
        return DoubtSeenFound(self.seen)


class DoubtSeenFound(WordsFound):
    def __init__(self, seen):
        self.seen = seen

    def evidence(self, response, cosines):
        self.seen.append(response.doubt_or("caller's"))
        return {}


async def test_the_answers_doubt_strength_reaches_the_channels_after_the_score_request():
    """SPEC §9.1/§10: the vector answer says whose strengths it carries (``doubtStrength``);
    the kernel keeps it when it adds the scored contexts of the second request, so a channel's
    doubt is the answering profile's."""
    started = asyncio.Event()
    started.set()

    class Answering(FakeVector):
        async def candidates(self, query, limit):
            return (await super().candidates(query, limit)).model_copy(
                update={"doubt_strength": 6.0})

    channel = DoubtSeen(RULE)
    channel.seen = []
    await search(SearchQuery(1, "조용한 카페"), [VectorChannel(RULE), channel], Answering(started),
                 RULE, 20)
    assert channel.seen == [6.0]

    class Switched(Answering):  # the profile moved between the two requests
        async def score(self, query, record_ids):
            return (await super().score(query, record_ids)).model_copy(
                update={"doubt_strength": None})

    channel.seen = []
    await search(SearchQuery(1, "조용한 카페"), [VectorChannel(RULE), channel], Switched(started),
                 RULE, 20)
    assert channel.seen == [None]  # the later answer's, whose strengths the named records carry


async def test_a_vector_search_that_embeds_here_prepares_before_the_channels_read():
    """Issue 28: with a model on this machine's CPU the query is embedded first (``prepare``),
    and only then do the channels read; the prepared query goes on to the same two requests."""
    events: list[str] = []

    class Here(FakeVector):
        async def prepare(self, query):
            events.append("prepare start")
            await asyncio.sleep(0)  # a real embedding yields to the loop
            await asyncio.sleep(0)
            events.append("prepare done")

    class Reading(Channel):
        names = ("words",)

        async def find(self, query):
            events.append("channel reads")
            return WordsFound()

    started = asyncio.Event()
    vector = Here(started)
    out = await search(SearchQuery(1, "조용한 카페"), [VectorChannel(RULE), Reading(RULE)], vector,
                       RULE, 20)
    assert events == ["prepare start", "prepare done", "channel reads"]
    assert vector.calls == [("candidates", "조용한 카페", 20), ("score", "조용한 카페", (7, 1))]
    assert [d.record_id for d in out] == [7, 1]
    events.clear()
    await explain(SearchQuery(1, "조용한 카페"), [VectorChannel(RULE), Reading(RULE)], vector, RULE, 20)
    assert events == ["prepare start", "prepare done", "channel reads"]


async def test_a_failing_prepare_raises_before_any_channel_reads():
    class Failing(FakeVector):
        async def prepare(self, query):
            raise LookupError("model gone")

    class Reading(Channel):
        names = ("words",)
        read = False

        async def find(self, query):
            Reading.read = True
            return WordsFound()

    with pytest.raises(LookupError, match="model gone"):
        await search(SearchQuery(1, "카페"), [Reading(RULE)], Failing(asyncio.Event()), RULE, 20)
    assert not Reading.read
