"""Wire compatibility with the reference backend (issue 14, SPEC §10): search hits carry
``keywordMatched``; a profile mismatch answers with ``requestProfile``/``serverProfile`` next to
our keys (tests/integration/search/test_internal_route.py); unknown fields in internal requests
are ignored and logged once per field name, while types stay strict."""

from __future__ import annotations

import json
import logging

from pinlog import contracts
from pinlog.logs import JsonFormatter
from pinlog.contracts import PROCESS_PATH, SEARCH_PATH, SECRET_HEADER
from tests.conftest import TEST_SECRET
from tests.integration.ai.support import insert_state, statuses
from tests.integration.search.conftest import QUERY, running_app
from tests.integration.search.test_internal_route import body, seed

HEADERS = {SECRET_HEADER: TEST_SECRET}


def keyword(conn, context_id: int, keyword_id: int) -> None:
    conn.execute("INSERT INTO ai.context_keyword VALUES (%s, %s, 0.9, 1)", (context_id, keyword_id))


async def test_keyword_matched_is_true_only_for_a_record_keyword_among_the_querys_best_presets(
        search_settings, db_url, provider, judge, presets, sync_conn):
    # QUERY's vector is e_0 = preset 101 (WITH_FRIENDS); 301 (QUIET) is orthogonal to it.
    seed(sync_conn, 1, 70, 0.9)
    keyword(sync_conn, 1, 101)           # record 70: the query's own best preset → true
    seed(sync_conn, 2, 71, 0.95)
    keyword(sync_conn, 2, 301)           # record 71: a keyword, but not one the query matches
    seed(sync_conn, 3, 72, 0.92)
    keyword(sync_conn, 3, 101)
    sync_conn.execute("UPDATE ai.context_ai_state SET keyword_status = 'PENDING' "
                      "WHERE context_id = 3")  # record 72: its keyword stage is not COMPLETED
    async with running_app(search_settings, db_url, provider, judge, ("ai",)) as app:
        response = await app.http.post(SEARCH_PATH, json=body(limit=100), headers=HEADERS)
    assert response.status_code == 200
    matched = {r["recordId"]: r["keywordMatched"] for r in response.json()["results"]}
    assert matched == {70: True, 71: False, 72: False}


async def test_unknown_fields_are_ignored_and_logged_once_per_name(
        search_settings, db_url, provider, judge, presets, sync_conn, caplog, monkeypatch):
    monkeypatch.setattr(contracts, "_SEEN_UNKNOWN", set())  # "once" is per process
    seed(sync_conn, 1, 70, 0.9)
    insert_state(sync_conn, 11)
    process = {"contextId": 11, "userId": 7, "recordId": 70, "text": QUERY, "placeMeta": None}
    caplog.set_level(logging.WARNING, logger="pinlog.contracts")
    async with running_app(search_settings, db_url, provider, judge, ("ai",)) as app:
        searched = [await app.http.post(SEARCH_PATH, json=body(newBackendField=n), headers=HEADERS)
                    for n in (1, 2)]
        accepted = [await app.http.post(PROCESS_PATH, json={**process, "traceTag": t,
                                                            "newBackendField": t},
                                        headers=HEADERS) for t in ("a", "b")]
        strict = await app.http.post(PROCESS_PATH, json={**process, "contextId": "11",
                                                         "traceTag": "c"}, headers=HEADERS)
        await app.settle()
    assert [r.status_code for r in searched] == [200, 200]
    assert [r.status_code for r in accepted] == [202, 202]
    assert strict.status_code == 422  # types stay strict
    assert statuses(sync_conn, 11) == ("COMPLETED", "COMPLETED")
    logged = [(r.request_model, r.field) for r in caplog.records
              if r.name == "pinlog.contracts"]
    # once per (request model, field name), whatever the number of requests
    assert sorted(set(logged)) == sorted(logged)
    assert {("SearchRequest", "newBackendField"), ("ProcessRequest", "traceTag"),
            ("ProcessRequest", "newBackendField")} <= set(logged)
    # the log line an operator reads names the model and the field (never a value)
    lines = [json.loads(JsonFormatter().format(r)) for r in caplog.records
             if r.name == "pinlog.contracts"]
    assert {(line["request_model"], line["field"]) for line in lines} == set(logged)


async def test_null_for_an_optional_search_field_means_not_given(
        search_settings, db_url, provider, judge, presets, sync_conn):
    """A backend that serialises absent fields as null (``"limit": null``, ``"recordIds":
    null``) gets the defaults, not a 422; a null for a required field stays a 422."""
    seed(sync_conn, 1, 70, 0.9)
    async with running_app(search_settings, db_url, provider, judge, ("ai",)) as app:
        nulls = await app.http.post(SEARCH_PATH, json=body(limit=None, recordIds=None),
                                    headers=HEADERS)
        given = await app.http.post(SEARCH_PATH, json=body(), headers=HEADERS)
        required = await app.http.post(SEARCH_PATH, json=body(query=None), headers=HEADERS)
    assert nulls.status_code == 200, nulls.text
    assert nulls.json() == given.json()
    assert required.status_code == 422
