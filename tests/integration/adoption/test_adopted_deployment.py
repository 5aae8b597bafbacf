"""Issue 14 acceptance: our ai side replaces the reference AI server on the reference backend's
database without changing the backend or losing a row.

Reference-shaped database → ``pinlog migrate --adopt`` (dry run, then twice) → the ai component
alone (what ``pinlog serve --components ai`` runs) → the backend's own calls and statements
(insert PENDING, cancel, its rescan claim with ``updated_at = now()``, its finalizer, ``POST
/internal/v1/context/process`` and ``/internal/v1/search``) → every context ends in the right final
state, nothing of the backend's changed, search and keywords work.
"""

from __future__ import annotations

import psycopg
import pytest

from pinlog.contracts import PROCESS_PATH, SEARCH_PATH, SECRET_HEADER
from pinlog.errors import StartupError
from tests.conftest import TEST_JWT_SECRET, TEST_SECRET
from tests.fakes import FakeEmbeddingProvider, FakeJudge
from tests.helpers import pinlog_env, run_pinlog
from tests.integration.adoption.reference import (
    BACKEND_CANCEL,
    BACKEND_CANCEL_EMBEDDING,
    BACKEND_CLAIM,
    BACKEND_FINALIZE,
    BACKEND_INSERT,
    REF_DIM,
    REF_PROFILE,
    TEXTS,
    USER_ID,
    backend_snapshot,
    text_vectors,
)
from tests.integration.ai.support import ai_settings_for, basis, keyword_rows, statuses
from tests.support.app import running_ai as ai_only

HEADERS = {SECRET_HEADER: TEST_SECRET}
NEW_TEXTS = {7: TEXTS[2] + " 새 메모", 8: "곧 지울 메모", 9: "계속 실패하는 메모"}


def process(cid: int) -> dict:
    text = TEXTS.get(cid) or NEW_TEXTS[cid]
    return {"contextId": cid, "userId": USER_ID, "recordId": cid, "text": text, "placeMeta": None}


def adopt_cli(url: str, tmp_path, *args: str):
    env = pinlog_env(tmp_path / "data", PINLOG_DATABASE_URL=url,
                     PINLOG_EMBEDDING_PROVIDER="openai", PINLOG_EMBEDDING_PROFILE=REF_PROFILE,
                     PINLOG_INTERNAL_SECRETS=TEST_SECRET, PINLOG_JWT_SECRET=TEST_JWT_SECRET)
    return run_pinlog(["migrate", "--adopt", *args], env, timeout=120)


