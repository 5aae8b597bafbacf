"""A counting OpenAI-compatible model server for the chaos run (not a benchmark itself):
``/v1/embeddings`` (deterministic unit vectors from a hash of the text) and
``/v1/chat/completions`` (a judge that picks the first candidate). It counts every text it
embeds and every note it judges, so the run can report model calls per stage and context.
Texts live only in this process's memory (never printed)."""

from __future__ import annotations

import hashlib
import json
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np

DIMENSION = 16
PROFILE = "chaos-fake-16-cosine-v1"


def vector(text: str) -> list[float]:
    seed = int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")
    vec = np.random.default_rng(seed).standard_normal(DIMENSION)
    return (vec / np.linalg.norm(vec)).astype(float).tolist()


class CountingModel:
    """``start()`` → ``base_url``; ``embedded`` / ``judged``: Counter text → calls."""

    def __init__(self) -> None:
        self.embedded: Counter[str] = Counter()
        self.judged: Counter[str] = Counter()
        self._lock = threading.Lock()
        model = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _reply(self, body: dict) -> None:
                data = json.dumps(body).encode()
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    pass

            def do_POST(self) -> None:  # noqa: N802
                try:
                    body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                except (ValueError, OSError):  # the caller was SIGKILLed mid-request
                    try:
                        self.send_error(400)
                    except OSError:
                        pass
                    return
                if self.path.endswith("/embeddings"):
                    texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
                    with model._lock:
                        model.embedded.update(texts)
                    self._reply({"object": "list", "model": body.get("model"), "data": [
                        {"object": "embedding", "index": i, "embedding": vector(t)}
                        for i, t in enumerate(texts)]})
                    return
                payload = json.loads(body["messages"][-1]["content"])
                with model._lock:
                    model.judged[str(payload.get("note", ""))] += 1
                first = payload["candidates"][0]["id"] if payload.get("candidates") else None
                answer = {"selected": [{"keywordId": first, "confidence": 0.9}]
                          if first is not None else [], "unmatchedConcepts": []}
                self._reply({"id": "c", "object": "chat.completion", "choices": [{
                    "index": 0, "finish_reason": "stop",
                    "message": {"role": "assistant", "content": json.dumps(answer)}}]})

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def start(self) -> CountingModel:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def env(self) -> dict[str, str]:
        """`pinlog` settings that point the embedding provider and the llm judge here."""
        return {"PINLOG_EMBEDDING_PROVIDER": "openai", "PINLOG_EMBEDDING_BASE_URL": self.base_url,
                "PINLOG_EMBEDDING_MODEL": "fake-embed", "PINLOG_EMBEDDING_PROFILE": PROFILE,
                "PINLOG_EMBEDDING_DIMENSION": str(DIMENSION), "PINLOG_JUDGE": "llm",
                "PINLOG_LLM_BASE_URL": self.base_url, "PINLOG_LLM_CHAIN": "fake-judge",
                "PINLOG_CANDIDATE_FLOOR": "-1"}
