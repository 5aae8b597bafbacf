"""Configuration for every PinLog component (SPEC §13).

All values come from environment variables with the prefix ``PINLOG_`` (or a ``.env`` file).
Every field has a documented default. Secrets are ``SecretStr`` so they are never echoed in a
``repr``, a log line or a validation error. Durations accept an integer number of seconds or an
ISO-8601 duration (``PT5M``).

Invalid settings raise :class:`SettingsError` with a message that names the offending settings
but never their secret values.

``Settings`` is the flat list of ``PINLOG_*`` variables (their names are an interface, SPEC §13)
and the one place where a rule about their values is checked. Components never read it: each
reads its own narrow, frozen config (``RescanConfig``, ``PipelineConfig``, an embedding
provider's model, …), built once from ``Settings`` by :func:`pinlog.composition.build_config`
through the config class's ``from_settings``. This module also holds the two small values several
components share: :class:`RetryPolicy` (the SPEC §6 budget formula) and :class:`LlmEndpoint`.
"""

from __future__ import annotations

import json
import os
import re
import secrets
from dataclasses import dataclass
from datetime import timedelta
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from pinlog.errors import PinlogError

#: Attempts a model call gets inside one job (SPEC §6).
MODEL_ATTEMPTS_DEFAULT = 3

#: Request bodies (issue 27 #1): smallest configurable limit, bytes one character may take in a
#: JSON body (a non-BMP character as two ``\\uXXXX`` escapes), room for a note request's other
#: fields (place strings, ids, keys), and the default limit.
MIN_BODY_BYTES = 1024
JSON_BYTES_PER_CHAR = 12
NOTE_REQUEST_OVERHEAD = 24 * 1024
DEFAULT_BODY_BYTES = 64 * 1024

#: A duration given as text: a number of seconds (``300``, ``-5``, ``0.5``), ISO-8601 (``PT5M``,
#: ``P1DT2H``, ``-PT1M``) or ``[D,]HH:MM:SS``.
#: ``HH:MM`` or ``HH:MM:SS[.f]`` (a clock-form duration).
_CLOCK = re.compile(r"(\d+):([0-5]\d)(?::([0-5]\d(?:\.\d+)?))?")
_DURATION = re.compile(r"[-+]?(\d+(\.\d*)?|\.\d+)"
                       r"|-?P(?=\d|T\d)(\d+(\.\d+)?[YMWD])*(T(?=\d)(\d+(\.\d+)?[HMS])+)?"
                       r"|-?(\d+ ?d(ays?)?,? ?)?\d{1,2}:\d{2}(:\d{2}(\.\d+)?)?", re.IGNORECASE)


def note_body_bytes(max_text_chars: int) -> int:
    """Smallest request-body limit (bytes) that fits a note of ``max_text_chars`` characters,
    each JSON-escaped to :data:`JSON_BYTES_PER_CHAR` bytes, plus
    :data:`NOTE_REQUEST_OVERHEAD`."""
    return JSON_BYTES_PER_CHAR * max_text_chars + NOTE_REQUEST_OVERHEAD



class SettingsError(PinlogError, RuntimeError):
    """Raised when the configuration is invalid. The message never contains secret values."""


def reveal(secret: SecretStr | None) -> str | None:
    """The value of a configured secret, for the HTTP client that sends it (never log it)."""
    return secret.get_secret_value() if secret is not None else None


@dataclass(frozen=True)
class RetryPolicy:
    """Attempts and capped exponential backoff of one model call inside a job (SPEC §6):
    ``PINLOG_MODEL_ATTEMPTS``, ``PINLOG_BACKOFF_BASE``, ``PINLOG_BACKOFF_CAP`` (seconds).

    :meth:`budget` is the one formula of the SPEC §6 budget rule: :class:`Settings` checks it
    against the PROCESSING expiry, the pipeline bounds each stage by it.
    """

    attempts: int
    backoff_base: float
    backoff_cap: float

    def total_backoff(self) -> float:
        """Worst-case sum of backoffs between ``attempts`` attempts, seconds."""
        return sum(min(self.backoff_cap, self.backoff_base * 2**i)
                   for i in range(self.attempts - 1))

    def budget(self, timeout: float) -> float:
        """Longest a model call with per-attempt ``timeout`` (seconds) may take in total:
        ``timeout × attempts + worst-case backoff``, seconds."""
        return timeout * self.attempts + self.total_backoff()


