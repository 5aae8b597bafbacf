"""The public /v1 API end to end on a real PostgreSQL (SPEC §4, §8, §11 #1, #4, #21)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import jwt
import pytest

from tests.acceptance.core.conftest import record_body, start_api
from tests.conftest import TEST_JWT_SECRET
from tests.integration.core.support import (
    Receiver,
    add_presets,
    complete,
    count,
    dispatch_count,
    set_status,
    snapshot,
    state_row,
)


async def test_scenario_01_edit_while_processing(api, sync_conn):
    add_presets(sync_conn)
    member, auth = await api.member()
    created = await api.http.post("/v1/records", json=record_body(text="부모님과 조용한 한식집"),
                                  headers=auth)
    assert created.status_code == 201
    record_id, old = created.json()["recordId"], created.json()["contextId"]
    # the ai side is mid-way: embedding stored and COMPLETED, keyword stage PROCESSING
    complete(sync_conn, old, [1], user_id=member, record_id=record_id)
    set_status(sync_conn, old, "COMPLETED", "PROCESSING")
    sync_conn.execute("UPDATE ai.context_ai_state SET retry_count = 2 WHERE context_id = %s", (old,))

    edited = await api.http.put(f"/v1/contexts/{old}", json={"text": "친구들과 시끌벅적"}, headers=auth)
    assert edited.status_code == 200
    new = edited.json()["contextId"]
    assert new != old
    # old: soft-deleted, both stages CANCELLED, embedding is_deleted
    assert sync_conn.execute("SELECT deleted_at IS NOT NULL, body FROM core.context WHERE id = %s",
                             (old,)).fetchone() == (True, "부모님과 조용한 한식집")
    assert state_row(sync_conn, old) == ("CANCELLED", "CANCELLED")
    assert sync_conn.execute("SELECT is_deleted FROM ai.context_embedding WHERE context_id = %s",
                             (old,)).fetchone() == (True,)
    # new: a new id, PENDING/PENDING, nothing inherited (no retry count, no embedding, no keywords)
    assert sync_conn.execute(
        "SELECT embedding_status, keyword_status, retry_count, rescanned_at, last_error "
        "FROM ai.context_ai_state WHERE context_id = %s", (new,)).fetchone() == (
        "PENDING", "PENDING", 0, None, None)
    assert count(sync_conn, "SELECT count(*) FROM ai.context_embedding WHERE context_id = %s", new) == 0
    assert count(sync_conn, "SELECT count(*) FROM ai.context_keyword WHERE context_id = %s", new) == 0
    assert sync_conn.execute("SELECT body, record_id FROM core.context WHERE id = %s AND "
                             "deleted_at IS NULL", (new,)).fetchone() == ("친구들과 시끌벅적", record_id)
    shown = (await api.http.get(f"/v1/records/{record_id}", headers=auth)).json()
    assert [(c["contextId"], c["text"], c["aiStatus"]) for c in shown["contexts"]] == [
        (new, "친구들과 시끌벅적", "processing")]
    # processed independently: the new context completes on its own
    complete(sync_conn, new, [5], user_id=member, record_id=record_id)
    shown = (await api.http.get(f"/v1/records/{record_id}", headers=auth)).json()
    assert shown["contexts"][0]["aiStatus"] == "ready" and shown["keywords"] == ["조용한"]
    assert state_row(sync_conn, old) == ("CANCELLED", "CANCELLED")
    # editing the old id again is impossible
    again = await api.http.put(f"/v1/contexts/{old}", json={"text": "x"}, headers=auth)
    assert again.status_code == 404


async def test_scenario_04_keyword_view_after_edit_excludes_old_keywords(api, sync_conn):
    add_presets(sync_conn)
    member, auth = await api.member()
    created = (await api.http.post("/v1/records", json=record_body(), headers=auth)).json()
    record_id, old = created["recordId"], created["contextId"]
    complete(sync_conn, old, [1, 2], user_id=member, record_id=record_id)
    shown = (await api.http.get(f"/v1/records/{record_id}", headers=auth)).json()
    assert shown["keywords"] == ["친구와", "데이트"]
    public_path = f"/v1/public/records/{shown['publicId']}"
    assert (await api.http.get(public_path, headers=auth)).json()["keywords"] == ["친구와"]

    new = (await api.http.put(f"/v1/contexts/{old}", json={"text": "혼자 조용히"},
                              headers=auth)).json()["contextId"]
    # the old keyword rows remain, excluded only by CANCELLED
    assert count(sync_conn, "SELECT count(*) FROM ai.context_keyword WHERE context_id = %s", old) == 2
    shown = (await api.http.get(f"/v1/records/{record_id}", headers=auth)).json()
    assert shown["keywords"] == [] and shown["contexts"][0]["keywords"] == []
    listed = (await api.http.get("/v1/records", headers=auth)).json()["records"]
    assert listed[0]["keywords"] == []
    _, other_auth = await api.member()
    public = (await api.http.get(public_path, headers=other_auth)).json()
    assert public["keywords"] == []
    # even if the old context's row were (wrongly) revived as active, its CANCELLED state hides it
    sync_conn.execute("UPDATE core.context SET deleted_at = NULL WHERE id = %s", (old,))
    shown = (await api.http.get(f"/v1/records/{record_id}", headers=auth)).json()
    assert shown["keywords"] == []
    complete(sync_conn, new, [5], user_id=member, record_id=record_id)
    shown = (await api.http.get(f"/v1/records/{record_id}", headers=auth)).json()
    assert shown["keywords"] == ["조용한"]


async def test_scenario_21_unfinished_or_failed_ai_records_are_created_listed_and_shown(api, sync_conn):
    add_presets(sync_conn)
    member, auth = await api.member()
    ids = []
    for n, (emb, kw) in enumerate([("PENDING", "PENDING"), ("PROCESSING", "PENDING"),
                                   ("FAILED", "PENDING"), ("COMPLETED", "FAILED")], start=1):
        created = await api.http.post("/v1/records", json=record_body(n, text=f"메모 {n}",
                                                                      name=f"장소 {n}"), headers=auth)
        assert created.status_code == 201
        ids.append((created.json()["recordId"], created.json()["contextId"]))
        set_status(sync_conn, created.json()["contextId"], emb, kw)
    # keyword rows exist for the last one, but its keyword stage FAILED: not shown
    sync_conn.execute("INSERT INTO ai.context_keyword (context_id, keyword_id, confidence, "
                      "preset_version) VALUES (%s, 1, 0.9, 1)", (ids[3][1],))
    listed = (await api.http.get("/v1/records", headers=auth)).json()["records"]
    assert [r["recordId"] for r in listed] == [r for r, _ in reversed(ids)]
    statuses = {r["recordId"]: (r["contexts"][0]["aiStatus"], r["keywords"],
                                r["contexts"][0]["keywords"], r["place"]["name"]) for r in listed}
    assert statuses == {
        ids[0][0]: ("processing", [], [], "장소 1"), ids[1][0]: ("processing", [], [], "장소 2"),
        ids[2][0]: ("failed", [], [], "장소 3"), ids[3][0]: ("failed", [], [], "장소 4"),
    }
    for record_id, context_id in ids:
        shown = await api.http.get(f"/v1/records/{record_id}", headers=auth)
        assert shown.status_code == 200
        assert shown.json()["contexts"][0]["contextId"] == context_id
        assert shown.json()["keywords"] == []


async def test_record_response_shape(api):
    _, auth = await api.member()
    created = (await api.http.post("/v1/records", json=record_body(), headers=auth)).json()
    shown = (await api.http.get(f"/v1/records/{created['recordId']}", headers=auth)).json()
    assert shown == {
        "recordId": created["recordId"], "publicId": created["publicId"],
        "place": {"externalPlaceId": "kakao-1", "name": "카페 온다", "address": "서울 중구",
                  "roadAddress": None, "lat": 37.56, "lng": 126.97},
        "keywords": [],
        "contexts": [{"contextId": created["contextId"], "text": "조용한 카페",
                      "aiStatus": "processing", "keywords": []}],
    }
    public = (await api.http.get(f"/v1/public/records/{created['publicId']}",
                                 headers=auth)).json()
    assert set(public) == {"publicId", "place", "keywords"}
    assert "조용한 카페" not in str(public) and str(created["contextId"]) not in str(public["keywords"])


async def test_add_edit_delete_context_and_record_lifecycle(api, sync_conn):
    _, auth = await api.member()
    created = (await api.http.post("/v1/records", json=record_body(), headers=auth)).json()
    record_id, first = created["recordId"], created["contextId"]
    added = await api.http.post(f"/v1/records/{record_id}/contexts", json={"text": "둘째"},
                                headers=auth)
    assert added.status_code == 201
    second = added.json()["contextId"]
    duplicate = await api.http.post("/v1/records", json=record_body(), headers=auth)
    assert duplicate.status_code == 409
    assert duplicate.json() == {"error": "RECORD_EXISTS", "recordId": record_id,
                                "message": "an active record already exists for this place"}

    refused = await api.http.delete(f"/v1/records/{record_id}", headers=auth)
    assert refused.status_code == 409 and refused.json()["error"] == "RECORD_HAS_CONTEXTS"
    assert (await api.http.delete(f"/v1/contexts/{first}", headers=auth)).status_code == 204
    last = await api.http.delete(f"/v1/contexts/{second}", headers=auth)
    assert last.status_code == 409
    assert last.json()["error"] == "LAST_CONTEXT"
    assert last.json()["forcedDeleteWouldRemove"] == {"recordId": record_id,
                                                      "placeName": "카페 온다", "contexts": 1}
    assert state_row(sync_conn, second) == ("PENDING", "PENDING")
    assert (await api.http.delete(f"/v1/records/{record_id}?force=true",
                                  headers=auth)).status_code == 204
    assert state_row(sync_conn, second) == ("CANCELLED", "CANCELLED")
    assert (await api.http.get(f"/v1/records/{record_id}", headers=auth)).status_code == 404
    assert (await api.http.get("/v1/records", headers=auth)).json() == {
        "records": [], "total": 0, "nextCursor": None}


async def test_another_members_ids_give_404_and_change_nothing(api, sync_conn):
    _, owner = await api.member()
    _, stranger = await api.member()
    created = (await api.http.post("/v1/records", json=record_body(), headers=owner)).json()
    record_id, context_id = created["recordId"], created["contextId"]
    await api.http.post(f"/v1/records/{record_id}/contexts", json={"text": "둘"}, headers=owner)
    before = snapshot(sync_conn)
    calls = [
        ("GET", f"/v1/records/{record_id}", None),
        ("POST", f"/v1/records/{record_id}/contexts", {"text": "x"}),
        ("DELETE", f"/v1/records/{record_id}?force=true", None),
        ("PUT", f"/v1/contexts/{context_id}", {"text": "x"}),
        ("DELETE", f"/v1/contexts/{context_id}", None),
    ]
    missing = [("GET", "/v1/records/999999", None), ("PUT", "/v1/contexts/999999", {"text": "x"}),
               ("DELETE", "/v1/contexts/999999", None)]
    bodies = set()
    for method, url, body in calls + missing:
        response = await api.http.request(method, url, json=body, headers=stranger)
        assert response.status_code == 404, (method, url)
        assert "카페" not in response.text and "조용한" not in response.text
        bodies.add((method, url.split("/")[2], response.text))
    # another member's id and a missing id answer identically
    assert len({(m, kind, text) for m, kind, text in bodies}) == len({(m, k) for m, k, _ in bodies})
    assert snapshot(sync_conn) == before
    assert (await api.http.get("/v1/records", headers=stranger)).json() == {
        "records": [], "total": 0, "nextCursor": None}
    # the public view of someone else's record is allowed (PUBLIC keywords only), by public id
    assert (await api.http.get(f"/v1/public/records/{created['publicId']}",
                               headers=stranger)).status_code == 200


@pytest.mark.parametrize("body,field", [
    (record_body(text=""), "text"), (record_body(text="   \n"), "text"),
    (record_body(text="x" * 2001), "text"), ({**record_body(), "extra": 1}, "extra"),
    ({"place": {**record_body()["place"], "lat": 95}, "text": "t"}, "place.lat"),
    ({"place": {**record_body()["place"], "lng": -181}, "text": "t"}, "place.lng"),
    ({"place": {**record_body()["place"], "lat": "37"}, "text": "t"}, "place.lat"),
    ({"place": {**record_body()["place"], "colour": "red"}, "text": "t"}, "place.colour"),
    ({"text": "t"}, "place"), (record_body(text=None), "text"),
])
async def test_invalid_create_is_422_with_a_clear_message_and_changes_nothing(api, sync_conn, body, field):
    _, auth = await api.member()
    before = snapshot(sync_conn)
    response = await api.http.post("/v1/records", json=body, headers=auth)
    assert response.status_code == 422
    payload = response.json()
    assert payload["error"] == "INVALID_INPUT" and field in payload["message"]
    assert "x" * 50 not in response.text  # the input is never echoed
    assert snapshot(sync_conn) == before


async def test_invalid_text_on_add_and_edit_is_422_and_changes_nothing(api, sync_conn):
    _, auth = await api.member()
    created = (await api.http.post("/v1/records", json=record_body(), headers=auth)).json()
    before = snapshot(sync_conn)
    for method, url in (("POST", f"/v1/records/{created['recordId']}/contexts"),
                        ("PUT", f"/v1/contexts/{created['contextId']}")):
        for body in ({"text": " "}, {"text": "가" * 2001}, {"text": "t", "contextId": 3}, {}, [1]):
            response = await api.http.request(method, url, json=body, headers=auth)
            assert response.status_code == 422, (method, body)
            assert response.json()["error"] == "INVALID_INPUT"
        response = await api.http.request(method, url, content=b"{not json", headers={
            **auth, "Content-Type": "application/json"})
        assert response.status_code == 422
    assert (await api.http.get("/v1/records/abc", headers=auth)).status_code == 422
    assert (await api.http.get(f"/v1/records/{2**63}", headers=auth)).status_code == 422
    assert snapshot(sync_conn) == before


async def test_authentication(api, sync_conn):
    member, auth = await api.member()
    assert (await api.http.get("/v1/me", headers=auth)).json() == {"memberId": member}
    expired = jwt.encode({"sub": str(member), "exp": datetime.now(UTC) - timedelta(seconds=1)},
                         TEST_JWT_SECRET, algorithm="HS256")
    forged = jwt.encode({"sub": str(member), "exp": datetime.now(UTC) + timedelta(hours=1)},
                        "another-secret-0123456789-abcdefghijklmn", algorithm="HS256")
    unknown = jwt.encode({"sub": "424242", "exp": datetime.now(UTC) + timedelta(hours=1)},
                         TEST_JWT_SECRET, algorithm="HS256")
    for headers in ({}, {"Authorization": "Basic abc"}, {"Authorization": "Bearer garbage"},
                    {"Authorization": f"Bearer {expired}"}, {"Authorization": f"Bearer {forged}"},
                    {"Authorization": f"Bearer {unknown}"}):
        for method, url, body in (("GET", "/v1/records", None), ("POST", "/v1/records", record_body()),
                                  ("DELETE", "/v1/me", None)):
            response = await api.http.request(method, url, json=body, headers=headers)
            assert response.status_code == 401, (headers, url)
            assert response.json() == {"error": "UNAUTHORIZED", "message": "missing or invalid token"}
    assert count(sync_conn, "SELECT count(*) FROM core.record") == 0


async def test_withdrawal_invalidates_everything_and_the_token_stops_working(api, sync_conn):
    add_presets(sync_conn)
    member, auth = await api.member()
    created = (await api.http.post("/v1/records", json=record_body(), headers=auth)).json()
    complete(sync_conn, created["contextId"], [1], user_id=member, record_id=created["recordId"])
    assert (await api.http.delete("/v1/me", headers=auth)).status_code == 204
    assert state_row(sync_conn, created["contextId"]) == ("CANCELLED", "CANCELLED")
    assert sync_conn.execute("SELECT is_deleted FROM ai.context_embedding").fetchall() == [(True,)]
    assert (await api.http.get("/v1/records", headers=auth)).status_code == 401
    _, other = await api.member()
    assert (await api.http.get(f"/v1/public/records/{created['publicId']}",
                               headers=other)).status_code == 404


async def test_openapi_documents_the_api(api):
    schema = (await api.http.get("/openapi.json")).json()
    paths = schema["paths"]
    assert {"/v1/records", "/v1/records/{record_id}", "/v1/records/{record_id}/contexts",
            "/v1/public/records/{public_id}", "/v1/contexts/{context_id}",
            "/v1/me"} <= set(paths)
    assert "force=true" in paths["/v1/records/{record_id}"]["delete"]["description"]
    assert "409" in paths["/v1/contexts/{context_id}"]["delete"]["responses"]


# --- the ai side failing never fails or slows the user's request (SPEC §4, §11) ---------------

@pytest.mark.parametrize("mode,outcome", [(500, "server_error"), ("hangup", "connection"),
                                          (401, "unauthorized"), ("hang", "timeout")])
async def test_a_failing_ai_side_never_fails_the_users_request(settings, db_url, sync_conn, mode, outcome):
    with Receiver(db_url, mode=mode) as receiver:
        configured = settings.model_copy(update={"ai_base_url": receiver.url,
                                                 "dispatch_read_timeout": 0.5})
        before = dispatch_count(outcome)
        async for api in start_api(configured, db_url):
            _, auth = await api.member()
            response = await api.http.post("/v1/records", json=record_body(), headers=auth)
            # answered while the ai side has not (yet) answered anything useful
            assert response.status_code == 201
            assert not receiver.release.is_set()
            context_id = response.json()["contextId"]
            assert await asyncio.to_thread(receiver.arrived.wait, 10)
            await api.core.dispatcher.join()
        assert receiver.received[0].state == ("PENDING", "PENDING")
    assert dispatch_count(outcome) == before + 1
    assert state_row(sync_conn, context_id) == ("PENDING", "PENDING")  # the rescan's job now


async def test_a_hung_ai_side_does_not_slow_the_users_request(settings, db_url):
    """The request is answered while the ai side still holds the process request."""
    with Receiver(db_url, mode="hang") as receiver:
        configured = settings.model_copy(update={"ai_base_url": receiver.url,
                                                 "dispatch_read_timeout": 30.0})
        async for api in start_api(configured, db_url):
            _, auth = await api.member()
            first = await api.http.post("/v1/records", json=record_body(1), headers=auth)
            assert await asyncio.to_thread(receiver.arrived.wait, 10)
            # the ai side is now holding the first request; more user requests go through
            second = await api.http.post("/v1/records", json=record_body(2), headers=auth)
            listed = await api.http.get("/v1/records", headers=auth)
            assert (first.status_code, second.status_code, listed.status_code) == (201, 201, 200)
            assert not receiver.release.is_set()
            receiver.release.set()
            await api.core.dispatcher.join()


async def test_metrics_show_dispatch_outcomes(api):
    _, auth = await api.member()
    await api.http.post("/v1/records", json=record_body(), headers=auth)
    await api.core.dispatcher.join()
    metrics = await api.http.get("/metrics")
    assert metrics.status_code == 200
    assert 'pinlog_dispatch_outcomes_total{outcome="unconfigured"}' in metrics.text
