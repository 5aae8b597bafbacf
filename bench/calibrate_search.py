"""Calibrate the search cuts of the default profile on the real Korean notes (issue 6).

For every query of ``search_queries.jsonl`` (plus one-word variants of them), embeds the
member's notes and the query with the default provider, scores records exactly as the search
SQL does (cosine, best context per record), and reports — per cut setting — the rank of the
expected record before and after the cuts and how many results the cuts remove. The cuts are
:func:`pinlog.ai.search.apply_cuts`, the code the server runs.

    python bench/calibrate_search.py [--data ../shared/data] [--grid]
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

import numpy as np

from pinlog.ai.calibration import calibration_for
from pinlog.ai.providers import build_provider
from pinlog.ai.search import SearchCuts, apply_cuts
from pinlog.contracts import SearchHit
from pinlog.settings import load_settings

#: One-word queries (the lower floor applies) with the record they should find.
ONE_WORD = [
    ("member7", "돈카츠", "katsuyo"), ("member7", "라멘", "sarukame"), ("member6", "서점", "okeeer"),
    ("member6", "피자", "zootopia"), ("member6", "양갱", "jeokdang"), ("member1", "야경", "view"),
]


def load(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    parser.add_argument("--grid", action="store_true", help="also scan floors and ratios")
    args = parser.parse_args()
    notes = load(args.data / "place_notes.jsonl")
    queries = [(q["member"], q["query"], q["expected_record"]) for q in load(args.data / "search_queries.jsonl")]
    queries += ONE_WORD
    settings = load_settings(data_dir=Path("/tmp/pinlog-calibrate"))
    provider = build_provider(settings)
    passages = await provider.embed([n["context"] for n in notes], "passage")
    qvecs = await provider.embed([q for _, q, _ in queries], "query")

    def hits_for(member: str, qv: np.ndarray) -> tuple[list[SearchHit], list[str]]:
        """Best context per record, ordered (what the search SQL returns) + record keys."""
        best: dict[str, float] = {}
        for i, n in enumerate(notes):
            if n["member"] == member:
                best[n["record"]] = max(best.get(n["record"], -1.0), float(passages[i] @ qv))
        ordered = sorted(best.items(), key=lambda kv: -kv[1])
        hits = [SearchHit(record_id=i + 1, context_id=i + 1, similarity=s)
                for i, (_, s) in enumerate(ordered)]
        return hits, [r for r, _ in ordered]

    def evaluate(cuts: SearchCuts, verbose: bool) -> tuple[int, int, int, int]:
        rank1 = kept_expected = removed = total = 0
        for (member, query, expected), qv in zip(queries, qvecs, strict=True):
            hits, names = hits_for(member, qv)
            kept = apply_cuts(hits, query, cuts)
            kept_names = [names[h.record_id - 1] for h in kept]
            before = names.index(expected) + 1
            after = kept_names.index(expected) + 1 if expected in kept_names else None
            rank1 += before == 1
            kept_expected += after is not None
            removed += len(hits) - len(kept)
            total += len(hits)
            if verbose:
                print(f"  {member:8} {query[:22]:24} expected={expected:14} rank {before} → "
                      f"{after if after else 'cut'}   results {len(hits):2} → {len(kept):2}  "
                      f"top {hits[0].similarity:.3f}")
        return rank1, kept_expected, removed, total

    cal = calibration_for(settings)
    cuts = SearchCuts.from_calibration(cal)
    print(f"profile {settings.profile}: floor {cuts.floor}, one-word floor {cuts.short_query_floor}, "
          f"ratio {cuts.ratio}")
    r1, kept, removed, total = evaluate(cuts, verbose=True)
    print(f"rank-1 {r1}/{len(queries)}; expected record kept after cuts {kept}/{len(queries)}; "
          f"cuts removed {removed}/{total} results")
    if args.grid:
        print("\nfloor  short  ratio   kept  removed")
        for floor in (0.80, 0.82, 0.84):
            for short in (0.78, 0.80, 0.82):
                for ratio in (0.94, 0.95, 0.96, 0.97, 0.98):
                    _, k, rem, tot = evaluate(SearchCuts(floor, short, ratio), verbose=False)
                    print(f"{floor:.2f}   {short:.2f}   {ratio:.2f}   {k:2}/{len(queries)}  {rem}/{tot}")


if __name__ == "__main__":
    asyncio.run(main())
