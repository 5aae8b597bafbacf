"""The maintained list of rule mutations (issue 18).

Each :class:`Mutation` breaks ONE rule the suite exists to protect, by replacing an exact snippet
of a source file with a rule-breaking variant, and names the tests that must catch it. The runner
(``python -m tests.mutations``) applies each one to a temporary copy of the tree — never to the
working tree — and runs only those tests; a mutation that every named test survives fails the
run, and so does a snippet that is no longer found (or found more often than stated): when a rule
moves or is rewritten, this list must be updated with it. ``tests/mutations/test_catalogue.py``
checks the snippets and node ids in every normal test run.

Mutations keep the SQL valid and keep comments/markers (``-- filter: member``…), so a kill comes
from behaviour, not from a broken file.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Mutation:
    """One rule-breaking edit.

    Attributes:
        name: unique short id (shown in the report, ``--only`` selects by it).
        rule: the rule it breaks (SPEC §).
        path: file relative to the repository root.
        original: exact text that must occur ``occurrences`` times in ``path``.
        replacement: what every occurrence becomes.
        tests: pytest node ids (relative to the repository root) that must catch it.
        occurrences: how many times ``original`` occurs (all are replaced).
    """

    name: str
    rule: str
    path: str
    original: str
    replacement: str
    tests: tuple[str, ...]
    occurrences: int = 1


STATE_SQL = "src/pinlog/ai/state.sql"
RESCAN_SQL = "src/pinlog/core/rescan.sql"
SEARCH_SQL = "src/pinlog/ai/search.sql"
CORE_SQL = "src/pinlog/core/core.sql"
CORE_SEARCH_SQL = "src/pinlog/core/search.sql"
SERVICES = "src/pinlog/core/services.py"
CANDIDATES = "src/pinlog/ai/candidates.py"
PIPELINE_PY = "src/pinlog/ai/pipeline.py"
AUTH = "src/pinlog/core/api/auth.py"
AI_API = "src/pinlog/ai/api.py"
REPROCESS_SQL = "src/pinlog/core/reprocess.sql"
SETTINGS_PY = "src/pinlog/settings.py"
REGISTRY_PY = "src/pinlog/ai/registry.py"
COMPOSITION_PY = "src/pinlog/composition.py"
CLI_APP_PY = "src/pinlog/cli/app.py"
CLI_OPS_PY = "src/pinlog/cli/ops.py"
RELEVANCE = "src/pinlog/relevance.py"
CHANNELS = "src/pinlog/core/channels/__init__.py"
LEXICAL = "src/pinlog/core/channels/lexical.py"
VECTOR = "src/pinlog/core/channels/vector.py"
AI_SEARCH = "src/pinlog/ai/search.py"
AI_RUNTIME = "src/pinlog/ai/runtime.py"
BATCHING = "src/pinlog/ai/providers/batching.py"
VECTORS = "src/pinlog/ai/vectors.py"
TEXT = "src/pinlog/text.py"
CONTRACTS = "src/pinlog/contracts.py"
MIGRATE = "src/pinlog/db/migrate.py"
PROCESS_SETTINGS = "src/pinlog/db/process_settings.py"
SIMILARITY = "src/pinlog/ai/judges/similarity.py"
APP = "src/pinlog/app.py"
RESCAN_PY = "src/pinlog/core/rescan.py"
PRESETS_PY = "src/pinlog/ai/presets.py"
HEAD_MIGRATION = "src/pinlog/db/migrations/versions/0006_any_preset_category.py"
LOGS_PY = "src/pinlog/logs.py"
WORKER_PY = "src/pinlog/ai/worker.py"
DISPATCH_PY = "src/pinlog/core/dispatch.py"
BATCH_PY = "src/pinlog/ai/batch.py"

GUARDS = "tests/integration/ai/test_state_guards.py"
STATE_BATCH = "tests/integration/ai/test_state_batch.py"
BATCH_T = "tests/integration/ai/test_batch_pipeline.py"
API_BATCH_T = "tests/integration/ai/test_api_batch.py"
DISPATCH_BATCH_T = "tests/integration/core/test_dispatch_batch.py"
BATCH_RESEND_T = "tests/integration/core/rescan/test_batch_resend.py"
IMPORT_T = "tests/integration/core/importer/test_import.py"
PIPELINE = "tests/integration/ai/test_pipeline.py"
ROUND = "tests/integration/core/rescan/test_rescan_round.py"
STATEMENTS = "tests/unit/core/rescan/test_statements.py"
SEARCH = "tests/integration/search/test_search_sql.py"
RECLAIM = "tests/integration/ai/test_reclaim_after_backend_rescan.py"
PUBLIC_SEARCH = "tests/integration/search/test_public_search.py"
SERVICES_T = "tests/integration/core/test_services.py"
ROLLBACK = "tests/integration/core/test_rollback.py"
JUDGES = "tests/unit/ai/judges/test_candidates_and_similarity.py"
AUTH_T = "tests/unit/core/test_auth.py"
AI_API_T = "tests/integration/ai/test_api.py"
REPROCESS_T = "tests/integration/core/rescan/test_reprocess_and_status.py"
HALF_T = "tests/integration/core/rescan/test_half_cancelled.py"
SETTINGS_T = "tests/unit/test_settings.py"
PROVIDER_REGISTRY_T = "tests/unit/ai/test_registry.py"
REPLICAS_T = "tests/integration/test_process_settings.py"
NEEDS_T = "tests/integration/test_command_needs.py"
VISIBILITY_T = "tests/acceptance/test_visibility.py"
FUSION_T = "tests/unit/test_relevance_fusion.py"
RELEVANCE_T = "tests/unit/core/test_relevance.py"
REGISTRY_T = "tests/unit/core/test_channel_registry.py"
LEXICAL_T = "tests/integration/search/test_lexical_search.py"
CHANNEL_T = "tests/integration/search/test_lexical_channel.py"
DEGENERATE_T = "tests/acceptance/robustness/test_degenerate_vectors.py"
UNICODE_T = "tests/acceptance/robustness/test_unicode.py"
NORMALISATION_T = "tests/unit/test_text_normalisation.py"
PRIORITY_T = "tests/acceptance/robustness/test_search_priority.py"
ADOPT_T = "tests/integration/adoption/test_adopt_migrate.py"
CONCURRENT_MIGRATE_T = "tests/integration/test_concurrent_migrations.py"
PROCESS_SETTINGS_T = "tests/integration/test_process_settings.py"
CUE_T = "tests/unit/ai/judges/test_cue_evidence.py"
UNAVAILABLE_T = "tests/acceptance/test_db_unavailable.py"
SPEED_T = "tests/integration/core/rescan/test_recovery_speed.py"
MIGRATION_FILES_T = "tests/unit/test_migration_files.py"
PRESET_FILE_T = "tests/unit/ai/judges/test_preset_file.py"
NO_DATABASE_T = "tests/unit/test_no_database.py"
LOGS_T = "tests/unit/test_logs.py"
WORKER_T = "tests/unit/ai/test_worker.py"
DISPATCHER_T = "tests/unit/core/test_dispatcher.py"
BATCHING_T = "tests/unit/ai/test_batching.py"
LOG_CONTEXT_T = "tests/integration/ai/test_log_context.py"
DISPATCH_HTTP_T = "tests/integration/core/test_dispatch_http.py"
OPS_CLI_T = "tests/acceptance/rescan/test_ops_cli.py"


def _dispatch_inside(op: str, tail: str, log_call: str, dispatch: str) -> Mutation:
    """Move ``op``'s dispatch to the last line INSIDE its transaction block."""
    return Mutation(
        name=f"dispatch_inside_transaction_{op}",
        rule="SPEC §4: dispatch after commit, only ids that really committed",
        path=SERVICES,
        original=f"{tail}\n{log_call}\n        {dispatch}\n",
        replacement=f"{tail}\n            {dispatch}\n{log_call}\n",
        tests=(f"{ROLLBACK}::test_a_commit_that_fails_at_commit_dispatches_nothing[{op}]",),
    )