@dataclass(frozen=True)
class LlmEndpoint:
    """The OpenAI-compatible chat endpoint the ``llm`` judge and the ``llm`` query rewrite call:
    ``PINLOG_LLM_BASE_URL`` (``…/v1``), ``PINLOG_LLM_API_KEY`` (never in a repr) and, for Azure
    OpenAI, ``PINLOG_LLM_API_VERSION``.

    Azure OpenAI (issue 23): with ``api_version`` set the key is sent as the ``api-key`` header
    and ``?api-version=…`` is added to every URL; a ``{model}`` in the base URL is replaced by
    the model (a deployment name), e.g.
    ``https://<resource>.openai.azure.com/openai/deployments/{model}``.
    """

    base_url: str
    api_key: SecretStr | None
    api_version: str | None = None

    def chat_url(self, model: str) -> str:
        """``{base_url}/chat/completions`` for ``model`` (plus ``?api-version=`` for Azure)."""
        from urllib.parse import quote

        base = self.base_url.replace("{model}", quote(model, safe="")).rstrip("/")
        url = base + "/chat/completions"
        return url + (f"?api-version={quote(self.api_version)}" if self.api_version else "")

    def headers(self) -> dict[str, str]:
        """The authentication header: ``api-key`` for Azure, else ``Authorization: Bearer``
        (none without a key). Reveals the key: for the HTTP client only, never log it."""
        key = reveal(self.api_key)
        if not key:
            return {}
        return {"api-key": key} if self.api_version else {"Authorization": f"Bearer {key}"}


def _split_csv(value: object) -> object:
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


