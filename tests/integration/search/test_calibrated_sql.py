"""The vector channel's per-query calibration in the search statements (SPEC §10, issue 28:
``ai/search.sql`` ``search_member`` and ``score_records``) on the real database: a context's
strength is ``(cosine − mean) / sd`` of the language group whose background centroid is nearest
to the context's vector; a record's best context is its strongest; the cut is on strength."""

from __future__ import annotations

import numpy as np
import pytest

from pinlog.ai.search import Background, SearchCuts, search
from pinlog.contracts import SearchRequest
from tests.fakes import FakeEmbeddingProvider, unit
from tests.integration.ai.support import DIM, PROFILE, insert_embedding, insert_state

QUERY = "calibrated query"
Q = unit([1, 0.2, 0.2, 0, 0, 0, 0, 0])


def background() -> Background:
    """Group ``a`` near axis 1, group ``b`` near axis 2 (their cosines to Q differ in mean and
    spread)."""
    rng = np.random.default_rng(11)
    a = [unit(np.eye(DIM)[1] * 3 + rng.normal(0, 0.8, DIM)) for _ in range(10)]
    b = [unit(np.eye(DIM)[2] * 3 + rng.normal(0, 0.3, DIM)) for _ in range(10)]
    return Background(np.stack(a + b), ["a"] * 10 + ["b"] * 10)


def expected_strength(bg: Background, vector: np.ndarray) -> float:
    import json

    cal = bg.calibrate(Q)
    centroids = np.stack([np.asarray(json.loads(c), dtype=np.float32) for c in cal.centroids])
    g = int(np.argmax(centroids @ vector))
    return (float(vector @ Q) - cal.means[g]) / cal.sds[g]


CONTEXTS = {  # context id → (record id, vector)
    1: (70, unit([0.55, 1.0, 0.1, 0, 0, 0, 0, 0])),   # group a, higher cosine
    2: (70, unit([0.45, 0.1, 1.0, 0, 0, 0, 0, 0])),   # group b
    3: (71, unit([0.2, 1.0, 0.0, 0.3, 0, 0, 0, 0])),  # group a, weak
    4: (72, unit([0.9, 0.0, 1.0, 0, 0, 0, 0, 0])),    # group b, strong
}


@pytest.fixture
def seeded(sync_conn):
    for cid, (record_id, vector) in CONTEXTS.items():
        insert_state(sync_conn, cid, "COMPLETED", "COMPLETED")
        insert_embedding(sync_conn, cid, list(vector), user_id=7, record_id=record_id)


def request(**extra) -> SearchRequest:
    return SearchRequest(user_id=7, query=QUERY, embedding_profile=PROFILE, limit=100, **extra)


async def test_strength_per_context_is_against_the_nearest_groups_background(engine, seeded):
    bg = background()
    provider = FakeEmbeddingProvider(PROFILE, DIM, vectors={QUERY: Q})
    strengths = {cid: expected_strength(bg, v) for cid, (_, v) in CONTEXTS.items()}
    # the two contexts of record 70 are in different groups: the strongest is not the closest
    assert CONTEXTS[1][1] @ Q > CONTEXTS[2][1] @ Q and strengths[2] > strengths[1]

    everything = await search(engine, provider, request(mode="vector", record_ids=[70, 71, 72]),
                              SearchCuts(-1.0, -1.0, 0.0, strength=-50.0), background=bg)
    by_record = {h.record_id: h for h in everything.results}
    assert by_record[70].context_id == 2  # its strongest context
    for hit in everything.results:
        assert hit.score == pytest.approx(strengths[hit.context_id], abs=1e-3)
        assert hit.similarity == pytest.approx(float(CONTEXTS[hit.context_id][1] @ Q), abs=1e-5)
    assert [h.record_id for h in everything.results] == sorted(
        by_record, key=lambda r: -strengths[by_record[r].context_id])
    assert {h.context_id: h.score for h in everything.scored} == pytest.approx(
        {cid: s for cid, s in strengths.items()}, abs=1e-3)

    # the cut is on strength, in the statement: only records whose best context reaches it
    threshold = sorted(strengths.values())[-2] - 1e-3
    cut = await search(engine, provider, request(mode="vector"),
                       SearchCuts(-1.0, -1.0, 0.0, strength=threshold), background=bg)
    assert sorted(h.context_id for h in cut.results) == sorted(
        c for c, s in strengths.items() if s >= threshold)

    # mode "score": only the requested records' contexts, with their strengths
    scored = await search(engine, provider, request(mode="score", record_ids=[71]),
                          SearchCuts(-1.0, -1.0, 0.0, strength=threshold), background=bg)
    assert scored.results == [] and [h.context_id for h in scored.scored] == [3]


