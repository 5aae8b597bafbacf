"""A local OpenAI-compatible server (``/v1/embeddings``, ``/v1/chat/completions``) for the
end-to-end rescan tests: it speaks the real protocol to the real providers of a `pinlog serve`
subprocess, and can hold calls on a threading.Event so a test can SIGKILL the server mid-stage.
"""

from __future__ import annotations

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np

from pinlog.ai.runtime import DIMENSION_PROBE_TEXT

DIMENSION = 8


def vector(text: str, dimension: int = DIMENSION) -> list[float]:
    seed = int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")
    vec = np.random.default_rng(seed).standard_normal(dimension)
    return (vec / np.linalg.norm(vec)).astype(float).tolist()


class FakeOpenAI:
    """Start with :meth:`start`; ``base_url`` is ``http://127.0.0.1:<port>/v1``.

    ``hold_embeddings`` / ``hold_chat``: when set, a call signals ``entered`` and blocks until
    ``release`` is set. ``embedded_texts`` / ``chat_calls`` record what was asked.

    Misbehaviour for robustness tests: ``vectors`` maps a text to the exact vector returned
    (e.g. all zeros, as some local servers do); ``dimension`` is the length of the other
    vectors (change it to imitate a model swapped under the same profile name).
    """

    def __init__(self, *, dimension: int = DIMENSION,
                 vectors: dict[str, list[float]] | None = None) -> None:
        self.dimension = dimension
        self.vectors: dict[str, list[float]] = dict(vectors or {})
        self.hold_embeddings = threading.Event()
        self.hold_chat = threading.Event()
        self.entered = threading.Event()
        self.release = threading.Event()
        self.embedded_texts: list[str] = []
        self.chat_calls = 0
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # quiet
                pass

            def _reply(self, body: dict) -> None:
                data = json.dumps(body).encode()
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:  # the client was killed meanwhile
                    pass

            def _hold(self, flag: threading.Event) -> None:
                if flag.is_set() and not fake.release.is_set():
                    fake.entered.set()
                    fake.release.wait(120)

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if self.path.endswith("/embeddings"):
                    texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
                    with fake._lock:
                        fake.embedded_texts += texts
                    if texts != [DIMENSION_PROBE_TEXT]:  # the start-up probe is never held
                        self._hold(fake.hold_embeddings)
                    self._reply({"object": "list", "model": body.get("model"), "data": [
                        {"object": "embedding", "index": i,
                         "embedding": fake.vectors.get(t) or vector(t, fake.dimension)}
                        for i, t in enumerate(texts)]})
                elif self.path.endswith("/chat/completions"):
                    with fake._lock:
                        fake.chat_calls += 1
                    self._hold(fake.hold_chat)
                    payload = json.loads(body["messages"][-1]["content"])
                    first = payload["candidates"][0]["id"] if payload.get("candidates") else None
                    answer = {"selected": ([{"keywordId": first, "confidence": 0.9}]
                                           if first is not None else []),
                              "unmatchedConcepts": []}
                    self._reply({"id": "c1", "object": "chat.completion",
                                 "model": body.get("model"), "choices": [{
                                     "index": 0, "finish_reason": "stop",
                                     "message": {"role": "assistant",
                                                 "content": json.dumps(answer)}}]})
                else:
                    self.send_error(404)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def start(self) -> FakeOpenAI:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.release.set()
        self._server.shutdown()
        self._server.server_close()