class Settings(BaseSettings):
    """Every configuration value of PinLog (SPEC §13). Field docs state units and defaults."""

    model_config = SettingsConfigDict(
        env_prefix="PINLOG_", env_file=".env", extra="ignore", hide_input_in_errors=True
    )

    # --- database -------------------------------------------------------------------------
    database_url: SecretStr | None = Field(
        None, description="External PostgreSQL with pgvector. Unset → embedded server."
    )
    data_dir: Path = Field(Path("./.pinlog"), description="Embedded server's data directory "
                           "(not empty: unset it for ./.pinlog).")
    db_pool_size: int = Field(10, ge=2, le=200, description="Connections per process pool.")

    # --- HTTP -----------------------------------------------------------------------------
    host: str = Field("127.0.0.1", description="Where `pinlog serve` listens.")
    port: int = Field(8000, ge=0, le=65535, description="Where `pinlog serve` listens.")
    internal_secrets: Annotated[list[SecretStr], NoDecode] = Field(
        default_factory=list,
        description="Comma-separated secrets accepted on /internal/*; the first is sent by the "
        "process client. Generated per data dir for the embedded setup; required otherwise.",
    )
    ai_base_url: str | None = Field(
        None, description="Where core sends process requests. Unset → in-process adapter."
    )
    jwt_secret: SecretStr | None = Field(
        None, description="HS256 key for member tokens. Generated per data dir when embedded."
    )
    jwt_algorithm: Literal["HS256", "HS384", "HS512"] = "HS256"
    jwt_ttl: timedelta = Field(timedelta(hours=12), description="Lifetime of member tokens "
                               "(positive).")
    max_body_bytes: int | None = Field(
        None, ge=MIN_BODY_BYTES, le=64 * 1024 * 1024, description="Largest request body "
        "accepted (bytes; 413 before it is read), on every route but POST /v1/search (16 KiB). "
        "Unset → 64 KiB, or what a note of PINLOG_MAX_TEXT_CHARS needs when that is more "
        "(note_body_bytes); a set value must be at least that.")

    # --- migrations (issue 27 #3) -----------------------------------------------------------
    migrate_lock_timeout: float = Field(
        3.0, gt=0, le=600, description="Seconds `pinlog migrate [--adopt]` waits for a table "
        "lock before it gives the attempt up (live traffic queues behind a waiting migration "
        "at most this long).")
    migrate_attempts: int = Field(
        5, ge=1, le=100, description="Attempts of `pinlog migrate [--adopt]` when a table is "
        "busy (each one transaction, nothing kept from a failed one); waits 1, 2, 4 … s (at "
        "most 10) in between.")

    # --- rescan / finalizer (SPEC §7.1) --------------------------------------------------
    rescan_enabled: bool = True
    rescan_interval: timedelta = Field(timedelta(seconds=300), description="Fixed delay.")
    pending_expiry: timedelta = timedelta(seconds=300)
    processing_expiry: timedelta = timedelta(seconds=600)
    max_retries: int = Field(3, ge=0, le=100)
    rescan_batch_size: int = Field(100, ge=1, le=10_000)
    rescan_concurrency: int = Field(4, ge=1, le=64, description="Parallel re-sends per round.")
    rescan_busy_wait: float = Field(
        60.0, ge=0, le=3600, description="Seconds one send (the live dispatch, a re-send, a "
        "batch) keeps retrying (capped backoff) while the ai side answers 503 (queue full): a "
        "refused note is processed as soon as there is room, and back-to-back rounds never "
        "flood it; 0 = once.")
    heartbeat_timeout: float = Field(
        30.0, ge=3, le=3600, description="Seconds a process may go without a heartbeat before "
        "it counts as gone (SPEC §7.3.1): its PROCESSING stages and the PENDING rows it was to "
        "send are then re-sent at once, before their expiry. It heartbeats every third of this; "
        "a clean stop releases its work at once. Each process's own value is recorded with its "
        "heartbeat, so replicas never judge each other by their own setting.")

    # --- retention (issue 31) ---------------------------------------------------------------
    retention_enabled: bool = Field(
        True, description="Run the purge job in `pinlog serve` (every process; SKIP LOCKED "
        "shares the work between replicas).")
    retention_deleted: timedelta = Field(
        timedelta(days=30), description="How long deleted and superseded notes, withdrawn "
        "members and their AI data are kept before they are hard-deleted; a CANCELLED state row "
        "stays at least the late-result window (Settings.late_result_window).")
    retention_events: timedelta = Field(
        timedelta(days=90), description="How long ai.context_ai_event history rows are kept.")
    retention_interval: timedelta = Field(
        timedelta(hours=1), description="Delay between two purge rounds (the first runs soon "
        "after start-up).")
    retention_batch_size: int = Field(500, ge=1, le=10_000, description="Rows per purge "
                                      "transaction.")

    # --- dispatch (SPEC §4) ---------------------------------------------------------------
    dispatch_queue_size: int = Field(100, ge=1)
    dispatch_workers: int = Field(4, ge=1, le=64)
    dispatch_connect_timeout: float = Field(1.0, gt=0, description="Seconds.")
    dispatch_read_timeout: float = Field(3.0, gt=0, description="Seconds.")

    # --- ai work queue (SPEC §5.4) ---------------------------------------------------------
    work_queue_size: int = Field(200, ge=1, description="Accepted jobs waiting to run.")
    worker_concurrency: int = Field(
        32, ge=1, le=256, description="Workers running jobs at once (each one job, or a batch of "
        "up to PINLOG_PROCESS_BATCH_SIZE jobs that were waiting). A job waiting for a model holds "
        "no DB connection; its short DB steps are bounded by the pool separately, so this may "
        "exceed PINLOG_DB_POOL_SIZE (enough waiting jobs keep the micro-batches full, SPEC §5.4).")
    process_batch_size: int = Field(
        64, ge=1, le=1000, description="Contexts processed as one batch (one claim and one write "
        "transaction per stage): the ai side takes up to this many waiting jobs at once, and "
        "core's rescan, reprocess and import send process-batch requests of this many contexts "
        "(1: one job / one request per context; SPEC §5.4, ARCHITECTURE \"Batch path\").")

    # --- embedding (SPEC §9) ---------------------------------------------------------------
    embedding_provider: str = Field(
        "local-e5", description="A name of the provider registry (pinlog.ai.providers.PROVIDERS); "
        "an unknown name is refused at start-up.")
    embedding_profile: str | None = Field(None, description="Per provider when unset.")
    embedding_model: str | None = Field(None, description="Model name or local path.")
    embedding_dimension: int | None = Field(None, ge=1, le=16_000)
    embedding_base_url: str | None = None
    embedding_api_key: SecretStr | None = None
    embedding_timeout: float = Field(
        60.0, gt=0, description="Seconds for one embedding call carrying a full batch "
        "(PINLOG_EMBEDDING_BATCH_MAX_CHARS characters); a smaller call gets a proportional share "
        "(at least a quarter). A call that times out is split in halves, never retried whole.")
    embedding_batch_size: int = Field(32, ge=1, le=1024, description="Micro-batch flush size.")
    embedding_batch_max_chars: int = Field(
        8000, ge=1, le=1_000_000, description="Micro-batch work bound: most characters of text "
        "in one embedding call (at least PINLOG_MAX_TEXT_CHARS, so every note fits).")
    embedding_batch_wait_ms: float = Field(5.0, ge=0, le=1000, description="Micro-batch wait.")
    embedding_max_inputs: int | None = Field(
        None, ge=1, le=4096, description="Most inputs one embedding call carries (per provider "
        "when unset: openai 32, TEI's default --max-client-batch-size; azure-openai 16). A "
        "server that refuses a call for too many inputs (413, or 400 'too many inputs') lowers "
        "it for the process.")
    embedding_max_concurrent: int | None = Field(
        None, ge=1, le=64, description="Most embedding calls in flight (per provider when unset: "
        "4 for a remote endpoint, 1 for a local model); a throttling server (429/503) gets fewer "
        "(adaptive, AIMD).")
    embedding_api_version: str | None = Field(
        None, description="azure-openai only: the api-version query parameter (default "
        "2024-10-21).")
    embedding_passage_prefix: str = Field(
        "", description="sentence-transformers only: prepended to stored texts (e.g. 'passage: ' "
        "for e5 models). Part of the input preprocessing: the profile string must name it.")
    embedding_query_prefix: str = Field(
        "", description="sentence-transformers only: prepended to search queries ('query: ').")

    # --- the next embedding profile (SPEC §9.1: profiles side by side) -------------------------
    # A second provider, built through the same registry (pinlog.ai.providers.PROVIDERS): the
    # profile `pinlog profiles build` backfills beside the active one. Every replica serves
    # whichever of its two profiles the database says is active (ai.embedding_profile).
    next_embedding_provider: str | None = Field(
        None, description="A name of the provider registry for the next profile (unset: none).")
    next_embedding_profile: str | None = Field(
        None, description="The next profile's string; per provider when unset. Must differ from "
        "PINLOG_EMBEDDING_PROFILE's.")
    next_embedding_model: str | None = Field(None, description="Next profile: model or path.")
    next_embedding_dimension: int | None = Field(None, ge=1, le=16_000)
    next_embedding_base_url: str | None = None
    next_embedding_api_key: SecretStr | None = None
    next_embedding_max_inputs: int | None = Field(
        None, ge=1, le=4096, description="Next profile: most inputs one embedding call carries "
        "(per provider when unset, as PINLOG_EMBEDDING_MAX_INPUTS).")
    next_embedding_max_concurrent: int | None = Field(
        None, ge=1, le=64, description="Next profile: most embedding calls in flight (per "
        "provider when unset, as PINLOG_EMBEDDING_MAX_CONCURRENT).")
    next_embedding_api_version: str | None = Field(
        None, description="Next profile, azure-openai only: the api-version query parameter.")
    next_embedding_passage_prefix: str = Field(
        "", description="Next profile, sentence-transformers only: prefix of stored texts.")
    next_embedding_query_prefix: str = Field(
        "", description="Next profile, sentence-transformers only: prefix of search queries.")

    # --- judge (SPEC §8) ---------------------------------------------------------------------
    judge: str = Field("similarity", description="A name of the judge registry "
                       "(pinlog.ai.judges.JUDGES); an unknown name is refused at start-up.")
    llm_base_url: str | None = None
    llm_api_key: SecretStr | None = None
    llm_chain: Annotated[list[str], NoDecode] = Field(default_factory=list)
    llm_votes: int = Field(1, ge=1, le=9)
    llm_timeout: float = Field(90.0, gt=0, description="Seconds per judge call (the whole "
                               "call: connect, send and every read).")
    llm_api_version: str | None = Field(
        None, description="Azure OpenAI: the api-version query parameter; set, the key is sent "
        "as the api-key header and {model} in PINLOG_LLM_BASE_URL names the deployment.")
    llm_max_concurrent: int = Field(
        8, ge=1, le=256, description="Most judge calls in flight; a throttling server (429/503) "
        "gets fewer (adaptive, AIMD).")
    candidate_top_k: int = Field(10, ge=1, le=100)
    candidate_floor: float | None = Field(None, ge=-1, le=1,
                                          description="Cosine, -1..1. Per profile when unset.")
    judge_floor: float | None = Field(None, description="similarity judge: absolute floor.")
    judge_margin: float | None = Field(None, description="similarity judge: margin to best.")
    judge_cue_floor: float | None = Field(
        None, description="similarity judge: calibrated score a candidate whose cue the note "
                          "states must reach.")
    judge_max_picks: int | None = Field(None, ge=0, le=10, description="Per profile when unset.")

    # --- errors (SPEC §6) --------------------------------------------------------------------
    model_attempts: int = Field(MODEL_ATTEMPTS_DEFAULT, ge=1, le=10)
    backoff_base: float = Field(0.5, ge=0, description="Seconds, first backoff.")
    backoff_cap: float = Field(4.0, ge=0, description="Seconds, longest single backoff.")

    # --- search (SPEC §10) ---------------------------------------------------------------------
    search_floor: float | None = Field(
        None, ge=-1, le=1, description="Cosine, -1..1 (above 1 no record could pass: the vector "
        "channel would be off). Per profile when unset.")
    search_short_query_floor: float | None = Field(
        None, ge=-1, le=1, description="Cosine, -1..1. Per profile when unset.")
    search_ratio: float | None = Field(None, ge=-1, le=1,
                                       description="At most 1 (0 = off). Per profile when unset.")
    search_text_min_coverage: float = Field(
        0.63, gt=0, le=1, description="Lexical evidence: share of the query's content words a "
        "record's notes and place must contain (directly or through the variant table).")
    search_text_doubt_coverage: float = Field(
        0.7, gt=0, le=1, description="Lexical doubt: a record containing more than 0 and less "
        "than this share of the query's content words is shown by the vector channel only at "
        "the doubt strength.")
    search_strength: float | None = Field(
        None, description="Vector evidence: calibrated strength (per-query, against the "
        "background set) a record's best context must reach. Per profile when unset.")
    search_doubt_strength: float | None = Field(
        None, description="Calibrated strength a record the lexical channel doubts needs. Per "
                          "profile when unset.")
    search_rrf_k: int = Field(60, ge=1, le=10_000, description="Reciprocal rank fusion constant.")
    search_rewrite: Literal["off", "llm"] = Field(
        "off", description="'llm': rewrite the query with PINLOG_LLM_* chat model before embedding.")
    search_rewrite_model: str | None = Field(
        None, description="Chat model for the rewrite; the first of PINLOG_LLM_CHAIN when unset.")
    search_rewrite_timeout: float = Field(2.0, gt=0, le=60, description="Seconds per rewrite call.")
    search_timeout: float = Field(
        5.0, gt=0, le=600, description="Seconds a search may take (query embedding, which has "
        "its own lane ahead of background embedding work, plus the SQL) before it answers 503 "
        "with Retry-After.")

    # --- operator console (issue 29) and the CLI's server client --------------------------
    console_admin_token: SecretStr | None = Field(
        None, description="Operator console (`/console`): the admin token (every page, the "
        "search debugger, actions). With neither console token set the console is off (404).")
    console_read_token: SecretStr | None = Field(
        None, description="Operator console: the read-only token (counts, failures, replicas, "
        "profiles; no note text, no search debugger, no actions).")
    console_session_ttl: timedelta = Field(
        timedelta(hours=8), description="Lifetime of a console session cookie after login.")
    console_refresh: float = Field(
        5.0, ge=0.2, le=3600, description="Seconds between two live refreshes of the console's "
        "overview (the page polls its JSON).")
    server_url: str | None = Field(
        None, description="`pinlog search|records|status` ask this running server (its API) "
        "instead of working in-process; unset → the server `pinlog serve` recorded for this "
        "PINLOG_DATA_DIR when it is running, else in-process.")

    max_text_chars: int = Field(2000, ge=1, le=100_000)
    shutdown_grace: float = Field(
        10.0, ge=0, le=3600, description="Seconds running stages (and a running rescan round, "
        "the dispatch queue, in-flight HTTP requests) get to finish on SIGTERM; what is left is "
        "logged and recovered by the rescan.")
    gc_threshold: int = Field(
        10_000, ge=0, le=1_000_000, description="Python's cyclic garbage collector while the "
        "components run: allocations between two young collections (the interpreter's default "
        "is 700; a backfill spends ~10 % of its time collecting at that rate), with what exists "
        "at start-up frozen out of later collections; 0: the interpreter's settings, untouched.")
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] = Field(
        "INFO", description="JSON log lines on stderr (`pinlog serve`; other commands log "
        "warnings and errors only unless this is set).")

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper_level(cls, value: object) -> object:
        return value.upper() if isinstance(value, str) else value

    @field_validator("database_url")
    @classmethod
    def _postgres_url(cls, value: SecretStr | None) -> SecretStr | None:
        """Only PostgreSQL URLs (``postgresql://``, ``postgres://``, ``postgresql+psycopg://``)."""
        if value is not None:
            scheme = value.get_secret_value().split("://", 1)[0].lower()
            if "://" not in value.get_secret_value() or not scheme.startswith("postgres"):
                raise ValueError("must be a PostgreSQL URL (postgresql://user:password@host/db)")
        return value

    @field_validator("jwt_secret")
    @classmethod
    def _long_jwt_secret(cls, value: SecretStr | None) -> SecretStr | None:
        """HS256 keys shorter than 32 characters are guessable (RFC 7518 §3.2)."""
        if value is not None and len(value.get_secret_value()) < 32:
            raise ValueError("must be at least 32 characters")
        return value

    @field_validator("internal_secrets", mode="before")
    @classmethod
    def _secrets_csv(cls, value: object) -> object:
        return _split_csv(value)

    @field_validator("rescan_interval", "pending_expiry", "processing_expiry", "jwt_ttl",
                     "retention_deleted", "retention_events", "retention_interval",
                     "console_session_ttl", mode="before")
    @classmethod
    def _seconds_or_iso(cls, value: object) -> object:
        """Durations: a number of seconds (``300``, ``-5`` is read, then refused as not
        positive), ISO-8601 (``PT5M``) or ``HH:MM:SS``; anything else is one clear line."""
        if isinstance(value, str):
            text = value.strip()
            if not _DURATION.fullmatch(text):
                raise ValueError("must be a number of seconds or an ISO-8601 duration (PT5M)")
            try:
                return float(text)
            except ValueError:
                pass
            clock = _CLOCK.fullmatch(text)  # HH:MM[:SS[.f]] read here: pydantic < 2.8 refuses it
            if clock:
                hours, minutes, seconds = clock.group(1), clock.group(2), clock.group(3) or "0"
                return int(hours) * 3600 + int(minutes) * 60 + float(seconds)
            return text
        return value

    @field_validator("data_dir", mode="before")
    @classmethod
    def _data_dir_not_empty(cls, value: object) -> object:
        """An empty ``PINLOG_DATA_DIR`` would silently mean the current directory."""
        if isinstance(value, str) and not value.strip():
            raise ValueError("must not be empty (unset it to use ./.pinlog)")
        return value

    @field_validator("embedding_profile")
    @classmethod
    def _profile_not_blank(cls, value: str | None) -> str | None:
        """A profile string names a vector space (SPEC §9): blank names none."""
        if value is not None and (not value.strip() or value != value.strip()):
            raise ValueError("must not be blank or start/end with spaces (unset it to use the "
                             "provider's profile)")
        return value

    @field_validator("console_admin_token", "console_read_token")
    @classmethod
    def _long_console_token(cls, value: SecretStr | None) -> SecretStr | None:
        """A console token is a password for an operator: at least 16 characters."""
        if value is not None and len(value.get_secret_value()) < 16:
            raise ValueError("must be at least 16 characters")
        return value

    @field_validator("server_url")
    @classmethod
    def _http_server_url(cls, value: str | None) -> str | None:
        """``http://`` or ``https://`` with a host (``http://127.0.0.1:8000``)."""
        if value is not None:
            from urllib.parse import urlsplit

            parts = urlsplit(value)
            if parts.scheme not in ("http", "https") or not parts.netloc:
                raise ValueError("must be an http(s) URL of a running pinlog serve "
                                 "(http://127.0.0.1:8000)")
        return value

    @field_validator("llm_chain", mode="before")
    @classmethod
    def _chain_csv(cls, value: object) -> object:
        return _split_csv(value)

    @field_validator("llm_votes")
    @classmethod
    def _odd_votes(cls, value: int) -> int:
        if value % 2 == 0:
            raise ValueError("must be an odd number")
        return value

    def uses_llm(self) -> bool:
        """True when an LLM endpoint is called: the ``llm`` judge or an ``llm`` query rewrite."""
        return self.judge == "llm" or self.search_rewrite == "llm"

    def llm_endpoint(self) -> LlmEndpoint:
        """The LLM endpoint — the one place its rule is checked: the ``llm`` judge and the
        ``llm`` query rewrite need ``PINLOG_LLM_BASE_URL`` (checked when the settings load,
        :meth:`_check_budget`; their configs take the endpoint from here).

        Raises:
            ValueError: ``PINLOG_LLM_BASE_URL`` is unset.
        """
        if not self.llm_base_url:
            raise ValueError("PINLOG_JUDGE=llm (or an llm search rewrite) needs "
                             "PINLOG_LLM_BASE_URL (an OpenAI-compatible endpoint, …/v1)")
        return LlmEndpoint(self.llm_base_url, self.llm_api_key, self.llm_api_version)

    def next_embedding(self) -> Settings | None:
        """The next profile's provider settings as a view of these settings whose
        ``embedding_*`` values are the ``next_embedding_*`` ones (so the provider registry
        reads them like the first provider's; SPEC §9.1), or None when
        ``PINLOG_NEXT_EMBEDDING_PROVIDER`` is unset. Timeouts and batching are shared."""
        if self.next_embedding_provider is None:
            return None
        return self.model_copy(update={
            "embedding_provider": self.next_embedding_provider,
            "embedding_profile": self.next_embedding_profile,
            "embedding_model": self.next_embedding_model,
            "embedding_dimension": self.next_embedding_dimension,
            "embedding_base_url": self.next_embedding_base_url,
            "embedding_api_key": self.next_embedding_api_key,
            "embedding_max_inputs": self.next_embedding_max_inputs,
            "embedding_max_concurrent": self.next_embedding_max_concurrent,
            "embedding_api_version": self.next_embedding_api_version,
            "embedding_passage_prefix": self.next_embedding_passage_prefix,
            "embedding_query_prefix": self.next_embedding_query_prefix,
        })

    @property
    def retries(self) -> RetryPolicy:
        """``PINLOG_MODEL_ATTEMPTS`` and the backoff of one model call (SPEC §6)."""
        return RetryPolicy(self.model_attempts, self.backoff_base, self.backoff_cap)

    @model_validator(mode="after")
    def _check_budget(self) -> Settings:
        """SPEC §6 budget rule: a job's retries must end before the PROCESSING expiry —
        counting only the models that are called (the LLM timeout only with an LLM judge or
        rewrite, SPEC §13). Also: an LLM judge or rewrite needs its endpoint."""
        for name in ("rescan_interval", "pending_expiry", "processing_expiry", "jwt_ttl",
                     "retention_deleted", "retention_events", "retention_interval"):
            if getattr(self, name).total_seconds() <= 0:
                raise ValueError(f"PINLOG_{name.upper()} must be positive")
        expiry = self.processing_expiry.total_seconds()
        timeouts = [("PINLOG_EMBEDDING_TIMEOUT", self.embedding_timeout)]
        if self.uses_llm():
            timeouts.append(("PINLOG_LLM_TIMEOUT", self.llm_timeout))
            self.llm_endpoint()
        for name, timeout in timeouts:
            budget = self.retries.budget(timeout)
            if budget >= expiry:
                raise ValueError(
                    f"budget rule (SPEC §6): {name} × PINLOG_MODEL_ATTEMPTS + backoff = "
                    f"{budget:.1f} s must stay below PINLOG_PROCESSING_EXPIRY = {expiry:.1f} s"
                )
        if self.embedding_batch_max_chars < self.max_text_chars:
            raise ValueError(
                f"PINLOG_EMBEDDING_BATCH_MAX_CHARS ({self.embedding_batch_max_chars}) must be at "
                f"least PINLOG_MAX_TEXT_CHARS ({self.max_text_chars}): every note must fit in "
                "one call whose timeout is PINLOG_EMBEDDING_TIMEOUT")
        needed = note_body_bytes(self.max_text_chars)
        if self.max_body_bytes is not None and self.max_body_bytes < needed:
            raise ValueError(
                f"PINLOG_MAX_BODY_BYTES ({self.max_body_bytes}) must be at least {needed} "
                f"(a note of PINLOG_MAX_TEXT_CHARS = {self.max_text_chars} characters, "
                f"JSON-escaped, must fit in a request)")
        admin, read = (reveal(t) for t in (self.console_admin_token, self.console_read_token))
        if admin is not None and admin == read:
            raise ValueError("PINLOG_CONSOLE_ADMIN_TOKEN and PINLOG_CONSOLE_READ_TOKEN must "
                             "differ (a login's role is the token's)")
        if self.console_session_ttl.total_seconds() <= 0:
            raise ValueError("PINLOG_CONSOLE_SESSION_TTL must be positive")
        return self

    def body_limit(self) -> int:
        """The request-body limit of every route but search, bytes: ``PINLOG_MAX_BODY_BYTES``,
        else :data:`DEFAULT_BODY_BYTES` or what a note of ``PINLOG_MAX_TEXT_CHARS`` needs
        (:func:`note_body_bytes`), whichever is more."""
        if self.max_body_bytes is not None:
            return self.max_body_bytes
        return max(DEFAULT_BODY_BYTES, note_body_bytes(self.max_text_chars))

    def batch_body_limit(self) -> int:
        """The request-body limit of ``POST /internal/v1/context/process-batch``, bytes: room for
        ``PINLOG_PROCESS_BATCH_SIZE`` notes of ``PINLOG_MAX_TEXT_CHARS`` characters each
        (:func:`note_body_bytes` per item), at least :meth:`body_limit` (issue 25: a batch of
        ordinary notes is larger than one note's limit; a caller's larger batch is split by
        the process client on 413)."""
        return max(self.body_limit(),
                   self.process_batch_size * note_body_bytes(self.max_text_chars))

    # --- derived values -------------------------------------------------------------------
    def late_result_window(self) -> timedelta:
        """How long after a stage's last start its result may still reach a save (SPEC §4/§5:
        the CANCELLED state row is what refuses such a late result, so it is kept at least this
        long after the cancellation, which comes after the last start — issue 31).

        ``PINLOG_PROCESSING_EXPIRY`` (the time by which a live worker counts as finished) + the
        longest stage budget of the job (``RetryPolicy.budget`` of ``PINLOG_EMBEDDING_TIMEOUT``
        and of ``PINLOG_LLM_TIMEOUT``: the pipeline bounds the keyword stage by the latter
        whatever the judge). Defaults: 600 + 90 × 3 + 1.5 = 871.5 s.
        """
        budgets = (self.retries.budget(self.embedding_timeout),
                   self.retries.budget(self.llm_timeout))
        return self.processing_expiry + timedelta(seconds=max(budgets))


    @property
    def embedded(self) -> bool:
        """True when no external database is configured (SPEC §13)."""
        return self.database_url is None

    def secret_values(self) -> list[str]:
        """The accepted internal secrets, in order (the first is the one sent)."""
        return [s.get_secret_value() for s in self.internal_secrets]


