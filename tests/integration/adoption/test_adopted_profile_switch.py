"""The profile switch on an adopted database (SPEC §9.1, issue 24): the reference's tables
(``ai.context_embedding`` keyed by ``context_id`` with a fixed ``vector(1536)``, ``varchar``
profiles, no hashes) after ``pinlog migrate --adopt``: a second profile of another dimension is
built beside the reference's vectors and activated; the primary key is unchanged, the backend's
tables untouched, search answers from the new profile, and rolling back works."""

from __future__ import annotations

import psycopg

from pinlog.ai.profiles import activate_profile, build_profile
from pinlog.ai.runtime import AiRuntime
from pinlog.contracts import SearchRequest
from pinlog.db import migrate
from pinlog.db.engine import create_engine
from tests.conftest import config_of
from tests.fakes import FakeEmbeddingProvider, FakeJudge
from tests.integration.adoption.reference import AXIS, BACKEND_CANCEL, BACKEND_CANCEL_EMBEDDING, REF_DIM
from tests.integration.adoption.reference import REF_PROFILE, TEXTS, USER_ID, backend_snapshot, text_vectors
from tests.integration.ai.profile_support import Texts, models
from tests.integration.ai.support import ai_settings_for, basis

NEW_PROFILE, NEW_DIM = "fake-profile-small-6", 6


def _pk(conn: psycopg.Connection) -> list[tuple]:
    return conn.execute("SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint WHERE "
                        "conrelid = 'ai.context_embedding'::regclass AND contype = 'p'").fetchall()


class BackendTexts(Texts):
    """What the backend exports (``core.context_note``, not deleted) — the operator's file."""

    def __init__(self, conn: psycopg.Connection) -> None:
        super().__init__(0)
        self.texts = dict(conn.execute(
            "SELECT id, content FROM core.context_note WHERE NOT is_deleted").fetchall())


async def test_build_and_activation_on_an_adopted_database_keep_its_primary_key(
        reference_url, tmp_path):
    migrate.adopt(reference_url, REF_DIM)
    # the new model ranks differently: the reference's axes 0, 2, 7 become 3, 4, 5
    new_vectors = {TEXTS[cid]: basis({0: 3, 2: 4, 7: 5}[axis], NEW_DIM)
                   for cid, axis in AXIS.items()}
    with psycopg.connect(reference_url, autocommit=True) as conn:
        pk = _pk(conn)
        backend = backend_snapshot(conn)
        texts = BackendTexts(conn)
        engine = create_engine(reference_url, pool_size=4)
        try:
            built = models(FakeEmbeddingProvider(NEW_PROFILE, NEW_DIM, vectors=new_vectors))
            report = await build_profile(engine, built, texts, active=(REF_PROFILE, REF_DIM),
                                         probe=False)
            await built.provider.aclose(close_provider=False)
            # COMPLETED and not deleted: 3, 5, 6 (4 is CANCELLED, 1 and 2 not embedded yet)
            assert report.embedded == 3 and report.skipped == {}
            conn.execute(BACKEND_CANCEL, (6,))  # the backend deletes one during the switch
            conn.execute(BACKEND_CANCEL_EMBEDDING, (6,))
            activation = await activate_profile(engine, NEW_PROFILE, current=(REF_PROFILE,
                                                                              REF_DIM))
            assert (activation.copied, activation.kept) == (2, 2)
            rows = dict(conn.execute("SELECT context_id, embedding_profile || ':' || "
                                     "vector_dims(embedding) FROM ai.context_embedding").fetchall())
            assert rows == {3: f"{NEW_PROFILE}:6", 4: f"{REF_PROFILE}:1536",
                            5: f"{NEW_PROFILE}:6", 6: f"{REF_PROFILE}:1536"}
            assert _pk(conn) == pk == [("context_embedding_pkey", "PRIMARY KEY (context_id)")]
            assert backend_snapshot(conn) == backend  # the backend's tables untouched

            # the ai component (configured with the reference profile and the new one) answers
            # the backend's search, which still names the reference profile, from the new one
            settings = ai_settings_for(
                tmp_path, reference_url, embedding_profile=REF_PROFILE,
                embedding_dimension=REF_DIM, next_embedding_provider="openai",
                next_embedding_profile=NEW_PROFILE, next_embedding_dimension=NEW_DIM,
                next_embedding_base_url="http://127.0.0.1:9/v1")
            assert config_of(settings).ai.next_embedding.profile == NEW_PROFILE
            query = FakeEmbeddingProvider(NEW_PROFILE, NEW_DIM, vectors=new_vectors)
            old = FakeEmbeddingProvider(REF_PROFILE, REF_DIM, vectors=text_vectors(REF_DIM))
            runtime = AiRuntime(engine, config_of(settings).ai, provider=old, judge=FakeJudge(),
                                next_provider=query)
            await runtime.start()
            try:
                answer = await runtime.search(SearchRequest(
                    user_id=USER_ID, query=TEXTS[3], limit=20, embedding_profile=REF_PROFILE))
                assert [h.context_id for h in answer.results] == [3]
                assert query.kinds == ["query"] and old.kinds.count("query") == 0
            finally:
                await runtime.stop()

            # rollback: the reference's vectors come back, under its varchar profile
            back = await activate_profile(engine, REF_PROFILE, current=(REF_PROFILE, REF_DIM))
            assert back.copied == 2
            assert set(dict(conn.execute("SELECT context_id, embedding_profile FROM "
                                         "ai.context_embedding")).values()) == {REF_PROFILE}
            assert _pk(conn) == pk
        finally:
            await engine.dispose()
