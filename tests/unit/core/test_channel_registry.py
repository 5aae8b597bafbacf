"""core's channel registry (SPEC §10, :mod:`pinlog.core.channels`): what the channels ask the ai
side to score, how the ai side's answer reaches them, and that a new channel plugs in with no
change to the decision. No database: the channels used here read nothing."""

from __future__ import annotations

from pinlog.channels.lexical import LexicalFound, LexicalMatch, LexicalQuery
from pinlog.channels.vector import VectorChannel
from pinlog.contracts import MAX_SCORED_RECORDS, SearchHit, SearchResponse
from pinlog.core import channels
from pinlog.core.channels import Channel, RelevanceRule, SearchQuery
from pinlog.relevance import Evidence

RULE = RelevanceRule(min_coverage=0.5, rrf_k=60)


def hit(record_id, context_id, similarity):
    return SearchHit(record_id=record_id, context_id=context_id, similarity=similarity)


class Asks:
    """A channel's findings that only ask for records to be scored."""

    def __init__(self, records, knows=()):
        self.records, self.known = records, set(knows)

    def to_score(self):
        return self.records

    def knows(self, record_id):
        return record_id in self.known

    def evidence(self, response, cosines):
        return {}


def test_records_to_score_are_every_channels_requests_in_order_each_once_capped():
    assert channels.records_to_score([Asks([3, 1]), Asks([]), Asks([1, 2, 3, 4])]) == [3, 1, 2, 4]
    many = channels.records_to_score([Asks(list(range(1, 800))), Asks(list(range(500, 1500)))])
    assert many == list(range(1, MAX_SCORED_RECORDS + 1))


def test_records_to_score_add_the_vector_results_another_channel_knows():
    answer = SearchResponse(results=[hit(8, 80, 0.9), hit(9, 90, 0.8), hit(3, 30, 0.7)])
    found = [Asks([3], knows=[9, 3]), Asks([])]
    # 9 is known (its evidence must count all its notes), 8 is not, 3 is asked already
    assert channels.records_to_score(found, answer) == [3, 9]


def test_scored_contexts_hold_every_cosine_of_the_answer():
    response = SearchResponse(results=[hit(1, 10, 0.9), hit(2, 20, 0.8)],
                              scored=[hit(2, 21, 0.7), hit(3, 30, 0.1), hit(2, 20, 0.8)])
    assert channels.scored_contexts(response) == {1: {10: 0.9}, 2: {21: 0.7, 20: 0.8}, 3: {30: 0.1}}
    assert list(channels.scored_contexts(response)[2]) == [21, 20]  # scored first, then results


def test_the_lexical_channel_asks_for_the_records_that_can_pass_counting_every_note():
    matches = {
        5: LexicalMatch({50: frozenset("a")}),                        # 1/4 < 0.5
        4: LexicalMatch({40: frozenset("ab"), 41: frozenset("c")}),   # 3/4 over two notes
        2: LexicalMatch({20: frozenset("a")}, frozenset("b")),        # 2/4 with the place
        3: LexicalMatch({30: frozenset("cd")}),                       # 2/4
    }
    four = LexicalQuery(tuple("abcd"), frozenset("abcd"))
    assert LexicalFound(matches, four, RULE).to_score() == [4, 2, 3]
    assert LexicalFound(matches, LexicalQuery((), frozenset()), RULE).to_score() == []


class Spelling(Channel):
    """A channel as a new module would add it: asks for record 7 and vouches for it (its
    context 71)."""

    names = ("spelling",)

    async def find(self, query):
        return SpellingFound()


class SpellingFound:
    def to_score(self):
        return [7]

    def knows(self, record_id):
        return record_id == 7

    def evidence(self, response, cosines):
        return {7: Evidence(1.0, True, Spelling.names, 71)}


async def test_a_new_channel_plugs_in_with_its_names_ranking_and_context():
    found = await channels.find_all(None, SearchQuery(1, "q"), RULE, (VectorChannel, Spelling))
    assert channels.records_to_score(found) == [7]
    response = SearchResponse(results=[hit(1, 10, 0.9), hit(7, 70, 0.88)],
                              scored=[hit(7, 70, 0.88), hit(7, 71, 0.6)])
    out = channels.decide(found, response, RULE, 20)
    assert [(d.record_id, d.context_id, d.similarity, d.matched_by) for d in out] == [
        (7, 71, 0.6, ("vector", "spelling")), (1, 10, 0.9, ("vector",))]
    assert out[0].score == 1 / 62 + 1 / 61 and out[1].score == 1 / 61
