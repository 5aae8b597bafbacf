"""core + the real ai runtime in one process (in-process adapter), fake model providers at their
Protocols: a record created through /v1 is processed and shown with keywords; an edit cancels
the old context and the new one is processed independently (SPEC §1, §4, §8, §11 #1/#4)."""

from __future__ import annotations

from pinlog.core.api.auth import issue_token
from tests.acceptance.core.conftest import record_body
from tests.conftest import make_settings, config_of
from tests.fakes import FakeEmbeddingProvider, FakeJudge
from tests.integration.core.support import count, state_row
from tests.support.app import running_app

PROFILE, DIM = "fake-profile-v1", 8
FRIENDS_TEXT, QUIET_TEXT = "친구들이랑 떠들기 좋은 곳", "혼자 조용히 책 읽기 좋은 곳"


def basis(i: int) -> list[float]:
    return [1.0 if j == i else 0.0 for j in range(DIM)]


def seed_presets(conn) -> None:
    for pid, code, name, vector, visibility in ((1, "WITH_FRIENDS", "친구와", basis(0), "PUBLIC"),
                                                (2, "QUIET", "조용한", basis(2), "PRIVATE_ONLY")):
        conn.execute("INSERT INTO ai.keyword_preset (id, code, display_name, category, description, "
                     "examples, visibility) VALUES (%s, %s, %s, 'ATMOSPHERE', 'd', ARRAY['e'], %s)",
                     (pid, code, name, visibility))
        conn.execute("INSERT INTO ai.keyword_preset_embedding (preset_id, embedding_profile, "
                     "embedding) VALUES (%s, %s, %s::vector)", (pid, PROFILE, str(vector)))


async def test_create_process_show_edit_end_to_end(tmp_path, db_url, sync_conn):
    seed_presets(sync_conn)
    settings = make_settings(tmp_path, db_url, embedding_profile=PROFILE, embedding_dimension=DIM,
                             candidate_floor=0.5, embedding_timeout=5.0, llm_timeout=5.0,
                             embedding_batch_wait_ms=1.0)
    provider = FakeEmbeddingProvider(PROFILE, DIM, vectors={FRIENDS_TEXT: basis(0),
                                                            QUIET_TEXT: basis(2)})
    judge = FakeJudge()
    async with running_app(settings, db_url, provider=provider, judge=judge) as running:
        core, ai, http = running.core, running.ai, running.http

        async def settle() -> None:
            await core.dispatcher.join()
            await ai.join()

        member = await core.service.create_member()
        other = await core.service.create_member()
        auth = {"Authorization": f"Bearer {issue_token(config_of(settings).core.auth, member)}"}
        other_auth = {"Authorization": f"Bearer {issue_token(config_of(settings).core.auth, other)}"}

        created = (await http.post("/v1/records", json=record_body(text=FRIENDS_TEXT),
                                   headers=auth)).json()
        record_id, old = created["recordId"], created["contextId"]
        await settle()
        shown = (await http.get(f"/v1/records/{record_id}", headers=auth)).json()
        assert shown["contexts"][0]["aiStatus"] == "ready"
        assert shown["keywords"] == ["친구와"]
        public_path = f"/v1/public/records/{created['publicId']}"
        assert (await http.get(public_path, headers=other_auth)).json()["keywords"] == ["친구와"]

        new = (await http.put(f"/v1/contexts/{old}", json={"text": QUIET_TEXT},
                              headers=auth)).json()["contextId"]
        await settle()
        shown = (await http.get(f"/v1/records/{record_id}", headers=auth)).json()
        assert [(c["contextId"], c["aiStatus"], c["keywords"]) for c in shown["contexts"]] == [
            (new, "ready", ["조용한"])]
        assert shown["keywords"] == ["조용한"]  # the owner sees PRIVATE_ONLY
        assert (await http.get(public_path,
                               headers=other_auth)).json()["keywords"] == []  # others do not

    assert state_row(sync_conn, old) == ("CANCELLED", "CANCELLED")
    assert state_row(sync_conn, new) == ("COMPLETED", "COMPLETED")
    assert sync_conn.execute("SELECT context_id, is_deleted FROM ai.context_embedding ORDER BY 1"
                             ).fetchall() == [(old, True), (new, False)]
    assert provider.texts.count(FRIENDS_TEXT) == 1 and provider.texts.count(QUIET_TEXT) == 1
    assert judge.calls == 2
    assert count(sync_conn, "SELECT count(*) FROM ai.context_keyword WHERE context_id = %s", old) == 1
