"""``/ops/v1``: what the ``pinlog`` command asks a running server (issue 29) — the internal
secret, the same JSON as the in-process functions, errors in the one shape."""

from __future__ import annotations

import json

from pinlog.contracts import SECRET_HEADER
from pinlog.core.api.routes.ops import records_json, search_json, status_json
from tests.conftest import TEST_SECRET
from tests.integration.console.conftest import SECRET_NOTE, console_app, create_notes

OK = {SECRET_HEADER: TEST_SECRET}


async def test_the_operator_api_needs_the_internal_secret(settings, db_url, provider, judge,
                                                          presets):
    async with console_app(settings, db_url, provider, judge) as app:
        for headers in ({}, {SECRET_HEADER: "wrong"}, {SECRET_HEADER: TEST_SECRET + "x"}):
            assert (await app.http.get("/ops/v1/status", headers=headers)).status_code == 401
            assert (await app.http.get("/ops/v1/records?member=1", headers=headers)).status_code == 401
            answer = await app.http.post("/ops/v1/search", headers=headers,
                                         json={"member": "1", "query": "x"})
            assert answer.status_code == 401 and answer.json()["error"] == "UNAUTHORIZED"


async def test_answers_are_the_commands_json(settings, db_url, provider, judge, presets, sync_conn):
    async with console_app(settings, db_url, provider, judge) as app:
        member_id, contexts = await create_notes(app, [SECRET_NOTE])
        core = app.core
        searched = await app.http.post("/ops/v1/search", headers=OK, json={
            "member": "console-member", "query": "한정식집", "limit": 5})
        assert searched.status_code == 200
        assert searched.text == await search_json(core.engine, core.config.search,
                                                  core.search_client, member_id, "한정식집", 5)
        assert json.loads(searched.text)["results"][0]["contextId"] == contexts[0]
        records = await app.http.get("/ops/v1/records", params={"member": f"id:{member_id}"},
                                     headers=OK)
        assert records.text == await records_json(core.service, member_id)
        status = await app.http.get("/ops/v1/status", headers=OK)
        assert json.loads(status.text)["rows"] == json.loads(
            await status_json(core.engine, core.config.status))["rows"]
        assert json.loads(status.text)["rows"]["keyword"]["COMPLETED"] == 1
        missing = await app.http.get("/ops/v1/records", params={"member": "nobody"}, headers=OK)
        assert missing.status_code == 404 and set(missing.json()) >= {"error", "message"}
        blank = await app.http.post("/ops/v1/search", headers=OK, json={"member": "1", "query": " "})
        assert blank.status_code == 422
