"""``python bench/calibrate_search.py --provider`` (issue 23): an operator with a labelled set
calibrates the search floors of any profile through an OpenAI-compatible endpoint — here the
local fake behind TEI's 32-input cap, with bag-of-words vectors (notes that share a query's
words are near it, as with a real model), so the fit has something to find. No database."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.helpers import pinlog_env
from tests.support.fake_openai import FakeOpenAI

ROOT = Path(__file__).resolve().parents[3]
TOPICS = ["quiet bookstore cafe", "spicy ramen noodle", "riverside bicycle path",
          "rooftop cocktail bar", "vintage vinyl record", "late night dumpling",
          "indoor climbing gym", "sunday flea market", "jazz piano lounge",
          "matcha dessert shop", "karaoke room friends", "lakeside camping site"]


def write_set(tmp_path: Path) -> tuple[Path, Path]:
    notes, queries = [], []
    for m in range(3):
        for k, topic in enumerate(TOPICS):
            record = f"m{m}-r{k}"
            notes.append({"member": f"m{m}", "record": record,
                          "context": f"{topic} worth a visit again",
                          "place": {"name": f"place {m} {k}", "address": "seoul"}})
            if k % 3 == m:
                queries.append({"member": f"m{m}", "query": topic, "expected_record": record})
        queries.append({"member": f"m{m}", "query": "passport renewal office",
                        "expected_record": None})
        queries.append({"member": f"m{m}", "query": "dentist", "expected_record": None})
    notes_path, queries_path = tmp_path / "notes.jsonl", tmp_path / "queries.jsonl"
    notes_path.write_text("\n".join(json.dumps(n) for n in notes), encoding="utf-8")
    queries_path.write_text("\n".join(json.dumps(q) for q in queries), encoding="utf-8")
    return notes_path, queries_path


def test_provider_mode_fits_the_configured_profiles_floors_through_the_endpoint(tmp_path):
    fake = FakeOpenAI(profile="tei", dimension=64, embedding="words").start()
    try:
        notes, queries = write_set(tmp_path)
        env = pinlog_env(tmp_path / "data", **fake.env("tei-words-64-cosine-v1", judge=False),
                         PINLOG_EMBEDDING_BATCH_SIZE="64", PINLOG_EMBEDDING_MAX_INPUTS="64")
        run = subprocess.run(
            [sys.executable, "bench/calibrate_search.py", "--provider", "--notes", str(notes),
             "--queries", str(queries), "--json"], cwd=ROOT, env=env, capture_output=True,
            text=True, timeout=300)
        assert run.returncode == 0, run.stderr[-3000:]
        out = json.loads(run.stdout.strip().splitlines()[-1])
        assert out["profile"] == "tei-words-64-cosine-v1" and out["provider"] == "openai"
        assert (out["notes"], out["queries"], out["positives"], out["off_topic"]) == (36, 18, 12, 6)
        # the fit finds every expected record first and answers nothing off-topic
        assert (out["rank1"], out["empty"]) == (12, 6)
        floor = out["chosen"]["PINLOG_SEARCH_FLOOR"]
        low, high, _ = out["grid_floors"]
        assert low <= floor <= high and -1.0 <= floor <= 1.0
        # every note and query went through the endpoint, within TEI's cap (learned from 413)
        assert fake.refused["too_many"] >= 1 and max(fake.embedding_calls) <= 32
        assert sum(fake.embedding_calls) == 36 + 18
    finally:
        fake.stop()
