"""Test support for core: a real local HTTP receiver for process requests, a recording
ProcessClient, SQL helpers that write ai rows as the ai side would, and metric readers."""

from __future__ import annotations

import json
import socket
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import psycopg
from prometheus_client import REGISTRY

from pinlog.contracts import PROCESS_PATH, SEARCH_PATH, ProcessRequest


def dispatch_count(outcome: str) -> float:
    """Current value of ``pinlog_dispatch_outcomes_total{outcome=...}``."""
    return REGISTRY.get_sample_value("pinlog_dispatch_outcomes_total", {"outcome": outcome}) or 0.0


def state_row(conn: psycopg.Connection, context_id: int) -> tuple[str, str] | None:
    row = conn.execute("SELECT embedding_status, keyword_status FROM ai.context_ai_state "
                       "WHERE context_id = %s", (context_id,)).fetchone()
    return None if row is None else (row[0], row[1])


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    state: tuple[str, str] | None  # state row read over the receiver's own connection


class Receiver:
    """A real HTTP server on a free local port standing in for the ai side.

    ``mode``: an int status to answer (202, 401, 500 …), ``"hangup"`` (close the connection
    without answering) or ``"hang"`` (hold the request until :attr:`release` is set).
    When ``db_url`` is given, the state row of the request's context is read over a separate
    psycopg connection at arrival (proves it was committed before the request arrived).
    ``search_answer``: when given, ``POST /internal/v1/search`` is answered 200 with this JSON
    body (the requests are recorded like the others: what core asked the ai side).
    """

    def __init__(self, db_url: str | None = None, mode: int | str = 202, *,
                 search_answer: dict[str, Any] | None = None) -> None:
        self.db_url, self.mode = db_url, mode
        self.search_answer = search_answer
        self.received: list[Received] = []
        self.arrived = threading.Event()
        self.release = threading.Event()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:  # quiet
                pass

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                state = None
                if receiver.db_url and "contextId" in body:
                    with psycopg.connect(receiver.db_url, autocommit=True) as conn:
                        state = state_row(conn, body["contextId"])
                receiver.received.append(Received(self.path, dict(self.headers), body, state))
                receiver.arrived.set()
                if self.path == SEARCH_PATH and receiver.search_answer is not None:
                    payload = json.dumps(receiver.search_answer).encode()
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                if receiver.mode == "hangup":
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if receiver.mode == "hang":
                    receiver.release.wait(30)
                    status = 202
                else:
                    status = int(receiver.mode) if self.path == PROCESS_PATH else 404
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> Receiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        self._server.shutdown()
        self._server.server_close()


@dataclass
class RecordingClient:
    """A ProcessClient that records what it is sent (at the core↔ai boundary) and answers
    ``status``; ``db_url`` → reads the state row at arrival over its own connection."""

    status: int = 202
    db_url: str | None = None
    sent: list[ProcessRequest] = field(default_factory=list)
    states: list[tuple[str, str] | None] = field(default_factory=list)

    async def send(self, request: ProcessRequest) -> int:
        if self.db_url:
            with psycopg.connect(self.db_url, autocommit=True) as conn:
                self.states.append(state_row(conn, request.context_id))
        self.sent.append(request)
        return self.status


# --- writing ai rows as the ai side would ------------------------------------------------------

def add_presets(conn: psycopg.Connection) -> None:
    """Presets 1 PUBLIC, 2 PRIVATE_ONLY, 3 BLOCKED, 4 PUBLIC but retired (is_active false)."""
    for pid, code, name, vis, active in (
        (1, "WITH_FRIENDS", "친구와", "PUBLIC", True),
        (2, "DATE", "데이트", "PRIVATE_ONLY", True),
        (3, "BANNED", "차단됨", "BLOCKED", True),
        (4, "OLD", "옛 키워드", "PUBLIC", False),
        (5, "QUIET", "조용한", "PUBLIC", True),
    ):
        conn.execute(
            "INSERT INTO ai.keyword_preset (id, code, display_name, category, description, "
            "examples, visibility, is_active) VALUES (%s, %s, %s, 'COMPANION', 'd', "
            "ARRAY['e'], %s, %s)", (pid, code, name, vis, active))


def complete(conn: psycopg.Connection, context_id: int, keyword_ids: list[int],
             *, user_id: int = 1, record_id: int = 1, embedding: bool = True) -> None:
    """Mark both stages COMPLETED with keyword rows (and an embedding row), as the ai side does."""
    conn.execute("UPDATE ai.context_ai_state SET embedding_status = 'COMPLETED', "
                 "keyword_status = 'COMPLETED', updated_at = now() WHERE context_id = %s",
                 (context_id,))
    for i, kid in enumerate(keyword_ids):
        conn.execute("INSERT INTO ai.context_keyword (context_id, keyword_id, confidence, "
                     "preset_version) VALUES (%s, %s, %s, 1)", (context_id, kid, 0.9 - i * 0.1))
    if embedding:
        conn.execute("INSERT INTO ai.context_embedding (context_id, user_id, record_id, embedding, "
                     "embedding_profile, text_sha256) VALUES (%s, %s, %s, '[1,0,0]', 'p', "
                     "decode(repeat('ab', 32), 'hex'))", (context_id, user_id, record_id))


def set_status(conn: psycopg.Connection, context_id: int, embedding: str, keyword: str) -> None:
    conn.execute("UPDATE ai.context_ai_state SET embedding_status = %s, keyword_status = %s, "
                 "updated_at = now() WHERE context_id = %s", (embedding, keyword, context_id))


def count(conn: psycopg.Connection, sql: str, *params: object) -> int:
    return conn.execute(sql, params).fetchone()[0]


def table_counts(conn: psycopg.Connection) -> dict[str, int]:
    """Row counts of every table core writes (to prove that bad input changed nothing)."""
    tables = ["core.member", "core.place", "core.record", "core.context", "ai.context_ai_state",
              "ai.context_ai_event", "ai.context_embedding"]
    return {t: count(conn, f"SELECT count(*) FROM {t}") for t in tables}


def snapshot(conn: psycopg.Connection) -> list[Any]:
    """Full content of the lifecycle tables (to prove nothing changed, not only counts)."""
    out = []
    for sql in ("SELECT id, deleted_at FROM core.member ORDER BY id",
                "SELECT id, deleted_at, updated_at FROM core.record ORDER BY id",
                "SELECT id, body, deleted_at FROM core.context ORDER BY id",
                "SELECT context_id, embedding_status, keyword_status, updated_at "
                "FROM ai.context_ai_state ORDER BY context_id",
                "SELECT context_id, is_deleted FROM ai.context_embedding ORDER BY context_id",
                "SELECT count(*) FROM ai.context_ai_event", "SELECT count(*) FROM core.place"):
        out.append(conn.execute(sql).fetchall())
    return out


def full_count(conn: psycopg.Connection) -> dict[str, dict[str, int]]:
    """State rows per stage × status by a full scan (what the maintained counts must equal);
    statuses with rows only."""
    out: dict[str, dict[str, int]] = {"embedding": {}, "keyword": {}}
    for stage in out:
        for status, n in conn.execute(
                f"SELECT {stage}_status, count(*) FROM ai.context_ai_state GROUP BY 1"):
            out[stage][status] = n
    return out
