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
