"""The one fake OpenAI-compatible model server (``/v1/embeddings``, ``/v1/chat/completions``).

It speaks the real protocol to the real providers (``PINLOG_EMBEDDING_PROVIDER=openai``, the
``llm`` judge) of a `pinlog serve` subprocess or a bench run, so no test hook is needed in
production code. Used by the acceptance tests (fixture ``fake_openai`` in
``tests/acceptance/conftest.py``) and by ``bench/fake_model.py`` (chaos and fuzz runs).

* Embeddings: a deterministic unit vector from a hash of the text (``vector``), unless
  ``vectors`` maps the text to an exact vector (e.g. all zeros, as some local servers return).
* Chat: a judge that picks the first candidate with confidence 0.9.
* Latency: ``delay`` seconds per embeddings call (a constant-time model, as in the benchmarks).
* Holding: with ``hold_embeddings`` / ``hold_chat`` set, a call signals ``entered`` and blocks
  until ``release`` is set (the start-up dimension probe is never held), so a test can SIGKILL
  or SIGTERM the server mid-stage.
* Counting: ``embedded_texts`` (every text, in order), ``embedded`` (Counter text → calls),
  ``chat_calls`` and ``judged`` (Counter note → calls). Texts live only in this process's
  memory (never printed: note text is personal data).
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np

from pinlog.ai.runtime import DIMENSION_PROBE_TEXT

DIMENSION = 8


def vector(text: str, dimension: int = DIMENSION) -> list[float]:
    """A unit vector of ``dimension`` floats, the same for the same text (seeded by SHA-256)."""
    seed = int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")
    vec = np.random.default_rng(seed).standard_normal(dimension)
    return (vec / np.linalg.norm(vec)).astype(float).tolist()


class FakeOpenAI:
    """Start with :meth:`start`; ``base_url`` is ``http://127.0.0.1:<port>/v1``.

    ``dimension`` is the length of the hashed vectors (change it to imitate a model swapped
    under the same profile name).
    """

    def __init__(self, *, dimension: int = DIMENSION,
                 vectors: dict[str, list[float]] | None = None, delay: float = 0.0) -> None:
        self.dimension = dimension
        self.delay = delay
        self.vectors: dict[str, list[float]] = dict(vectors or {})
        self.hold_embeddings = threading.Event()
        self.hold_chat = threading.Event()
        self.entered = threading.Event()
        self.release = threading.Event()
        self.embedded_texts: list[str] = []
        self.embedded: Counter[str] = Counter()
        self.chat_calls = 0
        self.judged: Counter[str] = Counter()
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
                    with fake._lock:
                        fake.embedded_texts += texts
                        fake.embedded.update(texts)
                    if texts != [DIMENSION_PROBE_TEXT]:  # the start-up probe is never held
                        self._hold(fake.hold_embeddings)
                    if fake.delay:
                        time.sleep(fake.delay)
                    self._reply({"object": "list", "model": body.get("model"), "data": [
                        {"object": "embedding", "index": i,
                         "embedding": fake.vectors.get(t) or vector(t, fake.dimension)}
                        for i, t in enumerate(texts)]})
                elif self.path.endswith("/chat/completions"):
                    payload = json.loads(body["messages"][-1]["content"])
                    with fake._lock:
                        fake.chat_calls += 1
                        fake.judged[str(payload.get("note", ""))] += 1
                    self._hold(fake.hold_chat)
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
        """Release any held request, then shut the server down."""
        self.release.set()
        self._server.shutdown()
        self._server.server_close()

    def env(self, profile: str, *, judge: bool = True) -> dict[str, str]:
        """`pinlog` settings that point the embedding provider (profile ``profile``, this
        server's ``dimension``) and, with ``judge``, the llm judge here."""
        env = {"PINLOG_EMBEDDING_PROVIDER": "openai", "PINLOG_EMBEDDING_BASE_URL": self.base_url,
               "PINLOG_EMBEDDING_MODEL": "fake-embed", "PINLOG_EMBEDDING_PROFILE": profile,
               "PINLOG_EMBEDDING_DIMENSION": str(self.dimension)}
        if judge:
            env |= {"PINLOG_JUDGE": "llm", "PINLOG_LLM_BASE_URL": self.base_url,
                    "PINLOG_LLM_CHAIN": "fake-judge"}
        return env