MUTATIONS: tuple[Mutation, ...] = (
    # ---- guarded transitions of the ai side (ai/state.sql, SPEC §3) -------------------------
    # the start and save guards are fragments of state.sql shared by the single and the batch
    # statements (SPEC §3, §5.4): one mutation breaks both paths; the single path's guard tests
    # kill it, the batch path's equivalence tests (STATE_BATCH) check the batch agrees row by row
    Mutation(
        "startable_reclaims_live_processing",
        "SPEC §3 start: a PROCESSING stage is re-claimed only after the expiry (both stages)",
        STATE_SQL,
        "OR (s.{stage} = 'PROCESSING'\n     AND (s.updated_at < now() - :expiry\n",
        "OR (s.{stage} = 'PROCESSING'\n     AND (true\n",
        (f"{GUARDS}::test_embedding_start_only_from_pending",
         f"{GUARDS}::test_processing_younger_than_expiry_is_not_reclaimed",
         f"{GUARDS}::test_keyword_start_needs_pending_and_embedding_completed"),
    ),
    Mutation(
        "startable_reclaims_on_any_retry_count",
        "SPEC §7.3 (last paragraph): only a retry_count HIGHER than at the stage's start re-claims",
        STATE_SQL,
        "OR s.retry_count > s.{label}_start_retry)))",
        "OR s.retry_count >= s.{label}_start_retry)))",
        (f"{RECLAIM}::test_backend_claim_after_a_crash_lets_the_resend_reclaim",),
    ),
    Mutation(
        "startable_from_failed_or_cancelled",
        "SPEC §3 start: only from PENDING (never FAILED → PROCESSING, never out of CANCELLED)",
        STATE_SQL,
        "(s.{stage} = 'PENDING'\n",
        "(s.{stage} IN ('PENDING', 'FAILED', 'CANCELLED')\n",
        (f"{GUARDS}::test_embedding_start_only_from_pending",),
    ),
    Mutation(
        "startable_from_completed",
        "SPEC §3: the ai side never changes a COMPLETED stage (start only from PENDING)",
        STATE_SQL,
        "(s.{stage} = 'PENDING'\n",
        "(s.{stage} IN ('PENDING', 'COMPLETED')\n",
        (f"{GUARDS}::test_keyword_start_needs_pending_and_embedding_completed",
         f"{PIPELINE}::test_a_finished_keyword_stage_is_never_restarted_by_the_job"),
    ),
    Mutation(
        "keyword_startable_without_completed_embedding",
        "SPEC §3 start (keyword): requires embedding_status = COMPLETED",
        STATE_SQL,
        "(s.embedding_status = 'COMPLETED' AND {startable})",
        "({startable})",
        (f"{GUARDS}::test_keyword_start_needs_pending_and_embedding_completed",
         f"{GUARDS}::test_keyword_reclaim_also_needs_embedding_completed"),
    ),
    Mutation(
        "embedding_savable_not_only_processing",
        "SPEC §3 complete (embedding): only from PROCESSING (never revives CANCELLED)",
        STATE_SQL,
        "(s.embedding_status = 'PROCESSING')",
        "(s.embedding_status IN ('PROCESSING', 'CANCELLED', 'FAILED'))",
        (f"{GUARDS}::test_complete_embedding_only_from_processing",),
    ),
    Mutation(
        "keyword_savable_not_only_processing",
        "SPEC §3 complete (keyword): only from PROCESSING",
        STATE_SQL,
        "(s.keyword_status = 'PROCESSING' AND s.embedding_status = 'COMPLETED')",
        "(s.keyword_status IN ('PROCESSING', 'CANCELLED', 'FAILED') "
        "AND s.embedding_status = 'COMPLETED')",
        (f"{GUARDS}::test_complete_keyword_only_from_processing_with_embedding_completed",),
    ),
    Mutation(
        "keyword_savable_without_completed_embedding",
        "SPEC §3 complete (keyword): and embedding_status = COMPLETED",
        STATE_SQL,
        "(s.keyword_status = 'PROCESSING' AND s.embedding_status = 'COMPLETED')",
        "(s.keyword_status = 'PROCESSING')",
        (f"{GUARDS}::test_complete_keyword_only_from_processing_with_embedding_completed",),
    ),
    Mutation(
        "fail_overwrites_cancelled",
        "SPEC §3 fail (both stages, one statement): only from PROCESSING — keeps CANCELLED",
        STATE_SQL,
        "       SET {stage} = 'FAILED',\n           updated_at = now(),\n"
        "           last_error = :error,\n           last_error_at = now()\n"
        "     WHERE context_id = :context_id\n       AND {stage} = 'PROCESSING'\n",
        "       SET {stage} = 'FAILED',\n           updated_at = now(),\n"
        "           last_error = :error,\n           last_error_at = now()\n"
        "     WHERE context_id = :context_id\n       AND {stage} <> 'COMPLETED'\n",
        (f"{GUARDS}::test_fail_only_from_processing_never_overwrites_cancelled",
         f"{PIPELINE}::test_scenario_11_judge_failure_after_delete_never_overwrites_cancelled"),
    ),
    Mutation(
        "embedding_upsert_revives_deleted",
        "SPEC §5.2: the upsert never touches is_deleted (a deleted context's data never returns)",
        STATE_SQL,
        "       updated_at = now()\n WHERE NOT ai.context_embedding.is_deleted;",
        "       updated_at = now(),\n       is_deleted = false;",
        (f"{GUARDS}::test_embedding_upsert_never_revives_is_deleted",),
    ),
    Mutation(
        "embedding_upsert_without_processing_guard",
        "SPEC §5.2 save: store the vector only while embedding_status = PROCESSING",
        STATE_SQL,
        "   AND {embedding_savable}\nON CONFLICT (context_id) DO UPDATE",
        "ON CONFLICT (context_id) DO UPDATE",
        (f"{GUARDS}::test_embedding_upsert_only_while_processing",),
    ),
    Mutation(
        "keyword_insert_without_guard",
        "SPEC §5.2 step 3 save: keyword rows only while keyword PROCESSING and embedding COMPLETED",
        STATE_SQL,
        " WHERE s.context_id = :context_id\n   AND {keyword_savable};",
        " WHERE s.context_id = :context_id;",
        (f"{GUARDS}::test_keyword_writes_are_guarded",),
    ),
    # ---- the batch path (ai/state.sql batch statements, ai/batch.py, SPEC §5.4) -----------------
    Mutation(
        "batch_start_waits_on_locked_rows",
        "SPEC §7.4: a batch claim is FOR UPDATE SKIP LOCKED (two batches never wait or share)",
        STATE_SQL,
        "       FOR UPDATE SKIP LOCKED\n), started AS (",
        "       FOR UPDATE\n), started AS (",
        (f"{STATE_BATCH}::test_two_batch_claims_at_once_share_no_row_and_never_wait",),
        occurrences=2,
    ),
    Mutation(
        "batch_start_without_row_lock",
        "SPEC §7.4: a batch claim locks what it picks (FOR UPDATE SKIP LOCKED)",
        STATE_SQL,
        "     ORDER BY s.context_id\n       FOR UPDATE SKIP LOCKED\n), started AS (",
        "     ORDER BY s.context_id\n), started AS (",
        (f"{STATE_BATCH}::test_two_batch_claims_at_once_share_no_row_and_never_wait",),
        occurrences=2,
    ),
    Mutation(
        "batch_completes_rows_whose_vector_was_not_stored",
        "SPEC §5.2: a batch completes exactly the rows whose vector it stored",
        STATE_SQL,
        "      FROM upserted u\n     WHERE s.context_id = u.context_id\n",
        "      FROM input u\n     WHERE s.context_id = u.context_id\n",
        (f"{STATE_BATCH}::test_batch_embedding_save_gives_every_row_what_the_single_save_gives_it",),
    ),
    Mutation(
        "batch_upsert_revives_deleted",
        "SPEC §5.2: the batch upsert never touches is_deleted (a deleted context's data never returns)",
        STATE_SQL,
        "           updated_at = now()\n     WHERE NOT ai.context_embedding.is_deleted\n",
        "           updated_at = now(),\n           is_deleted = false\n",
        (f"{STATE_BATCH}::test_batch_embedding_save_gives_every_row_what_the_single_save_gives_it",),
    ),
    Mutation(
        "batch_upsert_without_guard",
        "SPEC §5.2 save: a batch stores a vector only while its embedding stage is PROCESSING",
        STATE_SQL,
        "      JOIN ai.context_ai_state s ON s.context_id = i.context_id\n"
        "     WHERE {embedding_savable}\n",
        "      JOIN ai.context_ai_state s ON s.context_id = i.context_id\n",
        (f"{STATE_BATCH}::test_batch_embedding_save_gives_every_row_what_the_single_save_gives_it",),
    ),
    Mutation(
        "batch_keyword_delete_without_guard",
        "SPEC §5.2 step 3: a batch replaces keyword rows only while keyword PROCESSING",
        STATE_SQL,
        " WHERE k.context_id = ANY(CAST(:context_ids AS bigint[]))\n"
        "   AND s.context_id = k.context_id\n   AND {keyword_savable};",
        " WHERE k.context_id = ANY(CAST(:context_ids AS bigint[]))\n"
        "   AND s.context_id = k.context_id;",
        (f"{STATE_BATCH}::test_batch_keyword_save_gives_every_row_what_the_single_save_gives_it",),
    ),
    Mutation(
        "batch_keyword_insert_without_guard",
        "SPEC §5.2 step 3: a batch inserts keyword rows only while keyword PROCESSING",
        STATE_SQL,
        "  JOIN ai.context_ai_state s ON s.context_id = pick.context_id\n WHERE {keyword_savable};",
        "  JOIN ai.context_ai_state s ON s.context_id = pick.context_id;",
        (f"{STATE_BATCH}::test_batch_keyword_save_gives_every_row_what_the_single_save_gives_it",),
    ),
    Mutation(
        "batch_analysis_without_guard",
        "SPEC §5.2 step 3: a batch writes analysis rows only while keyword PROCESSING",
        STATE_SQL,
        "  JOIN ai.context_ai_state s ON s.context_id = a.context_id\n WHERE {keyword_savable}\n",
        "  JOIN ai.context_ai_state s ON s.context_id = a.context_id\n",
        (f"{STATE_BATCH}::test_batch_keyword_save_gives_every_row_what_the_single_save_gives_it",),
    ),
    Mutation(
        "batch_complete_keyword_without_guard",
        "SPEC §3 complete (keyword): a batch completes only keyword stages it may save",
        STATE_SQL,
        "     WHERE s.context_id = ANY(CAST(:context_ids AS bigint[]))\n"
        "       AND {keyword_savable}\n",
        "     WHERE s.context_id = ANY(CAST(:context_ids AS bigint[]))\n",
        (f"{STATE_BATCH}::test_batch_keyword_save_gives_every_row_what_the_single_save_gives_it",),
    ),
    Mutation(
        "batch_precheck_reads_deleted_embeddings",
        "SPEC §5.2 step 1: a row core marked deleted is never taken for a stored vector",
        STATE_SQL,
        "         ON e.context_id = s.context_id AND NOT e.is_deleted\n"
        " WHERE s.context_id = ANY(CAST(:context_ids AS bigint[]))\n",
        "         ON e.context_id = s.context_id\n"
        " WHERE s.context_id = ANY(CAST(:context_ids AS bigint[]))\n",
        (f"{STATE_BATCH}::test_batch_precheck_reads_what_precheck_reads",),
    ),
    Mutation(
        "batch_reads_deleted_embeddings",
        "SPEC §5.2 step 3: the keyword stage never uses a vector core marked deleted",
        STATE_SQL,
        "   AND NOT is_deleted\n ORDER BY context_id;",
        " ORDER BY context_id;",
        (f"{STATE_BATCH}::test_read_embeddings_batch_reads_what_read_embedding_reads",),
    ),
    Mutation(
        "batch_discard_counted_as_completed",
        "SPEC §5.2: a batch row whose save guard failed is discarded, never completed",
        BATCH_PY,
        '            outcome = "completed" if row.context_id in saved else "discarded"',
        '            outcome = "completed"',
        (f"{BATCH_T}::test_a_context_deleted_while_its_batch_is_embedded_is_never_stored",
         f"{BATCH_T}::test_a_context_edited_while_its_batch_is_judged_gets_no_keywords"),
    ),
    Mutation(
        "batch_one_bad_text_fails_the_batch",
        "SPEC §5.5: failure classification per row — one bad text fails only itself",
        BATCH_PY,
        "                if not isinstance(error, Exception):\n                    raise error",
        "                if True:\n                    raise error",
        (f"{BATCH_T}::test_a_degenerate_vector_in_a_batch_fails_only_its_context",
         f"{BATCH_T}::test_a_text_the_model_refuses_fails_only_its_context"),
    ),
    Mutation(
        "batch_without_partial_resume",
        "SPEC §5.2 step 2: a stored vector of the current profile is reused (no model call)",
        BATCH_PY,
        "                if pre.embedding_status is Status.COMPLETED and pre.embedding_profile == p.profile:",
        "                if False:",
        (f"{BATCH_T}::test_partial_resume_reuses_the_stored_vectors_of_a_batch",),
    ),
    Mutation(
        "batch_repeated_context_processed_as_new",
        "SPEC §5.3: a context twice in one batch is processed once",
        BATCH_PY,
        "            if request.context_id in rows:\n                duplicates.add(position)\n"
        "                continue\n",
        "",
        (f"{BATCH_T}::test_a_context_twice_in_one_batch_is_processed_once",),
    ),
    Mutation(
        "waiting_jobs_never_batched",
        "SPEC §5.4 batch path: a worker takes the jobs waiting together (up to the batch size)",
        WORKER_PY,
        "            while len(jobs) < self.batch_size and not queue.empty():  # others waiting: a batch",
        "            while False:",
        (f"{WORKER_T}::test_waiting_jobs_are_taken_together_up_to_the_batch_size",
         f"{API_BATCH_T}::test_the_items_of_a_batch_are_processed_together"),
    ),
    Mutation(
        "batch_repeated_context_id_accepted",
        "ARCHITECTURE Batch path: an item repeating a contextId of its batch is refused (422)",
        CONTRACTS,
        "            if request.context_id in seen:\n                out.append(None)\n"
        "                continue\n",
        "",
        (f"{API_BATCH_T}::test_one_status_per_item_and_a_bad_item_refused_alone",),
    ),
    Mutation(
        "batch_route_never_busy",
        "ARCHITECTURE Batch path: 503 + Retry-After when no valid item could be queued",
        AI_API,
        "    if valid and all(status == 503 for status in statuses if status != 422):",
        "    if False:",
        (f"{API_BATCH_T}::test_a_full_queue_refuses_the_items_that_do_not_fit_and_503_when_none_does",),
    ),
    Mutation(
        "batch_route_missing_never_falls_back",
        "ARCHITECTURE Batch path: an ai side without process-batch gets one request per context",
        DISPATCH_PY,
        "        if response.status_code in (404, 405):\n            return None",
        "        if False:\n            return None",
        (f"{DISPATCH_BATCH_T}::test_an_ai_side_without_the_batch_route_gets_one_request_per_context",),
    ),
    Mutation(
        "busy_batch_items_given_up_at_once",
        "SPEC §7.2 recovery speed: the busy (503) items of a batch are re-sent, paced",
        DISPATCH_PY,
        "    while busy and time.monotonic() + pause < deadline:",
        "    while False:",
        (f"{BATCH_RESEND_T}::test_busy_items_of_a_batch_are_re_sent_within_the_round",),
    ),
    Mutation(
        "resend_never_batched",
        "ARCHITECTURE Batch path: the rescan's re-sends go as process-batch calls",
        RESCAN_PY,
        "    if batch_size > 1 and isinstance(client, BatchProcessClient):",
        "    if False:",
        (f"{BATCH_RESEND_T}::test_a_round_re_sends_its_claimed_rows_in_batches",
         f"{BATCH_RESEND_T}::test_reprocess_dispatches_each_committed_batch_through_the_batch_path"),
    ),
    Mutation(
        "import_never_batched",
        "ARCHITECTURE Batch path: an import sends its contexts as process batches",
        "src/pinlog/cli/importing.py",
        "    if batch > 1 and isinstance(core.client, BatchProcessClient):",
        "    if False:",
        (f"{IMPORT_T}::test_an_import_sends_its_contexts_as_process_batches",),
    ),
    Mutation(
        "sql_markers_resolved_in_comments",
        "ARCHITECTURE §4: a comment naming a fragment stays a comment (no SQL leaks out of it)",
        "src/pinlog/db/sql.py",
        '        return "\\n".join(line if line.lstrip().startswith("--") else _MARKER.sub(resolve, line)',
        '        return "\\n".join(_MARKER.sub(resolve, line)',
        ("tests/unit/test_sql_markers.py::"
         "test_a_comment_naming_a_fragment_stays_as_written_and_the_sql_gets_the_fragment",),
    ),
    # ---- rescan / finalizer (core/rescan.sql, SPEC §7) ---------------------------------------
    Mutation(
        "claim_waits_on_locked_rows",
        "SPEC §7.2/§7.4: the claim is FOR UPDATE SKIP LOCKED (a locked row is skipped)",
        RESCAN_SQL,
        "    LIMIT :batch_size\n    FOR UPDATE SKIP LOCKED\n), claimed AS (",
        "    LIMIT :batch_size\n    FOR UPDATE\n), claimed AS (",
        (f"{ROUND}::test_skip_locked_a_locked_row_is_skipped_not_waited_for",
         f"{STATEMENTS}::test_claim_orders_by_exactly_the_partial_index_expression_and_skips_locked_rows"),
    ),
    Mutation(
        "claim_without_row_lock",
        "SPEC §7.2/§7.4: the claim locks what it picks (FOR UPDATE SKIP LOCKED)",
        RESCAN_SQL,
        "    LIMIT :batch_size\n    FOR UPDATE SKIP LOCKED\n), claimed AS (",
        "    LIMIT :batch_size\n), claimed AS (",
        (f"{ROUND}::test_skip_locked_a_locked_row_is_skipped_not_waited_for",),
    ),
    Mutation(
        "finalizer_waits_on_locked_rows",
        "SPEC §7.2 step 1: the finalizer is FOR UPDATE SKIP LOCKED",
        RESCAN_SQL,
        "    FOR UPDATE SKIP LOCKED\n), failed AS (\n    UPDATE ai.context_ai_state AS s\n"
        "    SET embedding_status = CASE",
        "    FOR UPDATE\n), failed AS (\n    UPDATE ai.context_ai_state AS s\n"
        "    SET embedding_status = CASE",
        (f"{ROUND}::test_skip_locked_a_locked_row_is_skipped_not_waited_for",),
    ),
    Mutation(
        "claim_refreshes_updated_at",
        "SPEC §7.3: the claim keeps its clock in rescanned_at, never refreshes updated_at",
        RESCAN_SQL,
        "SET retry_count = s.retry_count + 1, rescanned_at = now()",
        "SET retry_count = s.retry_count + 1, rescanned_at = now(), updated_at = now()",
        (f"{ROUND}::test_stale_pending_row_is_resent_and_spends_one_retry",),
    ),
    Mutation(
        "claim_without_rescanned_at",
        "SPEC §7.3: the claim sets rescanned_at (the last retry gets a full expiry)",
        RESCAN_SQL,
        "SET retry_count = s.retry_count + 1, rescanned_at = now()",
        "SET retry_count = s.retry_count + 1",
        (f"{ROUND}::test_the_last_retry_goes_out_and_is_not_finalized_in_the_same_round",),
    ),
    Mutation(
        "age_ignores_rescanned_at",
        "SPEC §7.3: rescan and finalizer measure age from greatest(updated_at, rescanned_at)",
        RESCAN_SQL,
        "\ngreatest(updated_at, coalesce(rescanned_at, updated_at))\n",
        "\nupdated_at\n",
        (f"{ROUND}::test_rescanned_at_restarts_the_expiry_clock",),
    ),
    Mutation(
        "finalizer_threshold_off_by_one",
        "SPEC §7.2 step 1: the finalizer takes retry_count >= max",
        RESCAN_SQL,
        "retry_count >= :max_retries",
        "retry_count > :max_retries",
        (f"{ROUND}::test_the_last_retry_goes_out_and_is_not_finalized_in_the_same_round",),
        occurrences=2,
    ),
    Mutation(
        "finalizer_fails_every_embedding_stage",
        "SPEC §7.2 step 1 whitelist: only PENDING/PROCESSING become FAILED (embedding)",
        RESCAN_SQL,
        "    SET embedding_status = CASE WHEN s.embedding_status IN ('PENDING','PROCESSING')\n"
        "                                THEN 'FAILED' ELSE s.embedding_status END,",
        "    SET embedding_status = 'FAILED',",
        (f"{ROUND}::test_scenario_16_finalizer_fails_only_unfinished_stages",),
    ),
    Mutation(
        "finalizer_fails_every_keyword_stage",
        "SPEC §7.2 step 1 whitelist: only PENDING/PROCESSING become FAILED (keyword)",
        RESCAN_SQL,
        "        keyword_status   = CASE WHEN s.keyword_status IN ('PENDING','PROCESSING')\n"
        "                                THEN 'FAILED' ELSE s.keyword_status END,",
        "        keyword_status   = 'FAILED',",
        (f"{ROUND}::test_finalizer_whitelist_keeps_a_finished_keyword_stage",),
    ),
    Mutation(
        "expiry_ignores_cancelled",
        "rescan.sql `expired`: a half-cancelled row is never claimed nor FAILED — also when the "
        "anomaly step (finalize_half_cancelled, SPEC §7.2) has not reached it this round",
        RESCAN_SQL,
        "    AND embedding_status <> 'CANCELLED' AND keyword_status <> 'CANCELLED'\n",
        "",
        (f"{HALF_T}::test_a_half_cancelled_row_beyond_the_batch_waits_and_is_never_claimed_or_failed",),
    ),
    Mutation(
        "expiry_ignores_cancelled_embedding",
        "as expiry_ignores_cancelled, embedding side only",
        RESCAN_SQL,
        "    AND embedding_status <> 'CANCELLED' AND keyword_status <> 'CANCELLED'\n",
        "    AND keyword_status <> 'CANCELLED'\n",
        (f"{HALF_T}::test_a_half_cancelled_row_beyond_the_batch_waits_and_is_never_claimed_or_failed",),
    ),
    Mutation(
        "expiry_ignores_cancelled_keyword",
        "as expiry_ignores_cancelled, keyword side only",
        RESCAN_SQL,
        "    AND embedding_status <> 'CANCELLED' AND keyword_status <> 'CANCELLED'\n",
        "    AND embedding_status <> 'CANCELLED'\n",
        (f"{HALF_T}::test_a_half_cancelled_row_beyond_the_batch_waits_and_is_never_claimed_or_failed",),
    ),
    Mutation(
        "half_cancelled_not_ended",
        "SPEC §7.2 anomaly: the next round ends a half-cancelled row's unfinished stage CANCELLED",
        RESCAN_SQL,
        "    SET embedding_status = 'CANCELLED', keyword_status = 'CANCELLED', updated_at = now()\n"
        "    FROM picked AS p",
        "    SET updated_at = now()\n    FROM picked AS p",
        (f"{HALF_T}::test_the_next_round_ends_a_half_cancelled_row_cancelled",
         f"{ROUND}::test_half_cancelled_rows_end_cancelled_and_are_neither_claimed_nor_failed"),
    ),
    Mutation(
        "processing_expiry_replaced_by_pending_expiry",
        "SPEC §7.1/§7.3: PENDING and PROCESSING use different expiries",
        RESCAN_SQL,
        "(embedding_status = 'PROCESSING' AND {age} < now() - CAST(:processing_expiry AS interval))",
        "(embedding_status = 'PROCESSING' AND {age} < now() - CAST(:pending_expiry AS interval))",
        (f"{ROUND}::test_pending_and_processing_expiries_differ_and_come_from_settings",),
    ),
    Mutation(
        "keyword_pending_expires_while_embedding_is_live",
        "rescan.sql `expired`: a PENDING keyword waits for a live embedding (its clock is the "
        "embedding's PROCESSING expiry)",
        RESCAN_SQL,
        "OR (keyword_status = 'PENDING' AND embedding_status = 'COMPLETED'",
        "OR (keyword_status = 'PENDING'",
        (f"{ROUND}::test_pending_and_processing_expiries_differ_and_come_from_settings",
         "tests/integration/core/rescan/test_recovery_speed.py::"
         "test_the_outlook_agrees_with_the_expired_predicate_for_every_status_pair"),
    ),
    Mutation(
        "reprocess_profile_moves_unfinished_stages",
        "SPEC §7.5: reprocess is the only COMPLETED → PENDING path (never FAILED/CANCELLED)",
        REPROCESS_SQL,
        "    s.embedding_status = 'COMPLETED'\n    AND EXISTS",
        "    s.embedding_status IN ('COMPLETED', 'FAILED', 'CANCELLED')\n    AND EXISTS",
        (f"{REPROCESS_T}::test_reprocess_profile_moves_only_completed_stages_of_another_profile",),
    ),
    # ---- search filters (ai/search.sql, core/search.sql, SPEC §10) ---------------------------
    Mutation(
        "search_without_member_filter",
        "SPEC §10/§11 #19: user_id = :userId",
        SEARCH_SQL,
        "e.user_id = :user_id ",
        "(e.user_id = :user_id OR true) ",
        (f"{SEARCH}::test_scenario_19_another_members_data_never_appears_even_with_a_large_limit",
         f"{SEARCH}::test_score_records_applies_each_filter_alone"),
        occurrences=2,  # search_member and score_records (the lexical channel's records)
    ),
    Mutation(
        "search_without_is_deleted_filter",
        "SPEC §10/§11 #3: is_deleted = false (alone sufficient)",
        SEARCH_SQL,
        "e.is_deleted = false ",
        "(e.is_deleted = false OR true) ",
        (f"{SEARCH}::test_each_invalidation_marker_alone_hides_a_row",
         f"{SEARCH}::test_score_records_applies_each_filter_alone"),
        occurrences=2,  # search_member and score_records (the lexical channel's records)
    ),
    Mutation(
        "search_member_without_completed_filter",
        "SPEC §10/§11 #3: embedding_status = COMPLETED (alone sufficient), search_member's probe",
        SEARCH_SQL,
        "WHERE s.context_id = e.context_id) = 'COMPLETED'",
        "WHERE s.context_id = e.context_id) IN ('COMPLETED', 'PENDING', 'PROCESSING', 'FAILED')",
        (f"{SEARCH}::test_each_invalidation_marker_alone_hides_a_row",),
    ),
    Mutation(
        "search_without_completed_filter",
        "SPEC §10/§11 #3: embedding_status = COMPLETED (alone sufficient)",
        SEARCH_SQL,
        "s.embedding_status = 'COMPLETED' ",
        "(s.embedding_status = 'COMPLETED' OR true) ",
        (f"{SEARCH}::test_score_records_applies_each_filter_alone",),
    ),
    Mutation(
        "search_without_profile_filter",
        "SPEC §10: embedding_profile = :profile (never compare vectors of different spaces)",
        SEARCH_SQL,
        "e.embedding_profile = :profile ",
        "(e.embedding_profile = :profile OR true) ",
        (f"{SEARCH}::test_other_profile_rows_are_never_compared",
         f"{SEARCH}::test_score_records_applies_each_filter_alone"),
        occurrences=2,  # search_member and score_records (the lexical channel's records)
    ),
    Mutation(
        "core_verify_hits_keeps_deleted_contexts",
        "SPEC §10: core re-verifies every hit (context still active)",
        CORE_SEARCH_SQL,
        "  AND c.deleted_at IS NULL\n",
        "",
        (f"{PUBLIC_SEARCH}::test_deleted_or_superseded_contexts_never_returned_even_if_ai_rows_stale",),
    ),
    # ---- search relevance: decision and fusion (relevance.py), core's channels (SPEC §10) -----
    Mutation(
        "relevance_fuses_two_lists_only",
        "SPEC §10: channels merge by RRF over every channel's ranking (N lists, not two)",
        RELEVANCE,
        "        for rank in ranks:\n",
        "        for rank in ranks[:2]:\n",
        (f"{FUSION_T}::test_three_channels_fuse_by_the_sum_of_their_reciprocal_ranks",),
    ),
    Mutation(
        "relevance_shows_records_without_evidence",
        "SPEC §10: a record is returned only when some channel gives evidence (no top-hit rule)",
        RELEVANCE,
        "        if not vouching:\n            continue\n",
        "        if not vouching and False:\n            continue\n",
        (f"{FUSION_T}::test_no_evidence_means_no_result_and_unscored_records_are_never_shown",
         f"{RELEVANCE_T}::test_no_evidence_means_no_result_even_for_the_best_cosine"),
    ),
    Mutation(
        "relevance_ranks_unsearchable_records",
        "SPEC §10: ranks are over the searchable records only (a note without embedding is not searchable)",
        RELEVANCE,
        "competition_ranks({r: e.score for r in pool\n",
        "competition_ranks({r: e.score for r in ev\n",
        (f"{FUSION_T}::test_evidence_about_unsearchable_records_does_not_change_the_ranks",),
    ),
    Mutation(
        "relevance_first_vouching_channel_shows_its_context",
        "SPEC §10: the shown context is the most specific vouching channel's (the note whose words matched)",
        RELEVANCE,
        "context_id = next((e.context_id for e in reversed(vouching)",
        "context_id = next((e.context_id for e in vouching",
        (f"{FUSION_T}::test_the_last_vouching_channel_that_names_a_scored_context_decides_what_is_shown",
         f"{RELEVANCE_T}::test_rrf_puts_a_record_with_both_kinds_of_evidence_first_and_shows_the_matching_note"),
    ),
    Mutation(
        "relevance_matched_by_not_in_channel_order",
        "SPEC §10: matchedBy lists the channels that matched, in channel order (vector, text, place)",
        RELEVANCE,
        "matched_by = tuple(dict.fromkeys(name for e in vouching for name in e.matched_by))",
        "matched_by = tuple(sorted(set(name for e in vouching for name in e.matched_by)))",
        (f"{FUSION_T}::test_matched_by_lists_the_vouching_channels_in_channel_order_each_name_once",
         f"{LEXICAL_T}::test_both_channels_merge_and_say_which_matched"),
    ),
    Mutation(
        "relevance_ties_by_record_id_only",
        "SPEC §10 (README): equal fused scores go to the higher best cosine, then the lower record id",
        RELEVANCE,
        "decisions.sort(key=lambda d: (-d.score, -best[d.record_id], d.record_id))",
        "decisions.sort(key=lambda d: (-d.score, d.record_id))",
        (f"{FUSION_T}::test_ties_go_to_the_higher_best_cosine_then_the_lower_record_id_then_the_limit",),
    ),
    Mutation(
        "lexical_ignores_the_coverage_threshold",
        "SPEC §10: lexical evidence needs PINLOG_SEARCH_TEXT_MIN_COVERAGE of the query's terms",
        LEXICAL,
        "Evidence(cov, cov >= self.min_coverage, names, shown)",
        "Evidence(cov, True, names, shown)",
        (f"{RELEVANCE_T}::test_lexical_evidence_needs_the_coverage_threshold",),
    ),
    Mutation(
        "lexical_counts_words_of_unscored_notes",
        "SPEC §10: a note is searchable once its embedding COMPLETED (its words count only then)",
        LEXICAL,
        "cov = coverage(match, self.query_terms, scored)",
        "cov = coverage(match, self.query_terms)",
        (f"{RELEVANCE_T}::test_words_of_a_note_without_an_embedding_do_not_count",),
    ),
    Mutation(
        "lexical_asks_to_score_records_below_the_threshold",
        "SPEC §10: only records that can pass the lexical test are sent to be scored (recordIds)",
        LEXICAL,
        "if self.query_terms and coverage(m, self.query_terms) >= self.min_coverage]",
        "if self.query_terms]",
        (f"{REGISTRY_T}::test_the_lexical_channel_asks_for_the_records_that_can_pass_counting_every_note",),
    ),
    Mutation(
        "vector_channel_vouches_for_every_scored_record",
        "SPEC §10: the vector channel vouches only for the ai side's results (calibrated floors)",
        VECTOR,
        "Evidence(max(scored.values()), record_id in vouched, (VECTOR,),",
        "Evidence(max(scored.values()), True, (VECTOR,),",
        (f"{RELEVANCE_T}::test_no_evidence_means_no_result_even_for_the_best_cosine",),
    ),
    Mutation(
        "records_to_score_from_the_first_channel_only",
        "SPEC §10: the ai side scores the records every channel names",
        CHANNELS,
        "wanted = dict.fromkeys(r for f in found for r in f.to_score())",
        "wanted = dict.fromkeys(r for f in found[:1] for r in f.to_score())",
        (f"{REGISTRY_T}::test_records_to_score_are_every_channels_requests_in_order_each_once_capped",
         f"{REGISTRY_T}::test_a_new_channel_plugs_in_with_its_names_ranking_and_context",
         f"{LEXICAL_T}::test_lexical_match_on_a_note_word_a_place_name_and_an_english_note"),
    ),
    Mutation(
        "scored_contexts_drop_the_vouched_results",
        "SPEC §10: the records the vector channel vouches for are searchable with their cosine",
        CHANNELS,
        "    for hit in (*response.scored, *response.results):\n",
        "    for hit in response.scored:\n",
        (f"{REGISTRY_T}::test_scored_contexts_hold_every_cosine_of_the_answer",
         f"{PUBLIC_SEARCH}::test_public_search_end_to_end"),
    ),
    # ---- invalidation marking (core/core.sql, SPEC §4) ---------------------------------------
    Mutation(
        "invalidation_does_not_mark_embeddings_deleted",
        "SPEC §4: delete/edit marks the embedding is_deleted",
        CORE_SQL,
        "UPDATE ai.context_embedding SET is_deleted = true\nWHERE context_id = ANY",
        "UPDATE ai.context_embedding SET is_deleted = is_deleted\nWHERE context_id = ANY",
        (f"{SERVICES_T}::test_delete_context_cancels_completed_and_failed_stages_and_hides_embedding",),
    ),
    Mutation(
        "invalidation_keeps_completed_stages",
        "SPEC §4: CANCEL both stages unconditionally (COMPLETED and FAILED too)",
        CORE_SQL,
        "    SET embedding_status = 'CANCELLED', keyword_status = 'CANCELLED', updated_at = now()",
        "    SET embedding_status = CASE WHEN s.embedding_status IN ('COMPLETED', 'FAILED') "
        "THEN s.embedding_status ELSE 'CANCELLED' END,\n"
        "        keyword_status = CASE WHEN s.keyword_status IN ('COMPLETED', 'FAILED') "
        "THEN s.keyword_status ELSE 'CANCELLED' END, updated_at = now()",
        (f"{SERVICES_T}::test_delete_context_cancels_completed_and_failed_stages_and_hides_embedding",),
    ),
    # ---- dispatch after commit (core/services.py, SPEC §4) -----------------------------------
    _dispatch_inside(
        "create_record",
        '            context_id = await self._insert_context(conn, record_id, member_id, text, '
        '"created")',
        '        log.info("record created", extra={"member_id": member_id, "record_id": record_id,\n'
        '                                          "context_id": context_id})',
        "self._dispatch([self._request(context_id, member_id, record_id, text, place)])"),
    _dispatch_inside(
        "add_context",
        '            await conn.execute(q("touch_record"), {"record_id": record_id})',
        '        log.info("context added", extra={"member_id": member_id, "record_id": record_id,\n'
        '                                         "context_id": context_id})',
        "self._dispatch([self._request(context_id, member_id, record_id, text, None)])"),
    _dispatch_inside(
        "edit_context",
        '            await conn.execute(q("touch_record"), {"record_id": record_id})',
        '        log.info("context edited", extra={"member_id": member_id, "record_id": record_id,\n'
        '                                          "context_id": new_id, "reason": f"replaces '
        '{context_id}"})',
        "self._dispatch([self._request(new_id, member_id, record_id, text, None)])"),
    # ---- candidate mapping (ai/candidates.py, SPEC §8) ---------------------------------------
    Mutation(
        "judge_picks_outside_the_candidates_kept",
        "SPEC §8: ids that were not among the candidates are dropped",
        CANDIDATES,
        "if keyword_id is None or keyword_id not in allowed:",
        "if keyword_id is None:",
        (f"{JUDGES}::test_map_picks_applies_the_spec_rules_and_counts_drops",),
    ),
    Mutation(
        "pipeline_stores_picks_outside_the_candidates",
        "SPEC §8 last line (pipeline): only candidates are stored, whatever a judge answers",
        PIPELINE_PY,
        "        if pick.keyword_id not in allowed:\n"
        "            metrics.JUDGE_DROPPED_PICKS.labels(reason=\"not_candidate\").inc()\n"
        "            continue\n",
        "",
        (f"{PIPELINE}::test_only_candidates_are_stored_even_if_a_judge_returns_others",),
    ),
    Mutation(
        "judge_confidence_clamped",
        "SPEC §8: confidences outside 0..1 are dropped, never clamped",
        CANDIDATES,
        "    if not math.isfinite(number) or not 0.0 <= number <= 1.0:\n        return None\n"
        "    return number",
        "    if not math.isfinite(number):\n        return None\n"
        "    return min(max(number, 0.0), 1.0)",
        (f"{JUDGES}::test_map_picks_applies_the_spec_rules_and_counts_drops",),
    ),
    # ---- JWT verification (core/api/auth.py) -------------------------------------------------
    Mutation(
        "jwt_signature_not_verified",
        "member tokens: the signature is verified",
        AUTH,
        'options={"require": ["exp", "sub"]}',
        'options={"require": ["exp", "sub"], "verify_signature": False}',
        (f"{AUTH_T}::test_rejected", f"{AUTH_T}::test_unsigned_and_garbage_tokens_are_rejected"),
    ),
    Mutation(
        "jwt_exp_not_required",
        "member tokens: exp is required",
        AUTH,
        'options={"require": ["exp", "sub"]}',
        'options={"require": ["sub"]}',
        (f"{AUTH_T}::test_rejected",),
    ),
    Mutation(
        "jwt_any_hmac_algorithm",
        "member tokens: only the configured algorithm is accepted",
        AUTH,
        "algorithms=[config.algorithm]",
        'algorithms=["HS256", "HS384", "HS512"]',
        (f"{AUTH_T}::test_rejected",),
    ),
    Mutation(
        "jwt_sub_not_checked",
        "member tokens: sub is a positive bigint member id",
        AUTH,
        "            or not 0 < int(sub) < 2**63):",
        "            ):",
        (f"{AUTH_T}::test_rejected",),
    ),
    # ---- internal secret (ai/api.py, SPEC §5.1) ----------------------------------------------
    Mutation(
        "internal_secret_not_compared",
        "SPEC §5.1: X-Internal-Secret must match a configured secret, else 401",
        AI_API,
        '        match |= hmac.compare_digest(given, secret.encode("utf-8"))',
        "        match = True",
        (f"{AI_API_T}::test_401_missing_or_wrong_secret_changes_nothing",),
    ),
    # ---- configuration and wiring (issue 22) -------------------------------------------------
    Mutation(
        "budget_without_backoff",
        "SPEC §6: the budget is timeout × attempts + the worst-case backoff (one formula)",
        SETTINGS_PY,
        "        return timeout * self.attempts + self.total_backoff()",
        "        return timeout * self.attempts",
        (f"{SETTINGS_T}::test_the_budget_counts_the_worst_case_backoff",),
    ),
    Mutation(
        "llm_endpoint_not_checked_at_load",
        "an llm judge or rewrite needs PINLOG_LLM_BASE_URL, refused when the settings load",
        SETTINGS_PY,
        "            timeouts.append((\"PINLOG_LLM_TIMEOUT\", self.llm_timeout))\n"
        "            self.llm_endpoint()\n",
        "            timeouts.append((\"PINLOG_LLM_TIMEOUT\", self.llm_timeout))\n",
        (f"{SETTINGS_T}::test_an_llm_judge_needs_its_endpoint",),
    ),
    Mutation(
        "unknown_provider_lists_no_names",
        "an unknown provider/judge name is one line listing the known ones",
        REGISTRY_PY,
        "f\"(known: {', '.join(self.names)})\"",
        "\"\"",
        (f"{PROVIDER_REGISTRY_T}::test_an_unknown_name_is_one_line_listing_the_known_ones",),
    ),
    Mutation(
        "replica_rules_without_the_profile",
        "issue 16 #7: an ai process records its embedding profile for the replica check",
        COMPOSITION_PY,
        "                        embedding_profile=config.ai.embedding.profile)",
        "                        )",
        ("tests/unit/test_rule_settings.py::test_rule_settings_record_no_secret",),
    ),
    Mutation(
        "one_shot_command_runs_the_rescan_loop",
        "SPEC §7: a one-shot command runs only its own rounds (no rescan loop)",
        CLI_APP_PY,
        "rescan=False if one_shot else None",
        "rescan=None",
        (f"{NEEDS_T}::test_running_is_one_shot_unless_asked",),
    ),
    Mutation(
        "serve_starts_the_components_twice",
        "issue 22: `pinlog serve` starts the ai runtime once (one provider probe)",
        CLI_OPS_PY,
        "create_app(config, started=started)",
        "create_app(config, components=started.components, database_url=url)",
        (f"{VISIBILITY_T}::test_serve_host_port_startup_line_http_metrics_and_oldest_unfinished",),
    ),
    # ---- issue 30: rules no test noticed, and the families they belong to --------------------
    # -- member withdrawal (core/core.sql, SPEC §4)
    Mutation(
        "withdrawal_hides_only_active_contexts_embeddings",
        "SPEC §4 withdrawal: EVERY embedding of the member is hidden, also one of a context "
        "deleted earlier whose own invalidation was missed",
        CORE_SQL,
        "UPDATE ai.context_embedding SET is_deleted = true\nWHERE user_id = :member_id AND NOT is_deleted;",
        "UPDATE ai.context_embedding SET is_deleted = true\nWHERE user_id = :member_id AND NOT is_deleted AND false;",
        (f"{SERVICES_T}::test_withdrawal_hides_every_embedding_of_the_member_also_of_earlier_deleted_contexts",),
    ),
    # -- core's lexical channel (core/search.sql, SPEC §10)
    Mutation(
        "lexical_notes_keep_deleted_contexts",
        "SPEC §10 lexical channel: an edited or deleted note's words never match",
        CORE_SEARCH_SQL,
        "WHERE c.member_id = :member_id AND c.deleted_at IS NULL\n",
        "WHERE c.member_id = :member_id\n",
        (f"{CHANNEL_T}::test_edited_or_deleted_notes_words_never_reach_the_lexical_channel",),
    ),
    Mutation(
        "lexical_notes_of_every_member",
        "SPEC §10/§11 #19 lexical channel: another member's notes never match",
        CORE_SEARCH_SQL,
        "WHERE c.member_id = :member_id AND c.deleted_at IS NULL\n",
        "WHERE c.deleted_at IS NULL\n",
        (f"{CHANNEL_T}::test_another_members_notes_and_places_never_reach_the_lexical_channel",),
    ),
    Mutation(
        "lexical_places_of_every_member",
        "SPEC §10/§11 #19 lexical channel: another member's saved places never match",
        CORE_SEARCH_SQL,
        "WHERE r.member_id = :member_id AND r.deleted_at IS NULL\n",
        "WHERE r.deleted_at IS NULL\n",
        (f"{CHANNEL_T}::test_another_members_notes_and_places_never_reach_the_lexical_channel",),
    ),
    Mutation(
        "lexical_places_keep_deleted_records",
        "SPEC §10 lexical channel: a deleted record's place name and address never match",
        CORE_SEARCH_SQL,
        "WHERE r.member_id = :member_id AND r.deleted_at IS NULL\n",
        "WHERE r.member_id = :member_id\n",
        (f"{CHANNEL_T}::test_a_deleted_records_place_name_and_address_never_reach_the_lexical_channel",),
    ),
    # -- the relevance decision end to end (pinlog/relevance.py, core/channels; SPEC §10):
    #    the same rules as the unit-level mutations above, killed through /v1/search
    Mutation(
        "relevance_shows_records_without_evidence_end_to_end",
        "SPEC §10: a record is returned only when some channel gives evidence for it",
        RELEVANCE,
        "        if not vouching:\n            continue\n",
        "        if not vouching and False:\n            continue\n",
        (f"{LEXICAL_T}::test_a_note_that_is_not_searchable_yet_gives_no_evidence_and_no_result",),
    ),
    Mutation(
        "relevance_ignores_the_coverage_threshold_end_to_end",
        "SPEC §10: lexical evidence needs the query-term coverage threshold, not any one term",
        LEXICAL,
        "Evidence(cov, cov >= self.min_coverage, names, shown)",
        "Evidence(cov, True, names, shown)",
        (f"{LEXICAL_T}::test_one_query_term_of_five_is_below_the_coverage_threshold",),
    ),
    Mutation(
        "relevance_counts_unscored_notes_words_end_to_end",
        "SPEC §10: words of a note that is not searchable (no embedding scored) give no evidence",
        LEXICAL,
        "cov = coverage(match, self.query_terms, scored)",
        "cov = coverage(match, self.query_terms)",
        (f"{LEXICAL_T}::test_a_note_that_is_not_searchable_yet_gives_no_evidence_and_no_result",),
    ),
    # -- the vector channel's short-query floor through search() (ai/search.py, SPEC §10)
    Mutation(
        "search_statement_uses_the_multi_word_floor_for_one_word",
        "SPEC §10 cuts: a one-word query's hits are cut at the short-query floor, also in the "
        "statement's bound (min_similarity)",
        AI_SEARCH,
        "        min_similarity = (cuts.short_query_floor if is_short_query(request.query)\n"
        "                          else cuts.floor) if apply else NO_CUT",
        "        min_similarity = cuts.floor if apply else NO_CUT",
        (f"{PUBLIC_SEARCH}::test_a_one_word_query_keeps_a_hit_between_the_short_query_floor_and_the_floor",),
    ),
    Mutation(
        "one_word_queries_get_the_multi_word_floor",
        "SPEC §10 cuts: a one-word query is a short query (its lower floor, in the statement and "
        "in the cut after it)",
        AI_SEARCH,
        "    return len(query.split()) <= 1",
        "    return False",
        (f"{PUBLIC_SEARCH}::test_a_one_word_query_keeps_a_hit_between_the_short_query_floor_and_the_floor",),
    ),
    # -- degenerate vectors (ai/vectors.py, ai/search.sql, SPEC §9)
    Mutation(
        "zero_norm_vectors_accepted",
        "SPEC §9: a zero / near-zero norm vector is a provider error, never stored or used",
        VECTORS,
        "    bad = ~finite.all(axis=1) | ~(norms >= MIN_NORM)",
        "    bad = ~finite.all(axis=1)",
        (f"{DEGENERATE_T}::test_check_embeddings_refuses_every_degenerate_kind",),
    ),
    Mutation(
        "search_member_ranks_nan",
        "SPEC §9 defence in depth: a NaN cosine (stored zero vector) is never ranked",
        SEARCH_SQL,
        "    WHERE similarity <> 'NaN'::float8               -- NaN is never ranked\n",
        "",
        (f"{DEGENERATE_T}::test_search_sql_never_ranks_a_stored_zero_vector",),
    ),
    Mutation(
        "score_records_scores_nan",
        "SPEC §9 defence in depth: a NaN cosine is never scored for the lexical channel",
        SEARCH_SQL,
        "  AND NOT (1 - (e.embedding <=> CAST(:query_vector AS vector))) = 'NaN'::float8  -- NaN never scored\n",
        "",
        (f"{DEGENERATE_T}::test_search_sql_never_ranks_a_stored_zero_vector",),
    ),
    Mutation(
        "search_member_compares_vectors_of_another_length",
        "SPEC §9 defence in depth: a stored vector of another length is skipped, never a 500",
        SEARCH_SQL,
        "      AND vector_dims(e.embedding) = vector_dims(CAST(:query_vector AS vector))  -- never a 500\n"
        "      -- cut:",
        "      -- cut:",
        (f"{DEGENERATE_T}::test_search_sql_skips_a_stored_vector_of_another_length",),
    ),
    Mutation(
        "score_records_compares_vectors_of_another_length",
        "SPEC §9 defence in depth: a stored vector of another length is never scored, never a 500",
        SEARCH_SQL,
        "  AND vector_dims(e.embedding) = vector_dims(CAST(:query_vector AS vector))  -- never a 500\n"
        "  AND NOT",
        "  AND NOT",
        (f"{DEGENERATE_T}::test_search_sql_skips_a_stored_vector_of_another_length",),
    ),
    # -- one normalisation (NFC) where text enters (pinlog/text.py, contracts, services; SPEC §13)
    Mutation(
        "lexical_terms_of_the_raw_query",
        "SPEC §13: a query is normalised (NFC) before its lexical terms are taken, so an NFD "
        "query matches like its NFC copy",
        TEXT,
        "    for run in _RUNS.findall(normalize(text).casefold()):",
        "    for run in _RUNS.findall(text.casefold()):",
        (f"{LEXICAL_T}::test_an_nfd_query_gets_the_lexical_matches_of_its_nfc_copy",),
    ),
    Mutation(
        "contract_text_not_normalised",
        "SPEC §13/§5.6: text entering the ai side is normalised, so NFD and NFC hash alike",
        CONTRACTS,
        "    value = normalize(_storable_text(value))",
        "    value = _storable_text(value)",
        (f"{NORMALISATION_T}::test_contract_normalises_text_so_nfd_and_nfc_hash_alike",),
    ),
    Mutation(
        "note_text_not_normalised",
        "SPEC §13: a note is stored in the one normalised form",
        SERVICES,
        "    text = normalize(text)\n    if is_blank(text):",
        "    if is_blank(text):",
        (f"{UNICODE_T}::test_nfd_note_and_place_are_stored_normalised_and_hashed_normalised",),
    ),
    Mutation(
        "place_fields_not_normalised",
        "SPEC §13: place names and addresses are stored in the one normalised form",
        SERVICES,
        "    if normal:\n        value = normalize(value)\n",
        "",
        (f"{UNICODE_T}::test_nfd_note_and_place_are_stored_normalised_and_hashed_normalised",),
    ),
    # -- the migration and adoption locks, lock_timeout (db/migrate.py, SPEC §2)
    Mutation(
        "migrate_inspects_before_the_migration_lock",
        "SPEC §2 migrations: a waiting `pinlog migrate` holds no lock and changes nothing until "
        "it has the migration lock (also on a database with the legacy version table)",
        MIGRATE,
        "        with engine.begin() as conn:\n            _lock(conn)\n"
        "            if inspect_database(conn) == \"foreign\":",
        "        with engine.begin() as conn:\n"
        "            if inspect_database(conn) == \"foreign\":",
        (f"{CONCURRENT_MIGRATE_T}::"
         "test_a_waiting_migrate_holds_no_lock_and_changes_nothing_until_it_has_the_migration_lock",),
    ),
    Mutation(
        "adopt_alters_before_the_migration_lock",
        "SPEC §2.2 adoption: a waiting `migrate --adopt` holds no lock on the backend's ai tables",
        MIGRATE,
        "            _lock(conn)\n            conn.execute(text(f\"SET LOCAL lock_timeout",
        "            conn.execute(text(f\"SET LOCAL lock_timeout",
        (f"{ADOPT_T}::test_concurrent_adoptions_wait_for_each_other_and_both_succeed",),
    ),
    Mutation(
        "adopt_waits_without_lock_timeout",
        "SPEC §2.2 adoption: a busy backend table aborts the adoption (lock_timeout), it never "
        "queues the backend's traffic behind it",
        MIGRATE,
        "            conn.execute(text(f\"SET LOCAL lock_timeout = '{ADOPT_LOCK_TIMEOUT}'\"))\n",
        "",
        (f"{ADOPT_T}::test_a_busy_table_is_reported_as_busy_not_as_a_connection_problem",),
    ),
    # -- the search deadline and the query lane (ai/runtime.py, ai/providers/batching.py)
    Mutation(
        "search_without_deadline",
        "SPEC §13 PINLOG_SEARCH_TIMEOUT: the search deadline alone bounds the answer (503)",
        AI_RUNTIME,
        "                                                 keyword_floor=calibration.candidate_floor),\n"
        "                                          deadline)",
        "                                                 keyword_floor=calibration.candidate_floor),\n"
        "                                          None)",
        (f"{PRIORITY_T}::test_search_past_its_deadline_is_503_with_retry_after",),
    ),
    Mutation(
        "query_lane_shares_the_passage_slot",
        "issue 16 #4: a query has its own provider slot, never behind the background backlog",
        BATCHING,
        "        self._slots = {\"passage\": asyncio.Semaphore(self.max_concurrent),\n"
        "                       \"query\": asyncio.Semaphore(1)}",
        "        self._slots = dict.fromkeys((\"passage\", \"query\"),\n"
        "                                    asyncio.Semaphore(self.max_concurrent))",
        (f"{PRIORITY_T}::test_search_answers_while_the_background_backlog_is_held",),
    ),
    # -- the keyword category rule (ai/judges/similarity.py, SPEC §8)
    Mutation(
        "score_pick_beside_a_cue_pick_of_its_category",
        "SPEC §8 similarity judge: no score-only pick in a category that has a cue-confirmed pick",
        SIMILARITY,
        "            if not cues[i] and c.preset.category in cue_categories:",
        "            if False:",
        (f"{CUE_T}::test_a_strong_score_alone_picks_but_not_next_to_a_cue_pick_of_its_category",),
    ),
    # -- the 503 middleware and /metrics (app.py, SPEC §6/§12)
    Mutation(
        "database_unavailable_answered_500",
        "SPEC §6: an unavailable database is a JSON 503 with Retry-After, never a 500",
        APP,
        "                if is_database_unavailable(exc):\n                    status, body = 503",
        "                if False:\n                    status, body = 503",
        (f"{UNAVAILABLE_T}::test_database_gone_under_a_running_app_is_json_503_and_metrics_say_so",),
    ),
    Mutation(
        "database_unavailable_without_retry_after",
        "SPEC §6: the 503 tells the client when to retry (Retry-After)",
        APP,
        "                **({\"Retry-After\": str(RETRY_AFTER_SECONDS)} if status == 503 else {})})",
        "                **({})})",
        (f"{UNAVAILABLE_T}::test_database_gone_under_a_running_app_is_json_503_and_metrics_say_so",),
    ),
    Mutation(
        "metrics_db_up_kept_when_the_read_fails",
        "SPEC §12: /metrics says the database is down (pinlog_db_up 0) when its read fails",
        APP,
        "            m.DB_UP.set(0)\n",
        "",
        (f"{UNAVAILABLE_T}::test_database_gone_under_a_running_app_is_json_503_and_metrics_say_so",),
    ),
    Mutation(
        "metrics_fails_when_the_database_is_down",
        "SPEC §12: /metrics always answers (monitoring never goes blind)",
        APP,
        "        except Exception as exc:  # noqa: BLE001 - monitoring must not go blind",
        "        except ZeroDivisionError as exc:  # noqa: BLE001 - monitoring must not go blind",
        (f"{UNAVAILABLE_T}::test_database_gone_under_a_running_app_is_json_503_and_metrics_say_so",),
    ),
    # -- process settings (db/process_settings.py, issue 16 #7)
    Mutation(
        "core_process_records_no_processing_expiry",
        "issue 16 #7: a core-only process (its rescan) and an ai-only process that disagree on "
        "PINLOG_PROCESSING_EXPIRY are reported",
        COMPOSITION_PY,
        "        rules = replace(rules, pending_expiry=rescan.pending_expiry.total_seconds(),\n"
        "                        processing_expiry=rescan.processing_expiry.total_seconds(),\n",
        "        rules = replace(rules, pending_expiry=rescan.pending_expiry.total_seconds(),\n",
        (f"{PROCESS_SETTINGS_T}::"
         "test_a_core_only_rescan_process_and_an_ai_only_process_disagreeing_on_the_expiry",),
    ),
    Mutation(
        "process_settings_compare_dead_processes",
        "issue 16 #7: only live processes (recent heartbeat) are compared",
        "src/pinlog/db/process_settings.sql",
        " WHERE seen_at > now() - make_interval(secs => :live_seconds)\n",
        "",
        (f"{PROCESS_SETTINGS_T}::test_a_process_whose_heartbeat_stopped_is_not_compared",),
    ),
    # -- dead ends and busy pacing (core/rescan.sql, core/rescan.py, SPEC §7.2)
    Mutation(
        "dead_end_not_finalized",
        "SPEC §7.2 dead end: a keyword PENDING behind a FAILED embedding ends FAILED every round",
        RESCAN_SQL,
        "    SET keyword_status = 'FAILED', updated_at = now()\n    FROM picked AS p",
        "    SET updated_at = now()\n    FROM picked AS p",
        (f"{ROUND}::test_dead_end_keyword_stage_is_failed_every_round_without_spending_retries",),
    ),
    Mutation(
        "dead_end_fails_a_keyword_stage_that_can_still_start",
        "SPEC §7.2 dead end: only behind a FAILED embedding (a PENDING/PROCESSING/COMPLETED "
        "embedding's keyword stage can still run)",
        RESCAN_SQL,
        "    WHERE {unfinished} AND keyword_status = 'PENDING' AND embedding_status = 'FAILED'\n"
        "    ORDER BY {age}\n    LIMIT :batch_size\n    FOR UPDATE SKIP LOCKED\n), failed AS (\n"
        "    UPDATE ai.context_ai_state AS s\n    SET keyword_status = 'FAILED', updated_at = now()\n"
        "    FROM picked AS p\n    WHERE s.context_id = p.context_id\n"
        "      AND s.keyword_status = 'PENDING' AND s.embedding_status = 'FAILED'\n",
        "    WHERE {unfinished} AND keyword_status = 'PENDING'\n"
        "    ORDER BY {age}\n    LIMIT :batch_size\n    FOR UPDATE SKIP LOCKED\n), failed AS (\n"
        "    UPDATE ai.context_ai_state AS s\n    SET keyword_status = 'FAILED', updated_at = now()\n"
        "    FROM picked AS p\n    WHERE s.context_id = p.context_id\n"
        "      AND s.keyword_status = 'PENDING'\n",
        (f"{ROUND}::test_completed_embedding_with_a_stale_keyword_stage_is_a_candidate",),
    ),
    Mutation(
        "busy_resend_given_up_at_once",
        "SPEC §7.2 recovery speed: a busy 503 is re-sent within the round (paced), never dropped",
        RESCAN_PY,
        "                while status == 503 and time.monotonic() + pause < deadline:",
        "                while False:",
        (f"{SPEED_T}::test_a_busy_ai_side_paces_the_round_instead_of_losing_the_resend",),
    ),
    # ---- the preset file (ai/presets.py, SPEC §8) ---------------------------------------------
    Mutation(
        "preset_file_unknown_keys_ignored",
        "SPEC §8 preset file: an unknown key (a typo) is refused, never silently ignored",
        PRESETS_PY,
        'model_config = ConfigDict(strict=True, extra="forbid", frozen=True)',
        'model_config = ConfigDict(strict=True, extra="ignore", frozen=True)',
        (f"{PRESET_FILE_T}::test_invalid_entries_are_refused_with_the_entry_id[unknown-field]",),
        occurrences=2,
    ),
    Mutation(
        "preset_file_types_coerced",
        "SPEC §8 preset file: values are never coerced (a tuple is not a list of examples; "
        "ids and versions are StrictInt on their own)",
        PRESETS_PY,
        'model_config = ConfigDict(strict=True, extra="forbid", frozen=True)',
        'model_config = ConfigDict(strict=False, extra="forbid", frozen=True)',
        (f"{PRESET_FILE_T}::test_invalid_entries_are_refused_with_the_entry_id[tuple-examples]",),
        occurrences=2,
    ),
    Mutation(
        "preset_file_example_count_unbounded_below",
        "SPEC §8 preset file: 2–5 examples per preset",
        PRESETS_PY,
        "Field(min_length=MIN_EXAMPLES, max_length=MAX_EXAMPLES)",
        "Field(max_length=MAX_EXAMPLES)",
        (f"{PRESET_FILE_T}::test_invalid_entries_are_refused_with_the_entry_id[one-example]",),
    ),
    Mutation(
        "preset_file_duplicate_code_accepted",
        "SPEC §8 preset file: a code appears once (it names one concept)",
        PRESETS_PY,
        "        if entry.code in codes:\n",
        "        if False:\n",
        (f"{PRESET_FILE_T}::test_duplicate_ids_and_codes_are_refused",),
    ),
    Mutation(
        "preset_file_invisible_cue_kept",
        "SPEC §8 cues: a cue with nothing visible once normalised is refused (it would be an "
        "empty cue)",
        PRESETS_PY,
        "    return _collapsed(normalize(value))",
        '    return " ".join(normalize(value).split())',
        (f"{PRESET_FILE_T}::test_invalid_entries_are_refused_with_the_entry_id[invisible-cue]",),
    ),
    # ---- migrations (pinlog.db.migrate, docs/ARCHITECTURE.md "Migrations") -------------------
    Mutation(
        "stored_revision_id_renamed",
        "docs/ARCHITECTURE.md Migrations: the revision ids deployed databases store never "
        "change (the chain stays intact, so only the id check can tell)",
        HEAD_MIGRATION,
        'revision = "0005_preset_categories"',
        'revision = "0006_any_preset_category"',
        (f"{MIGRATION_FILES_T}::"
         "test_the_stored_revision_ids_are_still_the_chain_and_new_ones_are_the_file_stem",),
    ),
    # ---- the logging context (pinlog.logs, set once per edge; SPEC §12, §6) -------------------
    Mutation(
        "log_context_accepts_any_field",
        "SPEC §12/§6: only ALLOWED_FIELDS enter the logging context (note text never can)",
        LOGS_PY,
        "    if unknown:\n        raise ValueError(",
        "    if False:\n        raise ValueError(",
        (f"{LOGS_T}::test_only_allowed_fields_can_enter_the_logging_context",),
    ),
    Mutation(
        "log_line_emits_any_context_field",
        "SPEC §12/§6: only ALLOWED_FIELDS reach a line from the logging context",
        LOGS_PY,
        "    fields: dict[str, object] = {}\n",
        "    fields: dict[str, object] = dict(context)\n",
        (f"{LOGS_T}::test_a_field_outside_the_allowed_list_never_reaches_a_line_from_the_context",),
    ),
    Mutation(
        "log_context_ignored_by_records",
        "SPEC §12: every record carries the logging context it was made in",
        LOGS_PY,
        "        elif key in context:\n",
        "        elif False:\n",
        (f"{LOGS_T}::test_records_carry_the_context_and_their_own_extra_wins",
         f"{LOG_CONTEXT_T}::test_a_job_sent_over_the_http_route_logs_the_request_id_it_was_sent_with"),
    ),
    Mutation(
        "http_request_sets_no_request_id",
        "SPEC §12: a request's lines (and the jobs it submits) carry its X-Request-Id",
        APP,
        "        with log_context(request_id=request_id):",
        "        with log_context():",
        (f"{LOG_CONTEXT_T}::test_a_job_sent_over_the_http_route_logs_the_request_id_it_was_sent_with",
         "tests/acceptance/test_db_outage.py::"
         "test_an_unexpected_error_is_json_500_logged_with_traceback"),
    ),
    Mutation(
        "job_runs_without_its_offer_context",
        "SPEC §12: a job's lines carry the request id it was accepted with",
        WORKER_PY,
        "            self._queue.put_nowait(Job(request, current_log_context()))",
        "            self._queue.put_nowait(Job(request, {}))",
        (f"{WORKER_T}::test_concurrent_jobs_log_their_own_ids_never_another_jobs_nor_the_workers",
         f"{LOG_CONTEXT_T}::test_a_job_submitted_in_process_logs_the_callers_request_id"),
    ),
    Mutation(
        "job_inherits_the_worker_context",
        "SPEC §12: a job's lines carry its own ids, never the worker task's context",
        WORKER_PY,
        "            with log_context(job.log_context, context_id=",
        "            with log_context(None, **job.log_context, context_id=",
        (f"{WORKER_T}::test_concurrent_jobs_log_their_own_ids_never_another_jobs_nor_the_workers",),
    ),
    Mutation(
        "job_lines_without_context_id",
        "SPEC §12: a job's lines carry its context id and record id",
        WORKER_PY,
        "            with log_context(job.log_context, context_id=job.request.context_id,\n"
        "                             record_id=job.request.record_id):",
        "            with log_context(job.log_context):",
        (f"{WORKER_T}::test_concurrent_jobs_log_their_own_ids_never_another_jobs_nor_the_workers",
         f"{LOG_CONTEXT_T}::test_a_job_submitted_in_process_logs_the_callers_request_id"),
    ),
    Mutation(
        "dispatch_sent_in_the_worker_context",
        "SPEC §4/§12: a dispatched request is sent with the request id it was enqueued with",
        DISPATCH_PY,
        "            with log_context(ids):\n",
        "            with log_context():\n",
        (f"{DISPATCHER_T}::"
         "test_a_request_is_sent_with_the_request_id_of_the_context_it_was_enqueued_in",),
    ),
    Mutation(
        "process_client_header_not_from_the_context",
        "SPEC §4: the process client sends X-Request-Id, the logging context's request id",
        DISPATCH_PY,
        '            return await self._post(request, str(ids["request_id"]))',
        '            return await self._post(request, "0" * 32)',
        (f"{DISPATCH_HTTP_T}::test_accepted_is_counted",
         f"{LOG_CONTEXT_T}::test_a_job_sent_over_the_http_route_logs_the_request_id_it_was_sent_with"),
    ),
    Mutation(
        "batcher_runs_in_the_first_jobs_context",
        "SPEC §12: a shared micro-batch never carries the ids of the job that started the batcher",
        BATCHING,
        "                                context=neutral_context()),",
        "                                context=None),",
        (f"{BATCHING_T}::"
         "test_a_batch_never_runs_in_the_logging_context_of_the_job_that_started_the_batcher",),
        occurrences=2,
    ),
    Mutation(
        "rescan_round_without_round_id",
        "SPEC §12: every line of a rescan round carries its round id",
        RESCAN_PY,
        "        with log_context(round_id=uuid.uuid4().hex[:16]):",
        "        with log_context():",
        (f"{ROUND}::test_every_line_of_a_rescan_round_carries_its_round_id",),
    ),
    Mutation(
        "cli_command_not_in_the_logging_context",
        "SPEC §12: a CLI command's lines carry the command",
        CLI_APP_PY,
        "    command_log_context(ctx)\n",
        "",
        (f"{OPS_CLI_T}::"
         "test_a_commands_lines_carry_the_command_the_round_and_the_request_id_it_sent",),
    ),
    # ---- the suite itself (tests/conftest.py, docs/ARCHITECTURE.md §7) -----------------------
    Mutation(
        "unit_test_may_start_the_database",
        "tests/unit runs without a database: a unit test requesting it fails before it starts",
        "tests/conftest.py",
        "    return path.is_relative_to(UNIT_TESTS) and DATABASE_FIXTURE in fixturenames",
        "    return False",
        (f"{NO_DATABASE_T}::test_a_unit_test_that_requests_the_database_is_caught",),
    ),
)
