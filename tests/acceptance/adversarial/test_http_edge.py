"""What every route gets at the HTTP edge (issue 27 #1, #2, #4; ``pinlog/http.py``), on the full
app (core + ai, fake models, real PostgreSQL): a body over its route's limit is 413 before it is
read; metric labels come from closed sets; every error answer is the one envelope
``{"error", "message"}`` — the framework's own errors included."""

from __future__ import annotations

import json
import random
import string

import pytest
from prometheus_client import REGISTRY

from pinlog.contracts import PROCESS_PATH, SEARCH_PATH, SECRET_HEADER
from pinlog.http import KNOWN_METHODS
from tests.acceptance.adversarial.conftest import record_body, table_counts
from tests.conftest import TEST_SECRET

JSON = {"Content-Type": "application/json"}
#: The app's limits with the default settings (README "Public API"): search 16 KiB, else 64 KiB.
SEARCH_LIMIT, DEFAULT_LIMIT = 16 * 1024, 64 * 1024


class Stream:
    """A request body streamed in 4 KiB chunks that counts how much of it the server pulled."""

    def __init__(self, total: int) -> None:
        self.total, self.pulled = total, 0

    async def __aiter__(self):
        while self.pulled < self.total:
            self.pulled += 4096
            yield b" " * 4096


def assert_envelope(response, status: int, code: str | None = None) -> dict:
    assert response.status_code == status, (response.status_code, response.text[:300])
    body = response.json()
    assert isinstance(body.get("error"), str) and body["error"].isupper(), body
    assert isinstance(body.get("message"), str) and body["message"], body
    assert "detail" not in body
    if code is not None:
        assert body["error"] == code, body
    return body


# --- 1. request body limits -----------------------------------------------------------------------

@pytest.mark.parametrize(("method", "path", "limit"), [
    ("POST", "/v1/search", SEARCH_LIMIT), ("POST", "/v1/records", DEFAULT_LIMIT),
    ("PUT", "/v1/contexts/1", DEFAULT_LIMIT), ("POST", PROCESS_PATH, DEFAULT_LIMIT),
    ("POST", SEARCH_PATH, DEFAULT_LIMIT), ("POST", "/no/such/route", DEFAULT_LIMIT)])
async def test_a_declared_length_over_the_limit_is_413_before_any_byte_is_read(
        full, sync_conn, method, path, limit):
    """No token, no secret: the 413 comes first (a 150 MB body was read in full before its
    401), and the server pulls nothing of the body."""
    before = table_counts(sync_conn)
    body = Stream(300 * 1024 * 1024)
    r = await full.http.request(method, path, content=body,
                                headers={**JSON, "Content-Length": str(body.total)})
    answer = assert_envelope(r, 413, "BODY_TOO_LARGE")
    assert str(limit) in answer["message"]
    assert body.pulled == 0
    assert table_counts(sync_conn) == before


@pytest.mark.parametrize(("path", "limit"), [("/v1/search", SEARCH_LIMIT),
                                             ("/v1/records", DEFAULT_LIMIT),
                                             (PROCESS_PATH, DEFAULT_LIMIT)])
async def test_a_chunked_body_is_cut_at_the_limit(full, sync_conn, path, limit):
    """Without Content-Length (chunked) the bytes are counted as they arrive: the request ends
    in a 413 as soon as they pass the limit, never after reading the rest."""
    _, auth = await full.member()
    before = table_counts(sync_conn)
    body = Stream(8 * 1024 * 1024)
    r = await full.http.post(path, content=body, headers={**auth, **JSON,
                                                          SECRET_HEADER: TEST_SECRET})
    assert_envelope(r, 413, "BODY_TOO_LARGE")
    assert limit < body.pulled <= limit + 4096
    assert table_counts(sync_conn) == before


async def test_the_longest_note_fully_escaped_still_fits(full, sync_conn):
    """The limit never refuses a valid note: 2,000 non-BMP characters, each sent as a JSON
    surrogate-pair escape (12 bytes), plus a long place."""
    _, auth = await full.member()
    text = "😀" * 2000
    body = record_body(text=text, name="가" * 300)
    body["place"]["address"] = "나" * 500
    content = json.dumps(body, ensure_ascii=True)
    assert len(content) > 24_000
    r = await full.http.post("/v1/records", content=content, headers={**auth, **JSON})
    assert r.status_code == 201, r.text
    edited = await full.http.put(f"/v1/contexts/{r.json()['contextId']}", headers={**auth, **JSON},
                                 content=json.dumps({"text": "😃" * 2000}, ensure_ascii=True))
    assert edited.status_code == 200, edited.text
    query = await full.http.post("/v1/search", headers={**auth, **JSON},
                                 content=json.dumps({"query": "😀" * 500}, ensure_ascii=True))
    assert query.status_code == 200, query.text


# --- 2. metric labels from closed sets ------------------------------------------------------------

