"""The counting OpenAI-compatible model server for the chaos and fuzz runs (not a benchmark
itself): the suite's one fake, :class:`tests.support.fake_openai.FakeOpenAI`, with 16-dimension
vectors and the llm judge. ``embedded`` / ``judged`` (Counter text → calls) let the run report
model calls per stage and context. Texts live only in this process's memory (never printed)."""

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
