"""The one fake OpenAI-compatible model server (``/v1/embeddings``, ``/v1/chat/completions``),
with behaviour profiles of the real servers production teams run (issue 23).

It speaks the real protocol to the real providers (``PINLOG_EMBEDDING_PROVIDER=openai`` /
``azure-openai``, the ``llm`` judge, the query rewrite) of a `pinlog serve` subprocess, an
in-process app or a bench run, so no test hook is needed in production code. Used by the
acceptance tests (fixture ``fake_openai`` in ``tests/acceptance/conftest.py``), the provider
conformance suite and ``bench/fake_model.py`` / ``bench/bench_throttle.py``.

* Embeddings: a deterministic unit vector from a hash of the text (:func:`vector`), unless
  ``vectors`` maps the text to an exact vector (e.g. all zeros, as some local servers return);
  with ``embedding="words"`` a bag-of-words vector (texts sharing words are near: calibration).
* Chat: a judge that picks the first candidate with confidence 0.9 (``greedy``: every candidate),
  or, for a query-rewrite request, ``rewrite`` (default: the query itself).
* Profiles (:data:`PROFILES`, ``FakeOpenAI(profile="tei")``) answer the way each real server
  does — URL, authentication, the input cap and its error, the context-length error, the error
  body shape, ``response_format`` support, reasoning blocks. Each field cites its source.
* Throttling: ``rate`` requests per second (token bucket, burst = one second's worth) over both
  endpoints; above it 429 with ``Retry-After`` (whole seconds, RFC 9110 §10.2.3) and the
  profile's error body (``throttled`` counts them).
  :meth:`throttle_next` scripts the next N answers as 429 with given headers.
* Latency: ``delay`` seconds per embeddings call (a constant-time model, as in the benchmarks).
* Trickling: with ``trickle`` seconds set, a chat answer sends its headers at once and then its
  body one byte every ``trickle`` seconds (an overloaded proxy).
* Holding: with ``hold_embeddings`` / ``hold_chat`` set, a call signals ``entered`` and blocks
  until ``release`` is set (the start-up dimension probe is never held), so a test can SIGKILL
  or SIGTERM the server mid-stage; ``hold_when`` (texts → bool) holds only the embedding calls
  it picks (e.g. a later batch of a backfill).
* Counting: ``embedded_texts`` (every text, in order), ``embedded`` (Counter text → calls),
  ``embedding_calls`` (inputs per call), ``embedding_fields`` (request fields sent),
  ``chat_calls``, ``chat_models`` (the model of every chat request, served or not, in order),
  ``chat_requests`` (model and ``response_format`` type per served call), ``judged`` (Counter
  note → calls), ``throttled`` and ``refused`` (Counter reason/model → refusals). Texts live
  only in this process's memory (never printed: note text is personal data).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import numpy as np

from pinlog.ai.runtime import DIMENSION_PROBE_TEXT

DIMENSION = 8
#: The key the fake expects when ``api_key`` is set (``env`` sends it).
API_KEY = "sk-fake-conformance-key-0123456789"


def vector(text: str, dimension: int = DIMENSION) -> list[float]:
    """A unit vector of ``dimension`` floats, the same for the same text (seeded by SHA-256)."""
    seed = int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")
    vec = np.random.default_rng(seed).standard_normal(dimension)
    return (vec / np.linalg.norm(vec)).astype(float).tolist()


def words_vector(text: str, dimension: int = DIMENSION) -> list[float]:
    """A bag-of-words unit vector (feature hashing of the lower-cased words, plus a small share
    of :func:`vector` so no text is the zero vector): texts that share words are near."""
    vec = np.zeros(dimension)
    for word in re.findall(r"\w+", text.lower()):
        digest = hashlib.sha256(word.encode("utf-8")).digest()
        vec[int.from_bytes(digest[:4], "big") % dimension] += 1.0 if digest[4] % 2 else -1.0
    vec = vec / (np.linalg.norm(vec) or 1.0) + 0.05 * np.asarray(vector(text, dimension))
    return (vec / np.linalg.norm(vec)).astype(float).tolist()


# --- error bodies, as each server writes them -------------------------------------------------
def openai_error(message: str, type_: str, code: str | None) -> dict:
    """OpenAI's (and Azure's, Ollama's, DeepSeek's) shape: ``{"error": {message, type, param,
    code}}`` (platform.openai.com/docs/guides/error-codes)."""
    return {"error": {"message": message, "type": type_, "param": None, "code": code}}


def tei_error(message: str, type_: str, status: int) -> dict:
    """TEI's OpenAI-compatible route: ``{"message", "code", "type"}``
    (huggingface/text-embeddings-inference router/src/http/types.rs
    ``OpenAICompatErrorResponse``; Validation → 413, Overloaded → 429)."""
    return {"message": message, "code": status, "type": type_}


def vllm_error(message: str, type_: str, status: int) -> dict:
    """vLLM's OpenAI server: ``{"object": "error", "message", "type", "param", "code"}``
    (vllm-project/vllm#4667 shows the shape)."""
    return {"object": "error", "message": message, "type": type_, "param": None, "code": status}


@dataclass(frozen=True)
class Profile:
    """How one real server answers. Defaults are OpenAI's.

    Attributes:
        name: the profile's name (``PROFILES`` key).
        azure: Azure OpenAI URLs (``/openai/deployments/{deployment}/…?api-version=``) and the
            ``api-key`` header (learn.microsoft.com/azure/ai-services/openai/reference).
        max_inputs: most inputs per embeddings request (None: no cap).
        too_many: ``(status, body)`` for a request of ``n`` inputs above the cap.
        max_input_chars: longest input accepted (a context length, one token per character).
        too_long: ``(status, body)`` for an input over it.
        error: builds ``(status, body)`` for ``(status, message, type, code)``.
        json_schema, json_object: ``response_format`` types the chat endpoint accepts; others
            are refused with ``format_refused``.
        think: the chat answer starts with a reasoning block (``<think>…</think>``).
        fence: the JSON answer is wrapped in a markdown code fence.
        model_missing: ``(status, body)`` for a model the server does not serve.
    """

    name: str
    azure: bool = False
    max_inputs: int | None = None
    too_many: Callable[[int, int], tuple[int, dict]] | None = None
    max_input_chars: int | None = None
    too_long: Callable[[int, int], tuple[int, dict]] | None = None
    error: Callable[[int, str, str, str | None], dict] = field(
        default=lambda status, message, type_, code: openai_error(message, type_, code))
    json_schema: bool = True
    json_object: bool = True
    format_refused: tuple[int, dict] = (400, openai_error(
        "This response_format type is unavailable now", "invalid_request_error",
        "invalid_request_error"))
    think: bool = False
    fence: bool = False
    model_missing: Callable[[str], tuple[int, dict]] = field(default=lambda model: (404, openai_error(
        f"The model `{model}` does not exist or you do not have access to it.",
        "invalid_request_error", "model_not_found")))


#: The behaviour profiles of the conformance suite (README "Tested providers").
PROFILES: dict[str, Profile] = {
    # OpenAI: 2048 inputs per request; 404 model_not_found (platform.openai.com error codes).
    "openai": Profile("openai", max_inputs=2048),
    # Azure OpenAI: api-key header, api-version query, deployment URL; 16 inputs per request on
    # many deployments: 400 "Too many inputs. The max number of inputs is 16." with type
    # invalid_request_error (microsoft/semantic-kernel#2099, Mintplex-Labs/anything-llm#184);
    # a missing deployment is 404 DeploymentNotFound.
    "azure-openai": Profile(
        "azure-openai", azure=True, max_inputs=16,
        too_many=lambda n, cap: (400, openai_error(
            f"Too many inputs. The max number of inputs is {cap}.  We hope to increase the number "
            "of inputs per request soon. Please contact us through an Azure support request at: "
            "https://go.microsoft.com/fwlink/?linkid=2213926 for further questions.",
            "invalid_request_error", None)),
        model_missing=lambda model: (404, {"error": {
            "code": "DeploymentNotFound",
            "message": "The API deployment for this resource does not exist."}})),
    # TEI: --max-client-batch-size defaults to 32; above it 413 "batch size N > maximum allowed
    # batch size 32", type validation (router/src/http/server.rs openai_embed); an input over
    # the model's length is 413 "`inputs` must have less than 512 tokens" (TEI#82). TEI serves
    # embeddings only: the chat side of this profile is a vLLM server.
    "tei": Profile(
        "tei", max_inputs=32,
        too_many=lambda n, cap: (413, tei_error(
            f"batch size {n} > maximum allowed batch size {cap}", "validation", 413)),
        max_input_chars=512,
        too_long=lambda chars, limit: (413, tei_error(
            f"Input validation error: `inputs` must have less than {limit} tokens. Given: {chars}",
            "validation", 413)),
        error=lambda status, message, type_, code: tei_error(message, type_, status)),
    # vLLM: no input cap; an input over max_model_len is 400 "This model's maximum context
    # length is 512 tokens. However, you requested N tokens in the input for embedding
    # generation. Please reduce the length of the input." (vllm-project/vllm#19798), in vLLM's
    # error shape; a model it does not serve is 404 NotFoundError.
    "vllm": Profile(
        "vllm", max_input_chars=512,
        too_long=lambda chars, limit: (400, vllm_error(
            f"This model's maximum context length is {limit} tokens. However, you requested "
            f"{chars} tokens in the input for embedding generation. Please reduce the length of "
            "the input.", "BadRequestError", 400)),
        error=lambda status, message, type_, code: vllm_error(message, type_, status),
        model_missing=lambda model: (404, vllm_error(
            f"The model `{model}` does not exist.", "NotFoundError", 404))),
    # Ollama's OpenAI-compatible API: /v1/embeddings takes model and input only — encoding
    # format, dimensions and user are not supported and are ignored (ollama docs/openai.md),
    # the vector has the model's own length; Qwen3 answers with a reasoning block; a model not
    # pulled is 404 'model "x" not found, try pulling it first' (type api_error).
    "ollama": Profile(
        "ollama", think=True,
        model_missing=lambda model: (404, openai_error(
            f'model "{model}" not found, try pulling it first', "api_error", None))),
    # A reasoning model (DeepSeek-R1 style): json_schema refused with 400 "This response_format
    # type is unavailable now" (bytedance/deer-flow#545), json_object accepted, the answer
    # starts with <think>…</think> and the JSON is fenced.
    "reasoning": Profile("reasoning", json_schema=False, think=True, fence=True),
}


class FakeOpenAI:
    """Start with :meth:`start`; ``base_url`` is ``http://127.0.0.1:<port>/v1``.

    Args:
        dimension: the length of the hashed vectors (change it to imitate a model swapped
            under the same profile name).
        vectors: exact vectors for some texts.
        profile: a :data:`PROFILES` name or a :class:`Profile` (default ``openai`` without an
            input cap and without a key check: the suite's plain fake).
        rate: requests per second above which the server answers 429 + ``Retry-After``.
        api_key: the key the server requires (``Authorization: Bearer`` or Azure's ``api-key``);
            None: no check.
        models: chat models the server serves (None: any); others get the profile's
            ``model_missing`` answer.
        greedy: the judge selects every candidate (confidences 0.9, 0.8, …).
        embedding: ``hash`` (default) or ``words`` (:func:`words_vector`).
    """

    def __init__(self, *, dimension: int = DIMENSION,
                 vectors: dict[str, list[float]] | None = None,
                 profile: str | Profile | None = None, rate: float | None = None,
                 api_key: str | None = None, models: tuple[str, ...] | None = None,
                 greedy: bool = False, embedding: str = "hash", delay: float = 0.0) -> None:
        self.dimension = dimension
        self.delay = delay
        self.vectors: dict[str, list[float]] = dict(vectors or {})
        self.profile = (PROFILES[profile] if isinstance(profile, str) else
                        profile or Profile("plain"))
        self.rate = rate
        self.api_key = api_key
        self.models = models
        self.greedy = greedy
        self.embedding = embedding
        self.rewrite: Callable[[str], str] | None = None
        self.trickle: float | None = None
        self.hold_embeddings = threading.Event()
        self.hold_chat = threading.Event()
        self.hold_when: Callable[[list[str]], bool] | None = None
        self.entered = threading.Event()
        self.release = threading.Event()
        self.embedded_texts: list[str] = []
        self.embedded: Counter[str] = Counter()
        self.embedding_calls: list[int] = []
        self.embedding_fields: Counter[str] = Counter()
        self.chat_calls = 0
        self.chat_requests: list[tuple[str, str]] = []
        self.chat_models: list[str] = []
        self.judged: Counter[str] = Counter()
        self.throttled = 0
        self.refused: Counter[str] = Counter()
        self._scripted_throttles: list[dict[str, str]] = []
        self._tokens = float(rate or 0)
        self._refilled = time.monotonic()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # quiet
                pass

            def _send(self, status: int, body: dict, headers: dict[str, str] | None = None,
                      trickle: float | None = None) -> None:
                data = json.dumps(body).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for name, value in (headers or {}).items():
                        self.send_header(name, value)
                    self.end_headers()
                    if trickle is None:
                        self.wfile.write(data)
                        return
                    self.wfile.flush()
                    for i in range(len(data)):  # one byte per interval: never idle for long
                        if fake._stopping.wait(trickle):
                            return
                        self.wfile.write(data[i:i + 1])
                        self.wfile.flush()
                except OSError:  # the client was killed or gave up meanwhile
                    pass

            def _error(self, status: int, message: str, type_: str, code: str | None,
                       headers: dict[str, str] | None = None) -> None:
                self._send(status, fake.profile.error(status, message, type_, code), headers)

            def _hold(self, flag: threading.Event) -> None:
                if flag.is_set() and not fake.release.is_set():
                    fake.entered.set()
                    fake.release.wait(120)

            def _authorised(self, query: dict[str, list[str]]) -> bool:
                if fake.profile.azure and "api-version" not in query:
                    # Azure without api-version: 404 Resource not found
                    self._send(404, {"error": {"code": "404", "message": "Resource not found"}})
                    return False
                if fake.api_key is None:
                    return True
                sent = (self.headers.get("api-key") if fake.profile.azure else
                        (self.headers.get("Authorization") or "").removeprefix("Bearer "))
                if sent == fake.api_key:
                    return True
                if fake.profile.azure:
                    self._send(401, {"error": {"code": "401", "message": (
                        "Access denied due to invalid subscription key or wrong API endpoint.")}})
                else:
                    self._error(401, "Incorrect API key provided.", "invalid_request_error",
                                "invalid_api_key")
                return False

            def _throttled(self) -> bool:
                with fake._lock:
                    scripted = (fake._scripted_throttles.pop(0) if fake._scripted_throttles
                                else None)
                if scripted is not None:
                    with fake._lock:
                        fake.throttled += 1
                    self._error(429, "Rate limit reached for requests", "requests",
                                "rate_limit_exceeded", scripted)
                    return True
                wait = fake._take_token()
                if wait is None:
                    return False
                with fake._lock:
                    fake.throttled += 1
                seconds = max(1, math.ceil(wait))
                headers = {"Retry-After": str(seconds)}
                if fake.profile.azure:  # Azure also sends the wait in milliseconds
                    headers["retry-after-ms"] = str(int(wait * 1000))
                self._error(429, "Rate limit reached for requests", "requests",
                            "rate_limit_exceeded", headers)
                return True

            def do_POST(self) -> None:  # noqa: N802
                try:
                    body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                except (ValueError, OSError, TypeError):  # the caller died mid-request
                    try:
                        self.send_error(400)
                    except OSError:
                        pass
                    return
                url = urlsplit(self.path)
                query = parse_qs(url.query)
                if not self._authorised(query):
                    return
                if self._throttled():
                    return
                if url.path.endswith("/embeddings"):
                    self._embeddings(body)
                elif url.path.endswith("/chat/completions"):
                    model = body.get("model")
                    match = re.search(r"/openai/deployments/([^/]+)/chat/completions$", url.path)
                    if fake.profile.azure and match:
                        model = match.group(1)
                    self._chat(body, str(model))
                else:
                    self._error(404, "Not found", "invalid_request_error", None)

            def _embeddings(self, body: dict) -> None:
                texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
                profile = fake.profile
                if profile.max_inputs is not None and len(texts) > profile.max_inputs:
                    with fake._lock:
                        fake.refused["too_many"] += 1
                    status, error = (profile.too_many(len(texts), profile.max_inputs)
                                     if profile.too_many else (400, openai_error(
                                         f"Too many inputs: at most {profile.max_inputs}",
                                         "invalid_request_error", None)))
                    self._send(status, error)
                    return
                if profile.max_input_chars is not None and profile.too_long is not None:
                    longest = max(len(t) for t in texts)
                    if longest > profile.max_input_chars:
                        with fake._lock:
                            fake.refused["too_long"] += 1
                        self._send(*profile.too_long(longest, profile.max_input_chars))
                        return
                with fake._lock:
                    fake.embedded_texts += texts
                    fake.embedded.update(texts)
                    fake.embedding_calls.append(len(texts))
                    fake.embedding_fields.update(body)
                if texts != [DIMENSION_PROBE_TEXT]:  # the start-up probe is never held
                    self._hold(fake.hold_embeddings)
                    picked = fake.hold_when
                    if picked is not None and picked(texts) and not fake.release.is_set():
                        fake.entered.set()
                        fake.release.wait(120)
                if fake.delay:
                    time.sleep(fake.delay)
                make = words_vector if fake.embedding == "words" else vector
                self._send(200, {"object": "list", "model": body.get("model"), "data": [
                    {"object": "embedding", "index": i,
                     "embedding": fake.vectors.get(t) or make(t, fake.dimension)}
                    for i, t in enumerate(texts)],
                    "usage": {"prompt_tokens": 0, "total_tokens": 0}})

            def _chat(self, body: dict, model: str) -> None:
                profile = fake.profile
                with fake._lock:
                    fake.chat_models.append(model)
                if fake.models is not None and model not in fake.models:
                    with fake._lock:
                        fake.refused[model] += 1
                    self._send(*profile.model_missing(model))
                    return
                kind = (body.get("response_format") or {}).get("type", "none")
                with fake._lock:
                    fake.chat_requests.append((model, kind))
                if (kind == "json_schema" and not profile.json_schema) or (
                        kind == "json_object" and not profile.json_object):
                    self._send(*profile.format_refused)
                    return
                last = body["messages"][-1]["content"]
                try:
                    payload = json.loads(last)
                except ValueError:  # a query rewrite: the query itself
                    payload = None
                if not isinstance(payload, dict) or "candidates" not in payload:
                    with fake._lock:
                        fake.chat_calls += 1
                    self._hold(fake.hold_chat)
                    answer_text = fake.rewrite(last) if fake.rewrite else last
                else:
                    with fake._lock:
                        fake.chat_calls += 1
                        fake.judged[str(payload.get("note", ""))] += 1
                    self._hold(fake.hold_chat)
                    ids = [c["id"] for c in payload.get("candidates", [])]
                    chosen = ids if fake.greedy else ids[:1]
                    answer = {"selected": [{"keywordId": k, "confidence": round(0.9 - 0.05 * i, 3)}
                                           for i, k in enumerate(chosen)],
                              "unmatchedConcepts": []}
                    answer_text = json.dumps(answer)
                    if profile.fence:
                        answer_text = f"Here are the picks:\n```json\n{answer_text}\n```"
                    if profile.think:
                        answer_text = ("<think>\nThe note mentions {a place}; let me check the "
                                       "candidates one by one.\n</think>\n\n" + answer_text)
                self._send(200, {"id": "chatcmpl-fake", "object": "chat.completion",
                                 "model": model, "choices": [{
                                     "index": 0, "finish_reason": "stop",
                                     "message": {"role": "assistant", "content": answer_text}}],
                                 "usage": {"prompt_tokens": 0, "completion_tokens": 0}},
                           trickle=fake.trickle)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def throttle_next(self, count: int, headers: dict[str, str] | None = None) -> None:
        """Answer the next ``count`` requests (either endpoint) with 429 and ``headers``
        (e.g. ``{"Retry-After": "1"}``; none: a throttle that names no time)."""
        with self._lock:
            self._scripted_throttles += [dict(headers or {}) for _ in range(count)]

    def _take_token(self) -> float | None:
        """Token bucket of ``rate`` requests per second: None when a request may go now, else
        the seconds until the next token."""
        if not self.rate:
            return None
        with self._lock:
            now = time.monotonic()
            self._tokens = min(self.rate, self._tokens + (now - self._refilled) * self.rate)
            self._refilled = now
            if self._tokens >= 1:
                self._tokens -= 1
                return None
            return (1 - self._tokens) / self.rate

    @property
    def root_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def base_url(self) -> str:
        return f"{self.root_url}/v1"

    def start(self) -> FakeOpenAI:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Release any held or trickling request, then shut the server down."""
        self.release.set()
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()

    def env(self, profile: str, *, judge: bool = True,
            chain: str = "fake-judge") -> dict[str, str]:
        """`pinlog` settings that point the embedding provider (profile ``profile``, this
        server's ``dimension``) and, with ``judge``, the llm judge (model ``chain``) here — the
        settings each behaviour profile needs (README "Tested providers")."""
        key = {"PINLOG_EMBEDDING_API_KEY": self.api_key} if self.api_key else {}
        if self.profile.azure:
            env = {"PINLOG_EMBEDDING_PROVIDER": "azure-openai",
                   "PINLOG_EMBEDDING_BASE_URL": self.root_url,
                   "PINLOG_EMBEDDING_API_VERSION": "2024-10-21"}
        else:
            env = {"PINLOG_EMBEDDING_PROVIDER": "openai",
                   "PINLOG_EMBEDDING_BASE_URL": self.base_url}
        env |= {"PINLOG_EMBEDDING_MODEL": "fake-embed", "PINLOG_EMBEDDING_PROFILE": profile,
                "PINLOG_EMBEDDING_DIMENSION": str(self.dimension), **key}
        if judge:
            env |= {"PINLOG_JUDGE": "llm", "PINLOG_LLM_CHAIN": chain}
            if self.api_key:
                env["PINLOG_LLM_API_KEY"] = self.api_key
            if self.profile.azure:
                env |= {"PINLOG_LLM_BASE_URL": f"{self.root_url}/openai/deployments/{{model}}",
                        "PINLOG_LLM_API_VERSION": "2024-10-21"}
            else:
                env["PINLOG_LLM_BASE_URL"] = self.base_url
        return env
