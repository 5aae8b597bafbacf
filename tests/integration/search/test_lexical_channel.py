"""core's lexical channel on its own (SPEC §10, §11 #3, #19; issue 30 #2–#4).

What the lexical channel finds is visible at the core↔ai boundary: the records whose contexts
core asks the ai side to score (``recordIds`` of the ``mode: "score"`` request core sends after
the ``mode: "vector"`` one of ``POST /internal/v1/search``). Here the ai side
is a recording HTTP receiver that scores nothing, so none of the later layers (the ai side's own
filters, the relevance decision, core's re-verification of hits) can hide a record the lexical
channel should never have found: an edited or deleted note's words, a deleted record's place
name or address, another member's notes and places.

core only (``PINLOG_AI_BASE_URL`` → the receiver), the real database; notes and records are
created through the public API, so their lexical terms are what core itself stored.
"""

from __future__ import annotations

import pytest

from pinlog.contracts import SEARCH_PATH
from tests.integration.core.support import Receiver
from tests.integration.search.conftest import place_body, running_app, search_settings_for

EGGPLANT = "가지튀김이 미쳤음. 다음엔 부모님이랑"
TRUFFLE = "트러플감자전 짱맛"
BUCKWHEAT = "메밀전병이 괜찮았다"
QUIET = "조용해서 책 읽기 좋은 곳"


@pytest.fixture
def receiver():
    with Receiver(mode=202, search_answer={"results": [], "scored": []}) as running:
        yield running


@pytest.fixture
def app_factory(tmp_path, db_url, provider, judge, receiver):
    settings = search_settings_for(tmp_path, db_url, ai_base_url=receiver.url)
    return lambda: running_app(settings, db_url, provider, judge, ("core",))


async def scored_records(app, auth, receiver, query: str) -> list[int]:
    """Search ``query`` through ``POST /v1/search``; the record ids core asked the ai side to
    score for it (sorted)."""
    before = len(searches(receiver))
    response = await app.http.post("/v1/search", json={"query": query, "limit": 100},
                                   headers=auth)
    assert response.status_code == 200, response.text
    assert response.json() == {"results": []}  # the receiver vouches for nothing
    sent = searches(receiver)[before:]
    assert [r["mode"] for r in sent][:1] == ["vector"] and sent[0]["recordIds"] == []
    assert all(r["mode"] == "score" for r in sent[1:]) and len(sent) <= 2
    return sorted(r for request in sent[1:] for r in request["recordIds"])


def searches(receiver) -> list[dict]:
    return [r.body for r in receiver.received if r.path == SEARCH_PATH]


async def create(app, auth, n: int, text: str, name: str, address: str = "서울 중구") -> dict:
    body = place_body(n, text, name)
    body["place"]["address"] = address
    response = await app.http.post("/v1/records", json=body, headers=auth)
    assert response.status_code == 201, response.text
    return response.json()


async def test_edited_or_deleted_notes_words_never_reach_the_lexical_channel(
        app_factory, receiver):
    async with app_factory() as app:
        _, auth = await app.member()
        record = await create(app, auth, 1, EGGPLANT, "이름 없는 식당")
        record_id = record["recordId"]
        extra = (await app.http.post(f"/v1/records/{record_id}/contexts",
                                     json={"text": TRUFFLE}, headers=auth)).json()
        # the test can fail: both notes' words reach the channel while they are active
        assert await scored_records(app, auth, receiver, "가지튀김") == [record_id]
        assert await scored_records(app, auth, receiver, "트러플감자전") == [record_id]

        edited = await app.http.put(f"/v1/contexts/{record['contextId']}",
                                    json={"text": BUCKWHEAT}, headers=auth)
        assert edited.status_code == 200, edited.text
        deleted = await app.http.delete(f"/v1/contexts/{extra['contextId']}", headers=auth)
        assert deleted.status_code == 204

        assert await scored_records(app, auth, receiver, "가지튀김") == []
        assert await scored_records(app, auth, receiver, "트러플감자전") == []
        assert await scored_records(app, auth, receiver, "메밀전병") == [record_id]


async def test_a_deleted_records_place_name_and_address_never_reach_the_lexical_channel(
        app_factory, receiver):
    async with app_factory() as app:
        _, auth = await app.member()
        record_id = (await create(app, auth, 1, QUIET, "피넛커피 충북혁신도시점",
                                  address="충북 진천군 덕산읍"))["recordId"]
        assert await scored_records(app, auth, receiver, "피넛커피") == [record_id]
        assert await scored_records(app, auth, receiver, "덕산읍") == [record_id]

        assert (await app.http.delete(f"/v1/records/{record_id}",
                                      headers=auth)).status_code == 204

        assert await scored_records(app, auth, receiver, "피넛커피") == []
        assert await scored_records(app, auth, receiver, "덕산읍") == []


async def test_another_members_notes_and_places_never_reach_the_lexical_channel(
        app_factory, receiver):
    async with app_factory() as app:
        _, auth = await app.member()
        _, other_auth = await app.member()
        await create(app, auth, 1, QUIET, "동네 북카페")
        theirs = (await create(app, other_auth, 2, EGGPLANT, "모던아시안누들서비스"))["recordId"]
        # the test can fail: the other member's own search finds their note and place
        assert await scored_records(app, other_auth, receiver, "가지튀김") == [theirs]
        assert await scored_records(app, other_auth, receiver, "모던아시안누들서비스") == [theirs]

        assert await scored_records(app, auth, receiver, "가지튀김") == []
        assert await scored_records(app, auth, receiver, "모던아시안누들서비스") == []

        # the same place saved by both members: only the searching member's own record
        mine = (await create(app, auth, 2, "여기 국수 맛있음", "모던아시안누들서비스"))["recordId"]
        assert await scored_records(app, auth, receiver, "모던아시안누들서비스") == [mine]
        assert await scored_records(app, other_auth, receiver, "모던아시안누들서비스") == [theirs]


@pytest.mark.parametrize("query", ["ㅎㅎ", "?", "..."])
async def test_a_filler_query_asks_the_ai_side_nothing(app_factory, receiver, query):
    """Issue 27: a query without any word answers ``[]`` before any channel or the ai side is
    asked (no embedding, no request)."""
    async with app_factory() as app:
        _, auth = await app.member()
        await create(app, auth, 1, "?! ... ㅎㅎ 맛있었음", "물음표 식당")
        response = await app.http.post("/v1/search", json={"query": query}, headers=auth)
        assert response.status_code == 200 and response.json() == {"results": []}
        assert searches(receiver) == []
