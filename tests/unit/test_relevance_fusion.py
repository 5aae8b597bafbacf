"""The channel-neutral relevance decision and RRF fusion over N channels (SPEC §10,
:func:`pinlog.relevance.decide`): no database, channels given as plain evidence lists."""

from __future__ import annotations

import pytest

from pinlog.relevance import Evidence, competition_ranks, decide

K = 60


def rrf(*ranks: int) -> float:
    return sum(1.0 / (K + r) for r in ranks)


def ev(score, vouched=False, names=(), context=None):
    return Evidence(score, vouched, tuple(names), context)


def test_competition_ranks_share_a_rank_and_skip_the_next():
    assert competition_ranks({1: 0.9, 2: 0.5, 3: 0.5, 4: 0.1}) == {1: 1, 2: 2, 3: 2, 4: 4}
    assert competition_ranks({}) == {}


def test_three_channels_fuse_by_the_sum_of_their_reciprocal_ranks():
    cosines = {1: {10: 0.9}, 2: {20: 0.8}, 3: {30: 0.7}}
    a = {1: ev(3.0, True, ["a"]), 2: ev(2.0, True, ["a"]), 3: ev(1.0, True, ["a"])}  # ranks 1, 2, 3
    b = {2: ev(5.0, True, ["b"]), 3: ev(4.0), 1: ev(3.0)}                            # ranks 3, 1, 2
    c = {3: ev(9.0, True, ["c"]), 2: ev(8.0), 1: ev(7.0)}                            # ranks 3, 2, 1
    out = decide(cosines, [a, b, c], rrf_k=K, limit=20)
    assert [(d.record_id, d.score) for d in out] == [
        (2, pytest.approx(rrf(2, 1, 2))), (3, pytest.approx(rrf(3, 2, 1))), (1, pytest.approx(rrf(1, 3, 3)))]
    assert [d.matched_by for d in out] == [("a", "b"), ("a", "c"), ("a",)]
    # the third list changes the order: over the first two, record 1 beats record 3
    assert [d.record_id for d in decide(cosines, [a, b], rrf_k=K, limit=20)] == [2, 1, 3]


def test_a_channel_with_no_evidence_adds_nothing():
    cosines = {1: {10: 0.9}, 2: {20: 0.8, 21: 0.6}}
    a = {1: ev(0.9, True, ["a"]), 2: ev(0.8)}
    b = {2: ev(1.0, True, ["b"], 21)}
    base = decide(cosines, [a, b], rrf_k=K, limit=20)
    assert decide(cosines, [a, b, {}], rrf_k=K, limit=20) == base
    assert decide(cosines, [{}, a, {}, b], rrf_k=K, limit=20) == base
    assert decide(cosines, [{}, {}], rrf_k=K, limit=20) == []


def test_a_ranking_without_vouching_orders_but_never_adds_a_record():
    cosines = {1: {10: 0.9}, 2: {20: 0.8}, 3: {30: 0.95}}
    vouch = {1: ev(0.9, True, ["a"]), 2: ev(0.8, True, ["a"])}
    rank_only = {2: ev(1.0), 3: ev(2.0)}     # ranks record 2 first of the two, vouches for none
    out = decide(cosines, [vouch, rank_only], rrf_k=K, limit=20)
    assert [d.record_id for d in out] == [2, 1]   # 3 (best cosine, ranked) has no evidence
    assert out[0].score == pytest.approx(rrf(2, 2))


def test_no_evidence_means_no_result_and_unscored_records_are_never_shown():
    cosines = {1: {10: 0.99}}
    assert decide(cosines, [{1: ev(0.99)}], rrf_k=K, limit=20) == []
    # record 2 is vouched for but has no scored context (not searchable): never shown
    assert decide(cosines, [{2: ev(1.0, True, ["a"], 20)}], rrf_k=K, limit=20) == []
    assert decide({2: {}}, [{2: ev(1.0, True, ["a"], 20)}], rrf_k=K, limit=20) == []


