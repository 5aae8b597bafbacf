"""Issue 27 #7, #8, #11 through the public API on a real PostgreSQL: the public view is keyed by
a public id nobody can count through (the old record-id path answers 410); the record list
pages by cursor with a total; an edit with the context's own text makes no new context."""

from __future__ import annotations

import base64
import unicodedata

from pinlog.core.public_ids import PublicIds, key_from_secret
from tests.acceptance.core.conftest import record_body
from tests.conftest import config_of
from tests.integration.core.support import add_presets, complete, snapshot


async def test_the_public_view_is_by_public_id_and_cannot_be_walked_by_counting(api, sync_conn):
    add_presets(sync_conn)
    member, owner = await api.member()
    _, other = await api.member()
    created = [(await api.http.post("/v1/records", json=record_body(n), headers=owner)).json()
               for n in (1, 2, 3)]
    complete(sync_conn, created[0]["contextId"], [1, 2], user_id=member,
             record_id=created[0]["recordId"])
    public_ids = [c["publicId"] for c in created]
    assert len(set(public_ids)) == 3
    listed = (await api.http.get("/v1/records", headers=owner)).json()["records"]
    assert {r["recordId"]: r["publicId"] for r in listed} == {
        c["recordId"]: c["publicId"] for c in created}

    view = await api.http.get(f"/v1/public/records/{public_ids[0]}", headers=other)
    assert view.status_code == 200
    assert view.json() == {"publicId": public_ids[0], "keywords": ["친구와"], "place": {
        "externalPlaceId": "kakao-1", "name": "카페 온다", "address": "서울 중구",
        "roadAddress": None, "lat": 37.56, "lng": 126.97}}

    # the old path, keyed by the sequential record id: 410 for every id, existing or not
    gone = {(await api.http.get(f"/v1/records/{n}/public-keywords", headers=other)).text
            for n in range(1, 8)}
    assert len(gone) == 1
    [answer] = gone
    assert '"error":"GONE"' in answer and "/v1/public/records/{publicId}" in answer
    # forged, another key's, malformed: 404 like a missing record
    real = public_ids[1]
    forged = [real[:-1] + ("A" if real[-1] != "A" else "B"), real[:10] + real[11:] + "x",
              PublicIds(key_from_secret(None)).encode(created[1]["recordId"]),
              "pr_" + "A" * 32, str(created[1]["recordId"]), "pr_", "x" * 51]
    for token in forged:
        r = await api.http.get(f"/v1/public/records/{token}", headers=other)
        assert r.status_code in (404, 422), (token, r.status_code)
        assert r.json()["error"] in ("NOT_FOUND", "INVALID_INPUT")
    # the id part of a public id cannot be altered to name another record (the tag checks it)
    blob = bytearray(base64.urlsafe_b64decode(public_ids[1][3:]))
    for i, (a, b) in enumerate(zip(created[1]["recordId"].to_bytes(8, "big"),
                                   created[0]["recordId"].to_bytes(8, "big"), strict=True)):
        blob[16 + i] ^= a ^ b
    altered = "pr_" + base64.urlsafe_b64encode(bytes(blob)).decode()
    r = await api.http.get(f"/v1/public/records/{altered}", headers=other)
    assert r.status_code == 404 and r.json()["error"] == "NOT_FOUND"
    # a deleted record's public id answers 404
    assert (await api.http.delete(f"/v1/records/{created[2]['recordId']}",
                                  headers=owner)).status_code == 204
    r = await api.http.get(f"/v1/public/records/{public_ids[2]}", headers=other)
    assert r.status_code == 404 and r.json()["error"] == "NOT_FOUND"
    # the key follows PINLOG_JWT_SECRET: the service makes the same id
    service_ids = PublicIds(config_of(api.settings).core.service.public_id_key)
    assert service_ids.decode(public_ids[1]) == created[1]["recordId"]


async def test_the_record_list_pages_by_cursor_with_a_total(api, sync_conn):
    _, auth = await api.member()
    ids = [(await api.http.post("/v1/records", json=record_body(n), headers=auth)).json()["recordId"]
           for n in range(1, 8)]
    first = (await api.http.get("/v1/records?limit=3", headers=auth)).json()
    assert first["total"] == 7 and len(first["records"]) == 3 and first["nextCursor"]
    # a record added between two pages neither repeats nor hides one (the cursor is an id)
    added = (await api.http.post("/v1/records", json=record_body(99), headers=auth)).json()
    seen = [r["recordId"] for r in first["records"]]
    cursor, totals = first["nextCursor"], []
    while cursor:
        page = (await api.http.get(f"/v1/records?limit=3&cursor={cursor}", headers=auth)).json()
        seen += [r["recordId"] for r in page["records"]]
        totals.append(page["total"])
        cursor = page["nextCursor"]
    assert seen == sorted(ids, reverse=True)
    assert totals == [8, 8] and added["recordId"] not in seen
    everything = (await api.http.get("/v1/records?limit=500", headers=auth)).json()
    assert everything["total"] == 8 and everything["nextCursor"] is None
    assert [r["recordId"] for r in everything["records"]] == [added["recordId"], *seen]
    for bad in ("nope", "cjA", "r0", "%00", "cjk5OTk5OTk5OTk5OTk5OTk5OTk5OTk5"):
        r = await api.http.get(f"/v1/records?cursor={bad}", headers=auth)
        assert r.status_code == 422, (bad, r.status_code)
        assert r.json()["error"] == "INVALID_INPUT" and r.json()["problems"][0]["field"] == "cursor"


async def test_an_edit_with_the_contexts_own_text_makes_no_new_context(api, sync_conn):
    _, auth = await api.member()
    text = "할머니랑 간 조용한 한정식집"
    created = (await api.http.post("/v1/records", json=record_body(text=text),
                                   headers=auth)).json()
    before = snapshot(sync_conn)
    for same in (text, unicodedata.normalize("NFD", text), text + "\u200b"):
        r = await api.http.put(f"/v1/contexts/{created['contextId']}", json={"text": same},
                               headers=auth)
        assert r.status_code == 200
        assert r.json() == {"contextId": created["contextId"], "changed": False}
    assert snapshot(sync_conn) == before  # no context, no state row, no event, no cancel
    changed = await api.http.put(f"/v1/contexts/{created['contextId']}",
                                 json={"text": text + " 또 가고 싶다"}, headers=auth)
    assert changed.status_code == 200
    assert changed.json()["changed"] is True and changed.json()["contextId"] != created["contextId"]
