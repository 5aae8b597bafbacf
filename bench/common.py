"""Helpers shared by the benchmarks (not a benchmark itself): the long note of the issue-16
burst, a nearest-rank percentile, min/median summaries and a machine description."""

from __future__ import annotations

import argparse
import os
import platform
import statistics
from collections.abc import Sequence


def long_note(i: int) -> str:
    """A 2,000-character Korean note (the issue-16 backlog/burst note), numbered ``i``."""
    text = f"{i}번째 긴 메모. " + "비 오는 날 창가에 앉아 오래 머물렀던 다방, 커피 향과 빗소리. " * 60
    return text[:2000]


def pct(values: Sequence[float], q: float) -> float:
    """The q-quantile (0..1) of ``values``, nearest rank on the sorted values."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def min_median(values: Sequence[float]) -> tuple[float, float]:
    """(min, median) of the rounds of one measure."""
    return min(values), statistics.median(values)


def max_median(values: Sequence[float]) -> tuple[float, float]:
    """(max, median): for rates, where the best round is the highest."""
    return max(values), statistics.median(values)


def cpu_model() -> str:
    """The CPU model name from /proc/cpuinfo (Linux), else platform.processor()."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def load_average() -> str:
    """The 1/5/15-minute load averages, formatted."""
    return " / ".join(f"{x:.2f}" for x in os.getloadavg())


def side_by_side_parser(doc: str, n: int) -> argparse.ArgumentParser:
    """The command line of a side-by-side benchmark (ours against a peer, each side its own
    contexts): the description is ``doc``'s first line; ``--n`` contexts per side per round
    (default ``n``) and ``--rounds`` (default 3); the benchmark adds its own options."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--n", type=int, default=n, help="contexts per side per round")
    parser.add_argument("--rounds", type=int, default=3)
    return parser
