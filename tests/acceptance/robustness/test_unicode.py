"""One Unicode normalisation where text enters (note text, place names, queries), blank = nothing
visible once normalised, and the text hash of the normalised text (issue: Unicode forms)."""

from __future__ import annotations

import hashlib
import unicodedata

import pytest

from pinlog.ai.presets import load_preset_file, upsert_presets
from pinlog.core.api.auth import issue_token
from tests.conftest import make_settings, config_of
from tests.fakes import FakeEmbeddingProvider, FakeJudge
from tests.integration.ai.support import DIM, PROFILE
from tests.integration.search.conftest import place_body, running_app, search_settings_for
from tests.support.app import running_app as run_app

RAIN = "비 오는 날 빗소리 들으며 앉아 있기 좋은 다방"
INVISIBLE = ["\u3164", "\u200b", "\ufeff", "\u2800", "\u00ad", "\u3164\u200b \ufeff",
             "\u2060\u200d", "\uffa0"]


def nfd(text: str) -> str:
    out = unicodedata.normalize("NFD", text)
    assert out != text
    return out


@pytest.mark.parametrize("invisible", INVISIBLE)
async def test_invisible_only_notes_queries_and_place_names_are_422(
        tmp_path, db_url, sync_conn, presets, invisible):
    settings = search_settings_for(tmp_path, db_url)
    provider = FakeEmbeddingProvider(PROFILE, DIM)
    async with running_app(settings, db_url, provider, FakeJudge()) as app:
        member, auth = await app.member()
        note = await app.http.post("/v1/records", json=place_body(1, invisible), headers=auth)
        assert note.status_code == 422
        place = await app.http.post("/v1/records", json=place_body(2, "좋은 카페", invisible),
                                    headers=auth)
        assert place.status_code == 422
        ok = (await app.http.post("/v1/records", json=place_body(3, "좋은 카페"),
                                  headers=auth)).json()
        added = await app.http.post(f"/v1/records/{ok['recordId']}/contexts",
                                    json={"text": invisible}, headers=auth)
        edited = await app.http.put(f"/v1/contexts/{ok['contextId']}", json={"text": invisible},
                                    headers=auth)
        assert (added.status_code, edited.status_code) == (422, 422)
        await app.settle()
        calls = provider.calls
        query = await app.http.post("/v1/search", json={"query": invisible}, headers=auth)
        assert query.status_code == 422
        assert provider.calls == calls  # nothing embedded for a blank query
        internal = await app.http.post(
            "/internal/v1/context/process", headers={"X-Internal-Secret": settings.secret_values()[0]},
            json={"contextId": 99, "userId": member, "recordId": 1, "text": invisible})
        assert internal.status_code == 422
    assert sync_conn.execute("SELECT count(*) FROM core.context").fetchone()[0] == 1


async def test_nfd_note_and_place_are_stored_normalised_and_hashed_normalised(
        tmp_path, db_url, sync_conn, presets):
    settings = search_settings_for(tmp_path, db_url)
    provider = FakeEmbeddingProvider(PROFILE, DIM)
    async with running_app(settings, db_url, provider, FakeJudge()) as app:
        member, auth = await app.member()
        body = place_body(1, nfd(RAIN), nfd("골목 안 다방"))
        body["place"]["address"] = "서울\u00a0중구\u200b"
        created = (await app.http.post("/v1/records", json=body, headers=auth)).json()
        await app.settle()
    stored, = sync_conn.execute("SELECT body FROM core.context WHERE id = %s",
                                (created["contextId"],)).fetchone()
    name, address = sync_conn.execute("SELECT name, address FROM core.place").fetchone()
    assert (stored, name, address) == (RAIN, "골목 안 다방", "서울 중구")
    sha, = sync_conn.execute("SELECT text_sha256 FROM ai.context_embedding").fetchone()
    assert bytes(sha) == hashlib.sha256(RAIN.encode()).digest()
    assert provider.texts == [RAIN]


NOTES = [
    "혼자 노트북 들고 와서 세 시간 작업한 카페",
    "친구들이랑 떠들며 삼겹살 먹기 좋은 고깃집",
    "강아지랑 산책하기 좋은 한강 공원 길",
    "조용한 서점 안쪽 자리에서 책 읽기",
]