async def test_adopted_reference_deployment_end_to_end(reference_url, tmp_path):
    settings = ai_settings_for(tmp_path, reference_url, embedding_profile=REF_PROFILE,
                               embedding_dimension=REF_DIM)
    provider = FakeEmbeddingProvider(REF_PROFILE, REF_DIM, vectors={
        **text_vectors(REF_DIM), NEW_TEXTS[7]: basis(2, REF_DIM)})
    judge = FakeJudge()
    with psycopg.connect(reference_url, autocommit=True) as conn:
        backend_before = backend_snapshot(conn)

    # before the adoption the ai component refuses to start (its tables are missing)
    with pytest.raises(StartupError, match="pinlog migrate"):
        async with ai_only(settings, reference_url, provider, judge):
            pass

    dry = adopt_cli(reference_url, tmp_path, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert "database: foreign" in dry.stdout and "dry run: nothing changed" in dry.stdout
    first = adopt_cli(reference_url, tmp_path)
    second = adopt_cli(reference_url, tmp_path)
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    assert "nothing to add" in second.stdout and "(no change)" in second.stdout

    with psycopg.connect(reference_url, autocommit=True) as conn:
        async with ai_only(settings, reference_url, provider, judge) as (client, ai):
            ready = await client.get("/ready")
            assert ready.status_code == 200, ready.text   # our revision + presets loaded

            # the backend's new contexts: inserted PENDING, dispatched
            for cid in (7, 8, 9):
                conn.execute(BACKEND_INSERT, (cid,))
            conn.execute(BACKEND_CANCEL, (8,))              # deleted before it was processed
            conn.execute(BACKEND_CANCEL_EMBEDDING, (8,))
            for _ in range(3):                              # 9: the backend gives up 3 times
                conn.execute(BACKEND_CLAIM, (9,))
            conn.execute(BACKEND_FINALIZE, (9,))
            for cid in (7, 8, 9, 3, 4):
                r = await client.post(PROCESS_PATH, json=process(cid), headers=HEADERS)
                assert r.status_code == 202
            # 2 crashed mid-embedding: a re-send WITHOUT the backend's claim is a live stage
            r = await client.post(PROCESS_PATH, json=process(2), headers=HEADERS)
            await ai.join()
            assert statuses(conn, 2) == ("PROCESSING", "PENDING")

            # the backend's rescan: claim (retry_count + 1, updated_at = now()), re-send
            for cid in (1, 2, 5, 6):
                assert conn.execute(BACKEND_CLAIM, (cid,)).fetchone() is not None
                r = await client.post(PROCESS_PATH, json=process(cid), headers=HEADERS)
                assert r.status_code == 202
            await ai.join()

            # an unknown field from a newer backend is ignored
            search = await client.post(SEARCH_PATH, headers=HEADERS, json={
                "userId": USER_ID, "query": TEXTS[2], "limit": 20,
                "embeddingProfile": REF_PROFILE, "backendTraceId": "t-1"})
            mismatch = await client.post(SEARCH_PATH, headers=HEADERS, json={
                "userId": USER_ID, "query": TEXTS[2], "embeddingProfile": "other-profile"})

        final = {cid: statuses(conn, cid) for cid in range(1, 10)}
        assert final == {
            1: ("COMPLETED", "COMPLETED"), 2: ("COMPLETED", "COMPLETED"),
            3: ("COMPLETED", "COMPLETED"), 4: ("CANCELLED", "CANCELLED"),
            5: ("COMPLETED", "COMPLETED"), 6: ("COMPLETED", "COMPLETED"),
            7: ("COMPLETED", "COMPLETED"), 8: ("CANCELLED", "CANCELLED"),
            9: ("FAILED", "FAILED"),
        }
        # keywords: judged by our side for 1, 2, 5, 6, 7; the reference's row of 3 untouched
        assert {cid: [k for k, *_ in keyword_rows(conn, cid)] for cid in (1, 2, 3, 5, 6, 7)} == \
            {1: [101], 2: [301], 3: [301], 5: [101], 6: [301], 7: [301]}
        # hash-less embeddings are trusted: 5 and 6 kept their reference vector (no hash, not
        # re-embedded); 2 and 7 were embedded by us (hash written)
        hashes = dict(conn.execute("SELECT context_id, text_sha256 IS NOT NULL "
                                   "FROM ai.context_embedding").fetchall())
        assert hashes == {1: True, 2: True, 3: False, 4: False, 5: False, 6: False, 7: True}
        embedded = set(provider.texts)
        assert TEXTS[5] not in embedded and TEXTS[6] not in embedded and TEXTS[3] not in embedded
        assert NEW_TEXTS[8] not in embedded and NEW_TEXTS[9] not in embedded
        # the re-claims were the retry rule, recorded in the history
        reasons = [r for (r,) in conn.execute(
            "SELECT reason FROM ai.context_ai_event WHERE context_id IN (2, 6) "
            "AND from_status = 'PROCESSING' AND to_status = 'PROCESSING' ORDER BY id").fetchall()]
        assert reasons == ["reclaimed: retry_count rose since the stage started"] * 2
        # nothing of the backend's changed: its schema, rows and version table
        assert backend_snapshot(conn) == backend_before
        assert conn.execute("SELECT to_regclass('public.alembic_version')").fetchone()[0] is None

    assert search.status_code == 200, search.text
    hits = {h["recordId"]: h["keywordMatched"] for h in search.json()["results"]}
    assert hits == {2: True, 3: True, 6: True, 7: True}
    assert mismatch.status_code == 422
    assert mismatch.json()["requestProfile"] == "other-profile"
    assert mismatch.json()["serverProfile"] == REF_PROFILE