async def test_an_uncalibrated_profile_has_no_strength_and_ranks_by_cosine(engine, seeded):
    provider = FakeEmbeddingProvider(PROFILE, DIM, vectors={QUERY: Q})
    out = await search(engine, provider, request(mode="vector", record_ids=[70]),
                       SearchCuts(-1.0, -1.0, 0.0), background=background())
    assert all(h.score is None for h in (*out.results, *out.scored))
    assert [h.record_id for h in out.results] == [72, 70, 71]  # by best cosine
    assert {h.record_id: h.context_id for h in out.results}[70] == 1


def four_groups() -> Background:
    """As many groups as the statements compare (MAX_GROUPS): group ``g<k>`` near axis k."""
    rng = np.random.default_rng(12)
    vectors, labels = [], []
    for k, spread in zip(range(1, 5), (0.8, 0.3, 0.5, 0.2), strict=True):
        vectors += [unit(np.eye(DIM)[k] * 3 + rng.normal(0, spread, DIM)) for _ in range(10)]
        labels += [f"g{k}"] * 10
    return Background(np.stack(vectors), labels)


async def test_every_one_of_four_groups_calibrates_its_own_contexts(engine, sync_conn):
    """A context near each of the four groups' centroids, and each centroid itself, gets that
    group's strength (each of the statement's four terms decides for one of them); a stored zero
    vector beside them is neither scored nor an error (the statements' NaN filters drop it before
    its group is sought)."""
    from pinlog.ai.search import MAX_GROUPS

    bg = four_groups()
    assert len(bg.groups) == MAX_GROUPS
    near = {10 + k: unit(np.eye(DIM)[k] * 2 + np.eye(DIM)[0]) for k in range(1, 5)}
    import json

    # the centroids themselves: a distance of exactly 0 (pgvector keeps it in [0, 2])
    for g, centroid in enumerate(bg.calibrate(Q).centroids):
        near[20 + g] = np.asarray(json.loads(centroid), dtype=np.float32)
    for cid, vector in near.items():
        insert_state(sync_conn, cid, "COMPLETED", "COMPLETED")
        insert_embedding(sync_conn, cid, list(vector), user_id=7, record_id=cid)
    insert_state(sync_conn, 99, "COMPLETED", "COMPLETED")
    insert_embedding(sync_conn, 99, [0.0] * DIM, user_id=7, record_id=99)
    cal = bg.calibrate(Q)
    centroids = np.stack([np.asarray(json.loads(c), dtype=np.float32) for c in cal.centroids])
    assert [int(np.argmax(centroids @ v)) for v in near.values()] == [0, 1, 2, 3] * 2
    strengths = {cid: expected_strength(bg, v) for cid, v in near.items()}
    # the groups' backgrounds differ: the same cosine would not give the same strength
    assert len({round(cal.sds[g], 4) for g in range(4)}) == 4

    provider = FakeEmbeddingProvider(PROFILE, DIM, vectors={QUERY: Q})
    out = await search(engine, provider, request(mode="vector", record_ids=[*near, 99]),
                       SearchCuts(-1.0, -1.0, 0.0, strength=-50.0), background=bg)
    # search_member: what the cuts keep (ratio 0 still drops a negative cosine: one centroid
    # context has one); score_records: every context asked for
    kept = {cid: s for cid, s in strengths.items() if float(near[cid] @ Q) >= 0}
    assert len(kept) >= 7
    assert {h.context_id: h.score for h in out.results} == pytest.approx(kept, abs=1e-3)
    assert {h.context_id: h.score for h in out.scored} == pytest.approx(strengths, abs=1e-3)
