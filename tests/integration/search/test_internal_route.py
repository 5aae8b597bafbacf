"""``POST /internal/v1/search`` through the real ASGI app (ai component only) and the real
database (SPEC §10): secret first (401, no model call), body validation (422), profile mismatch
(422 naming both profiles, no model call), camelCase results, the calibrated cuts in force."""

from __future__ import annotations

import pytest

from pinlog import metrics
from pinlog.contracts import SEARCH_PATH, SECRET_HEADER
from tests.conftest import TEST_SECRET
from tests.integration.ai.support import PROFILE, insert_embedding, insert_state
from tests.integration.search.conftest import QUERY, at_cosine, running_app, search_settings_for

OTHER_PROFILE = "openai-text-embedding-3-small-1536-cosine-v1"


def body(**extra) -> dict:
    return {"userId": 7, "query": QUERY, "limit": 20, "embeddingProfile": PROFILE, **extra}


def seed(conn, context_id: int, record_id: int, cosine: float, user_id: int = 7) -> None:
    insert_state(conn, context_id, "COMPLETED", "COMPLETED")
    insert_embedding(conn, context_id, at_cosine(cosine, axis=1 + context_id % 7),
                     user_id=user_id, record_id=record_id)


def _count(outcome: str) -> float:
    return metrics.SEARCH_REQUESTS.labels(outcome)._value.get()


async def test_200_camel_case_results_best_first(search_settings, db_url, provider, judge,
                                                 presets, sync_conn):
    seed(sync_conn, 1, 70, 0.9)
    seed(sync_conn, 2, 71, 0.95)
    seed(sync_conn, 3, 80, 1.0, user_id=8)
    async with running_app(search_settings, db_url, provider, judge, ("ai",)) as app:
        response = await app.http.post(SEARCH_PATH, json=body(limit=100),
                                       headers={SECRET_HEADER: TEST_SECRET})
    assert response.status_code == 200
    results = response.json()["results"]
    assert [(r["recordId"], r["contextId"]) for r in results] == [(71, 2), (70, 1)]
    # the default mode is the hybrid decision (SPEC §10 adopters): matchedBy says which channel
    assert set(results[0]) == {"recordId", "contextId", "similarity", "keywordMatched", "matchedBy"}
    assert results[0]["matchedBy"] == ["vector"]
    assert results[0]["similarity"] == pytest.approx(0.95, abs=1e-5)
    assert provider.calls == 1 and provider.kinds == ["query"]


@pytest.mark.parametrize("headers", [{}, {SECRET_HEADER: "wrong"}, {SECRET_HEADER: ""},
                                     {SECRET_HEADER: TEST_SECRET + "x"}])
async def test_401_missing_or_wrong_secret_no_model_call(search_settings, db_url, provider, judge,
                                                         presets, sync_conn, headers):
    seed(sync_conn, 1, 70, 0.9)
    before = _count("unauthorized")
    async with running_app(search_settings, db_url, provider, judge, ("ai",)) as app:
        response = await app.http.post(SEARCH_PATH, json=body(), headers=headers)
        # checked before the body and before the profile
        bad_body = await app.http.post(SEARCH_PATH, content=b"{nope", headers=headers)
        mismatch = await app.http.post(SEARCH_PATH, json=body(embeddingProfile=OTHER_PROFILE),
                                       headers=headers)
    assert [r.status_code for r in (response, bad_body, mismatch)] == [401, 401, 401]
    assert response.json() == {"error": "UNAUTHORIZED", "message": "missing or wrong X-Internal-Secret"}
    assert PROFILE not in mismatch.text and OTHER_PROFILE not in mismatch.text
    assert provider.calls == 0
    assert _count("unauthorized") == before + 3


async def test_422_profile_mismatch_names_both_profiles_and_calls_no_model(
        search_settings, db_url, provider, judge, presets, sync_conn):
    seed(sync_conn, 1, 70, 0.9)
    before = _count("profile_mismatch")
    async with running_app(search_settings, db_url, provider, judge, ("ai",)) as app:
        response = await app.http.post(SEARCH_PATH, json=body(embeddingProfile=OTHER_PROFILE),
                                       headers={SECRET_HEADER: TEST_SECRET})
    assert response.status_code == 422
    assert OTHER_PROFILE in response.text and PROFILE in response.text
    assert response.json() == {"error": "PROFILE_MISMATCH", "message": "embedding profile mismatch",
                               "requested": OTHER_PROFILE,
                               "server": PROFILE, "requestProfile": OTHER_PROFILE,
                               "serverProfile": PROFILE}
    assert provider.calls == 0 and provider.texts == []
    assert _count("profile_mismatch") == before + 1


