"""The counting OpenAI-compatible model server for the chaos and fuzz runs (not a benchmark
itself): the suite's one fake, :class:`tests.support.fake_openai.FakeOpenAI`, with 16-dimension
vectors and the llm judge. ``embedded`` / ``judged`` (Counter text → calls) let the run report
model calls per stage and context. Texts live only in this process's memory (never printed).

``python bench/fake_model.py serve --dimension 384 --delay 0.002`` runs the same fake in a
process of its own (the backfill benchmark: its CPU is then not the measured process's) and
prints its base URL as the first line of stdout; it serves until killed.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repo root: tests.support

from tests.support.fake_openai import FakeOpenAI  # noqa: E402

DIMENSION = 16
PROFILE = "chaos-fake-16-cosine-v1"


class CountingModel(FakeOpenAI):
    """``start()`` → ``base_url``; ``embedded`` / ``judged``: Counter text → calls."""

    def __init__(self) -> None:
        super().__init__(dimension=DIMENSION)

    def env(self, profile: str = PROFILE, *, judge: bool = True) -> dict[str, str]:
        """`pinlog` settings that point the embedding provider and the llm judge here."""
        return {**super().env(profile, judge=judge), "PINLOG_CANDIDATE_FLOOR": "-1"}


def serve(argv: list[str] | None = None) -> None:
    """``serve [--dimension N] [--delay SECONDS]``: run a :class:`FakeOpenAI` until killed."""
    import argparse
    import signal
    import threading

    parser = argparse.ArgumentParser(prog="fake_model.py serve")
    parser.add_argument("--dimension", type=int, default=384)
    parser.add_argument("--delay", type=float, default=0.002, help="seconds per embeddings call")
    args = parser.parse_args(argv)
    server = FakeOpenAI(dimension=args.dimension, delay=args.delay).start()
    print(server.base_url, flush=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        stop.wait()
    except KeyboardInterrupt:
        pass
    server.stop()


if __name__ == "__main__" and sys.argv[1:2] == ["serve"]:
    serve(sys.argv[2:])
