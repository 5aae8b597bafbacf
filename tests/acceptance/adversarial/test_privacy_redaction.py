"""Privacy probes (SPEC §6, §12): a provider error body may echo the API key or the input text;
neither may reach ``last_error``, the event history or a log record."""

from __future__ import annotations

import json
import logging

import httpx
import pytest

from pinlog.ai.providers.openai import OpenAIEmbeddingProvider
from tests.acceptance.adversarial.conftest import full_app, record_body
from tests.integration.ai.support import DIM, PROFILE, seed_presets

#: An API key that matches none of the generic patterns (no ``sk-`` prefix, no ``Bearer``, not
#: written as ``api_key=``) — e.g. a Google-style key. It is *configured*, so it is known.
ODD_KEY = "AIzaSyD4-pinlog-probe-key-7f3c9a1b2c"
PERSONAL = "엄마 생신에 모시고 간 조용한 한정식집 010-1234-5678"
OTHER_PERSONAL = "전 남자친구랑 헤어진 카페, 다시는 안 감"


def _all_log_text(caplog) -> str:
    parts = []
    for rec in caplog.records:
        parts.append(rec.getMessage())
        parts.append(json.dumps({k: str(v) for k, v in rec.__dict__.items()
                                 if k not in ("msg", "args")}, ensure_ascii=False))
    return "\n".join(parts)


def _stored_errors(conn) -> str:
    rows = conn.execute("SELECT coalesce(last_error, '') FROM ai.context_ai_state").fetchall()
    events = conn.execute("SELECT coalesce(reason, '') FROM ai.context_ai_event").fetchall()
    return "\n".join(r[0] for r in rows + events)


def _echo_transport(status: int, *, echo_key: bool = False, echo_text: bool = False):
    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        message = "request rejected"
        if echo_key:
            # what several providers do: quote the presented key back
            message = f"API key not valid. Please pass a valid API key. Received {ODD_KEY}"
        if echo_text:
            message = f"Invalid input: {body['input']!r} contains unsupported content"
        return httpx.Response(status, json={"error": {"message": message}})
    return httpx.MockTransport(handler)


@pytest.fixture
def seeded(sync_conn):
    seed_presets(sync_conn)


async def test_configured_api_key_echoed_by_provider_is_redacted(adv_settings, db_url, sync_conn,
                                                                 seeded, judge, caplog):
    caplog.set_level(logging.DEBUG)
    provider = OpenAIEmbeddingProvider(base_url="http://emb.test/v1", api_key=ODD_KEY,
                                       model="m", dimension=DIM, profile=PROFILE,
                                       transport=_echo_transport(400, echo_key=True))
    async with full_app(adv_settings, db_url, provider, judge) as full:
        _, auth = await full.member()
        r = await full.http.post("/v1/records", json=record_body(), headers=auth)
        assert r.status_code == 201
        await full.settle()
    stored = _stored_errors(sync_conn)
    assert "embedding permanent" in stored  # the failure really happened and was recorded
    assert ODD_KEY not in stored
    assert ODD_KEY not in _all_log_text(caplog)


async def test_provider_error_echoing_text_does_not_leak_it(adv_settings, db_url, sync_conn,
                                                            seeded, judge, caplog):
    caplog.set_level(logging.DEBUG)
    provider = OpenAIEmbeddingProvider(base_url="http://emb.test/v1", api_key="k", model="m",
                                       dimension=DIM, profile=PROFILE,
                                       transport=_echo_transport(400, echo_text=True))
    async with full_app(adv_settings, db_url, provider, judge) as full:
        _, auth = await full.member()
        r = await full.http.post("/v1/records", json=record_body(text=PERSONAL), headers=auth)
        assert r.status_code == 201
        await full.settle()
    stored = _stored_errors(sync_conn)
    assert "embedding permanent" in stored
    assert "010-1234-5678" not in stored
    assert "010-1234-5678" not in _all_log_text(caplog)