def _load_generated_secrets(data_dir: Path) -> dict[str, str]:
    """Per-data-dir generated secrets for the embedded setup (file mode 0600)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / "secrets.json"
    if path.exists():
        return json.loads(path.read_text())
    values = {"internal_secret": secrets.token_urlsafe(32), "jwt_secret": secrets.token_urlsafe(48)}
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        json.dump(values, fh)
    os.replace(tmp, path)
    return values


def load_database_settings(**overrides: object) -> Settings:
    """:func:`load_settings` for commands that only look at the database (``pinlog db
    url|status|stop``): no secret is generated or required, the data dir is not created, and
    the secrets may stay unset.

    Raises:
        SettingsError: as :func:`load_settings`.
    """
    return _load(overrides, generate_secrets=False)


def load_settings(**overrides: object) -> Settings:
    """Build and validate :class:`Settings`.

    For the embedded setup, missing internal/JWT secrets are generated once per data dir.
    With an external database they are required.

    Raises:
        SettingsError: a readable message naming the invalid settings (values of secrets
            are never included).
    """
    return _load(overrides, generate_secrets=True)


def _load(overrides: dict[str, object], *, generate_secrets: bool) -> Settings:
    try:
        settings = Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            name = "PINLOG_" + "_".join(str(p) for p in err["loc"]).upper() if err["loc"] else ""
            message = err["msg"].removeprefix("Value error, ")
            lines.append(f"{name}: {message}" if name else message)
        # one line per bad setting (issue 13): "invalid setting PINLOG_X: what is wrong"
        raise SettingsError("\n".join(
            f"invalid setting {line}" if line.startswith("PINLOG_") else f"invalid settings: {line}"
            for line in lines)) from None
    missing = []
    if generate_secrets and (not settings.internal_secrets or not settings.jwt_secret):
        if settings.embedded:
            try:
                generated = _load_generated_secrets(settings.data_dir)
            except OSError as exc:
                raise SettingsError(
                    f"PINLOG_DATA_DIR: cannot use {settings.data_dir} "
                    f"({exc.strerror or type(exc).__name__})") from None
            if not settings.internal_secrets:
                settings.internal_secrets = [SecretStr(generated["internal_secret"])]
            if not settings.jwt_secret:
                settings.jwt_secret = SecretStr(generated["jwt_secret"])
        else:
            if not settings.internal_secrets:
                missing.append("PINLOG_INTERNAL_SECRETS")
            if not settings.jwt_secret:
                missing.append("PINLOG_JWT_SECRET")
    if missing:
        raise SettingsError(
            "with an external database (PINLOG_DATABASE_URL) these must be set: " + ", ".join(missing)
        )
    _register_secrets(settings)
    return settings


def _register_secrets(settings: Settings) -> None:
    """Make every configured secret value redactable wherever it might be echoed (SPEC §6)."""
    from urllib.parse import urlsplit

    from pinlog.redaction import register_secret

    for value in (settings.jwt_secret, settings.embedding_api_key, settings.llm_api_key,
                  settings.next_embedding_api_key, settings.console_admin_token,
                  settings.console_read_token, *settings.internal_secrets):
        if value is not None:
            register_secret(value.get_secret_value())
    if settings.database_url is not None:
        try:
            register_secret(urlsplit(settings.database_url.get_secret_value()).password)
        except ValueError:
            pass


#: ``PINLOG_*`` variables that are read outside :class:`Settings` (the test suite's database).
EXTRA_KNOWN_VARIABLES = ("PINLOG_TEST_DATABASE_URL",)


def known_variables() -> list[str]:
    """Every ``PINLOG_*`` variable name PinLog reads (SPEC §13)."""
    return sorted({"PINLOG_" + name.upper() for name in Settings.model_fields}
                  | set(EXTRA_KNOWN_VARIABLES))


def unknown_variables(environ: dict[str, str] | None = None) -> list[tuple[str, str | None]]:
    """``PINLOG_*`` variables of ``environ`` (default ``os.environ``) that PinLog does not read,
    each with the closest known name (difflib; None when nothing is close), sorted by name.
    Names only — values are never looked at (they may be secrets)."""
    import difflib

    known = known_variables()
    env = os.environ if environ is None else environ
    unknown = sorted(name for name in env if name.upper().startswith("PINLOG_")
                     and name.upper() not in known)
    # compare the parts after the common prefix (with it, every name looks alike)
    suffixes = {k.removeprefix("PINLOG_"): k for k in known}

    def closest(name: str) -> str | None:
        match = difflib.get_close_matches(name.upper().removeprefix("PINLOG_"), list(suffixes),
                                          n=1, cutoff=0.6)
        return suffixes[match[0]] if match else None

    return [(name, closest(name)) for name in unknown]


def unknown_variables_warning(environ: dict[str, str] | None = None) -> str | None:
    """One line naming the unknown ``PINLOG_*`` variables and the closest known names, or None."""
    found = unknown_variables(environ)
    if not found:
        return None
    parts = [f"{name} (did you mean {close}?)" if close else name for name, close in found]
    return "warning: unknown PINLOG_* variable(s) ignored: " + ", ".join(parts)


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """Process-wide settings, loaded once."""
    return load_settings()
