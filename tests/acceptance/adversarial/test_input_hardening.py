"""Hostile input on every door (SPEC §4, §5.1, §6, §10): a clear 4xx, never a 500, nothing
written. Bodies are sent raw so the JSON itself can be odd (lone surrogates, NaN, duplicate
keys, deep nesting, 10 MB)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import jwt
import pytest

from pinlog.contracts import PROCESS_PATH, SEARCH_PATH, SECRET_HEADER
from tests.acceptance.adversarial.conftest import record_body, table_counts
from tests.conftest import TEST_JWT_SECRET, TEST_SECRET
from tests.integration.ai.support import insert_state, statuses

JSON = {"Content-Type": "application/json"}
PLACE = '{"externalPlaceId":"k-1","name":"n","lat":1,"lng":1}'


async def _created(full, auth):
    r = await full.http.post("/v1/records", json=record_body(), headers=auth)
    assert r.status_code == 201
    await full.settle()
    return r.json()["recordId"], r.json()["contextId"]


# --- lone UTF-16 surrogates: valid JSON (\ud800), not encodable to UTF-8 for PostgreSQL ------------

async def _refused_and_nothing_written(full, sync_conn, method: str, url: str, auth, content: str):
    """Send a raw JSON body; assert a 4xx and that no table changed."""
    before = table_counts(sync_conn)
    r = await full.http.request(method, url, headers={**auth, **JSON}, content=content)
    assert table_counts(sync_conn) == before
    assert 400 <= r.status_code < 500


async def test_lone_surrogate_text_on_create_is_4xx(full, sync_conn):
    _, auth = await full.member()
    await _refused_and_nothing_written(full, sync_conn, "POST", "/v1/records", auth,
                                       '{"place":' + PLACE + ',"text":"quiet \\ud800 cafe"}')


async def test_lone_surrogate_text_on_add_context_is_4xx(full, sync_conn):
    _, auth = await full.member()
    record_id, _ = await _created(full, auth)
    await _refused_and_nothing_written(full, sync_conn, "POST", f"/v1/records/{record_id}/contexts",
                                       auth, '{"text":"\\udfffx"}')


async def test_lone_surrogate_text_on_edit_is_4xx(full, sync_conn):
    _, auth = await full.member()
    _, context_id = await _created(full, auth)
    await _refused_and_nothing_written(full, sync_conn, "PUT", f"/v1/contexts/{context_id}",
                                       auth, '{"text":"\\ud83dx"}')
    assert statuses(sync_conn, context_id) == ("COMPLETED", "COMPLETED")


async def test_lone_surrogate_in_place_name_and_search_is_4xx(full, sync_conn):
    """Holds (place strings and the search query reject surrogates with 422)."""
    _, auth = await full.member()
    before = table_counts(sync_conn)
    r = await full.http.post("/v1/records", headers={**auth, **JSON}, content=(
        '{"place":{"externalPlaceId":"k","name":"\\udfff","lat":1,"lng":1},"text":"abc"}'))
    assert r.status_code == 422
    r = await full.http.post("/v1/search", headers={**auth, **JSON}, content='{"query":"\\ud800"}')
    assert r.status_code == 422
    assert table_counts(sync_conn) == before


# --- odd JSON on the public API: all must be 4xx and write nothing ---------------------------------

ODD_BODIES = {
    "nan_lat": '{"place":{"externalPlaceId":"k","name":"n","lat":NaN,"lng":1},"text":"a"}',
    "inf_lng": '{"place":{"externalPlaceId":"k","name":"n","lat":1,"lng":-Infinity},"text":"a"}',
    "overflow_float": '{"place":{"externalPlaceId":"k","name":"n","lat":1e999,"lng":1},"text":"a"}',
    "huge_int_lat": '{"place":{"externalPlaceId":"k","name":"n","lat":' + "9" * 5000
                    + ',"lng":1},"text":"a"}',
    "lat_out_of_range": '{"place":{"externalPlaceId":"k","name":"n","lat":91,"lng":1},"text":"a"}',
    "lat_as_string": '{"place":{"externalPlaceId":"k","name":"n","lat":"1","lng":1},"text":"a"}',
    "lat_bool": '{"place":{"externalPlaceId":"k","name":"n","lat":true,"lng":1},"text":"a"}',
    "text_number": '{"place":' + PLACE + ',"text":5}',
    "text_list": '{"place":' + PLACE + ',"text":["a"]}',
    "text_nul": '{"place":' + PLACE + ',"text":"a\\u0000b"}',
    "text_blank_unicode": '{"place":' + PLACE + ',"text":"\\u3000\\u2003\\n\\t"}',
    "text_too_long": '{"place":' + PLACE + ',"text":"' + "가" * 2001 + '"}',
    "ten_megabytes": '{"place":' + PLACE + ',"text":"' + "a" * 10_000_000 + '"}',
    "deep_nesting": '{"place":' + "[" * 100_000 + "]" * 100_000 + ',"text":"a"}',
    "extra_field": '{"place":' + PLACE + ',"text":"a","memberId":2}',
    "place_null": '{"place":null,"text":"a"}',
    "place_id_nul": '{"place":{"externalPlaceId":"k\\u0000","name":"n","lat":1,"lng":1},"text":"a"}',
    "not_an_object": '["a"]',
    "empty": "",
    "bad_utf8": b'{"place":' + PLACE.encode() + b',"text":"\xff\xfe"}',
}


@pytest.mark.parametrize("name", sorted(ODD_BODIES))
async def test_odd_create_bodies_are_4xx_and_write_nothing(full, sync_conn, name):
    _, auth = await full.member()
    before = table_counts(sync_conn)
    r = await full.http.post("/v1/records", content=ODD_BODIES[name], headers={**auth, **JSON})
    assert 400 <= r.status_code < 500, (name, r.status_code)
    assert table_counts(sync_conn) == before
    assert "a" * 100 not in r.text  # the input is never echoed


async def test_duplicate_keys_last_wins_and_no_500(full, sync_conn):
    _, auth = await full.member()
    r = await full.http.post("/v1/records", headers={**auth, **JSON},
                             content='{"text":"first","text":"second","place":' + PLACE + '}')
    assert r.status_code == 201
    assert sync_conn.execute("SELECT body FROM core.context").fetchall() == [("second",)]


@pytest.mark.parametrize("path", ["/v1/records/0", "/v1/records/-1", "/v1/records/9223372036854775808",
                                  "/v1/records/abc", "/v1/records/1e3", "/v1/contexts/0",
                                  "/v1/records/99999999999999999999999999"])
async def test_bad_ids_in_paths_are_4xx(full, path):
    _, auth = await full.member()
    for method in ("GET", "DELETE", "PUT"):
        r = await full.http.request(method, path, headers=auth, json={"text": "x"})
        assert 400 <= r.status_code < 500, (method, path, r.status_code)


@pytest.mark.parametrize("query", ["offset=9223372036854775808", "offset=1000000001",
                                   "offset=-1", "limit=0", "limit=501"])
async def test_out_of_range_paging_is_422_not_500(full, query):
    """Found by bench/fuzz_api.py (schemathesis): an offset beyond bigint reached PostgreSQL."""
    _, auth = await full.member()
    r = await full.http.get(f"/v1/records?{query}", headers=auth)
    assert r.status_code == 422, (query, r.status_code, r.text)


async def test_other_members_ids_look_missing_and_change_nothing(full, sync_conn):
    _, alice = await full.member()
    _, mallory = await full.member()
    record_id, context_id = await _created(full, alice)
    await full.http.post(f"/v1/records/{record_id}/contexts", json={"text": "둘째 메모"},
                         headers=alice)
    await full.settle()
    before = table_counts(sync_conn)
    state = sync_conn.execute("SELECT * FROM ai.context_ai_state ORDER BY 1").fetchall()
    calls = [
        ("GET", f"/v1/records/{record_id}", None),
        ("POST", f"/v1/records/{record_id}/contexts", {"text": "hijack"}),
        ("PUT", f"/v1/contexts/{context_id}", {"text": "hijack"}),
        ("DELETE", f"/v1/contexts/{context_id}", None),
        ("DELETE", f"/v1/records/{record_id}?force=true", None),
    ]
    for method, path, body in calls:
        r = await full.http.request(method, path, headers=mallory, json=body)
        assert r.status_code == 404, (method, path, r.status_code)
    assert table_counts(sync_conn) == before
    assert sync_conn.execute("SELECT * FROM ai.context_ai_state ORDER BY 1").fetchall() == state


# --- JWT ---------------------------------------------------------------------------------------

def _token(sub, *, key=TEST_JWT_SECRET, alg="HS256", exp_delta=timedelta(hours=1)):
    claims = {"sub": sub}
    if exp_delta is not None:
        claims["exp"] = datetime.now(UTC) + exp_delta
    return jwt.encode(claims, key, algorithm=alg)


async def test_jwt_attacks_are_401(full):
    member_id, auth = await full.member()
    tokens = {
        "alg_none": jwt.encode({"sub": str(member_id), "exp": datetime.now(UTC) + timedelta(hours=1)},
                               None, algorithm="none"),
        "wrong_key": _token(str(member_id), key="k" * 48),
        "expired": _token(str(member_id), exp_delta=-timedelta(seconds=5)),
        "no_exp": _token(str(member_id), exp_delta=None),
        "sub_int": _token(member_id),
        "sub_negative": _token("-1"),
        "sub_zero": _token("0"),
        "sub_text": _token("admin"),
        "sub_overflow": _token(str(2**63)),
        "sub_unknown": _token("999999"),
        "other_alg": _token(str(member_id), alg="HS384"),
        "garbage": "a.b.c",
    }
    for name, token in tokens.items():
        r = await full.http.get("/v1/me", headers={"Authorization": f"Bearer {token}"})
        assert r.status_code == 401, name
        assert token not in r.text
    assert (await full.http.get("/v1/me", headers={"Authorization": "Basic eDp5"})).status_code == 401
    assert (await full.http.delete("/v1/me", headers=auth)).status_code == 204
    assert (await full.http.get("/v1/me", headers=auth)).status_code == 401  # withdrawn


@pytest.mark.parametrize("sub", ["¹", "1" * 5000])
async def test_signed_token_with_odd_numeric_sub_is_401(full, sub):
    r = await full.http.get("/v1/me", headers={"Authorization": f"Bearer {_token(sub)}"})
    assert r.status_code == 401


# --- internal API ------------------------------------------------------------------------------

def _process(**fields) -> str:
    body = {"contextId": 1, "userId": 7, "recordId": 70, "text": "조용히 책 읽기 좋은 카페"}
    body.update(fields)
    return json.dumps(body)


@pytest.mark.parametrize("secret", ["", " ", TEST_SECRET.upper(), TEST_SECRET[:-1], TEST_SECRET[:1],
                                    TEST_SECRET + " ", " " + TEST_SECRET, TEST_SECRET + "x",
                                    TEST_SECRET + "," + TEST_SECRET])
async def test_internal_secret_variants_are_401_and_change_nothing(full, sync_conn, secret):
    insert_state(sync_conn, 1)
    for path, body in ((PROCESS_PATH, _process()),
                       (SEARCH_PATH, json.dumps({"userId": 7, "query": "q",
                                                 "embeddingProfile": "fake-profile-v1"}))):
        r = await full.http.post(path, content=body, headers={SECRET_HEADER: secret, **JSON})
        assert r.status_code == 401
    await full.settle()
    assert statuses(sync_conn, 1) == ("PENDING", "PENDING")
    assert full.provider.calls == 0


def test_secret_comparison_is_constant_time_style():
    """Holds: hmac.compare_digest against every configured secret, no early exit."""
    import inspect

    from pinlog.ai import api

    source = inspect.getsource(api.secret_ok)
    assert "compare_digest" in source and "==" not in source and "break" not in source


async def test_process_with_out_of_range_user_id_is_422_and_harmless(full, sync_conn):
    insert_state(sync_conn, 1)
    r = await full.http.post(PROCESS_PATH, content=_process(userId=2**63),
                             headers={SECRET_HEADER: TEST_SECRET, **JSON})
    await full.settle()
    assert statuses(sync_conn, 1) == ("PENDING", "PENDING")
    assert r.status_code == 422


@pytest.mark.parametrize("value", [True, "1", 1.0])
async def test_process_type_confusion_is_422(full, sync_conn, value):
    insert_state(sync_conn, 1)
    r = await full.http.post(PROCESS_PATH, content=_process(contextId=value),
                             headers={SECRET_HEADER: TEST_SECRET, **JSON})
    assert r.status_code == 422


@pytest.mark.parametrize("body", [
    "", "null", "[]", "hello", '{"contextId":1}', _process(text=""), _process(text="a" * 2001),
    _process(contextId=0), _process(contextId=-5), _process(extra="1", recordId="70"),
    _process(placeMeta=[1]),
    '{"contextId":1,"userId":7,"recordId":70,"text":"\\ud800"}',
    '{"contextId":1,"userId":7,"recordId":70,"text":"a","placeMeta":' + '{"a":' * 5000 + "1"
    + "}" * 5000 + "}",
])
async def test_invalid_process_bodies_are_422_and_change_nothing(full, sync_conn, body):
    insert_state(sync_conn, 1)
    r = await full.http.post(PROCESS_PATH, content=body, headers={SECRET_HEADER: TEST_SECRET, **JSON})
    assert r.status_code == 422
    assert r.json() == {"error": "INVALID_INPUT", "message": "the request body is not a valid request for this route"}
    await full.settle()
    assert statuses(sync_conn, 1) == ("PENDING", "PENDING")
    assert full.provider.calls == 0


@pytest.mark.parametrize("body", [
    {"userId": 2**63, "query": "q", "embeddingProfile": "fake-profile-v1"},
    {"userId": 0, "query": "q", "embeddingProfile": "fake-profile-v1"},
    {"userId": 1, "query": "", "embeddingProfile": "fake-profile-v1"},
    {"userId": 1, "query": "q", "embeddingProfile": "fake-profile-v1", "limit": 0},
    {"userId": 1, "query": "q", "embeddingProfile": "fake-profile-v1", "limit": 101},
    {"userId": 1, "query": "q", "embeddingProfile": "other-profile"},
    {"userId": 1, "query": "q" * 2001, "embeddingProfile": "fake-profile-v1"},
])
async def test_internal_search_bad_bodies_never_500(full, body):
    r = await full.http.post(SEARCH_PATH, json=body, headers={SECRET_HEADER: TEST_SECRET})
    assert r.status_code < 500, (body, r.status_code)
