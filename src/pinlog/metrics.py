"""Prometheus metrics of every component, defined once (SPEC §12).

Served at ``/metrics``. Label values are small closed sets (outcome, stage, class) — never ids
or text. Gauges that describe the database (rows per stage × status, retry distribution,
exhausted-but-unfinished rows) are refreshed by :func:`pinlog.core.status.refresh_gauges` when
``/metrics`` is scraped.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

# --- ai: process API and jobs ------------------------------------------------------------------
PROCESS_REQUESTS = Counter(
    "pinlog_process_requests_total", "POST /internal/v1/context/process by outcome",
    ["outcome"],  # accepted | unauthorized | invalid | busy
)
STAGE_OUTCOMES = Counter(
    "pinlog_stage_outcomes_total", "Stage outcomes by stage and class",
    ["stage", "outcome"],  # completed | transient | permanent | discarded | skipped | reclaimed | reused
)
MODEL_LATENCY = Histogram(
    "pinlog_model_call_seconds", "Latency of model calls (embedding batch, judge)", ["kind"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
)
BATCH_SIZE = Histogram(
    "pinlog_embedding_batch_size", "Texts per micro-batch sent to the embedding model",
    buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256),
)
WORK_QUEUE_DEPTH = Gauge("pinlog_work_queue_depth", "Accepted jobs waiting in the ai work queue")
CONTRACT_VIOLATIONS = Counter(
    "pinlog_contract_violations_total", "Same contextId sent with a different text (SPEC §5.6)"
)
JUDGE_DROPPED_PICKS = Counter(
    "pinlog_judge_dropped_picks_total", "Judge picks dropped by the mapping rules (SPEC §8)",
    ["reason"],  # not_candidate | bad_confidence | max_picks
)
# --- remote model servers: throttling, adaptive concurrency, input caps (SPEC §6, issue 23) ---
MODEL_THROTTLED = Counter(
    "pinlog_model_throttled_total", "Model calls the server throttled (HTTP 429 or 503)",
    ["kind"],  # embedding | judge | rewrite
)
MODEL_CONCURRENCY_LIMIT = Gauge(
    "pinlog_model_concurrency_limit",
    "Calls allowed in flight to the model server now (adaptive: halved by a throttle, raised "
    "by successes up to PINLOG_EMBEDDING_MAX_CONCURRENT / PINLOG_LLM_MAX_CONCURRENT)",
    ["kind"],  # embedding | judge
)
MODEL_THROTTLE_WAIT = Counter(
    "pinlog_model_throttle_wait_seconds_total",
    "Seconds spent waiting out a server's Retry-After (waits that spent no attempt)", ["kind"],
)
EMBEDDING_MAX_INPUTS = Gauge(
    "pinlog_embedding_max_inputs",
    "Most inputs one embedding call carries now (PINLOG_EMBEDDING_MAX_INPUTS, lowered for the "
    "process when the server refused a call for carrying too many)",
)
SEARCH_REQUESTS = Counter("pinlog_search_requests_total", "Internal searches by outcome", ["outcome"])

# --- core: dispatch, rescan, finalizer ---------------------------------------------------------
DISPATCH_OUTCOMES = Counter(
    "pinlog_dispatch_outcomes_total", "Process requests sent by core, by outcome",
    ["outcome"],  # accepted | dropped | unauthorized | client_error | server_error | busy | timeout | connection
)
DISPATCH_QUEUE_DEPTH = Gauge("pinlog_dispatch_queue_depth", "Process requests waiting to be sent")
RESCAN_CANDIDATES = Gauge("pinlog_rescan_claimed_last_round", "Rows claimed by the last rescan round")
RESCAN_FINALIZED = Gauge("pinlog_rescan_finalized_last_round", "Rows finalized FAILED by the last round")
RESCAN_ROUNDS = Counter("pinlog_rescan_rounds_total", "Rescan rounds by outcome", ["outcome"])
RESCAN_DISPATCHED = Counter("pinlog_rescan_dispatched_total", "Re-sends by outcome", ["outcome"])

# --- retention (issue 31: pinlog.db.retention) -------------------------------------------------
PURGED_ROWS = Counter(
    "pinlog_purged_rows_total",
    "Rows hard-deleted by the retention job and `pinlog purge`, by table (schema.table)",
    ["table"],
)
RETENTION_OLDEST_DELETED = Gauge(
    "pinlog_retention_oldest_deleted_seconds",
    "Age of the oldest deleted row still retained, by table (0 when none; stays below the "
    "retention plus one interval while the job runs — alert above it)",
    ["table"],
)
RETENTION_ROUNDS = Counter("pinlog_retention_rounds_total", "Retention rounds by outcome",
                           ["outcome"])  # ok | failed

# --- database picture (refreshed on scrape) ----------------------------------------------------
STATE_ROWS = Gauge("pinlog_state_rows", "State rows per stage and status", ["stage", "status"])
RETRY_COUNT_ROWS = Gauge("pinlog_retry_count_rows", "Unfinished state rows per retry_count", ["retry_count"])
EXHAUSTED_UNFINISHED = Gauge(
    "pinlog_exhausted_unfinished_rows",
    "Rows with retry_count >= max that are still unfinished (should return to 0 within an interval)",
)
OLDEST_UNFINISHED = Gauge(
    "pinlog_oldest_unfinished_seconds",
    "Age of the oldest unfinished stage on the rescan clock (0 when none; alert on it)",
)
DB_UP = Gauge(
    "pinlog_db_up",
    "1 when the last /metrics read of the database succeeded, 0 when it failed (the database "
    "gauges then keep their last successful values)",
)
DB_LAST_READ = Gauge(
    "pinlog_db_last_read_timestamp_seconds", "Unix time of the last successful database read",
)

# --- HTTP ---------------------------------------------------------------------------------------
HTTP_REQUESTS = Counter(
    "pinlog_http_requests_total", "HTTP requests by route template, method and status",
    ["route", "method", "status"],
)
HTTP_LATENCY = Histogram(
    "pinlog_http_request_seconds", "HTTP request latency by route template and method",
    ["route", "method"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
