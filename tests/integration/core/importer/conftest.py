"""Fixtures of the importer integration tests: the real core + ai runtimes in one process on the
real test PostgreSQL, with fake model providers at their Protocols only (tests/fakes.py)."""

from __future__ import annotations

import io
import json
from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import Any

import psycopg
import pytest
from rich.console import Console

from pinlog.composition import Components, running_components
from pinlog.settings import Settings
from tests.conftest import make_settings, config_of
from tests.fakes import FakeEmbeddingProvider, FakeJudge

PROFILE, DIM = "fake-profile-v1", 8

#: Texts whose fake vector equals a preset's vector (similarity 1.0 → one keyword each).
FRIENDS_TEXT = "친구들이랑 떠들기 좋은 곳"
QUIET_TEXT = "혼자 조용히 책 읽기 좋은 곳"


def basis(i: int) -> list[float]:
    return [1.0 if j == i else 0.0 for j in range(DIM)]


TEXT_VECTORS = {FRIENDS_TEXT: basis(0), QUIET_TEXT: basis(2)}


def seed_presets(conn: psycopg.Connection) -> None:
    """Two presets with vectors for the fake profile (ids 1 and 2)."""
    for pid, code, name, vector in ((1, "WITH_FRIENDS", "친구와", basis(0)),
                                    (2, "QUIET", "조용한", basis(2))):
        conn.execute("INSERT INTO ai.keyword_preset (id, code, display_name, category, description, "
                     "examples) VALUES (%s, %s, %s, 'ATMOSPHERE', 'd', ARRAY['e'])",
                     (pid, code, name))
        conn.execute("INSERT INTO ai.keyword_preset_embedding (preset_id, embedding_profile, "
                     "embedding) VALUES (%s, %s, %s::vector)", (pid, PROFILE, str(vector)))


def import_settings(tmp_path: Path, db_url: str, **overrides: object) -> Settings:
    """Test settings for the fake profile; the candidate floor is high so only the texts of
    :data:`TEXT_VECTORS` get a candidate (and so a keyword) — the counts are exact."""
    values: dict[str, object] = {
        "embedding_profile": PROFILE, "embedding_dimension": DIM, "candidate_floor": 0.99,
        "embedding_timeout": 5.0, "llm_timeout": 5.0, "embedding_batch_wait_ms": 1.0,
    }
    values.update(overrides)
    return make_settings(tmp_path, db_url, **values)


def place(ext: str, name: str = "카페", lat: float = 37.5, lng: float = 127.0) -> dict[str, Any]:
    return {"name": name, "external_place_id": ext, "address": "서울 (테스트)", "lat": lat, "lng": lng}


def note(member: str, record: str, ext: str, context: str, **place_kw: Any) -> str:
    """One import line (the format of shared/data/place_notes.jsonl)."""
    return json.dumps({"member": member, "record": record, "place": place(ext, **place_kw),
                       "context": context}, ensure_ascii=False)


def write_jsonl(path: Path, lines: Iterable[str]) -> Path:
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return path


def quiet_console() -> Console:
    """A console that renders into memory (``console.export_text()`` reads it back)."""
    return Console(record=True, file=io.StringIO(), width=200)


def count(conn: psycopg.Connection, sql: str, *params: object) -> int:
    return int(conn.execute(sql, params).fetchone()[0])


def db_counts(conn: psycopg.Connection) -> dict[str, int]:
    """Rows per table the importer writes (core and the state table)."""
    return {table: count(conn, f"SELECT count(*) FROM {table}")  # fixed names, no input
            for table in ("core.member", "core.place", "core.record", "core.context",
                          "ai.context_ai_state")}


@pytest.fixture
def presets(sync_conn: psycopg.Connection) -> None:
    seed_presets(sync_conn)


@pytest.fixture
def provider() -> FakeEmbeddingProvider:
    return FakeEmbeddingProvider(PROFILE, DIM, vectors=TEXT_VECTORS)


@pytest.fixture
def isettings(tmp_path: Path, db_url: str) -> Settings:
    return import_settings(tmp_path, db_url)


@pytest.fixture
async def parts(isettings: Settings, engine, presets, provider: FakeEmbeddingProvider,
                judge: FakeJudge) -> AsyncIterator[Components]:
    """core + ai runtimes in this process (in-process adapter), fake providers."""
    async with running_components(config_of(isettings), engine,
                                  ai_kwargs={"provider": provider, "judge": judge}) as started:
        yield started