@pytest.mark.parametrize("bad", [
    {"limit": 0}, {"limit": 101}, {"query": ""}, {"userId": 0}, {"embeddingProfile": ""},
    {"limit": "5"}, {"userId": 7.0},  # types stay strict (unknown fields are ignored: issue 14)
])
async def test_422_invalid_body_no_model_call(search_settings, db_url, provider, judge, presets,
                                              bad):
    async with running_app(search_settings, db_url, provider, judge, ("ai",)) as app:
        response = await app.http.post(SEARCH_PATH, json=body(**bad),
                                       headers={SECRET_HEADER: TEST_SECRET})
        missing = await app.http.post(SEARCH_PATH, json={"userId": 7, "query": QUERY},
                                      headers={SECRET_HEADER: TEST_SECRET})
    assert response.status_code == 422 and response.json() == {
        "error": "INVALID_INPUT", "message": "the request body is not a valid request for this route"}
    assert missing.status_code == 422  # embeddingProfile is required
    assert provider.calls == 0


async def test_limit_defaults_to_20(search_settings, db_url, provider, judge, presets, sync_conn):
    for i in range(25):
        seed(sync_conn, 100 + i, 700 + i, 0.99 - i * 0.001)
    async with running_app(search_settings, db_url, provider, judge, ("ai",)) as app:
        payload = body()
        del payload["limit"]
        response = await app.http.post(SEARCH_PATH, json=payload, headers={SECRET_HEADER: TEST_SECRET})
    assert response.status_code == 200 and len(response.json()["results"]) == 20


async def test_configured_cuts_are_in_force_and_cut_the_top_hit_too(tmp_path, db_url, provider,
                                                                    judge, presets, sync_conn):
    """SPEC §10 (issue 10): no "keep the top hit" rule — under the floor nothing is returned,
    but requested contexts are still scored (core merges the channels)."""
    settings = search_settings_for(tmp_path, db_url, search_floor=0.99,
                                   search_short_query_floor=0.99, search_ratio=0.99)
    seed(sync_conn, 1, 70, 0.30)
    seed(sync_conn, 2, 71, 0.29)
    async with running_app(settings, db_url, provider, judge, ("ai",)) as app:
        response = await app.http.post(SEARCH_PATH, json=body(),
                                       headers={SECRET_HEADER: TEST_SECRET})
        scored = await app.http.post(SEARCH_PATH, json={**body(), "recordIds": [71, 999],
                                                        "mode": "vector"},
                                     headers={SECRET_HEADER: TEST_SECRET})
    assert response.status_code == 200 and response.json() == {"results": [], "scored": []}
    assert scored.json()["results"] == []
    assert [(h["recordId"], h["contextId"]) for h in scored.json()["scored"]] == [(71, 2)]
    assert scored.json()["scored"][0]["similarity"] == pytest.approx(0.29, abs=1e-5)


async def test_503_when_the_query_cannot_be_embedded(search_settings, db_url, provider, judge,
                                                     presets, sync_conn):
    from pinlog.ai.errors import PermanentModelError

    seed(sync_conn, 1, 70, 0.9)
    async with running_app(search_settings, db_url, provider, judge, ("ai",)) as app:
        provider.fail_next(PermanentModelError, message="upstream said no: sk-secret123")
        response = await app.http.post(SEARCH_PATH, json=body(),
                                       headers={SECRET_HEADER: TEST_SECRET})
    assert response.status_code == 503
    assert response.json() == {"error": "SEARCH_UNAVAILABLE",
                               "message": "search unavailable, retry later"}
    assert "sk-secret" not in response.text


@pytest.mark.parametrize("doubt", [None, 4.5])
async def test_the_doubt_strength_is_answered_only_when_asked_and_null_survives_the_wire(
        tmp_path, db_url, provider, judge, presets, sync_conn, doubt):
    """SPEC §9.1/§10: modes vector and score answer ``doubtStrength`` (the answering profile's;
    ``null``: it has none, which is not "absent") when the request asks ``withDoubtStrength``;
    unasked, the answer has no such field, so a core of the previous release (which refuses
    unknown answer fields) keeps working during a rolling upgrade."""
    from pinlog.contracts import SearchResponse

    settings = search_settings_for(tmp_path, db_url, search_doubt_strength=doubt)
    seed(sync_conn, 1, 70, 0.9)
    headers = {SECRET_HEADER: TEST_SECRET}
    async with running_app(settings, db_url, provider, judge, ("ai",)) as app:
        answers = {(mode, asked): await app.http.post(
            SEARCH_PATH, json={**body(), "mode": mode, "recordIds": [70],
                               **({"withDoubtStrength": True} if asked else {})}, headers=headers)
            for mode in ("vector", "score") for asked in (False, True)}
    for (mode, asked), response in answers.items():
        assert response.status_code == 200
        answer = response.json()
        assert ("doubtStrength" in answer) is asked, (mode, asked)
        if asked:
            assert answer["doubtStrength"] == doubt
            # core's reading: the answer's value, null included, not core's own rule
            assert SearchResponse.model_validate(answer).doubt_or(-1.0) == doubt
        else:
            assert SearchResponse.model_validate(answer).doubt_or(-1.0) == -1.0
