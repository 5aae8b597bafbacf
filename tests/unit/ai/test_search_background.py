"""The per-query calibration of the vector channel (SPEC §10, issue 28: ``pinlog.ai.search``):
the background set's language groups, a query's mean and deviation per group, and the lowest
cosine that can reach a strength. No database, no model."""

from __future__ import annotations

import json

import numpy as np
import pytest

from pinlog.ai.search import MIN_GROUP, Background, background_notes, script_group
from tests.fakes import unit


@pytest.mark.parametrize(("text", "group"), [
    ("점심에 동료들이랑 간 백반집", "hangul"), ("Lunch spot near the office", "latin"),
    ("会社の近くのランチ。", "kana"), ("公司附近的午餐店", "han"), ("Petit café de quartier", "latin"),
])
def test_script_groups(text, group):
    assert script_group(text) == group


def test_the_packaged_background_has_every_group_it_calibrates_with():
    notes = background_notes()
    counts = {g: sum(1 for n in notes if script_group(n) == g) for g in ("hangul", "latin", "kana", "han")}
    assert all(c >= MIN_GROUP for c in counts.values()), counts
    assert len(set(notes)) == len(notes)


def test_calibration_is_the_mean_and_deviation_of_the_query_against_each_group():
    rng = np.random.default_rng(3)
    a = np.stack([unit(rng.standard_normal(8)) for _ in range(MIN_GROUP)])
    b = np.stack([unit(rng.standard_normal(8)) for _ in range(MIN_GROUP + 2)])
    lone = unit(rng.standard_normal(8))[None, :]  # a group too small to be one
    background = Background(np.concatenate([a, b, lone]), ["x"] * len(a) + ["y"] * len(b) + ["z"])
    assert background.groups == ["x", "y"]
    q = unit(rng.standard_normal(8))
    cal = background.calibrate(q)
    assert cal.means == pytest.approx(((a @ q).mean(), (b @ q).mean()), abs=1e-6)
    assert cal.sds == pytest.approx(((a @ q).std(), (b @ q).std()), abs=1e-6)
    centroid = np.asarray(json.loads(cal.centroids[0]), dtype=np.float32)
    np.testing.assert_allclose(centroid, unit(a.mean(axis=0)), atol=1e-6)
    # the lowest cosine at which a context of any group reaches the strength
    assert cal.floor(3.0) == pytest.approx(min(m + 3.0 * s for m, s in zip(cal.means, cal.sds, strict=True)))
    params = cal.params()
    assert params["centroids"].startswith('{"[') and len(params["means"]) == 2


def test_a_background_without_any_group_is_refused():
    with pytest.raises(ValueError, match="no language group"):
        Background(np.eye(8, dtype=np.float32)[:3], ["x", "y", "z"])


def test_a_background_of_more_groups_than_the_statements_compare_is_refused():
    """ai/search.sql nearest_group compares MAX_GROUPS (4) centroids: a fifth group would be
    silently ignored, so the background is refused instead; four are accepted."""
    from pinlog.ai.search import MAX_GROUPS, MIN_GROUP

    rng = np.random.default_rng(5)
    vectors = np.stack([unit(rng.normal(0, 1, 8)) for _ in range(MIN_GROUP * 5)])
    labels = [f"g{i // MIN_GROUP}" for i in range(MIN_GROUP * 5)]
    with pytest.raises(ValueError, match=f"at most {MAX_GROUPS}"):
        Background(vectors, labels)
    assert len(Background(vectors[:MIN_GROUP * 4], labels[:MIN_GROUP * 4]).groups) == MAX_GROUPS