def http_series() -> set[tuple[str, tuple[tuple[str, str], ...]]]:
    return {(sample.name, tuple(sorted(sample.labels.items())))
            for metric in REGISTRY.collect() if metric.name.startswith("pinlog_http_")
            for sample in metric.samples}


async def test_a_thousand_requests_with_random_methods_and_paths_add_no_series(full):
    """Issue 27 #2: 300 made-up methods added 301 request series and 3,660 histogram series.
    Methods are labelled from the known set (else ``other``), routes by template (else
    ``unmatched``): after one request of each kind, 1,000 random ones add nothing."""
    rng = random.Random(27)

    def made_up() -> str:
        return "ZZ" + "".join(rng.choices(string.ascii_uppercase + string.digits, k=6))

    def random_path() -> str:
        return "/" + "/".join("".join(rng.choices(string.ascii_lowercase + "0123456789-._~",
                                                  k=rng.randint(1, 12)))
                              for _ in range(rng.randint(1, 4)))

    kinds = {  # path kind → a path of that kind
        "unknown": random_path,
        "health": lambda: "/health",
        "record": lambda: f"/v1/records/{rng.randint(1, 2**40)}",
        "context": lambda: f"/v1/contexts/{rng.randint(1, 2**40)}",
    }
    methods = {"made-up": made_up, "get": lambda: "GET", "delete": lambda: "DELETE"}

    async def send(method: str, path: str) -> None:
        r = await full.http.request(method, path)
        assert r.status_code in (200, 401, 404, 405), (method, path, r.status_code)

    for make_method in methods.values():  # one request of each kind
        for make_path in kinds.values():
            await send(make_method(), make_path())
    before = http_series()
    for _ in range(1000):
        await send(rng.choice(list(methods.values()))(), rng.choice(list(kinds.values()))())
    after = http_series()
    assert after == before, sorted(after - before)[:5]
    labels = {dict(labels).get("method") for _, labels in after} - {None}
    assert labels <= KNOWN_METHODS | {"other"}
    routes = {dict(labels).get("route") for _, labels in after} - {None}
    assert all(r == "unmatched" or r.startswith("/") and len(r) < 80 for r in routes)
    assert not any(r.startswith("/v1/records/") and r[12:13].isdigit() for r in routes)


# --- 4. one error envelope on every path ----------------------------------------------------------

async def test_every_error_answer_is_the_one_envelope(full):
    _, auth = await full.member()
    bad_token = {"Authorization": "Bearer not-a-token"}
    deep = '{"place":' + "[" * 20_000 + "]" * 20_000 + ',"text":"a"}'
    cases = [
        ("GET", "/no/such/route", {}, None, 404, "NOT_FOUND"),
        ("GET", "/v1/recordz", auth, None, 404, "NOT_FOUND"),
        ("DELETE", "/health", {}, None, 405, "METHOD_NOT_ALLOWED"),
        ("ZZ9", "/v1/records", auth, None, 405, "METHOD_NOT_ALLOWED"),
        ("PATCH", "/v1/records", auth, "{}", 405, "METHOD_NOT_ALLOWED"),
        ("POST", "/v1/records", auth, deep, 400, "BAD_REQUEST"),
        ("POST", "/v1/records", auth, "{not json", 422, "INVALID_INPUT"),
        ("POST", "/v1/records", auth, "[1,2]", 422, "INVALID_INPUT"),
        ("GET", "/v1/records?limit=abc", auth, None, 422, "INVALID_INPUT"),
        ("GET", "/v1/records", {}, None, 401, "UNAUTHORIZED"),
        ("GET", "/v1/me", bad_token, None, 401, "UNAUTHORIZED"),
        ("GET", "/v1/records/abc", auth, None, 422, "INVALID_INPUT"),
        ("GET", "/v1/records/99", auth, None, 404, "NOT_FOUND"),
        ("POST", PROCESS_PATH, {}, "{}", 401, "UNAUTHORIZED"),
        ("POST", SEARCH_PATH, {SECRET_HEADER: "wrong"}, "{}", 401, "UNAUTHORIZED"),
        ("POST", PROCESS_PATH, {SECRET_HEADER: TEST_SECRET}, "[]", 422, "INVALID_INPUT"),
        ("POST", SEARCH_PATH, {SECRET_HEADER: TEST_SECRET}, "{}", 422, "INVALID_INPUT"),
        ("GET", PROCESS_PATH, {}, None, 405, "METHOD_NOT_ALLOWED"),
        ("GET", "/v1/records", {"Content-Length": "12x"}, None, 400, "BAD_REQUEST"),
    ]
    for method, path, headers, content, status, code in cases:
        r = await full.http.request(method, path, headers={**JSON, **headers}, content=content)
        assert_envelope(r, status, code)
        if status == 405:
            assert r.headers.get("allow"), (method, path)
    assert (await full.http.get("/v1/me", headers=bad_token)).headers["www-authenticate"] == "Bearer"
