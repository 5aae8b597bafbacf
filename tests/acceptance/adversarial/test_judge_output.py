"""A judge answer that is valid by the schema but carries junk in the analysis-only field
``unmatchedConcepts`` (SPEC §8: never shown to members) must not destroy the keyword result."""

from __future__ import annotations


import httpx

from pinlog.ai.judges.llm import LlmJudge
from pinlog.ai.ports import JudgeAnswer, Pick
from tests.acceptance.adversarial.conftest import full_app, record_body
from tests.integration.ai.support import QUIET_TEXT, seed_presets


def _llm(unmatched_json: str) -> LlmJudge:
    content = '{"selected":[{"keywordId":301,"confidence":0.9}],"unmatchedConcepts":' \
              + unmatched_json + "}"

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"choices": [{"message": {"content": content}}]})

    async def no_sleep(_: float) -> None:
        return None

    return LlmJudge(base_url="http://llm.test/v1", api_key="k", chain=["m"], sleep=no_sleep,
                    client=httpx.AsyncClient(transport=httpx.MockTransport(handler)))


async def _run(settings, db_url, sync_conn, provider, judge):
    seed_presets(sync_conn)
    async with full_app(settings, db_url, provider, judge) as full:
        _, auth = await full.member()
        r = await full.http.post("/v1/records", json=record_body(text=QUIET_TEXT), headers=auth)
        cid = r.json()["contextId"]
        await full.settle()
    return cid, sync_conn.execute(
        "SELECT embedding_status, keyword_status, last_error FROM ai.context_ai_state "
        "WHERE context_id = %s", (cid,)).fetchone()


async def test_nul_in_unmatched_concepts_does_not_fail_keywords(adv_settings, db_url, sync_conn,
                                                                 provider):
    _, (emb, kw, err) = await _run(adv_settings, db_url, sync_conn, provider,
                                   _llm('["quiet\\u0000place"]'))
    assert (emb, kw) == ("COMPLETED", "COMPLETED"), err


async def test_lone_surrogate_in_unmatched_concepts_does_not_fail_keywords(adv_settings, db_url,
                                                                           sync_conn, provider):
    _, (emb, kw, err) = await _run(adv_settings, db_url, sync_conn, provider,
                                   _llm('["quiet\\ud800"]'))
    assert (emb, kw) == ("COMPLETED", "COMPLETED"), err


async def test_out_of_range_and_odd_picks_are_dropped_not_fatal(adv_settings, db_url, sync_conn,
                                                                provider):
    """Holds: ids that are not candidates (huge, negative, BLOCKED), NaN/out-of-range
    confidences and duplicates are mapped away; the stage completes."""
    picks = (Pick(2**40, 0.5), Pick(-1, 0.5), Pick(401, 0.99), Pick(301, float("nan")),
             Pick(301, 1.5), Pick(301, 0.2), Pick(301, 0.9996))
    from tests.fakes import FakeJudge

    judge = FakeJudge(answer=JudgeAnswer(picks=picks, model_profile="fake",
                                         unmatched_concepts=("x" * 50_000,) * 20))
    cid, (emb, kw, err) = await _run(adv_settings, db_url, sync_conn, provider, judge)
    assert (emb, kw) == ("COMPLETED", "COMPLETED"), err
    assert sync_conn.execute("SELECT keyword_id, confidence FROM ai.context_keyword "
                             "WHERE context_id = %s", (cid,)).fetchall() == [(301, 1)]