async def test_batched_error_does_not_cross_members(tmp_path, db_url, sync_conn, seeded, judge):
    from tests.integration.ai.conftest import ai_settings_for

    settings = ai_settings_for(tmp_path, db_url, embedding_batch_wait_ms=200.0)
    provider = OpenAIEmbeddingProvider(base_url="http://emb.test/v1", api_key="k", model="m",
                                       dimension=DIM, profile=PROFILE,
                                       transport=_echo_transport(400, echo_text=True))
    async with full_app(settings, db_url, provider, judge) as full:
        _, auth_a = await full.member()
        _, auth_b = await full.member()
        a = await full.http.post("/v1/records", json=record_body(1, text=PERSONAL), headers=auth_a)
        b = await full.http.post("/v1/records", json=record_body(2, text=OTHER_PERSONAL),
                                 headers=auth_b)
        await full.settle()
    """Holds: a permanently failed batch is retried one by one, so one member's echoed text
    never lands in another member's last_error."""
    b_error = sync_conn.execute("SELECT last_error FROM ai.context_ai_state WHERE context_id = %s",
                                (b.json()["contextId"],)).fetchone()[0]
    a_error = sync_conn.execute("SELECT last_error FROM ai.context_ai_state WHERE context_id = %s",
                                (a.json()["contextId"],)).fetchone()[0]
    assert b_error and a_error
    assert "010-1234-5678" not in b_error and "다시는" not in a_error


@pytest.mark.parametrize("leak", [
    "Bearer eyJhbGciOiJIUzI1NiJ9.abc.def", "sk-proj-AbCdEf0123456789xyz",
    'api_key="s3cr3t-value-42"', "postgresql://pinlog:hunter2@db:5432/pinlog",
    "https://user:hunter2@proxy.example/v1",
])
async def test_generic_secret_shapes_are_redacted_everywhere(adv_settings, db_url, sync_conn,
                                                             seeded, judge, caplog, leak):
    """Holds: the generic shapes of SPEC §6 are scrubbed from last_error, events and logs."""
    caplog.set_level(logging.DEBUG)

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(403, text=f"forbidden: {leak}")

    provider = OpenAIEmbeddingProvider(base_url="http://emb.test/v1", api_key="k", model="m",
                                       dimension=DIM, profile=PROFILE,
                                       transport=httpx.MockTransport(handler))
    async with full_app(adv_settings, db_url, provider, judge) as full:
        _, auth = await full.member()
        assert (await full.http.post("/v1/records", json=record_body(),
                                     headers=auth)).status_code == 201
        await full.settle()
    stored = _stored_errors(sync_conn)
    assert "embedding permanent: upstream 403" in stored
    secret_part = {"Bearer": "eyJhbGci", "sk-": "AbCdEf0123", "api_": "s3cr3t", "postg": "hunter2",
                   "https": "hunter2"}
    needle = next(v for k, v in secret_part.items() if leak.startswith(k))
    assert needle not in stored
    assert needle not in _all_log_text(caplog)


async def test_no_text_secret_or_db_url_in_logs_of_a_normal_life(full, sync_conn, caplog, db_url):
    """Holds: create / process / edit / delete / search / withdraw log no text, secret or URL."""
    from tests.conftest import TEST_JWT_SECRET, TEST_SECRET

    caplog.set_level(logging.DEBUG)
    _, auth = await full.member()
    created = (await full.http.post("/v1/records", json=record_body(text=PERSONAL),
                                    headers=auth)).json()
    await full.settle()
    await full.http.post(f"/v1/records/{created['recordId']}/contexts",
                         json={"text": OTHER_PERSONAL}, headers=auth)
    new = (await full.http.put(f"/v1/contexts/{created['contextId']}",
                               json={"text": PERSONAL + " 수정"}, headers=auth)).json()
    await full.settle()
    await full.http.post("/v1/search", json={"query": "엄마 생신 한정식"}, headers=auth)
    await full.http.delete(f"/v1/contexts/{new['contextId']}", headers=auth)
    await full.http.delete("/v1/me", headers=auth)
    await full.settle()
    text = _all_log_text(caplog)
    for needle in ("010-1234-5678", "다시는", "엄마 생신", TEST_SECRET, TEST_JWT_SECRET,
                   db_url.split("@")[0]):
        assert needle not in text
