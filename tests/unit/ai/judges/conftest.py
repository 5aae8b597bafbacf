"""A real local HTTP server speaking the OpenAI chat-completions protocol, for the llm judge.

Each test scripts the answers: ``server.script(reply, reply, …)`` where a reply is
``ok(answer_dict)``, ``content("raw text")`` or ``status(429)``; requests are recorded
(model, headers, parsed body). Replies are consumed in order; when the script is empty the
server answers 500.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from pinlog.ai.ports import Candidate, Preset


class Sleeps:
    """Injected sleep of a judge: records the backoff and Retry-After delays instead of
    waiting."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


@dataclass
class Reply:
    status: int = 200
    content: str | None = None
    body: str | None = None
    hang: bool = False


def ok(answer: dict) -> Reply:
    return Reply(content=json.dumps(answer))


def content(text: str) -> Reply:
    return Reply(content=text)


def hang() -> Reply:
    """Never answer (until the server stops): the client's timeout must fire."""
    return Reply(hang=True)


def status(code: int, body: str = '{"error": {"message": "nope"}}') -> Reply:
    return Reply(status=code, body=body)


@dataclass
class ChatServer:
    url: str
    replies: list[Reply] = field(default_factory=list)
    requests: list[dict] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: optional per-model script: model name → replies (used before ``replies``)
    by_model: dict[str, list[Reply]] = field(default_factory=dict)
    stopping: threading.Event = field(default_factory=threading.Event)

    def script(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    def models(self) -> list[str]:
        return [r["body"]["model"] for r in self.requests]


def _handler(server: ChatServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:  # keep test output clean
            pass

        def do_POST(self) -> None:  # noqa: N802
            length = int(self.headers.get("Content-Length", 0))
            body = json.loads(self.rfile.read(length))
            with server.lock:
                server.requests.append({"path": self.path, "headers": dict(self.headers),
                                        "body": body})
                queue = server.by_model.get(body.get("model"))
                reply = (queue.pop(0) if queue else
                         server.replies.pop(0) if server.replies else Reply(status=500, body="{}"))
            if reply.hang:
                server.stopping.wait(30)
                return
            if self.path != "/v1/chat/completions":
                reply = Reply(status=404, body="{}")
            if reply.status != 200:
                payload = (reply.body or "").encode()
            else:
                payload = json.dumps({
                    "id": "chatcmpl-test", "object": "chat.completion", "model": body["model"],
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": reply.content}}],
                }).encode()
            self.send_response(reply.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    return Handler


@pytest.fixture
def chat_server() -> Iterator[ChatServer]:
    """A started local chat-completions server (``server.url`` ends with ``/v1``)."""
    state = ChatServer(url="")
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    state.url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02},
                              daemon=True)
    thread.start()
    try:
        yield state
    finally:
        state.stopping.set()
        httpd.shutdown()
        httpd.server_close()


def make_candidates(*pairs: tuple[int, float]) -> list[Candidate]:
    """Candidates with ids and similarities (presets with plausible fields)."""
    return [
        Candidate(preset=Preset(id=pid, code=f"CODE_{pid}", display_name=f"이름 {pid}",
                                category="ATMOSPHERE", description=f"설명 {pid} / description",
                                examples=(f"예시 {pid}", f"example {pid}"),
                                cues=(f"단서{pid}", f"cue{pid}")),
                  similarity=sim)
        for pid, sim in pairs
    ]