def test_evidence_about_unsearchable_records_does_not_change_the_ranks():
    cosines = {1: {10: 0.5}, 2: {20: 0.4}}
    a = {1: ev(0.5, True, ["a"]), 2: ev(0.4, True, ["a"])}
    b = {2: ev(0.3, True, ["b"])}
    with_ghost = {**b, 9: ev(0.9, True, ["b"], 90)}   # record 9: nothing scored
    assert decide(cosines, [a, with_ghost], rrf_k=K, limit=20) == decide(cosines, [a, b], rrf_k=K, limit=20)
    assert decide(cosines, [a, with_ghost], rrf_k=K, limit=20)[0].score == pytest.approx(rrf(2, 1))


def test_matched_by_lists_the_vouching_channels_in_channel_order_each_name_once():
    cosines = {1: {10: 0.5}}
    out = decide(cosines, [{1: ev(1.0, True, ["x"])}, {1: ev(1.0, False, ["never"])},
                           {1: ev(1.0, True, ["a", "x"])}, {1: ev(1.0, True, ["b"])}], rrf_k=K, limit=20)
    assert out[0].matched_by == ("x", "a", "b")


def test_the_last_vouching_channel_that_names_a_scored_context_decides_what_is_shown():
    cosines = {1: {10: 0.3, 11: 0.9, 12: 0.5}}
    general = {1: ev(1.0, True, ["g"], 12)}
    specific = {1: ev(1.0, True, ["s"], 10)}
    silent = {1: ev(1.0, True, ["q"])}                 # vouches, names no context
    unscored = {1: ev(1.0, True, ["u"], 99)}           # names a context the ai side did not score
    not_vouching = {1: ev(1.0, False, ["n"], 11)}
    assert decide(cosines, [general, specific], rrf_k=K, limit=20)[0].context_id == 10
    assert decide(cosines, [specific, general], rrf_k=K, limit=20)[0].context_id == 12
    [d] = decide(cosines, [general, specific, silent, unscored, not_vouching], rrf_k=K, limit=20)
    assert (d.context_id, d.similarity) == (10, 0.3)
    # no channel names one: the best-cosine context
    assert decide(cosines, [silent, unscored], rrf_k=K, limit=20)[0].context_id == 11


def test_ties_go_to_the_higher_best_cosine_then_the_lower_record_id_then_the_limit():
    cosines = {5: {50: 0.6}, 3: {30: 0.4}, 4: {40: 0.6, 41: 0.1}}
    same = {r: ev(1.0, True, ["a"], r * 10) for r in cosines}   # all rank 1: equal RRF scores
    out = decide(cosines, [same], rrf_k=K, limit=20)
    assert [d.record_id for d in out] == [4, 5, 3]
    assert [d.record_id for d in decide(cosines, [same], rrf_k=K, limit=2)] == [4, 5]


def test_explain_shows_every_channels_evidence_next_to_the_decision_it_took():
    from pinlog.relevance import explain

    cosines = {1: {10: 0.9}, 2: {20: 0.8}, 3: {30: 0.7}, 4: {}}
    a = {1: ev(0.9, True, ["a"], 10), 2: ev(0.8, False, ["a"]), 3: ev(0.7), 5: ev(0.99, True, ["a"])}
    b = {2: ev(1.0, True, ["b"], 20), 4: ev(1.0, True, ["b"])}
    decided = decide(cosines, [a, b], rrf_k=K, limit=1)
    out = explain(cosines, [a, b], rrf_k=K, limit=1)
    assert [x.decision for x in out if x.decision] == decided  # the decision itself
    by_id = {x.record_id: x for x in out}
    assert [x.record_id for x in out][:1] == [d.record_id for d in decided]
    assert by_id[decided[0].record_id].position == 1
    assert by_id[2].evidence == (a[2], b[2]) and by_id[2].ranks == (2, 1)
    assert by_id[3].evidence == (a[3], None) and by_id[3].decision is None
    # evidence about records nobody scored is shown, as not searchable
    assert not by_id[4].searchable and not by_id[5].searchable and by_id[5].ranks == (None, None)
    assert by_id[1].searchable and set(by_id) == {1, 2, 3, 4, 5}
    full = explain(cosines, [a, b], rrf_k=K, limit=20)
    assert [x.record_id for x in full if x.decision] == [d.record_id for d in
                                                          decide(cosines, [a, b], rrf_k=K, limit=20)]