@pytest.mark.slow
async def test_nfd_note_gets_the_composed_copys_keywords_and_ranks_first(
        tmp_path, db_url, engine, sync_conn):
    """Real model, packaged presets, similarity judge: the NFD rain note gets the same keywords
    as its composed copy (non-empty) and ranks first for a rain query, also sent in NFD."""
    settings = make_settings(tmp_path, db_url)
    await upsert_presets(engine, load_preset_file(), config_of(settings).ai.embedding.build())
    async with run_app(settings, db_url) as running:
        app, http = running.app, running.http
        service = app.state.core.service
        decomposed_member = await service.create_member()
        composed_member = await service.create_member()
        auth = {"Authorization": f"Bearer {issue_token(config_of(settings).core.auth, decomposed_member)}"}
        composed_auth = {"Authorization": f"Bearer {issue_token(config_of(settings).core.auth, composed_member)}"}
        rain_nfd = (await http.post("/v1/records", json=place_body(1, nfd(RAIN)),
                                    headers=auth)).json()
        for n, note in enumerate(NOTES, start=2):
            assert (await http.post("/v1/records", json=place_body(n, note),
                                    headers=auth)).status_code == 201
        rain_nfc = (await http.post("/v1/records", json=place_body(1, RAIN),
                                    headers=composed_auth)).json()
        await app.state.core.dispatcher.join()
        await app.state.ai.join()
        keywords = {}
        for key, created, headers in (("nfd", rain_nfd, auth), ("nfc", rain_nfc, composed_auth)):
            record = (await http.get(f"/v1/records/{created['recordId']}",
                                     headers=headers)).json()
            keywords[key] = record["contexts"][0]["keywords"]
        assert keywords["nfd"] == keywords["nfc"]
        assert keywords["nfd"], "the rain note gets at least one keyword"
        for query in ("비 오는 날 가기 좋은 곳", nfd("비 오는 날 가기 좋은 곳")):
            results = (await http.post("/v1/search", json={"query": query},
                                       headers=auth)).json()["results"]
            assert results and results[0]["contextId"] == rain_nfd["contextId"]


# --- issue 27 #6: what displays wrong never reaches another member ---------------------------------

async def test_bidi_and_control_characters_never_reach_a_displayed_field(tmp_path, db_url, sync_conn):
    """Place names, addresses and notes lose bidi controls (``\\u202e`` shows "evil" as "live")
    and control characters; a one-line field also loses its line breaks. Identifiers (the
    external place id, a member's external ref) are kept exactly, so they are refused instead;
    so are external refs that could only be reached as ``ref:…`` or that differ from what
    they look like by spaces at their edges."""
    from pinlog.core.services import CoreService, InvalidInput

    settings = make_settings(tmp_path, db_url)
    async with run_app(settings, db_url, components=("core",)) as app:
        _, owner = await app.member()
        _, other = await app.member()
        body = {"place": {"externalPlaceId": "kakao-bidi", "name": "\u202eevil\u202c 다방\u200f",
                          "address": "서울\u0007 중구\n2층\u2066", "roadAddress": "세종대로\t1\x1b",
                          "lat": 37.5, "lng": 127.0},
                "text": "조용한\u202e 카페\x1b[31m\n창가 자리\u2069"}
        created = await app.http.post("/v1/records", json=body, headers=owner)
        assert created.status_code == 201, created.text
        public = (await app.http.get(f"/v1/public/records/{created.json()['publicId']}",
                                     headers=other)).json()
        assert public["place"]["name"] == "evil 다방"
        assert public["place"]["address"] == "서울 중구 2층"
        assert public["place"]["roadAddress"] == "세종대로 1"
        mine = (await app.http.get(f"/v1/records/{created.json()['recordId']}",
                                   headers=owner)).json()
        assert mine["contexts"][0]["text"] == "조용한 카페[31m\n창가 자리"  # notes keep line breaks
        for place_id in ("kakao\u202e1", "kakao\t1", " kakao-2", "kakao-3\n"):
            refused = await app.http.post("/v1/records", headers=owner, json={
                **body, "place": {**body["place"], "externalPlaceId": place_id}})
            assert refused.status_code == 422, place_id
            assert refused.json()["problems"][0]["field"] == "place.externalPlaceId"
        service: CoreService = app.core.service
        for ref in ("id:5", "ref:alice", "ID:5", " 공백 ", "공백 ", "a\u202eb", "a\nb", "\u200f"):
            with pytest.raises(InvalidInput) as refused_ref:
                await service.create_member(ref)
            assert refused_ref.value.field == "externalRef", ref
        assert await service.create_member("공 백") > 0  # spaces inside are fine
    stored = sync_conn.execute("SELECT name, address, road_address FROM core.place").fetchall()
    assert stored == [("evil 다방", "서울 중구 2층", "세종대로 1")]
    assert sync_conn.execute("SELECT count(*) FROM core.member WHERE external_ref LIKE '%:%' "
                             "OR external_ref <> btrim(external_ref)").fetchone()[0] == 0


def test_members_create_refuses_a_ref_that_names_a_member_kind(tmp_path, db_url):
    from tests.conftest import TEST_JWT_SECRET, TEST_SECRET
    from tests.helpers import pinlog_env, run_pinlog

    env = pinlog_env(tmp_path / "data", PINLOG_DATABASE_URL=db_url,
                     PINLOG_INTERNAL_SECRETS=TEST_SECRET, PINLOG_JWT_SECRET=TEST_JWT_SECRET)
    for ref, says in (("id:5", "must not start with id: or ref:"),
                      (" 공백 ", "must not start or end with whitespace")):
        result = run_pinlog(["members", "create", "--external-ref", ref], env, timeout=120)
        assert result.returncode == 1, (ref, result.stdout, result.stderr)
        assert f"externalRef {says}" in result.stderr and "Traceback" not in result.stderr
