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
LEXICAL = "src/pinlog/channels/lexical.py"
VECTOR = "src/pinlog/channels/vector.py"
FLOW = "src/pinlog/channels/flow.py"
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
PROFILES_SQL = "src/pinlog/ai/profiles.sql"
PROFILES_PY = "src/pinlog/ai/profiles.py"
ROUTING_PY = "src/pinlog/ai/routing.py"
STATE_PY = "src/pinlog/ai/state.py"
PROCESS_SETTINGS_SQL = "src/pinlog/db/process_settings.sql"
ENGINE_PY = "src/pinlog/db/engine.py"
BATCH_PY = "src/pinlog/ai/batch.py"
AI_RETENTION_SQL = "src/pinlog/ai/retention.sql"
AI_RETENTION_PY = "src/pinlog/ai/retention.py"
CORE_RETENTION_SQL = "src/pinlog/core/retention.sql"
CORE_RETENTION_PY = "src/pinlog/core/retention.py"
DB_RETENTION_PY = "src/pinlog/db/retention.py"
STATUS_SQL = "src/pinlog/core/status.sql"
HTTP_PY = "src/pinlog/http.py"
PUBLIC_IDS = "src/pinlog/core/public_ids.py"
IMPORTER_PY = "src/pinlog/core/importer.py"
CLI_DB_PY = "src/pinlog/cli/db.py"
AI_ERRORS = "src/pinlog/ai/errors.py"
LIMITS_PY = "src/pinlog/ai/limits.py"
LLM_PY = "src/pinlog/ai/judges/llm.py"
REWRITE_PY = "src/pinlog/ai/rewrite.py"
OPENAI_PY = "src/pinlog/ai/providers/openai.py"
AZURE_PY = "src/pinlog/ai/providers/azure_openai.py"
CALIBRATION_PY = "src/pinlog/ai/calibration.py"
CONSOLE_MIGRATION = "src/pinlog/db/migrations/versions/0008_operator_console.py"
CONSOLE_ACCESS = "src/pinlog/console/access.py"
CONSOLE_ROUTES = "src/pinlog/console/routes.py"
STATUS_SQL = "src/pinlog/core/status.sql"
REMOTE_PY = "src/pinlog/cli/remote.py"
CLI_INIT = "src/pinlog/cli/__init__.py"

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
LIVENESS_T = "tests/integration/test_engine_liveness.py"
SPEED_T = "tests/integration/core/rescan/test_recovery_speed.py"
MIGRATION_FILES_T = "tests/unit/test_migration_files.py"
PRESET_FILE_T = "tests/unit/ai/judges/test_preset_file.py"
NO_DATABASE_T = "tests/unit/test_no_database.py"
# issue 28: search beyond the tuned set, the same decision for adopters
VARIANTS = "src/pinlog/channels/variants.py"
AI_CHANNELS = "src/pinlog/ai/channels.py"
RESCAN_SQL_PY = "src/pinlog/core/rescan.py"
CHANNEL_RULES_T = "tests/unit/test_channels_lexical.py"
AI_LEXICAL_T = "tests/integration/search/test_ai_lexical.py"
CALIBRATED_T = "tests/integration/search/test_calibrated_sql.py"
CUTS_T = "tests/unit/ai/test_search_cuts.py"
SAVES_T = "tests/integration/ai/test_state_saves.py"
WIRING_T = "tests/unit/test_search_wiring.py"
DISPATCH_HTTP_T = "tests/integration/core/test_dispatch_http.py"
LOGS_T = "tests/unit/test_logs.py"
WORKER_T = "tests/unit/ai/test_worker.py"
DISPATCHER_T = "tests/unit/core/test_dispatcher.py"
BATCHING_T = "tests/unit/ai/test_batching.py"
LOG_CONTEXT_T = "tests/integration/ai/test_log_context.py"
OPS_CLI_T = "tests/acceptance/rescan/test_ops_cli.py"
PROFILES_T = "tests/integration/ai/test_profiles.py"
NEXT_PROFILE_T = "tests/unit/ai/test_next_profile.py"
CLAIM_OWNER_T = "tests/integration/ai/test_claim_owner.py"
OWNERSHIP_T = "tests/integration/ai/test_pipeline_ownership.py"
RELEASED_T = "tests/integration/core/rescan/test_released_rows.py"
MIXED_T = "tests/integration/test_mixed_fleet.py"
NEXT_DELAY_T = "tests/unit/core/rescan/test_next_delay.py"
UNREACHABLE_T = "tests/unit/test_database_unreachable.py"
PURGE_T = "tests/integration/retention/test_purge.py"
LATE_T = "tests/integration/retention/test_late_results.py"
PURGE_REPLICAS_T = "tests/integration/retention/test_replicas.py"
ERASURE_T = "tests/integration/retention/test_erasure.py"
ADOPTED_PURGE_T = "tests/integration/adoption/test_adopted_retention.py"
RETENTION_UNIT_T = "tests/unit/test_retention.py"
HTTP_EDGE_T = "tests/acceptance/adversarial/test_http_edge.py"
MIGRATE_LOCK_T = "tests/integration/test_migrate_lock_timeout.py"
PUBLIC_PAGING_T = "tests/acceptance/core/test_public_view_paging_edit.py"
IMPORT_T = "tests/integration/core/importer/test_import.py"
SERVE_EMBEDDED_T = "tests/acceptance/test_serve_embedded.py"
SETTINGS_LINE_T = "tests/unit/test_settings.py::test_a_setting_that_cannot_work_is_one_clear_line"
REMOTE_LIMITS_T = "tests/unit/ai/test_remote_limits.py"
CAPS_T = "tests/unit/ai/test_input_caps_and_deadlines.py"
LLM_ENDPOINTS_T = "tests/unit/ai/judges/test_llm_endpoints.py"
REMOTE_T = "tests/integration/ai/test_remote_providers.py"
SEARCH_CUTS_T = "tests/unit/ai/test_search_cuts.py"
CONSOLE_T = "tests/integration/console/test_console.py"
CONSOLE_UNIT_T = "tests/unit/console/test_access.py"
OPS_API_T = "tests/integration/console/test_ops_api.py"
COUNTS_T = "tests/integration/core/test_state_counts.py"
CLI_SERVER_T = "tests/acceptance/test_cli_server.py"


#: The guard of ``complete_stage`` (ai/state.sql: one complete statement for both stages, single
#: and batch); each complete mutation weakens it for the stage (``'{label}' = …``) it names.
COMPLETE_GUARD = "      FROM {batch_claims}\n     WHERE s.context_id = c.context_id\n       AND {@savable}\n"


def _complete_also(condition: str) -> str:
    """:data:`COMPLETE_GUARD`, also true where ``condition`` holds (a weakened complete)."""
    return COMPLETE_GUARD.replace("{@savable}", f"({{@savable}} OR {condition})")


#: fail_stage's SET list and the guard fragment that fail_stage and record_error share
#: (``job_owns_stage``: the job's row, its stage PROCESSING, its claim still owned).
FAIL_SET = ("       SET {stage} = 'FAILED',\n           updated_at = now(),\n"
            "           last_error = :error,\n           last_error_at = now()\n")
OWNED_STAGE = "      {job_owns_stage}\n"


def _owned_stage_inline(status: str, *, claim: bool = True) -> str:
    """``job_owns_stage`` written out in place, with the stage's status test ``status`` (e.g.
    ``"= 'PROCESSING'"``) and, unless ``claim`` is False, the claim check: a weakened guard of
    one statement only."""
    return ("      FROM {job_claim}\n     WHERE s.context_id = :context_id\n"
            f"       AND s.{{stage}} {status}\n" + ("       AND {owns_claim}\n" if claim else ""))


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
    # the start predicate is ONE fragment of both stages' starts (state.sql `startable`)
    Mutation(
        "start_reclaims_live_processing",
        "SPEC §3 start (both stages): a PROCESSING stage is re-claimed only after the expiry "
        "(or the retry/owner rules)",
        STATE_SQL,
        " OR (s.{stage} = 'PROCESSING'\n     AND (s.updated_at < now() - :expiry\n",
        " OR (s.{stage} = 'PROCESSING'\n     AND (true\n",
        (f"{GUARDS}::test_embedding_start_only_from_pending",
         f"{GUARDS}::test_processing_younger_than_expiry_is_not_reclaimed",
         f"{GUARDS}::test_keyword_start_needs_pending_and_embedding_completed"),
    ),
    Mutation(
        "start_reclaims_on_any_retry_count",
        "SPEC §7.3 (last paragraph): only a retry_count HIGHER than at the stage's start re-claims",
        STATE_SQL,
        "OR s.retry_count > s.{label}_start_retry",
        "OR s.retry_count >= s.{label}_start_retry",
        (f"{RECLAIM}::test_backend_claim_after_a_crash_lets_the_resend_reclaim",),
    ),
    Mutation(
        "start_from_failed_or_cancelled",
        "SPEC §3 start (both stages): only from PENDING (never FAILED → PROCESSING, never out of "
        "CANCELLED)",
        STATE_SQL,
        "(s.{stage} = 'PENDING'\n OR (s.{stage} = 'PROCESSING'",
        "(s.{stage} IN ('PENDING', 'FAILED', 'CANCELLED')\n OR (s.{stage} = 'PROCESSING'",
        (f"{GUARDS}::test_embedding_start_only_from_pending",),
    ),
    Mutation(
        "startable_from_completed",
        'SPEC §3 start (keyword): requires embedding_status = COMPLETED (keyword_startable, both paths)',
        STATE_SQL,
        "(s.embedding_status = 'COMPLETED' AND {startable})",
        '({startable})',
        (f"{GUARDS}::test_keyword_start_needs_pending_and_embedding_completed",
         f"{GUARDS}::test_keyword_reclaim_also_needs_embedding_completed"),
    ),
    Mutation(
        "start_from_completed",
        "SPEC §3: the ai side never changes a COMPLETED stage (a start only from PENDING)",
        STATE_SQL,
        "(s.{stage} = 'PENDING'\n OR (s.{stage} = 'PROCESSING'",
        "(s.{stage} IN ('PENDING', 'COMPLETED')\n OR (s.{stage} = 'PROCESSING'",
        (f"{GUARDS}::test_keyword_start_needs_pending_and_embedding_completed",
         f"{PIPELINE}::test_a_finished_keyword_stage_is_never_restarted_by_the_job"),
    ),
    Mutation(
        "complete_embedding_not_only_from_processing",
        'SPEC §3 complete (embedding): only from PROCESSING (never revives CANCELLED)',
        STATE_SQL,
        "(s.embedding_status = 'PROCESSING' AND {owns_claim})",
        "(s.embedding_status IN ('PROCESSING', 'CANCELLED', 'FAILED') AND {owns_claim})",
        (f"{GUARDS}::test_complete_embedding_only_from_processing",)
    ),
    Mutation(
        "keyword_savable_not_only_processing",
        'SPEC §3 complete (keyword): only from PROCESSING',
        STATE_SQL,
        "(s.keyword_status = 'PROCESSING' AND s.embedding_status = 'COMPLETED' AND {owns_claim})",
        "(s.keyword_status IN ('PROCESSING', 'CANCELLED', 'FAILED') "
        "AND s.embedding_status = 'COMPLETED' AND {owns_claim})",
        (f"{GUARDS}::test_complete_keyword_only_from_processing_with_embedding_completed",)
    ),
    Mutation(
        "keyword_savable_without_completed_embedding",
        'SPEC §3 complete (keyword): and embedding_status = COMPLETED',
        STATE_SQL,
        "(s.keyword_status = 'PROCESSING' AND s.embedding_status = 'COMPLETED' AND {owns_claim})",
        "(s.keyword_status = 'PROCESSING' AND {owns_claim})",
        (f"{GUARDS}::test_complete_keyword_only_from_processing_with_embedding_completed",)
    ),
    Mutation(
        "fail_overwrites_cancelled",
        'SPEC §3 fail (both stages, one statement): only from PROCESSING — keeps CANCELLED',
        STATE_SQL,
        FAIL_SET + OWNED_STAGE,
        FAIL_SET + _owned_stage_inline("<> 'COMPLETED'"),
        (f"{GUARDS}::test_fail_only_from_processing_never_overwrites_cancelled",)
    ),
    Mutation(
        "embedding_upsert_revives_deleted",
        "SPEC §5.2: the upsert never touches is_deleted (a deleted context's data never returns; "
        "embedding_replaced, the tail of the single and the batch upsert)",
        STATE_SQL,
        "       updated_at = now()\n WHERE NOT ai.context_embedding.is_deleted\n",
        "       updated_at = now(),\n       is_deleted = false\n",
        (f"{GUARDS}::test_embedding_upsert_never_revives_is_deleted",),
    ),
    Mutation(
        "embedding_upsert_without_processing_guard",
        'SPEC §5.2 save: store the vector only while embedding_status = PROCESSING',
        STATE_SQL,
        ' WHERE s.context_id = :context_id\n   AND {embedding_savable}\n   AND {embedding_replaced};',
        ' WHERE s.context_id = :context_id\n   AND {owns_claim}\n   AND {embedding_replaced};',
        (f"{GUARDS}::test_embedding_upsert_only_while_processing",)
    ),
    Mutation(
        "keyword_insert_without_guard",
        'SPEC §5.2 step 3 save: keyword rows only while keyword PROCESSING and embedding COMPLETED',
        STATE_SQL,
        ' WHERE s.context_id = :context_id\n   AND {keyword_savable};',
        ' WHERE s.context_id = :context_id\n   AND {owns_claim};',
        (f"{GUARDS}::test_keyword_writes_are_guarded",)
    ),
    # ---- re-claim by owner (SPEC §7.3.1): ai/state.sql, core/rescan.sql, the kernel's lease ------
    Mutation(
        "start_ignores_a_gone_owner",
        "SPEC §7.3.1: a PROCESSING stage whose owner is gone is re-claimed at once",
        STATE_SQL,
        "          OR s.retry_count > s.{label}_start_retry\n          OR {owner_gone})))",
        "          OR s.retry_count > s.{label}_start_retry)))",
        (f"{CLAIM_OWNER_T}::test_a_stage_whose_owner_is_gone_is_reclaimed_at_once",
         f"{OWNERSHIP_T}::test_a_job_whose_claim_was_taken_over_discards_its_late_result"),
    ),
    Mutation(
        "every_owner_counts_as_gone",
        "SPEC §7.3.1: only an owner whose heartbeat lease ended is gone (a live owner, however "
        "slow, keeps its work)",
        PROCESS_SETTINGS_SQL,
        "(SELECT ps.process_id FROM ai.process_settings ps WHERE ps.alive_until <= now())",
        "(SELECT ps.process_id FROM ai.process_settings ps WHERE true)",
        (f"{CLAIM_OWNER_T}::test_a_live_but_slow_owner_keeps_its_stage_until_the_expiry",
         f"{RELEASED_T}::test_a_live_owners_rows_wait_for_the_expiry"),
    ),
    Mutation(
        "start_trusts_a_stale_owner_record",
        "SPEC §7.3.1: an owner record counts only while owned_at >= the row's age (else unknown)",
        STATE_SQL,
        "(s.owner IN {gone_owners}\n"
        " AND s.owned_at >= greatest(s.updated_at, coalesce(s.rescanned_at, s.updated_at)))",
        "(s.owner IN {gone_owners})",
        (f"{CLAIM_OWNER_T}::test_an_unknown_owner_is_left_to_the_expiry",
         f"{MIXED_T}::test_a_stage_an_old_replica_reclaimed_is_never_taken_over_and_no_late_save_lands"),
    ),
    Mutation(
        "start_records_no_owner",
        'SPEC §7.3.1: the guarded start records the live process that claims the stage '
        '(stage_started: the one claim of every start, single and batch, both stages)',
        STATE_SQL,
        '           owner = {live_owner},\n           owned_at = now()\n      FROM picked p',
        '           owner = NULL,\n           owned_at = now()\n      FROM picked p',
        (f"{CLAIM_OWNER_T}::test_the_start_records_the_live_process_as_owner_and_returns_the_claim",
         f"{OWNERSHIP_T}::test_a_job_whose_claim_was_taken_over_discards_its_late_result"),
    ),
    Mutation(
        "batch_start_records_no_owner",
        "SPEC §7.3.1: a batch start records the live claiming process as each row's owner "
        "(the same shared stage_started text as start_records_no_owner, caught by the batch tests)",
        STATE_SQL,
        '           owner = {live_owner},\n           owned_at = now()\n      FROM picked p',
        '           owner = NULL,\n           owned_at = now()\n      FROM picked p',
        (f"{STATE_BATCH}::test_a_batch_start_records_the_owner_and_returns_each_rows_claim",
         f"{STATE_BATCH}::test_batch_start_gives_every_row_what_the_single_start_gives_it"),
    ),
    Mutation(
        "a_process_that_is_not_live_is_recorded",
        "SPEC §7.3.1: only a live process is recorded as owner (else unknown: the expiry decides)",
        PROCESS_SETTINGS_SQL,
        "  WHERE ps.process_id = CAST(:owner AS text) AND ps.alive_until > now())",
        "  WHERE ps.process_id = CAST(:owner AS text))",
        (f"{CLAIM_OWNER_T}::test_a_process_that_is_not_live_is_never_recorded",),
    ),
    Mutation(
        "claim_check_ignores_the_owner",
        "SPEC §7.3.1: the job owns its claim only while the row's owner is the one it recorded",
        STATE_SQL,
        '(s.owner IS NOT DISTINCT FROM c.owner\n AND s.owned_at',
        '(true\n AND s.owned_at',
        (f"{CLAIM_OWNER_T}::test_the_claim_is_its_owner_and_its_time_together",)
    ),
    Mutation(
        "claim_check_ignores_a_rescan_claim",
        "SPEC §7.3.1: a rescan claim (owned_at moved) ends the job's claim, owners unknown or not",
        STATE_SQL,
        ' AND s.owned_at = c.claimed_at\n',
        '',
        (f"{CLAIM_OWNER_T}::test_a_claim_by_an_unregistered_rescan_still_ends_an_unregistered_jobs_claim",)
    ),
    Mutation(
        "claim_check_ignores_a_reclaim_without_owner",
        "SPEC §7.3.1: any later start (updated_at moved; an older version records no owner) ends the job's claim",
        STATE_SQL,
        '\n AND s.updated_at = c.claimed_at)',
        ')',
        (f"{CLAIM_OWNER_T}::test_a_claim_taken_by_a_start_that_records_no_owner_is_no_longer_the_jobs",
         f"{MIXED_T}::test_a_stage_an_old_replica_reclaimed_is_never_taken_over_and_no_late_save_lands"),
    ),
    Mutation(
        "upsert_embedding_ignores_the_claim",
        'SPEC §7.3.1: upsert_embedding writes only while the job still owns its claim',
        STATE_SQL,
        ' WHERE s.context_id = :context_id\n   AND {embedding_savable}\n   AND {embedding_replaced};',
        " WHERE s.context_id = :context_id\n   AND s.embedding_status = 'PROCESSING'\n"
        '   AND {embedding_replaced};',
        (f"{CLAIM_OWNER_T}::test_every_single_write_of_a_taken_over_job_affects_no_row",)
    ),
    Mutation(
        "complete_embedding_ignores_the_claim",
        'SPEC §7.3.1: the embedding complete (complete_stage, embedding) writes only while the job '
        'still owns its claim',
        STATE_SQL,
        COMPLETE_GUARD,
        _complete_also("'{label}' = 'embedding' AND s.embedding_status = 'PROCESSING'"),
        (f"{CLAIM_OWNER_T}::test_every_single_write_of_a_taken_over_job_affects_no_row",)
    ),
    Mutation(
        "delete_keywords_ignores_the_claim",
        'SPEC §7.3.1: delete_keywords writes only while the job still owns its claim',
        STATE_SQL,
        '   AND s.context_id = k.context_id\n   AND {keyword_savable};',
        '   AND s.context_id = k.context_id\n'
        "   AND s.keyword_status = 'PROCESSING' AND s.embedding_status = 'COMPLETED';",
        (f"{CLAIM_OWNER_T}::test_every_single_write_of_a_taken_over_job_affects_no_row",)
    ),
    Mutation(
        "insert_keywords_ignores_the_claim",
        'SPEC §7.3.1: insert_keywords writes only while the job still owns its claim',
        STATE_SQL,
        '           AS pick(keyword_id, confidence)\n WHERE s.context_id = :context_id\n'
        '   AND {keyword_savable};',
        '           AS pick(keyword_id, confidence)\n WHERE s.context_id = :context_id\n'
        "   AND s.keyword_status = 'PROCESSING' AND s.embedding_status = 'COMPLETED';",
        (f"{CLAIM_OWNER_T}::test_every_single_write_of_a_taken_over_job_affects_no_row",)
    ),
    Mutation(
        "upsert_keyword_analysis_ignores_the_claim",
        'SPEC §7.3.1: upsert_keyword_analysis writes only while the job still owns its claim',
        STATE_SQL,
        ' WHERE s.context_id = :context_id\n   AND {keyword_savable}\n{analysis_replaced}',
        ' WHERE s.context_id = :context_id\n'
        "   AND s.keyword_status = 'PROCESSING' AND s.embedding_status = 'COMPLETED'\n"
        '{analysis_replaced}',
        (f"{CLAIM_OWNER_T}::test_every_single_write_of_a_taken_over_job_affects_no_row",)
    ),
    Mutation(
        "complete_keyword_ignores_the_claim",
        'SPEC §7.3.1: the keyword complete (complete_stage, keyword: single and batch) writes only '
        'while the job still owns its claim',
        STATE_SQL,
        COMPLETE_GUARD,
        _complete_also("'{label}' = 'keyword'\n"
                       "            AND s.keyword_status = 'PROCESSING' AND s.embedding_status = 'COMPLETED'"),
        (f"{CLAIM_OWNER_T}::test_every_single_write_of_a_taken_over_job_affects_no_row",)
    ),
    Mutation(
        "fail_stage_ignores_the_claim",
        "SPEC §7.3.1: a taken-over job never fails the new owner's stage",
        STATE_SQL,
        FAIL_SET + OWNED_STAGE,
        FAIL_SET + _owned_stage_inline("= 'PROCESSING'", claim=False),
        (f"{CLAIM_OWNER_T}::test_a_taken_over_job_can_neither_fail_the_stage_nor_record_its_error",)
    ),
    Mutation(
        "record_error_ignores_the_claim",
        "SPEC §7.3.1: a taken-over job never writes last_error onto the new owner's stage",
        STATE_SQL,
        "       SET last_error = :error,\n           last_error_at = now()\n" + OWNED_STAGE,
        "       SET last_error = :error,\n           last_error_at = now()\n"
        + _owned_stage_inline("= 'PROCESSING'", claim=False),
        (f"{CLAIM_OWNER_T}::test_a_taken_over_job_can_neither_fail_the_stage_nor_record_its_error",)
    ),
    Mutation(
        "take_over_not_recorded",
        "SPEC §7.3.1: an ai process takes over sending what it accepted over HTTP",
        AI_API,
        "    status = await runtime.submit(body, take_over=True)",
        "    status = await runtime.submit(body)",
        (f"{CLAIM_OWNER_T}::test_what_an_ai_process_accepted_over_http_is_released_when_it_stops",),
    ),
    Mutation(
        "take_over_steals_started_work",
        "SPEC §7.3.1: the take-over changes only PENDING work (never another's live claim)",
        STATE_SQL,
        "   AND (s.embedding_status = 'PENDING'\n"
        "        OR (s.embedding_status = 'COMPLETED' AND s.keyword_status = 'PENDING'))\n",
        "",
        (f"{CLAIM_OWNER_T}::test_taking_over_sending_touches_only_pending_work_of_a_live_process",),
    ),
    Mutation(
        "job_step_not_run_again_when_the_database_is_back",
        "SPEC §7.3.1: work that failed only because the database was unreachable is retried",
        PIPELINE_PY,
        "                if not is_database_unreachable(exc) or loop.time() + pause > deadline:",
        "                if True:",
        (f"{OWNERSHIP_T}::test_a_save_that_lost_its_database_connection_runs_again_when_it_answers",),
    ),
    Mutation(
        "an_answering_database_counts_as_unreachable",
        "SPEC §7.3.1: only refused or lost connections are retried (a lock timeout is an answer)",
        ENGINE_PY,
        "            return sqlstate[:2] == \"08\" or sqlstate in UNREACHABLE_SQLSTATES",
        "            return True",
        (f"{UNREACHABLE_T}::test_an_answering_database_is_not_unreachable",),
    ),
    Mutation(
        "claim_skips_released_rows",
        "SPEC §7.3.1: the rescan claims a gone owner's rows at once, before their expiry",
        RESCAN_SQL,
        "    WHERE retry_count < :max_retries AND {released}\n",
        "    WHERE false\n",
        (f"{RELEASED_T}::test_the_rows_of_a_gone_owner_are_claimed_before_their_expiry",),
    ),
    Mutation(
        "released_trusts_a_stale_owner_record",
        "SPEC §7.3.1: an owner record counts only while owned_at >= the row's age",
        RESCAN_SQL,
        "    AND owner IN {gone_owners}\n    AND owned_at >= {age}\n",
        "    AND owner IN {gone_owners}\n",
        (f"{RELEASED_T}::test_an_unknown_owner_leaves_the_row_to_the_expiry",
         f"{MIXED_T}::test_an_old_rescan_claim_makes_the_sender_record_unknown"),
    ),
    Mutation(
        "released_rows_need_not_be_sendable",
        "SPEC §7.2/§7.3.1: a gone owner never releases a cancelled or dead-end row",
        RESCAN_SQL,
        "    AND owned_at >= {age}\n    AND {sendable}\n)",
        "    AND owned_at >= {age}\n)",
        (f"{RELEASED_T}::test_a_gone_owner_never_releases_finished_cancelled_or_dead_end_rows",),
    ),
    Mutation(
        "claim_keeps_the_gone_owner",
        "SPEC §7.3.1: the claimer records itself as the owner of the re-send",
        RESCAN_SQL,
        "        owner = {live_owner}, owned_at = now()",
        "        owner = owner, owned_at = now()",
        (f"{RELEASED_T}::test_the_rows_of_a_gone_owner_are_claimed_before_their_expiry",),
    ),
    Mutation(
        "core_records_no_sender",
        "SPEC §7.3.1: the process that creates a row owns its PENDING work",
        CORE_SQL,
        "now(), {live_owner}, now())",
        "now(), NULL, now())",
        (f"{RELEASED_T}::test_the_process_that_creates_a_row_owns_its_pending_work",),
    ),
    Mutation(
        "outlook_ignores_leases",
        "SPEC §7.3.1: a loop wakes when a live owner's lease would run out",
        RESCAN_SQL,
        "                    THEN (SELECT ps.alive_until FROM ai.process_settings ps\n"
        "                           WHERE ps.process_id = owner) END) AS expires_at",
        "                    THEN CAST(NULL AS timestamptz) END) AS expires_at",
        (f"{RELEASED_T}::test_the_outlook_wakes_the_loop_when_a_live_owners_lease_would_end",),
    ),
    Mutation(
        "outlook_counts_exhausted_releases",
        "SPEC §7.3.1 + §7.2: the outlook counts what the round takes (no retries left → not due)",
        RESCAN_SQL,
        "               CASE WHEN retry_count < :max_retries AND owned_at >= {age} AND {sendable}",
        "               CASE WHEN owned_at >= {age} AND {sendable}",
        (f"{RELEASED_T}::test_the_outlook_agrees_with_the_round_for_every_status_pair_and_owner",),
    ),
    Mutation(
        "loop_sleeps_the_whole_interval",
        "SPEC §7.3.1: a loop looks at least once per heartbeat timeout",
        RESCAN_PY,
        "    longest = min(interval, config.heartbeat_timeout)",
        "    longest = interval",
        (f"{NEXT_DELAY_T}::test_the_loop_looks_at_least_once_per_heartbeat_timeout",),
    ),
    Mutation(
        "stop_keeps_the_lease",
        "SPEC §7.3.1: a clean stop ends the lease at once (its work is handed back)",
        PROCESS_SETTINGS_SQL,
        "    UPDATE ai.process_settings SET alive_until = now() WHERE process_id = :process_id",
        "    UPDATE ai.process_settings SET alive_until = alive_until WHERE process_id = :process_id",
        (f"{PROCESS_SETTINGS_T}::"
         "test_the_registry_keeps_a_lease_of_its_own_timeout_and_ends_it_when_it_stops",),
    ),
    Mutation(
        "heartbeat_keeps_the_old_lease",
        "SPEC §7.3.1: each heartbeat extends the lease by the process's own timeout",
        PROCESS_SETTINGS_SQL,
        "   SET seen_at = now(), alive_until = now() + make_interval(secs => :lease_seconds)",
        "   SET seen_at = now()",
        (f"{PROCESS_SETTINGS_T}::"
         "test_the_registry_keeps_a_lease_of_its_own_timeout_and_ends_it_when_it_stops",),
    ),
    # ---- the batch path (ai/state.sql batch statements, ai/batch.py, SPEC §5.4) -----------------
    Mutation(
        "batch_start_waits_on_locked_rows",
        "SPEC §7.4: a batch claim is FOR UPDATE SKIP LOCKED (two batches never wait or share)",
        STATE_SQL,
        "       FOR UPDATE SKIP LOCKED\n), {stage_started}",
        "       FOR UPDATE\n), {stage_started}",
        (f"{STATE_BATCH}::test_two_batch_claims_at_once_share_no_row_and_never_wait",),
    ),
    Mutation(
        "batch_start_without_row_lock",
        "SPEC §7.4: a batch claim locks what it picks (FOR UPDATE SKIP LOCKED)",
        STATE_SQL,
        "     ORDER BY s.context_id\n       FOR UPDATE SKIP LOCKED\n), {stage_started}",
        "     ORDER BY s.context_id\n), {stage_started}",
        (f"{STATE_BATCH}::test_two_batch_claims_at_once_share_no_row_and_never_wait",),
    ),
    Mutation(
        "batch_completes_rows_whose_vector_was_not_stored",
        'SPEC §5.2: a batch completes exactly the rows whose vector it stored',
        STATE_SQL,
        '      FROM upserted u\n      JOIN c ON c.context_id = u.context_id\n',
        '      FROM c u\n      JOIN c ON c.context_id = u.context_id\n',
        (f"{STATE_BATCH}::test_batch_embedding_save_gives_every_row_what_the_single_save_gives_it",)
    ),
    Mutation(
        "batch_upsert_revives_deleted",
        "SPEC §5.2: the batch upsert never touches is_deleted (a deleted context's data never returns; "
        "the same embedding_replaced text as embedding_upsert_revives_deleted, caught by the batch test)",
        STATE_SQL,
        "       updated_at = now()\n WHERE NOT ai.context_embedding.is_deleted\n",
        "       updated_at = now(),\n       is_deleted = false\n",
        (f"{STATE_BATCH}::test_batch_embedding_save_gives_every_row_what_the_single_save_gives_it",),
    ),
    Mutation(
        "batch_upsert_without_guard",
        'SPEC §5.2 save: a batch stores a vector only while its embedding stage is PROCESSING',
        STATE_SQL,
        '      JOIN ai.context_ai_state s ON s.context_id = c.context_id\n'
        '     WHERE {embedding_savable}\n       AND {embedding_replaced}\n',
        '      JOIN ai.context_ai_state s ON s.context_id = c.context_id\n'
        '     WHERE {embedding_replaced}\n',
        (f"{STATE_BATCH}::test_batch_embedding_save_gives_every_row_what_the_single_save_gives_it",)
    ),
    Mutation(
        "batch_keyword_delete_without_guard",
        'SPEC §5.2 step 3: a batch replaces keyword rows only while keyword PROCESSING',
        STATE_SQL,
        '  JOIN ai.context_ai_state s ON s.context_id = c.context_id\n'
        ' WHERE k.context_id = c.context_id\n   AND {keyword_savable};',
        '  JOIN ai.context_ai_state s ON s.context_id = c.context_id\n'
        ' WHERE k.context_id = c.context_id;',
        (f"{STATE_BATCH}::test_batch_keyword_save_gives_every_row_what_the_single_save_gives_it",)
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
        'SPEC §3 complete (keyword): a batch completes only keyword stages it may save '
        '(complete_stage, keyword: the single and the batch complete are one statement)',
        STATE_SQL,
        COMPLETE_GUARD,
        _complete_also("'{label}' = 'keyword'"),
        (f"{STATE_BATCH}::test_batch_keyword_save_gives_every_row_what_the_single_save_gives_it",)
    ),
    Mutation(
        "batch_embedding_save_ignores_the_claim",
        "SPEC §7.3.1: a batch stores a row's vector only while the job still owns that row's claim",
        STATE_SQL,
        '      JOIN ai.context_ai_state s ON s.context_id = c.context_id\n'
        '     WHERE {embedding_savable}\n       AND {embedding_replaced}\n',
        '      JOIN ai.context_ai_state s ON s.context_id = c.context_id\n'
        "     WHERE s.embedding_status = 'PROCESSING'\n       AND {embedding_replaced}\n",
        (f"{STATE_BATCH}::test_a_taken_over_rows_batch_embedding_save_writes_nothing",)
    ),
    Mutation(
        "batch_keyword_delete_ignores_the_claim",
        "SPEC §7.3.1: a batch deletes a row's keywords only while the job still owns that row's claim",
        STATE_SQL,
        '  JOIN ai.context_ai_state s ON s.context_id = c.context_id\n'
        ' WHERE k.context_id = c.context_id\n   AND {keyword_savable};',
        '  JOIN ai.context_ai_state s ON s.context_id = c.context_id\n'
        ' WHERE k.context_id = c.context_id\n'
        "   AND s.keyword_status = 'PROCESSING' AND s.embedding_status = 'COMPLETED';",
        (f"{STATE_BATCH}::test_a_taken_over_rows_batch_keyword_save_writes_nothing",)
    ),
    Mutation(
        "batch_keyword_insert_ignores_the_claim",
        "SPEC §7.3.1: a batch inserts a row's keywords only while the job still owns that row's claim",
        STATE_SQL,
        '  JOIN ai.context_ai_state s ON s.context_id = pick.context_id\n'
        ' WHERE {keyword_savable};',
        '  JOIN ai.context_ai_state s ON s.context_id = pick.context_id\n'
        " WHERE s.keyword_status = 'PROCESSING' AND s.embedding_status = 'COMPLETED';",
        (f"{STATE_BATCH}::test_a_taken_over_rows_batch_keyword_save_writes_nothing",)
    ),
    Mutation(
        "batch_analysis_ignores_the_claim",
        "SPEC §7.3.1: a batch writes a row's analysis only while the job still owns that row's claim",
        STATE_SQL,
        '  JOIN ai.context_ai_state s ON s.context_id = a.context_id\n WHERE {keyword_savable}\n',
        '  JOIN ai.context_ai_state s ON s.context_id = a.context_id\n'
        " WHERE s.keyword_status = 'PROCESSING' AND s.embedding_status = 'COMPLETED'\n",
        (f"{STATE_BATCH}::test_a_taken_over_rows_batch_keyword_save_writes_nothing",)
    ),
    Mutation(
        "batch_complete_keyword_ignores_the_claim",
        "SPEC §7.3.1: a batch completes a row's keyword stage only while the job owns that row's claim "
        "(the same complete_stage text as complete_keyword_ignores_the_claim, caught by the batch test)",
        STATE_SQL,
        COMPLETE_GUARD,
        _complete_also("'{label}' = 'keyword'\n"
                       "            AND s.keyword_status = 'PROCESSING' AND s.embedding_status = 'COMPLETED'"),
        (f"{STATE_BATCH}::test_a_taken_over_rows_batch_keyword_save_writes_nothing",)
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
        "SPEC §5.5: failure classification per row — one bad text fails only itself "
        "(BatchRunner._row_failed, both stages' per-row failures)",
        BATCH_PY,
        "        if not isinstance(error, Exception):\n            raise error",
        "        if True:\n            raise error",
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
        "batch_over_the_limit_never_split",
        "ARCHITECTURE Batch path: a batch the ai side answers 413 is sent again in halves",
        DISPATCH_PY,
        "        if all(status == 413 for status in statuses):",
        "        if False:",
        (f"{DISPATCH_BATCH_T}::test_a_batch_over_the_ai_sides_limit_is_sent_again_in_halves",),
    ),
    Mutation(
        "batch_route_gets_one_notes_body_limit",
        "ARCHITECTURE Batch path: process-batch has room for PINLOG_PROCESS_BATCH_SIZE notes",
        APP,
        "(\"POST\", PROCESS_BATCH_PATH): settings.batch_body_limit()",
        "(\"POST\", PROCESS_BATCH_PATH): settings.body_limit()",
        (f"{DISPATCH_BATCH_T}::test_a_batch_of_the_longest_notes_fits_the_batch_routes_limit_in_one_call",),
    ),
    Mutation(
        "busy_batch_items_paced_like_single_resends",
        "issue 25: a batch's busy items are re-sent after pauses of at most 250 ms",
        DISPATCH_PY,
        "    for pause in _pauses(BATCH_BUSY_BACKOFF, busy_wait, clock):",
        "    for pause in _pauses(BUSY_BACKOFF, busy_wait, clock):",
        ("tests/unit/core/test_batch_pacing.py::"
         "test_busy_items_are_re_sent_with_pauses_capped_well_under_a_second",),
    ),
    Mutation(
        "busy_batch_items_given_up_at_once",
        "SPEC §7.2 recovery speed: the busy (503) items of a batch are re-sent, paced",
        DISPATCH_PY,
        "        if not busy:\n",
        "        if True:\n",
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
        "    {oldest_batch}\n), by_owner AS (",
        "    ORDER BY {age}\n    LIMIT :batch_size\n    FOR UPDATE\n), by_owner AS (",
        (f"{ROUND}::test_skip_locked_a_locked_row_is_skipped_not_waited_for",
         f"{STATEMENTS}::test_claim_orders_by_exactly_the_partial_index_expression_and_skips_locked_rows"),
    ),
    Mutation(
        "claim_without_row_lock",
        "SPEC §7.2/§7.4: the claim locks what it picks (FOR UPDATE SKIP LOCKED)",
        RESCAN_SQL,
        "    {oldest_batch}\n), by_owner AS (",
        "    ORDER BY {age}\n    LIMIT :batch_size\n), by_owner AS (",
        (f"{ROUND}::test_skip_locked_a_locked_row_is_skipped_not_waited_for",),
    ),
    Mutation(
        "finalizer_waits_on_locked_rows",
        "SPEC §7.2 step 1: the finalizer is FOR UPDATE SKIP LOCKED",
        RESCAN_SQL,
        "    {oldest_batch}\n), failed AS (\n    UPDATE ai.context_ai_state AS s\n"
        "    SET embedding_status = CASE",
        "    ORDER BY {age}\n    LIMIT :batch_size\n    FOR UPDATE\n), failed AS (\n"
        "    UPDATE ai.context_ai_state AS s\n    SET embedding_status = CASE",
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
        "OR (keyword_status = 'PENDING' AND embedding_status = 'COMPLETED'\n",
        "OR (keyword_status = 'PENDING'\n",
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
        occurrences=3,  # search_member, score_records and the ai side's lexical_matches
    ),
    Mutation(
        "search_without_is_deleted_filter",
        "SPEC §10/§11 #3: is_deleted = false (alone sufficient)",
        SEARCH_SQL,
        "e.is_deleted = false ",
        "(e.is_deleted = false OR true) ",
        (f"{SEARCH}::test_each_invalidation_marker_alone_hides_a_row",
         f"{SEARCH}::test_score_records_applies_each_filter_alone"),
        occurrences=3,  # search_member, score_records and the ai side's lexical_matches
    ),
    Mutation(
        "search_member_without_completed_filter",
        "SPEC §10/§11 #3: embedding_status = COMPLETED (alone sufficient), search_member's probe",
        SEARCH_SQL,
        "WHERE s.context_id = k.context_id) = 'COMPLETED'",
        "WHERE s.context_id = k.context_id) IN ('COMPLETED', 'PENDING', 'PROCESSING', 'FAILED')",
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
        occurrences=3,  # search_member, score_records and the ai side's lexical_matches
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
        "Evidence(cov, cov >= rule.min_coverage, names or (TEXT,), shown,",
        "Evidence(cov, True, names or (TEXT,), shown,",
        (f"{RELEVANCE_T}::test_lexical_evidence_needs_the_coverage_threshold",),
    ),
    Mutation(
        "lexical_counts_words_of_unscored_notes",
        "SPEC §10: a note is searchable once its embedding COMPLETED (its words count only then)",
        LEXICAL,
        "cov = query.coverage(match.terms(scored))",
        "cov = query.coverage(match.terms())",
        (f"{RELEVANCE_T}::test_words_of_a_note_without_an_embedding_do_not_count",),
    ),
    Mutation(
        "lexical_asks_to_score_records_below_the_threshold",
        "SPEC §10: only records that can pass the lexical test are sent to be scored (recordIds)",
        LEXICAL,
        "            if cov > 0 and cov >= self.rule.min_coverage:\n",
        "            if cov > 0:\n",
        (f"{REGISTRY_T}::test_the_lexical_channel_asks_for_the_records_that_can_pass_counting_every_note",),
    ),
    Mutation(
        "vector_channel_vouches_for_every_scored_record",
        "SPEC §10: the vector channel vouches only for the ai side's results (calibrated floors)",
        VECTOR,
        "out[record_id] = Evidence(max(scored.values()) if s is None else s, record_id in vouched,",
        "out[record_id] = Evidence(max(scored.values()) if s is None else s, True,",
        (f"{RELEVANCE_T}::test_no_evidence_means_no_result_even_for_the_best_cosine",),
    ),
    Mutation(
        "records_to_score_from_the_first_channel_only",
        "SPEC §10: the ai side scores the records every channel names",
        FLOW,
        "wanted = dict.fromkeys(r for f in found for r in f.to_score())",
        "wanted = dict.fromkeys(r for f in found[:1] for r in f.to_score())",
        (f"{REGISTRY_T}::test_records_to_score_are_every_channels_requests_in_order_each_once_capped",
         f"{REGISTRY_T}::test_a_new_channel_plugs_in_with_its_names_ranking_and_context",
         f"{LEXICAL_T}::test_lexical_match_on_a_note_word_a_place_name_and_an_english_note"),
    ),
    Mutation(
        "scored_contexts_drop_the_vouched_results",
        "SPEC §10: the records the vector channel vouches for are searchable with their cosine",
        FLOW,
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
        "            meta = await self._place_meta(conn, record_id)",
        '        log.info("record created", extra={"member_id": member_id, "record_id": record_id,\n'
        '                                          "context_id": context_id})',
        "self._dispatch([self._request(context_id, member_id, record_id, text, meta)])"),
    _dispatch_inside(
        "add_context",
        "            meta = await self._place_meta(conn, record_id)",
        '        log.info("context added", extra={"member_id": member_id, "record_id": record_id,\n'
        '                                         "context_id": context_id})',
        "self._dispatch([self._request(context_id, member_id, record_id, text, meta)])"),
    _dispatch_inside(
        "edit_context",
        "            meta = await self._place_meta(conn, record_id)",
        '        log.info("context edited", extra={"member_id": member_id, "record_id": record_id,\n'
        '                                          "context_id": new_id, "reason": f"replaces '
        '{context_id}"})',
        "self._dispatch([self._request(new_id, member_id, record_id, text, meta)])"),
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
    # ---- internal secret (contracts.py: the ai side's internal API, core's operator API; SPEC §5.1)
    Mutation(
        "internal_secret_not_compared",
        "SPEC §5.1: X-Internal-Secret must match a configured secret, else 401",
        CONTRACTS,
        '        match |= hmac.compare_digest(given, secret.encode("utf-8"))',
        "        match = True",
        (f"{AI_API_T}::test_401_missing_or_wrong_secret_changes_nothing",
         f"{OPS_API_T}::test_the_operator_api_needs_the_internal_secret"),
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
        "SPEC §10/§11 #19 lexical channel: another member's notes never match (the member filter "
        "and the terms' member key both lost: each alone keeps other members out)",
        CORE_SEARCH_SQL,
        "WHERE c.member_id = :member_id AND c.deleted_at IS NULL\n"
        "         AND core.member_terms(c.member_id, c.lexemes)",
        "WHERE c.deleted_at IS NULL\n"
        "         AND core.member_terms(:member_id, c.lexemes)",
        (f"{CHANNEL_T}::test_another_members_notes_and_places_never_reach_the_lexical_channel",),
    ),
    Mutation(
        "lexical_places_of_every_member",
        "SPEC §10/§11 #19 lexical channel: another member's saved places never match (the member "
        "filter and the terms' member key both lost)",
        CORE_SEARCH_SQL,
        "WHERE r.member_id = :member_id AND r.deleted_at IS NULL\n"
        "         AND core.member_terms(r.member_id, r.place_lexemes)",
        "WHERE r.deleted_at IS NULL\n"
        "         AND core.member_terms(:member_id, r.place_lexemes)",
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
        "Evidence(cov, cov >= rule.min_coverage, names or (TEXT,), shown,",
        "Evidence(cov, True, names or (TEXT,), shown,",
        (f"{LEXICAL_T}::test_one_query_term_of_five_is_below_the_coverage_threshold",),
    ),
    Mutation(
        "relevance_counts_unscored_notes_words_end_to_end",
        "SPEC §10: words of a note that is not searchable (no embedding scored) give no evidence",
        LEXICAL,
        "cov = query.coverage(match.terms(scored))",
        "cov = query.coverage(match.terms())",
        (f"{LEXICAL_T}::test_a_note_that_is_not_searchable_yet_gives_no_evidence_and_no_result",),
    ),
    # -- the vector channel's short-query floor through search() (ai/search.py, SPEC §10)
    Mutation(
        "search_statement_uses_the_multi_word_floor_for_one_word",
        "SPEC §10 cuts: a one-word query's hits are cut at the short-query floor, also in the "
        "statement's bound (min_similarity)",
        AI_SEARCH,
        "            floor = cuts.short_query_floor if is_short_query(request.query) else cuts.floor\n",
        "            floor = cuts.floor\n",
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
        "    folded = normalize(text).casefold()\n"
        "    return [(m.group(0), m.start(), m.end()) for m in _RUNS.finditer(folded)",
        "    folded = text.casefold()\n"
        "    return [(m.group(0), m.start(), m.end()) for m in _RUNS.finditer(folded)",
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
        "    if normal:\n        value = normalize_line(value)\n",
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
        "            _set_lock_timeout(conn, config)\n"
        "            if inspect_database(conn) == \"foreign\":",
        "        with engine.begin() as conn:\n            _set_lock_timeout(conn, config)\n"
        "            if inspect_database(conn) == \"foreign\":",
        (f"{CONCURRENT_MIGRATE_T}::"
         "test_a_waiting_migrate_holds_no_lock_and_changes_nothing_until_it_has_the_migration_lock",),
    ),
    Mutation(
        "adopt_alters_before_the_migration_lock",
        "SPEC §2.2 adoption: a waiting `migrate --adopt` holds no lock on the backend's ai tables",
        MIGRATE,
        "        _lock(conn)\n        _set_lock_timeout(conn, config)\n        plan = plan_adoption(",
        "        _set_lock_timeout(conn, config)\n        plan = plan_adoption(",
        (f"{ADOPT_T}::test_concurrent_adoptions_wait_for_each_other_and_both_succeed",),
    ),
    Mutation(
        "adopt_waits_without_lock_timeout",
        "SPEC §2.2 adoption: a busy backend table aborts the adoption (lock_timeout), it never "
        "queues the backend's traffic behind it",
        MIGRATE,
        "        _set_lock_timeout(conn, config)\n        plan = plan_adoption(",
        "        plan = plan_adoption(",
        (f"{ADOPT_T}::test_a_busy_table_is_reported_as_busy_not_as_a_connection_problem",),
    ),
    # -- the search deadline and the query lane (ai/runtime.py, ai/providers/batching.py)
    Mutation(
        "search_without_deadline",
        "SPEC §13 PINLOG_SEARCH_TIMEOUT: the search deadline alone bounds the answer (503)",
        AI_RUNTIME,
        "            async with asyncio.timeout(deadline):\n",
        "            async with asyncio.timeout(None):\n",
        (f"{PRIORITY_T}::test_search_past_its_deadline_is_503_with_retry_after",),
    ),
    Mutation(
        "query_lane_shares_the_passage_slot",
        "issue 16 #4: a query has its own provider slot, never behind the background backlog",
        BATCHING,
        "        self._slots = {\"passage\": self.limit,\n"
        "                       \"query\": AdaptiveLimit(1, kind=\"embedding_query\")}",
        "        self._slots = dict.fromkeys((\"passage\", \"query\"), self.limit)",
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
        "    {oldest_batch}\n), failed AS (\n"
        "    UPDATE ai.context_ai_state AS s\n    SET keyword_status = 'FAILED', updated_at = now()\n"
        "    FROM picked AS p\n    WHERE s.context_id = p.context_id\n"
        "      AND s.keyword_status = 'PENDING' AND s.embedding_status = 'FAILED'\n",
        "    WHERE {unfinished} AND keyword_status = 'PENDING'\n"
        "    {oldest_batch}\n), failed AS (\n"
        "    UPDATE ai.context_ai_state AS s\n    SET keyword_status = 'FAILED', updated_at = now()\n"
        "    FROM picked AS p\n    WHERE s.context_id = p.context_id\n"
        "      AND s.keyword_status = 'PENDING'\n",
        (f"{ROUND}::test_completed_embedding_with_a_stale_keyword_stage_is_a_candidate",),
    ),
    Mutation(
        "busy_resend_given_up_at_once",
        "SPEC §7.2 recovery speed: a busy 503 is re-sent within the round (paced), never dropped",
        DISPATCH_PY,
        "            if status != 503 or stopping():\n",
        "            if True:\n",
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
        "    context = neutral_context()\n    context.run(EMBED_GROUP.set, None)\n",
        "    context = contextvars.copy_context()\n    context.run(EMBED_GROUP.set, None)\n",
        (f"{BATCHING_T}::"
         "test_a_batch_never_runs_in_the_logging_context_of_the_job_that_started_the_batcher",),
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
    # ---- profiles side by side (SPEC §9.1, issue 24) -------------------------------------------
    Mutation(
        "save_writes_a_non_active_profile_into_the_active_table",
        "SPEC §9.1: ai.context_embedding holds the active profile's vectors only (the save's "
        "guard: an activation during the job makes it save under the new profile)",
        STATE_SQL,
        "WHERE p.role = 'active' AND p.profile <> CAST(:profile AS text))",
        "WHERE false AND p.profile <> CAST(:profile AS text))",
        (f"{PROFILES_T}::test_a_job_that_embedded_with_the_old_profile_saves_under_the_new_one",),
    ),
    Mutation(
        "save_without_the_shared_profile_lock",
        'SPEC §9.1: activation is atomic — it waits for the embedding saves in flight',
        STATE_PY,
        '        await _execute(conn, "lock_profiles_shared")\n'
        '        await _execute(conn, "lock_state", ',
        '        await _execute(conn, "lock_state", ',
        (f"{PROFILES_T}::test_an_activation_waits_for_an_embedding_save_in_flight",)
    ),
    Mutation(
        "activation_without_the_exclusive_profile_lock",
        "SPEC §9.1: activation is atomic — it holds the profile lock exclusive",
        PROFILES_PY,
        '        await conn.execute(q("lock_profiles_exclusive"))\n'
        '        await conn.execute(q("record_active"), {"profile": current[0],',
        '        await conn.execute(q("record_active"), {"profile": current[0],',
        (f"{PROFILES_T}::test_an_activation_waits_for_an_embedding_save_in_flight",),
    ),
    Mutation(
        "shadow_vector_written_for_a_profile_not_building",
        'SPEC §9.1: the save writes a second vector only for the building profile',
        STATE_SQL,
        "WHERE p.profile = CAST(:profile AS text) AND p.role = 'building')",
        'WHERE p.profile = CAST(:profile AS text) OR true)',
        (f"{PROFILES_T}::test_a_building_vector_is_written_only_while_its_profile_is_building",)
    ),
    Mutation(
        "new_notes_not_embedded_for_the_building_profile",
        "SPEC §9.1: new notes created during the build get a vector in both profiles",
        PIPELINE_PY,
        "                building = self.profiles.building()\n",
        "                building = None\n",
        (f"{PROFILES_T}::test_edit_and_new_notes_during_the_build_get_a_vector_in_both_profiles"
         "[single_job]",),
    ),
    Mutation(
        "batch_new_notes_not_embedded_for_the_building_profile",
        "SPEC §9.1: new notes created during the build get a vector in both profiles (batch path)",
        BATCH_PY,
        "        active, building = p.profiles.active(), p.profiles.building()\n",
        "        active, building = p.profiles.active(), None\n",
        (f"{PROFILES_T}::test_edit_and_new_notes_during_the_build_get_a_vector_in_both_profiles"
         "[batch_path]",),
    ),
    Mutation(
        "save_not_retried_under_the_new_active_profile",
        "SPEC §9.1: a job whose save met a new active profile saves under it (no lost note)",
        PIPELINE_PY,
        "                await self._refresh_profiles()  # 0 rows: cancelled, or an activation moved",
        "                pass  # 0 rows: cancelled, or an activation moved",
        (f"{PROFILES_T}::test_a_job_that_embedded_with_the_old_profile_saves_under_the_new_one",),
    ),
    Mutation(
        "keyword_stage_fails_on_the_new_profile",
        "SPEC §9.1: a keyword stage meeting the new active profile's vector re-reads the roles",
        PIPELINE_PY,
        "                    await self.profiles.refresh(conn)\n",
        "                    pass\n",
        (f"{PROFILES_T}::test_a_keyword_stage_after_an_activation_re_reads_the_roles",),
    ),
    Mutation(
        "keywords_judged_profile_not_recorded",
        "SPEC §9.1: the analysis row records the profile the keywords were judged with",
        STATE_PY,
        "            embedding_profile), **owned})\n        complete = await _execute(conn, \"complete_stage\",",
        "            None), **owned})\n        complete = await _execute(conn, \"complete_stage\",",
        (f"{PROFILES_T}::test_a_keyword_stage_after_an_activation_re_reads_the_roles",),
    ),
    Mutation(
        "build_writes_for_a_context_no_longer_completed",
        "SPEC §9.1: a note deleted or edited during the build never gets a building vector",
        PROFILES_SQL,
        "       AND s.embedding_status = 'COMPLETED'\n       AND NOT e.is_deleted\n"
        "     ORDER BY s.context_id\n",
        "       AND NOT e.is_deleted\n     ORDER BY s.context_id\n",
        (f"{PROFILES_T}::test_the_build_writes_nothing_for_a_note_invalidated_between_fetch_and_"
         "write",),
    ),
    Mutation(
        "build_writes_for_a_deleted_vector",
        "SPEC §9.1: a deleted vector never gets a building vector",
        PROFILES_SQL,
        "       AND NOT e.is_deleted\n     ORDER BY s.context_id\n",
        "     ORDER BY s.context_id\n",
        (f"{PROFILES_T}::test_the_build_writes_nothing_for_a_note_invalidated_between_fetch_and_"
         "write",),
    ),
    Mutation(
        "build_write_does_not_wait_for_a_cancel",
        "SPEC §9.1: the build's write locks the state rows FOR SHARE (a committing cancel wins)",
        PROFILES_SQL,
        "     ORDER BY s.context_id\n       FOR SHARE OF s\n",
        "     ORDER BY s.context_id\n",
        (f"{PROFILES_T}::test_a_cancel_that_commits_during_the_builds_write_wins",),
    ),
    Mutation(
        "invalidation_leaves_the_other_profiles_vectors",
        "SPEC §9.1: invalidation holds for every profile (a deleted context's building vector "
        "is removed with it)",
        SERVICES,
        '        await conn.execute(q("delete_shadow_vectors"), {"context_ids": ids})\n',
        "",
        (f"{PROFILES_T}::test_delete_during_the_build_removes_its_building_vector_and_it_never_"
         "becomes_searchable",),
    ),
    Mutation(
        "build_embeds_what_was_already_written",
        "SPEC §9.1: the build is resumable — what was written is never embedded again",
        PROFILES_SQL,
        "   AND NOT EXISTS (SELECT 1 FROM ai.context_embedding_shadow sh\n"
        "                    WHERE sh.context_id = e.context_id AND sh.embedding_profile = "
        "CAST(:profile AS text))\n   AND NOT (e.context_id",
        "   AND NOT (e.context_id",
        (f"{PROFILES_T}::test_a_second_build_embeds_nothing_again",
         f"{PROFILES_T}::test_a_crashed_build_resumes_with_no_duplicate_model_calls_beyond_the_"
         "batch_in_flight"),
    ),
    Mutation(
        "two_builds_at_once",
        "SPEC §9.1: one backfill at a time (a second would make duplicate model calls)",
        PROFILES_PY,
        '        if not (await lock_conn.execute(q("try_build_lock"))).scalar():',
        "        if False:",
        (f"{PROFILES_T}::test_only_one_build_runs_at_a_time",),
    ),
    Mutation(
        "build_keeps_writing_after_the_profile_stopped_building",
        "SPEC §9.1: activation or drop stops the build (its progress row is the guard)",
        PROFILES_SQL,
        " WHERE profile = CAST(:profile AS text)\n   AND role = 'building'\nRETURNING profile;",
        " WHERE profile = CAST(:profile AS text)\nRETURNING profile;",
        (f"{PROFILES_T}::test_activation_during_a_build_stops_it",),
    ),
    Mutation(
        "build_ignores_its_max_rate",
        "SPEC §9.1 (issue 24 bench): a paced build (--max-rate) waits between batches",
        PROFILES_PY,
        "            if ahead > 0:\n                await sleep(ahead)",
        "            if False:\n                await sleep(ahead)",
        (f"{PROFILES_T}::test_a_paced_build_waits_between_batches_for_its_rate",),
    ),
    Mutation(
        "build_ignores_a_changed_text",
        "SPEC §5.6/§9.1: a context id always means the same text (a changed one is skipped)",
        PROFILES_PY,
        "        elif row.text_sha256 is not None and bytes(row.text_sha256) != sha:",
        "        elif False:",
        (f"{PROFILES_T}::test_build_skips_notes_whose_text_is_gone_or_changed",),
    ),
    Mutation(
        "build_skips_the_building_profiles_presets",
        "SPEC §9.1: presets are embedded for the building profile first",
        PROFILES_PY,
        "            presets = await embed_stored_presets(engine, models.provider, retries=retries)",
        '            presets = type("NoPresets", (), {"embedded": ()})()',
        (f"{PROFILES_T}::test_build_writes_every_vector_beside_the_active_ones_and_changes_no_"
         "status",),
    ),
    Mutation(
        "building_profile_not_probed",
        "SPEC §9.1: the dimension probe applies to the building profile too",
        PROFILES_PY,
        "            if probe:\n",
        "            if False:\n",
        (f"{PROFILES_T}::test_build_checks_the_building_profiles_dimension",),
    ),
    Mutation(
        "building_profiles_stored_vectors_unchecked",
        "SPEC §9.1: the stored-dimension check applies to the building profile's vectors too",
        ROUTING_PY,
        "    wrong = [d for d in shadow if d != dimension]",
        "    wrong = [d for d in shadow if False]",
        (f"{PROFILES_T}::test_build_checks_the_building_profiles_dimension",
         f"{PROFILES_T}::test_a_replica_refuses_to_start_when_the_next_profiles_dimension_is_"
         "wrong"),
    ),
    Mutation(
        "activation_below_full_coverage",
        "SPEC §9.1: activation refuses below full coverage unless forced",
        PROFILES_PY,
        "        if missing and not force:",
        "        if missing and not force and False:",
        (f"{PROFILES_T}::test_activation_refuses_below_full_coverage_unless_forced",),
    ),
    Mutation(
        "activation_without_presets",
        "SPEC §9.1: no profile becomes active without its presets (keywords would stop)",
        PROFILES_PY,
        "        if usable == 0:",
        "        if False:",
        (f"{PROFILES_T}::test_activation_refuses_a_profile_without_presets",),
    ),
    Mutation(
        "activation_copies_contexts_no_longer_completed",
        "SPEC §9.1: activation copies only vectors of contexts still COMPLETED",
        PROFILES_SQL,
        "   AND s.context_id = e.context_id\n   AND s.embedding_status = 'COMPLETED'\n",
        "   AND s.context_id = e.context_id\n",
        (f"{PROFILES_T}::test_activation_copies_only_contexts_still_completed_and_not_deleted",),
    ),
    Mutation(
        "activation_copies_deleted_vectors",
        "SPEC §9.1: activation copies only vectors of contexts not deleted",
        PROFILES_SQL,
        "   AND NOT e.is_deleted\n   AND e.embedding_profile <> CAST(:profile AS text);",
        "   AND e.embedding_profile <> CAST(:profile AS text);",
        (f"{PROFILES_T}::test_activation_copies_only_contexts_still_completed_and_not_deleted",),
    ),
    Mutation(
        "activation_keeps_nothing_for_the_rollback",
        "SPEC §9.1: the previous profile's vectors are kept, so activating it again is the "
        "rollback",
        PROFILES_SQL,
        "   AND e.embedding_profile <> CAST(:profile AS text)\nON CONFLICT",
        "   AND false\nON CONFLICT",
        (f"{PROFILES_T}::test_rollback_is_activating_the_kept_profile",),
    ),
    Mutation(
        "search_misses_an_activation_after_its_query_was_embedded",
        "SPEC §9.1: a search sees one profile or the other, never nothing",
        AI_SEARCH,
        "        if active is not None and active != provider.profile:\n",
        "        if False:\n",
        (f"{PROFILES_T}::test_activation_is_atomic_for_a_concurrent_search",),
    ),
    Mutation(
        "search_roles_and_vectors_in_two_snapshots",
        "SPEC §9.1: a search reads the roles and the vectors in one snapshot (never a mix)",
        AI_SEARCH,
        'isolation_level="REPEATABLE READ"',
        'isolation_level="READ COMMITTED"',
        (f"{PROFILES_T}::test_a_search_reads_the_roles_and_the_vectors_in_one_snapshot",),
    ),
    Mutation(
        "search_refuses_the_backends_profile_during_a_switch",
        "SPEC §9.1/§10: a request naming a profile this replica serves is answered from the "
        "active one (backends keep naming theirs through a switch)",
        AI_SEARCH,
        "    if request.embedding_profile not in (accepted_profiles or (provider.profile,)):",
        "    if request.embedding_profile != provider.profile:",
        (f"{PROFILES_T}::test_activation_switches_every_search_and_keeps_the_old_vectors",),
    ),
    Mutation(
        "replica_serves_a_profile_it_has_no_provider_for",
        "SPEC §9.1: a replica without a provider for the active profile refuses",
        ROUTING_PY,
        "        return self.active_profile in self.models\n",
        "        return True\n",
        (f"{PROFILES_T}::test_a_replica_without_a_provider_for_the_active_profile_refuses",),
    ),
    Mutation(
        "profile_drift_not_logged",
        "SPEC §9.1: that replica logs an ERROR (the settings-drift check)",
        PROCESS_SETTINGS,
        "    if active is None or active in served:\n        return None",
        "    if True:\n        return None",
        (f"{PROFILES_T}::test_a_replica_without_a_provider_for_the_active_profile_refuses",),
    ),
    Mutation(
        "rejudge_writes_a_keyword_stage_not_completed",
        "SPEC §9.1: the re-judge replaces only COMPLETED keywords (never a stage in flight nor "
        "a deleted context's)",
        PROFILES_SQL,
        " WHERE s.context_id = :context_id\n"
        "   AND s.keyword_status = 'COMPLETED'\n",
        " WHERE s.context_id = :context_id\n",
        (f"{PROFILES_T}::test_keywords_are_rejudged_with_the_new_presets_and_the_old_ones_stay_"
         "until_then",),
    ),
    Mutation(
        "rejudge_again_what_was_rejudged",
        "SPEC §9.1: the re-judge is resumable (a re-judged context records the profile)",
        PROFILES_SQL,
        "   AND a.embedding_profile IS DISTINCT FROM CAST(:profile AS text)\n",
        "   AND true\n",
        (f"{PROFILES_T}::test_keywords_are_rejudged_with_the_new_presets_and_the_old_ones_stay_"
         "until_then",),
    ),
    Mutation(
        "drop_of_the_active_profile",
        "SPEC §9.1: drop deletes an inactive profile's vectors only",
        PROFILES_PY,
        "        if rows.get(profile) == ACTIVE:\n"
        "            raise ProfileError(f\"profile {profile} is the active profile: activate another \"",
        "        if False:\n"
        "            raise ProfileError(f\"profile {profile} is the active profile: activate another \"",
        (f"{PROFILES_T}::test_drop_deletes_an_inactive_profiles_vectors_and_refuses_the_active_one",),
    ),
    Mutation(
        "coverage_counts_contexts_that_should_not_have_a_vector",
        "SPEC §9.1: coverage = contexts embedded ÷ contexts that should be",
        PROFILES_SQL,
        "     WHERE s.embedding_status = 'COMPLETED'\n       AND NOT e.is_deleted\n), per_profile",
        "     WHERE true\n), per_profile",
        (f"{PROFILES_T}::test_overview_shows_coverage_of_each_profile",),
    ),
    Mutation(
        "reprocess_against_the_configured_profile",
        "SPEC §7.5/§9.1: reprocess --profile regenerates against the active profile",
        REPROCESS_SQL,
        "SELECT coalesce((SELECT profile FROM ai.embedding_profile WHERE role = 'active'),\n"
        "                CAST(:profile AS text))",
        "SELECT CAST(:profile AS text)",
        (f"{PROFILES_T}::test_reprocess_profile_after_a_forced_activation_resets_only_the_"
         "notes_left_behind",),
    ),
    Mutation(
        "next_profile_may_equal_the_first",
        "SPEC §9: a profile names one vector space — the next profile differs from the first",
        "src/pinlog/ai/providers/__init__.py",
        "    if config.profile == first.profile:",
        "    if False:",
        (f"{NEXT_PROFILE_T}::test_the_next_profile_must_differ_from_the_first",),
    ),
    Mutation(
        "next_profile_takes_the_first_profiles_overrides",
        "SPEC §8/§10: thresholds are per profile (the overrides are the first profile's)",
        AI_RUNTIME,
        "            next_calibration = calibration_defaults(next_embedding.profile)",
        "            next_calibration = calibration_for(settings, next_embedding.profile)",
        (f"{NEXT_PROFILE_T}::test_the_next_profile_has_its_own_profiles_thresholds_not_the_"
         "overrides",),
    ),
    # ---- retention (issue 31: pinlog.ai/core/db.retention, docs/ARCHITECTURE.md §3) ---------
    Mutation(
        "retention_cancelled_row_ignores_the_late_result_window",
        "issue 31 + SPEC §4/§5: a CANCELLED state row stays at least the late-result window "
        "after its cancellation, whatever PINLOG_RETENTION_DELETED says",
        AI_RETENTION_SQL,
        "greatest(CAST(:retention AS interval),",
        "least(CAST(:retention AS interval),",
        (f"{LATE_T}::test_a_cancelled_row_stays_for_the_late_result_window_whatever_the_retention",),
    ),
    Mutation(
        "retention_window_without_the_processing_expiry",
        "issue 31: late-result window = processing expiry + the longest stage budget",
        SETTINGS_PY,
        "return self.processing_expiry + timedelta(seconds=max(budgets))",
        "return timedelta(seconds=max(budgets))",
        (f"{RETENTION_UNIT_T}::"
         "test_the_late_result_window_is_the_processing_expiry_plus_the_longest_stage_budget",
         f"{LATE_T}::test_the_window_is_the_processing_expiry_plus_the_longest_stage_budget"),
    ),
    Mutation(
        "retention_purges_a_half_cancelled_row",
        "issue 31: only a row whose two stages are CANCELLED is dead (the finalizer still needs "
        "a half-cancelled one)",
        AI_RETENTION_SQL,
        "(embedding_status = 'CANCELLED' AND keyword_status = 'CANCELLED'\n AND updated_at",
        "((embedding_status = 'CANCELLED' OR keyword_status = 'CANCELLED')\n AND updated_at",
        (f"{PURGE_T}::test_live_notes_recent_deletions_and_unfinished_rows_are_untouched",),
    ),
    Mutation(
        "retention_ai_pick_waits_for_locked_rows",
        "issue 31: replicas purge at once (FOR UPDATE SKIP LOCKED), a held batch is skipped",
        AI_RETENTION_SQL,
        " LIMIT :batch_size\n   FOR UPDATE SKIP LOCKED\n\n\n-- name: given_contexts",
        " LIMIT :batch_size\n   FOR UPDATE\n\n\n-- name: given_contexts",
        (f"{PURGE_REPLICAS_T}::test_two_purgers_at_once_share_the_work[contexts]",),
    ),
    Mutation(
        "retention_keeps_shadow_vectors",
        "issue 31 + SPEC §9.1: a dead context's vectors of every profile go with it, the "
        "building and kept profiles' too (ai.context_embedding_shadow)",
        AI_RETENTION_SQL,
        "     purged AS (DELETE FROM ai.context_embedding_shadow\n"
        "                 WHERE {given_contexts} AND CAST(:apply AS boolean))",
        "     purged AS (DELETE FROM ai.context_embedding_shadow\n"
        "                 WHERE {given_contexts} AND false)",
        (f"{PURGE_T}::test_past_the_retention_no_trace_of_a_deleted_note_remains",
         f"{ERASURE_T}::test_erasing_a_withdrawn_member_removes_its_rows_now",
         f"{ADOPTED_PURGE_T}::test_on_an_adopted_database_only_our_ai_rows_are_purged"),
    ),
    Mutation(
        "retention_event_pick_waits_for_locked_rows",
        "issue 31: replicas purge history at once (FOR UPDATE SKIP LOCKED)",
        AI_RETENTION_SQL,
        "       FOR UPDATE SKIP LOCKED\n), purged AS (\n    DELETE FROM ai.context_ai_event",
        "       FOR UPDATE\n), purged AS (\n    DELETE FROM ai.context_ai_event",
        (f"{PURGE_REPLICAS_T}::test_two_purgers_at_once_share_the_work[events]",),
    ),
    Mutation(
        "retention_core_pick_waits_for_locked_rows",
        "issue 31: replicas purge notes, records and members at once (FOR UPDATE SKIP LOCKED, "
        "one fragment for the three)",
        CORE_RETENTION_SQL,
        " LIMIT :batch_size\n   FOR UPDATE SKIP LOCKED",
        " LIMIT :batch_size\n   FOR UPDATE",
        tuple(f"{PURGE_REPLICAS_T}::test_two_purgers_at_once_share_the_work[{t}]"
              for t in ("core.context", "core.record", "core.member")),
    ),
    Mutation(
        "retention_events_without_their_retention",
        "issue 31: history rows go past PINLOG_RETENTION_EVENTS, not before",
        AI_RETENTION_SQL,
        "     WHERE at < now() - CAST(:retention AS interval)",
        "     WHERE at < now()",
        (f"{PURGE_T}::test_history_rows_go_by_their_own_retention",
         f"{PURGE_T}::test_live_notes_recent_deletions_and_unfinished_rows_are_untouched"),
    ),
    Mutation(
        "retention_notes_without_their_retention",
        "issue 31: a deleted note goes past PINLOG_RETENTION_DELETED, not before",
        CORE_RETENTION_SQL,
        "(c.deleted_at < now() - CAST(:retention AS interval) AND {state_invalidated})",
        "(c.deleted_at IS NOT NULL AND {state_invalidated})",
        (f"{PURGE_T}::test_live_notes_recent_deletions_and_unfinished_rows_are_untouched",
         f"{PURGE_T}::test_rows_purged_and_the_oldest_deleted_row_kept_are_measured"),
    ),
    Mutation(
        "retention_core_purges_what_it_has_not_invalidated",
        "issue 31: core purges a deleted note only when its AI state is CANCELLED (or absent)",
        CORE_RETENTION_SQL,
        "             WHERE s.context_id = c.id\n               AND (s.embedding_status <> "
        "'CANCELLED'",
        "             WHERE false AND s.context_id = c.id\n               AND "
        "(s.embedding_status <> 'CANCELLED'",
        (f"{PURGE_T}::test_a_deleted_note_whose_invalidation_was_missed_is_kept_and_reported",
         f"{ERASURE_T}::"
         "test_a_note_whose_invalidation_was_missed_is_kept_with_its_record_and_member"),
    ),
    Mutation(
        "retention_record_purged_while_notes_refer_to_it",
        "issue 31: a record goes only once no note row refers to it",
        CORE_RETENTION_SQL,
        "WHERE c.record_id = r.id AND (CAST(:apply AS boolean) OR NOT {context_due})))",
        "WHERE c.record_id = r.id AND (NOT CAST(:apply AS boolean) AND NOT {context_due})))",
        (f"{PURGE_T}::test_a_deleted_note_whose_invalidation_was_missed_is_kept_and_reported",),
    ),
    Mutation(
        # two guards (the statements' :apply and the rolled-back transaction): both are broken
        "retention_dry_run_deletes",
        "issue 31: pinlog purge --dry-run counts and changes nothing",
        AI_RETENTION_PY,
        '                    params = {"context_ids": ids, "apply": not dry_run}\n'
        "                    for name, table in context_tables():\n"
        "                        report.add(table, await _count(conn, name, params))\n"
        '                    report.add(STATE_TABLE, await _count(conn, "delete_cancelled_states",\n'
        "                                                         {**params, **window}))\n"
        "                await (transaction.rollback() if dry_run else transaction.commit())",
        '                    params = {"context_ids": ids, "apply": True}\n'
        "                    for name, table in context_tables():\n"
        "                        report.add(table, await _count(conn, name, params))\n"
        '                    report.add(STATE_TABLE, await _count(conn, "delete_cancelled_states",\n'
        "                                                         {**params, **window}))\n"
        "                await transaction.commit()",
        (f"{PURGE_T}::test_the_dry_run_counts_exactly_what_the_purge_removes",),
    ),
    Mutation(
        "retention_core_part_runs_on_an_adopted_database",
        "issue 31: on an adopted database only ai.* is touched; core's part is off",
        CORE_RETENTION_PY,
        "        if not await self.ours():\n            report.off.append(OFF_ADOPTED)",
        "        if False:\n            report.off.append(OFF_ADOPTED)",
        (f"{ADOPTED_PURGE_T}::test_on_an_adopted_database_only_our_ai_rows_are_purged",),
    ),
    Mutation(
        "retention_erases_an_active_member",
        "issue 31: pinlog purge --member refuses an active member (nothing changes)",
        CORE_RETENTION_PY,
        "        if active:\n            raise MemberActive(active)",
        "        if False:\n            raise MemberActive(active)",
        (f"{ERASURE_T}::test_an_active_member_is_refused_and_nothing_changes",),
    ),
    Mutation(
        "retention_erasure_ignores_the_state",
        "issue 31: an erasure erases the AI data of CANCELLED contexts only",
        AI_RETENTION_SQL,
        "   AND embedding_status = 'CANCELLED' AND keyword_status = 'CANCELLED'\n"
        " ORDER BY context_id\n   FOR UPDATE",
        "   AND true\n ORDER BY context_id\n   FOR UPDATE",
        (f"{ERASURE_T}::"
         "test_a_note_whose_invalidation_was_missed_is_kept_with_its_record_and_member",),
    ),
    Mutation(
        "retention_rows_purged_not_counted",
        "issue 31: pinlog_purged_rows_total counts every real purge by table",
        DB_RETENTION_PY,
        "        report.merge(await part.purge(dry_run=dry_run, stop=stop))\n    count_purged(report)",
        "        report.merge(await part.purge(dry_run=dry_run, stop=stop))",
        (f"{PURGE_T}::test_rows_purged_and_the_oldest_deleted_row_kept_are_measured",
         f"{RETENTION_UNIT_T}::test_only_a_real_purge_counts_rows"),
    ),
    Mutation(
        "retention_tombstone_counted_as_an_anomaly",
        "issue 31: a CANCELLED state row whose note was purged is a tombstone, not an anomaly",
        STATUS_SQL,
        "count(*) FILTER (WHERE c.id IS NULL\n                            AND NOT "
        "(s.embedding_status = 'CANCELLED' AND s.keyword_status = 'CANCELLED'))",
        "count(*) FILTER (WHERE c.id IS NULL)",
        (f"{ERASURE_T}::test_a_purged_notes_tombstone_is_no_anomaly",),
    ),
    Mutation(
        "retention_loop_in_one_shot_commands",
        "issue 31: the retention loop runs in serving processes, not in one-shot commands",
        COMPOSITION_PY,
        "if (config.ai.retention.enabled if retention is None else retention) and (ai or core):",
        "if ai or core:",
        (f"{PURGE_T}::test_a_running_process_purges_in_the_background_unless_one_shot",),
    ),
    # ---- remote providers: throttling, input caps, deadlines, LLM answers (issue 23, SPEC §6) --
    Mutation(
        "retry_after_spends_an_attempt",
        "SPEC §6: a 429/503 with Retry-After is waited out instead of spending an attempt",
        AI_ERRORS,
        "            if wait is not None and deadline is not None:\n",
        "            if False:\n",
        (f"{REMOTE_LIMITS_T}::test_a_retry_after_is_waited_out_without_spending_an_attempt",
         f"{REMOTE_T}::test_a_throttled_embedding_waits_out_retry_after_without_spending_attempts"),
    ),
    Mutation(
        "retry_after_waited_past_the_budget",
        "SPEC §6 budget rule: a throttle's wait never ends past the stage budget",
        AI_ERRORS,
        "                if clock() + wait >= deadline:\n",
        "                if False:\n",
        (f"{REMOTE_LIMITS_T}::"
         "test_a_retry_after_past_the_deadline_gives_up_at_once_and_never_sleeps_past_it",),
    ),
    Mutation(
        "embedding_stage_waits_without_its_budget",
        "SPEC §6 budget rule: the embedding stage's throttle waits end inside its budget "
        "(timeout × attempts + backoff < processing expiry)",
        PIPELINE_PY,
        "            sleep=self._sleep, deadline=deadline, clock=loop.time,",
        "            sleep=self._sleep, deadline=None, clock=loop.time,",
        (f"{REMOTE_T}::test_the_budget_rule_holds_under_a_throttle_that_never_ends",
         f"{REMOTE_T}::test_a_throttled_embedding_waits_out_retry_after_without_spending_attempts"),
    ),
    Mutation(
        "retry_after_header_ignored",
        "SPEC §6: a throttle carries the server's Retry-After",
        AI_ERRORS,
        "            retry_after=parse_retry_after(headers))",
        "            retry_after=None)",
        (f"{REMOTE_LIMITS_T}::test_429_and_503_are_throttles_carrying_the_servers_wait",
         f"{CAPS_T}::test_a_throttle_reaches_the_caller_with_the_servers_wait"),
    ),
    Mutation(
        "retry_after_http_date_ignored",
        "RFC 9110 §10.2.3: Retry-After is delay-seconds or an HTTP date",
        AI_ERRORS,
        "            when = email.utils.parsedate_to_datetime(raw)\n",
        "            when = None\n",
        (f"{REMOTE_LIMITS_T}::test_retry_after_in_seconds_as_an_http_date_and_in_milliseconds",),
    ),
    Mutation(
        "throttle_keeps_the_concurrency",
        "SPEC §6: a throttled provider gets fewer calls in flight (multiplicative decrease)",
        LIMITS_PY,
        "            self.limit = max(float(self.minimum), self.limit / 2.0)\n",
        "            self.limit = max(float(self.minimum), self.limit)\n",
        (f"{REMOTE_LIMITS_T}::"
         "test_a_throttle_halves_the_limit_once_per_round_and_successes_raise_it_again",
         f"{CAPS_T}::test_a_throttle_halves_the_calls_in_flight_and_holds_new_calls"),
    ),
    Mutation(
        "batcher_ignores_throttles",
        "SPEC §6: the micro-batcher's calls in flight follow the server's throttling",
        BATCHING,
        "            self.limit.throttled(begun, exc.retry_after)\n",
        "",
        (f"{CAPS_T}::test_a_throttle_halves_the_calls_in_flight_and_holds_new_calls",),
    ),
    Mutation(
        "too_many_inputs_fails_the_batch",
        "issue 23: a refusal for too many inputs lowers the cap and the texts are sent again",
        BATCHING,
        "        except TooManyInputs as exc:\n            if len(texts) <= 1:\n",
        "        except TooManyInputs as exc:\n            if True:\n",
        (f"{CAPS_T}::test_a_413_above_teis_batch_size_lowers_the_cap_to_the_servers_maximum",
         f"{REMOTE_T}::test_presets_load_succeeds_against_a_16_input_cap_and_serve_can_start"),
    ),
    Mutation(
        "too_many_inputs_not_recognised",
        "issue 23: TEI's 413 and Azure's 400 'Too many inputs' are recognised as such",
        AI_ERRORS,
        "    if inputs > 1 and (says_too_many or (status == 413 and not too_long)) \\\n",
        "    if False and (says_too_many or (status == 413 and not too_long)) \\\n",
        (f"{REMOTE_LIMITS_T}::"
         "test_too_many_inputs_in_each_servers_words_names_the_servers_maximum",
         f"{REMOTE_T}::test_presets_load_succeeds_against_a_16_input_cap_and_serve_can_start"),
    ),
    Mutation(
        "too_long_413_taken_for_too_many_inputs",
        "issue 23: TEI's 413 for an input over its token limit is not a too-many-inputs refusal",
        AI_ERRORS,
        "(status == 413 and not too_long)",
        "(status == 413)",
        (f"{REMOTE_LIMITS_T}::"
         "test_an_input_over_the_context_length_is_permanent_and_never_too_many_inputs[tei-413]",),
    ),
    Mutation(
        "context_length_refusal_unnamed",
        "SPEC §6: an input over the model limit is permanent and says so (vLLM's context length)",
        AI_ERRORS,
        "    if too_long and status in (400, 413, 422):\n",
        "    if False:\n",
        (f"{REMOTE_LIMITS_T}::"
         "test_an_input_over_the_context_length_is_permanent_and_never_too_many_inputs[vllm-400]",
         f"{REMOTE_T}::test_a_note_over_the_context_length_fails_alone_and_its_batch_mates_complete"),
    ),
    Mutation(
        "lowered_cap_ignored_for_formed_batches",
        "issue 23: a cap the server taught is used at once, also for calls formed before it",
        BATCHING,
        "        if len(texts) > self.max_inputs:  # formed before the server lowered the cap\n",
        "        if False:  # formed before the server lowered the cap\n",
        (f"{CAPS_T}::test_a_413_above_teis_batch_size_lowers_the_cap_to_the_servers_maximum",),
    ),
    Mutation(
        "embedding_call_bounded_per_read",
        "SPEC §6: every remote call is bounded as a whole, not per read (embedding)",
        OPENAI_PY,
        "            async with asyncio.timeout(self.timeout):  # the whole call, not each read\n",
        "            async with asyncio.timeout(None):  # the whole call, not each read\n",
        (f"{CAPS_T}::test_an_answer_that_trickles_in_times_out_as_a_whole",),
    ),
    Mutation(
        "judge_call_bounded_per_read",
        "SPEC §6: every remote call is bounded as a whole, not per read (judge)",
        LLM_PY,
        "            async with asyncio.timeout(self._timeout):  # the whole call, not each read\n",
        "            async with asyncio.timeout(None):  # the whole call, not each read\n",
        (f"{LLM_ENDPOINTS_T}::test_an_answer_that_trickles_in_times_out_as_a_whole",),
    ),
    Mutation(
        "rewrite_call_bounded_per_read",
        "SPEC §6/§10: the query rewrite is bounded as a whole; a rewrite problem never fails "
        "search",
        REWRITE_PY,
        "            async with asyncio.timeout(self._timeout):  # the whole call, not each read\n",
        "            async with asyncio.timeout(None):  # the whole call, not each read\n",
        (f"{LEXICAL_T}::"
         "test_a_rewrite_that_trickles_in_falls_back_within_its_deadline_and_search_answers",),
    ),
    Mutation(
        "azure_key_sent_as_bearer",
        "issue 23: Azure OpenAI takes its key in the api-key header",
        AZURE_PY,
        "        return {\"api-key\": api_key} if api_key else {}\n",
        "        return super()._auth_headers(api_key)\n",
        (f"{CAPS_T}::test_azure_requests_carry_the_deployment_url_and_no_model_field",),
    ),
    Mutation(
        "azure_chat_key_sent_as_bearer",
        "issue 23: the judge and the rewrite send Azure's api-key header with an api-version",
        SETTINGS_PY,
        "        return {\"api-key\": key} if self.api_version else "
        "{\"Authorization\": f\"Bearer {key}\"}\n",
        "        return {\"Authorization\": f\"Bearer {key}\"}\n",
        (f"{LLM_ENDPOINTS_T}::test_azure_openai_gets_the_deployment_url_api_version_and_api_key",),
    ),
    Mutation(
        "response_format_never_downgraded",
        "issue 23: an endpoint that refuses json_schema is asked with json_object, then none",
        LLM_PY,
        "            if mode != \"none\" and refuses_response_format(response.status_code, "
        "response.text):\n",
        "            if False:\n",
        (f"{LLM_ENDPOINTS_T}::test_json_schema_refused_falls_back_to_json_object_remembered_per_model",
         f"{LLM_ENDPOINTS_T}::test_an_endpoint_with_no_json_mode_gets_no_response_format"),
    ),
    Mutation(
        "reasoning_block_parsed_as_the_answer",
        "issue 23: <think>…</think> is stripped before the judge's JSON is parsed",
        LLM_PY,
        "    text = _THINK.sub(\"\", content)\n    closing = text.lower().rfind(\"</think>\")\n",
        "    text = content\n    closing = -1\n",
        (f"{LLM_ENDPOINTS_T}::test_reasoning_blocks_fences_and_prose_are_stripped_before_parsing[think]",),
    ),
    Mutation(
        "per_model_refusal_ends_the_chain",
        "SPEC §6: a per-model not-found (or other 4xx but 401/403) moves to the next model",
        AI_ERRORS,
        "    if 400 <= status < 500 and status not in (401, 403):\n",
        "    if False:\n",
        (f"{LLM_ENDPOINTS_T}::"
         "test_a_model_that_is_gone_moves_to_the_next_model_and_is_skipped_from_then_on[openai]",
         f"{LLM_ENDPOINTS_T}::"
         "test_another_per_model_4xx_moves_on_in_order_without_forgetting_the_model"),
    ),
    Mutation(
        "gone_model_asked_again",
        "issue 23: a model the endpoint does not serve is skipped for the rest of the process",
        LLM_PY,
        "        return [m for m in self.chain if m not in self._gone] or list(self.chain)\n",
        "        return list(self.chain)\n",
        (f"{LLM_ENDPOINTS_T}::"
         "test_a_model_that_is_gone_moves_to_the_next_model_and_is_skipped_from_then_on[vllm]",),
    ),
    Mutation(
        "judge_retry_after_spends_an_attempt",
        "SPEC §6: the judge waits a Retry-After out instead of spending an attempt",
        LLM_PY,
        "                if wait is not None:  # Retry-After: wait it out, no attempt spent "
        "(SPEC §6)\n",
        "                if False:\n",
        (f"{LLM_ENDPOINTS_T}::test_a_retry_after_is_waited_out_without_spending_an_attempt",),
    ),
    Mutation(
        "judge_retry_after_waited_past_the_budget",
        "SPEC §6 budget rule: the judge never waits a Retry-After past its budget",
        LLM_PY,
        "                    if clock() + wait >= deadline:\n",
        "                    if False:\n",
        (f"{LLM_ENDPOINTS_T}::test_a_retry_after_past_the_budget_gives_up_at_once",),
    ),
    Mutation(
        "picks_not_capped_for_every_judge",
        "SPEC §8: 0–3 keywords — at most max_picks are stored, whatever judge answered",
        PIPELINE_PY,
        "    return tuple(ranked[:max(0, max_picks)])",
        "    return tuple(ranked)",
        (f"{REMOTE_T}::test_a_judge_that_selects_every_candidate_stores_at_most_max_picks",),
    ),
    Mutation(
        "picks_capped_keeping_the_lowest_confidences",
        "issue 23: the cap keeps the highest confidences",
        PIPELINE_PY,
        "    ranked = sorted(kept.values(), key=lambda p: -(p.confidence or 0.0))",
        "    ranked = sorted(kept.values(), key=lambda p: (p.confidence or 0.0))",
        (f"{REMOTE_T}::test_a_judge_that_selects_every_candidate_stores_at_most_max_picks",),
    ),
    Mutation(
        "openai_search_floor_guessed",
        "issue 23: text-embedding-3-small is cut at the reference system's cosines (0.30/0.24)",
        CALIBRATION_PY,
        "    search_floor=0.30,\n    search_short_query_floor=0.24,\n",
        "    search_floor=0.2,\n    search_short_query_floor=0.3,\n",
        (f"{SEARCH_CUTS_T}::test_the_openai_profiles_cut_at_the_reference_systems_cosines",),
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
    # ---- issue 28: the lexical channel's rules (pinlog/channels, kernel) ---------------------
    Mutation(
        "relevance_ignores_a_doubt",
        "SPEC §10 (issue 28): a record a channel doubts is shown by another only at the doubt strength",
        RELEVANCE,
        "    return all(e is None or e.doubt is None or (own.strength",
        "    return all(e is None or True or (own.strength",
        (f"{FUSION_T}::test_a_doubted_record_is_shown_only_by_a_channel_strong_enough",),
    ),
    Mutation(
        "explain_counts_a_doubted_vouch",
        "issue 28/29: the search debugger shows a vouch another channel doubts as not counted (the decision's rule)",
        RELEVANCE,
        "                             tuple(vouches(i, evidence) for i in range(len(evidence))),",
        "                             tuple(e is not None and e.vouched for e in evidence),",
        (f"{FUSION_T}::test_a_doubted_record_is_shown_only_by_a_channel_strong_enough",),
    ),
    Mutation(
        "lexical_never_doubts",
        "SPEC §10 (issue 28): a partial word match doubts the record",
        LEXICAL,
        "            doubt = doubt_strength if cov < rule.doubt_coverage else None\n",
        "            doubt = None\n",
        (f"{CHANNEL_RULES_T}::test_a_partial_match_doubts_a_full_one_vouches",),
    ),
    Mutation(
        "query_verbs_are_content",
        "SPEC §10 (issue 28): only nouns, adjectives, foreign words and numbers are what a query asks for",
        LEXICAL,
        "        if tag not in QUERY_CONTENT_TAGS or table.is_generic(m.lemma) or table.is_generic(m.form):",
        "        if table.is_generic(m.lemma) or table.is_generic(m.form):",
        (f"{CHANNEL_RULES_T}::test_content_words_are_nouns_adjectives_and_foreign_words_never_verbs_adverbs_or_generic",),
    ),
    Mutation(
        "query_generic_words_are_content",
        "SPEC §10 (issue 28): the variant table's generic words (곳, place, good) are never evidence",
        LEXICAL,
        "        if tag not in QUERY_CONTENT_TAGS or table.is_generic(m.lemma) or table.is_generic(m.form):",
        "        if tag not in QUERY_CONTENT_TAGS:",
        (f"{CHANNEL_RULES_T}::test_content_words_are_nouns_adjectives_and_foreign_words_never_verbs_adverbs_or_generic",),
    ),
    Mutation(
        "coverage_per_bigram_not_per_word",
        "SPEC §10 (issue 28): coverage is the mean share per content word (a long word counts once)",
        LEXICAL,
        "            units = self.units or tuple(frozenset((t,)) for t in self.content)",
        "            units = tuple(frozenset((t,)) for t in self.content)",
        (f"{CHANNEL_RULES_T}::test_coverage_is_per_word_not_per_bigram",),
    ),
    Mutation(
        "variants_without_narrower_concepts",
        "SPEC §10 (issue 28): a broader word also finds notes naming a narrower concept",
        VARIANTS,
        "owner for cid in self._closure(concept)",
        "owner for cid in [concept]",
        (f"{CHANNEL_RULES_T}::test_narrower_concepts_are_found_from_the_broader_word_only",),
    ),
    Mutation(
        "variants_without_sound_keys",
        "SPEC §10 (issue 28): a spelling the table does not list finds its concept by sound",
        VARIANTS,
        "        if self.sound and len(key) >= 2 and _HANGUL.match(key):",
        "        if False:",
        (f"{CHANNEL_RULES_T}::test_sound_keys_find_spellings_the_table_does_not_list",),
    ),
    Mutation(
        "variants_compounds_never_from_parts",
        "SPEC §10 (issue 28): a compound (피맥) is found in a note naming all its parts",
        VARIANTS,
        "        return bool(self.all_of) and all(",
        "        return False and all(",
        (f"{CHANNEL_RULES_T}::test_compounds_are_found_by_their_parts_and_find_notes_naming_all_parts",),
    ),
    Mutation(
        "records_the_lexical_channel_knows_not_scored",
        "SPEC §10 (issue 28): a vector result another channel knows is scored whole (its doubt counts all notes)",
        FLOW,
        "    if answer is not None:\n        wanted.update(",
        "    if answer is not None and False:\n        wanted.update(",
        (f"{REGISTRY_T}::test_records_to_score_add_the_vector_results_another_channel_knows",),
    ),
    Mutation(
        "channels_read_after_the_vector_search",
        "issue 28 latency: the channels read while the query is embedded, not one after the other",
        FLOW,
        "    found, answer = await gather(find_all(channels, query), vector.candidates(query, limit))",
        "    found, answer = await find_all(channels, query), await vector.candidates(query, limit)",
        ("tests/unit/test_channels_flow.py::"
         "test_channels_read_beside_the_vector_search_then_the_named_records_are_scored",),
    ),
    Mutation(
        "filler_query_asks_the_ai_side",
        "issue 27 #5: a filler query answers [] before any channel or the ai side is asked",
        FLOW,
        "    if is_filler(query.text):\n        return []\n",
        "    if False:\n        return []\n",
        (f"{CHANNEL_T}::test_a_filler_query_asks_the_ai_side_nothing",),
    ),
    # ---- issue 28: the vector channel's per-query calibration (ai/search.py, ai/search.sql) --
    Mutation(
        "filler_query_embedded",
        "issue 27 #5: a filler query answers nothing on the ai side, without a model call",
        AI_SEARCH,
        "    if is_filler(request.query):  # nothing asked: no model call (issue 27)",
        "    if False:  # nothing asked: no model call (issue 27)",
        (f"{AI_LEXICAL_T}::test_filler_queries_answer_nothing_on_every_path_without_a_model_call",),
    ),
    Mutation(
        "strength_cut_ignored",
        "SPEC §10 (issue 28): a calibrated profile's vector evidence needs the strength",
        AI_SEARCH,
        "            and (cuts.strength is None or (h.score is not None and h.score >= cuts.strength))]",
        "            ]",
        (f"{CUTS_T}::test_a_calibrated_cut_needs_the_strength_too",),
    ),
    Mutation(
        "strength_against_the_first_group_only",
        "SPEC §10 (issue 28): a context is calibrated against the background of its nearest language group",
        SEARCH_SQL,
        "    SELECT (NULLIF(least(\n",
        "    SELECT (NULLIF(coalesce(\n",
        (f"{CALIBRATED_T}::test_strength_per_context_is_against_the_nearest_groups_background",),
    ),
    Mutation(
        "background_of_five_groups_accepted",
        "SPEC §10 (issue 28): a background with more groups than nearest_group compares is refused",
        "src/pinlog/ai/search.py",
        "        if len(self.groups) > MAX_GROUPS:\n",
        "        if len(self.groups) > MAX_GROUPS + 1:\n",
        ("tests/unit/ai/test_search_background.py::"
         "test_a_background_of_more_groups_than_the_statements_compare_is_refused",),
    ),
    Mutation(
        "nearest_group_of_three_centroids",
        "SPEC §10 (issue 28): nearest_group compares every one of MAX_GROUPS (4) centroids",
        SEARCH_SQL,
        "        floor((s.embedding <=> (CAST(:centroids AS vector[]))[4]) * 1e7) * 8 + 4\n",
        "        floor((s.embedding <=> (CAST(:centroids AS vector[]))[3]) * 1e7) * 8 + 3\n",
        (f"{CALIBRATED_T}::test_every_one_of_four_groups_calibrates_its_own_contexts",),
    ),
    Mutation(
        "best_context_by_cosine_not_strength",
        "SPEC §10 (issue 28): a record's best context is its strongest (per-query calibrated)",
        SEARCH_SQL,
        "    ORDER BY record_id, strength DESC NULLS LAST, similarity DESC, context_id",
        "    ORDER BY record_id, similarity DESC, context_id",
        (f"{CALIBRATED_T}::test_strength_per_context_is_against_the_nearest_groups_background",),
    ),
    Mutation(
        "one_cache_miss_per_request",
        "issue 28 latency: one search embeds its query once (core's second request reuses it)",
        AI_SEARCH,
        "        if vector is not None:\n            self._vectors.move_to_end(key)",
        "        if vector is not None and False:\n            self._vectors.move_to_end(key)",
        (f"{AI_LEXICAL_T}::test_core_search_and_the_internal_search_make_the_same_decision",),
    ),
    # ---- issue 28: the ai side's own lexical evidence (ai/state.sql, ai/search.sql, ai/channels.py)
    Mutation(
        "ai_lexical_terms_stored_without_the_save_guard",
        "SPEC §10 (issue 28), §7.3.1: the ai side's lexical terms are stored with the embedding, "
        "under its guard (embedding PROCESSING, the job owns its claim)",
        STATE_SQL,
        " WHERE s.context_id = :context_id\n   AND {embedding_savable}\n   AND {lexical_replaced}",
        " WHERE s.context_id = :context_id\n   AND {lexical_replaced}",
        (f"{SAVES_T}::test_upsert_lexical_alone_keeps_both_guards",
         f"{CLAIM_OWNER_T}::test_every_single_write_of_a_taken_over_job_affects_no_row"),
    ),
    Mutation(
        "batch_start_passed_over_row_left_for_the_rescan",
        "SPEC §3: a row the batch's SKIP LOCKED embedding start passed over (locked a moment) "
        "runs as the single job now, not after the rescan's expiry",
        BATCH_PY,
        "                if claim is None and pre.embedding_status in _MAYBE_LOCKED:",
        "                if False:",
        ("tests/integration/ai/test_batch_pipeline.py::"
         "test_a_row_a_batch_start_passed_over_for_a_lock_is_still_processed_now",),
    ),
    Mutation(
        "batch_keyword_start_passed_over_row_left_for_the_rescan",
        "SPEC §3: a row the batch's SKIP LOCKED keyword start passed over runs its single "
        "keyword stage now",
        BATCH_PY,
        "            await asyncio.gather(*(self._single_keyword(row) for row in passed_over))",
        "            pass",
        ("tests/integration/ai/test_batch_pipeline.py::"
         "test_a_keyword_stage_a_batch_start_passed_over_for_a_lock_is_still_processed_now",),
    ),
    Mutation(
        "batch_lexical_terms_not_written",
        "SPEC §10 (issue 28): the batch path stores the ai side's lexical terms as the single job does",
        STATE_PY,
        '        await _execute(conn, "upsert_lexical_batch", _lexical_batch_params(rows))\n',
        "",
        ("tests/integration/ai/test_batch_pipeline.py::"
         "test_a_batch_gives_every_context_what_the_single_job_gives_it",),
    ),
    Mutation(
        "ai_lexical_terms_over_a_deleted_embedding",
        "SPEC §10 (issue 28): never over a context whose embedding core marked deleted",
        STATE_SQL,
        "NOT EXISTS (SELECT 1 FROM ai.context_embedding AS e\n"
        "             WHERE e.context_id = s.context_id AND e.is_deleted)\nON CONFLICT",
        "true\nON CONFLICT",
        (f"{SAVES_T}::test_upsert_lexical_alone_keeps_both_guards",),
    ),
    Mutation(
        "ai_lexical_matches_without_the_status_filter",
        "SPEC §10/§11 #3 (issue 28): the ai side's words of a cancelled context never match",
        SEARCH_SQL,
        "WHERE s.context_id = l.context_id) = 'COMPLETED'",
        "WHERE s.context_id = l.context_id) IN ('COMPLETED', 'CANCELLED', 'PENDING', 'PROCESSING', 'FAILED')",
        (f"{AI_LEXICAL_T}::test_the_ai_lexical_statement_applies_each_filter_alone",),
    ),
    Mutation(
        "ai_lexical_matches_of_every_member",
        "SPEC §10/§11 #19 (issue 28): another member's words never match through the ai side",
        SEARCH_SQL,
        "    WHERE l.user_id = :user_id\n      AND e.user_id = :user_id ",
        "    WHERE true\n      AND true ",
        (f"{AI_LEXICAL_T}::test_the_ai_lexical_statement_applies_each_filter_alone",),
    ),
    Mutation(
        "hybrid_search_without_the_ai_lexical_channel",
        "SPEC §10 (issue 28): /internal/v1/search gives adopters the lexical channel too",
        AI_CHANNELS,
        "CHANNELS: tuple[type[Channel], ...] = (VectorChannel, LexicalChannel)",
        "CHANNELS: tuple[type[Channel], ...] = (VectorChannel,)",
        (f"{AI_LEXICAL_T}::test_internal_search_returns_lexical_only_matches_with_matched_by",),
    ),
    Mutation(
        "core_decides_with_its_own_rule",
        "SPEC §10 (issue 28): core's search decides with the ai side's relevance rule (one decision)",
        COMPOSITION_PY,
        "                                                relevance=ai.relevance))",
        "                                                relevance=None))",
        (f"{WIRING_T}::test_core_search_decides_with_the_ai_sides_rule",),
    ),
    Mutation(
        "no_place_meta_with_the_process_request",
        "SPEC §5.1/§10 (issue 28): every process request carries the record's saved place",
        SERVICES,
        "        return place_meta(row) if row is not None else None",
        "        return None",
        (f"{DISPATCH_HTTP_T}::test_state_row_is_committed_when_the_process_request_arrives",),
    ),
    Mutation(
        "no_place_meta_with_the_rescan_resend",
        "SPEC §5.1/§10 (issue 28): a re-sent process request carries the saved place too",
        RESCAN_SQL_PY,
        "place_meta=place_meta(row) if row[\"external_place_id\"] is not None else None)",
        "place_meta=None)",
        (f"{ROUND}::test_stale_pending_row_is_resent_and_spends_one_retry",),
    ),
    # ---- issue 27: the HTTP edge (pinlog/http.py, app.py) ----------------------------------
    Mutation(
        "body_limit_reads_a_declared_oversized_body",
        "issue 27 #1: a Content-Length over the route's limit is 413 before any byte is read",
        HTTP_PY,
        "            if int(declared) > limit:",
        "            if False:",
        (f"{HTTP_EDGE_T}::test_a_declared_length_over_the_limit_is_413_before_any_byte_is_read"
         "[POST-/v1/search-16384]",),
    ),
    Mutation(
        "body_limit_not_counted_while_streaming",
        "issue 27 #1: a chunked body is cut as soon as its bytes pass the route's limit",
        HTTP_PY,
        "                if received > limit:",
        "                if False:",
        (f"{HTTP_EDGE_T}::test_a_chunked_body_is_cut_at_the_limit[/v1/search-16384]",),
    ),
    Mutation(
        "search_body_limit_is_the_default",
        "issue 27 #1: limits per route (POST /v1/search: a query needs 16 KiB at most)",
        APP,
        "                      routes={(\"POST\", \"/v1/search\"): SEARCH_BODY_BYTES,",
        "                      routes={",
        (f"{HTTP_EDGE_T}::test_a_chunked_body_is_cut_at_the_limit[/v1/search-16384]",),
    ),
    Mutation(
        "metric_method_label_unbounded",
        "issue 27 #2: metric labels from closed sets (made-up methods add no series)",
        APP,
        "            method = method_label(scope.get(\"method\"))",
        "            method = str(scope.get(\"method\", \"\"))",
        (f"{HTTP_EDGE_T}::test_a_thousand_requests_with_random_methods_and_paths_add_no_series",),
    ),
    Mutation(
        "framework_errors_not_in_the_envelope",
        "issue 27 #4: the framework's own errors (404, 405, 400) answer in the one envelope",
        APP,
        "    install_error_handlers(app)\n",
        "",
        (f"{HTTP_EDGE_T}::test_every_error_answer_is_the_one_envelope",),
    ),
    Mutation(
        "internal_401_without_a_message",
        "issue 27 #4: the internal routes answer in the one envelope too",
        AI_API,
        "UNAUTHORIZED = error_body(\"UNAUTHORIZED\", \"missing or wrong X-Internal-Secret\")",
        "UNAUTHORIZED = {\"error\": \"unauthorized\"}",
        (f"{HTTP_EDGE_T}::test_every_error_answer_is_the_one_envelope",),
    ),
    # ---- issue 27: migrations under a lock timeout (db/migrate.py) --------------------------
    Mutation(
        "migrate_waits_without_lock_timeout",
        "issue 27 #3: a migration waits for a table lock at most PINLOG_MIGRATE_LOCK_TIMEOUT, so "
        "live traffic never queues behind it for longer",
        MIGRATE,
        "    conn.execute(text(f\"SET LOCAL lock_timeout = '{max(1, round(config.lock_timeout * 1000))}ms'\"))",
        "    pass",
        (f"{MIGRATE_LOCK_T}::"
         "test_live_traffic_passes_a_migration_waiting_for_a_busy_table_and_the_migration_retries",),
    ),
    Mutation(
        "migrate_not_retried",
        "issue 27 #3: a migration that met a busy table is tried again (PINLOG_MIGRATE_ATTEMPTS)",
        MIGRATE,
        "    for attempt in range(1, config.attempts + 1):",
        "    for attempt in range(1, 2):",
        (f"{MIGRATE_LOCK_T}::"
         "test_live_traffic_passes_a_migration_waiting_for_a_busy_table_and_the_migration_retries",),
    ),
    # ---- issue 27: what displays wrong, public ids, paging, import, edits ---------------------
    Mutation(
        "bidi_controls_kept",
        "issue 27 #6: bidi controls are removed from every displayed field (one normalisation)",
        TEXT,
        "                             + BIDI_CONTROLS + CONTROL_CHARACTERS))",
        "                             + CONTROL_CHARACTERS))",
        (f"{UNICODE_T}::test_bidi_and_control_characters_never_reach_a_displayed_field",),
    ),
    Mutation(
        "place_fields_keep_line_breaks",
        "issue 27 #6: a one-line field (place name, address) shows on one line",
        SERVICES,
        "        value = normalize_line(value)",
        "        value = normalize(value)",
        (f"{UNICODE_T}::test_bidi_and_control_characters_never_reach_a_displayed_field",),
    ),
    Mutation(
        "identifier_with_controls_accepted",
        "issue 27 #6: identifiers shown back (external place id, external ref) are refused with "
        "control/bidi characters or edge whitespace",
        SERVICES,
        "    if not normal and (problem := identifier_problem(value)) is not None:",
        "    if False and (problem := identifier_problem(value)) is not None:",
        (f"{UNICODE_T}::test_bidi_and_control_characters_never_reach_a_displayed_field",),
    ),
    Mutation(
        "external_ref_may_name_a_member_kind",
        "issue 27 #6: an external ref starting with id:/ref: is refused (reachable only as ref:…)",
        SERVICES,
        "    if checked.casefold().startswith(MEMBER_NAME_PREFIXES):",
        "    if False:",
        (f"{UNICODE_T}::test_bidi_and_control_characters_never_reach_a_displayed_field",),
    ),
    Mutation(
        "public_id_tag_not_checked",
        "issue 27 #7: a public id whose id part was altered names no record (the tag is checked)",
        PUBLIC_IDS,
        "        if not hmac.compare_digest(tag, self._prf(b\"tag\", raw)[:_TAG_BYTES]):\n"
        "            return None\n",
        "",
        (f"{PUBLIC_PAGING_T}::"
         "test_the_public_view_is_by_public_id_and_cannot_be_walked_by_counting",),
    ),
    Mutation(
        "record_cursor_ignored",
        "issue 27 #8: a cursor page starts below the previous page's last record",
        CORE_SQL,
        "  AND (CAST(:before AS bigint) IS NULL OR r.id < CAST(:before AS bigint))\n",
        "",
        (f"{PUBLIC_PAGING_T}::test_the_record_list_pages_by_cursor_with_a_total",),
    ),
    Mutation(
        "import_place_not_strict",
        "issue 27 #10: an import line is validated like the API's body (strict types)",
        IMPORTER_PY,
        "    model_config = ConfigDict(alias_generator=to_camel, extra=\"ignore\", strict=True,",
        "    model_config = ConfigDict(alias_generator=to_camel, extra=\"ignore\", strict=False,",
        (f"{IMPORT_T}::test_import_and_the_api_refuse_the_same_lines_and_json_counts_them",),
    ),
    Mutation(
        "import_skipped_lines_not_counted",
        "issue 27 #10: import --json counts the lines skipped as already present",
        IMPORTER_PY,
        "                    record_id = existing\n                    report.lines_skipped += 1\n",
        "                    record_id = existing\n",
        (f"{IMPORT_T}::test_import_and_the_api_refuse_the_same_lines_and_json_counts_them",),
    ),
    Mutation(
        "same_text_edit_makes_a_new_context",
        "issue 27 #11: an edit with the context's own text is no edit (nothing written)",
        SERVICES,
        "            if body == text:",
        "            if False:",
        (f"{PUBLIC_PAGING_T}::test_an_edit_with_the_contexts_own_text_makes_no_new_context",),
    ),
    # ---- issue 27: settings that cannot work, and what an operator notices ------------------
    Mutation(
        "jwt_ttl_zero_accepted",
        "issue 27 #9: PINLOG_JWT_TTL must be positive (tokens would be born expired)",
        SETTINGS_PY,
        '        for name in ("rescan_interval", "pending_expiry", "processing_expiry", "jwt_ttl",\n',
        '        for name in ("rescan_interval", "pending_expiry", "processing_expiry",\n',
        (f"{SETTINGS_LINE_T}[jwt-ttl-0]",),
    ),
    Mutation(
        "search_floor_unbounded",
        "issue 27 #9: a cosine floor is -1..1 (2 would switch the vector channel off silently)",
        SETTINGS_PY,
        "    search_floor: float | None = Field(\n        None, ge=-1, le=1,",
        "    search_floor: float | None = Field(\n        None,",
        (f"{SETTINGS_LINE_T}[search-floor-2]",),
    ),
    Mutation(
        "blank_profile_accepted",
        "issue 27 #9: a blank embedding profile names no vector space",
        SETTINGS_PY,
        "        if value is not None and (not value.strip() or value != value.strip()):",
        "        if False:",
        (f"{SETTINGS_LINE_T}[profile-blank]",),
    ),
    Mutation(
        "empty_data_dir_is_the_cwd",
        "issue 27 #9: an empty PINLOG_DATA_DIR is refused (it would mean the current directory)",
        SETTINGS_PY,
        "        if isinstance(value, str) and not value.strip():\n"
        "            raise ValueError(\"must not be empty (unset it to use ./.pinlog)\")",
        "        if False:\n"
        "            raise ValueError(\"must not be empty (unset it to use ./.pinlog)\")",
        (f"{SETTINGS_LINE_T}[data-dir-empty]",),
    ),
    Mutation(
        "body_limit_below_a_note_accepted",
        "issue 27 #1: PINLOG_MAX_BODY_BYTES must fit the longest note, JSON-escaped",
        SETTINGS_PY,
        "        if self.max_body_bytes is not None and self.max_body_bytes < needed:",
        "        if False:",
        (f"{SETTINGS_LINE_T}[body-bytes-too-small]",),
    ),
    Mutation(
        "db_stop_under_a_running_serve",
        "issue 27 #11: pinlog db stop refuses while pinlog processes use the embedded database",
        CLI_DB_PY,
        "    users = server.users() if server.is_running() else []",
        "    users = []",
        (f"{SERVE_EMBEDDED_T}::test_db_url_only_looks_and_db_stop_refuses_under_a_running_serve",),
    ),
    Mutation(
        "db_url_starts_the_server",
        "issue 27 #9: pinlog db url only looks (never starts or creates a cluster)",
        CLI_DB_PY,
        "    server = embedded_for(settings)\n    if not server.is_running():\n"
        "        exit_with_error(f\"the embedded database of PINLOG_DATA_DIR",
        "    server = embedded_for(settings)\n    server.start()\n    if not server.is_running():\n"
        "        exit_with_error(f\"the embedded database of PINLOG_DATA_DIR",
        (f"{SERVE_EMBEDDED_T}::test_db_url_only_looks_and_db_stop_refuses_under_a_running_serve",),
    ),
    Mutation(
        "port_in_use_is_a_traceback",
        "issue 27 #11: a port in use is one line (exit 3) before anything starts",
        CLI_OPS_PY,
        "    except OSError as exc:\n        sock.close()\n",
        "    except ZeroDivisionError as exc:\n        sock.close()\n",
        (f"{SERVE_EMBEDDED_T}::test_a_port_in_use_is_one_line_before_anything_starts",),
    ),
    Mutation(
        "pending_stage_said_to_be_processing",
        "issue 27 #11: a stage whose failure was not recorded (not PROCESSING) is not said to be "
        "left PROCESSING",
        PIPELINE_PY,
        '        left = ("left PROCESSING for the rescan" if changed else',
        '        left = ("left PROCESSING for the rescan" if True else',
        (f"{PIPELINE}::test_a_keyword_stage_that_failed_before_it_started_is_not_said_to_be_processing",),
    ),
    # ---- the operator console and the command's server client (issue 29) ---------------------
    Mutation(
        "console_actions_outlive_the_app",
        "issue 29: the app's shutdown stops the console's running actions while its engine is "
        "open (a reprocess task that outlived it left a session in a transaction)",
        APP,
        "            if actions is not None:\n                await actions.stop()\n",
        "            if actions is not None:\n                pass\n",
        (f"{CONSOLE_T}::test_a_running_console_reprocess_is_stopped_and_recorded_at_shutdown",),
    ),
    Mutation(
        "console_actions_stop_does_not_wait",
        "issue 29: stopping the console's actions waits until each has ended (its cleanup runs "
        "before the engine is disposed)",
        CONSOLE_ROUTES,
        "        await asyncio.gather(*tasks, return_exceptions=True)\n\n\ndef build_router(",
        "\n\n\ndef build_router(",
        ("tests/unit/test_console_actions.py::test_stop_cancels_a_running_action_and_waits_for_its_cleanup",
         f"{CONSOLE_T}::test_a_running_console_reprocess_is_stopped_and_recorded_at_shutdown"),
    ),
    Mutation(
        "console_stopped_reprocess_not_recorded",
        "issue 29: a console reprocess stopped by the shutdown says so in the action log",
        CONSOLE_ROUTES,
        '                await reads.finish_action(runtime.engine, action_id, {"state": "stopped"})\n',
        "",
        (f"{CONSOLE_T}::test_a_running_console_reprocess_is_stopped_and_recorded_at_shutdown",),
    ),
    Mutation(
        "console_on_without_a_token",
        "issue 29: the console is off (404) unless a console token is configured",
        CONSOLE_ACCESS,
        "        return self.admin_token is not None or self.read_token is not None",
        "        return True",
        (f"{CONSOLE_T}::test_console_is_off_without_a_token",),
    ),
    Mutation(
        "console_any_token_logs_in",
        "issue 29: a login's role is the token's, compared in constant time with each token",
        CONSOLE_ACCESS,
        '        if token is not None and hmac.compare_digest(given, token.encode("utf-8")) and found is None:',
        "        if token is not None and found is None:",
        (f"{CONSOLE_UNIT_T}::test_the_token_decides_the_role",
         f"{CONSOLE_T}::test_login_sets_a_strict_httponly_session_and_refuses_wrong_tokens"),
    ),
    Mutation(
        "console_session_outlives_its_token",
        "issue 29: the session key depends on the role's token, so changing it ends its sessions",
        CONSOLE_ACCESS,
        '    return hmac.new(material.encode("utf-8"), f"pinlog-console|{role}|{token}".encode(),',
        '    return hmac.new(material.encode("utf-8"), f"pinlog-console|{role}|".encode(),',
        (f"{CONSOLE_T}::test_changing_a_token_ends_its_sessions",
         f"{CONSOLE_UNIT_T}::test_a_session_is_signed_expires_and_dies_with_its_token"),
    ),
    Mutation(
        "console_csrf_not_checked",
        "issue 29: every console POST carries the session's CSRF token",
        CONSOLE_ACCESS,
        '    return hmac.compare_digest(presented.encode("utf-8"), csrf_token(config, session).encode())',
        "    return True",
        (f"{CONSOLE_T}::test_actions_need_the_csrf_token_a_confirmation_and_are_recorded",
         f"{CONSOLE_T}::test_logout_needs_csrf_and_ends_the_session",
         f"{CONSOLE_UNIT_T}::test_csrf_and_signed_values_are_bound_to_the_session"),
    ),
    Mutation(
        "console_admin_pages_open_to_read_only",
        "issue 29: the search debugger (note text) and the actions are for the admin role only",
        CONSOLE_ROUTES,
        "        if admin and not session.admin:",
        "        if admin and session.role == 'nobody':",
        (f"{CONSOLE_T}::test_the_read_only_role_never_sees_note_text_nor_secrets",),
    ),
    Mutation(
        "console_session_cookie_readable_by_scripts",
        "issue 29: the session cookie is HttpOnly and SameSite=Strict",
        CONSOLE_ROUTES,
        '                            path=COOKIE_PATH, httponly=True, samesite="strict",',
        '                            path=COOKIE_PATH, httponly=False, samesite="lax",',
        (f"{CONSOLE_T}::test_login_sets_a_strict_httponly_session_and_refuses_wrong_tokens",),
    ),
    Mutation(
        "console_reprocess_without_its_dry_run",
        "issue 29: a reprocess from the console runs only after its dry-run (signed count)",
        CONSOLE_ROUTES,
        '                or not signed_ok(config, session, ticket, fields.get("signature"))):',
        "                ):",
        (f"{CONSOLE_T}::test_reprocess_runs_only_after_its_dry_run",),
    ),
    Mutation(
        "state_counts_miss_the_old_keyword_status",
        "SPEC §12 (issue 29): the maintained counts take every status change (old status -1)",
        CONSOLE_MIGRATION,
        "            UNION ALL SELECT 'keyword', keyword_status, -1 FROM old_rows\n",
        "",
        (f"{COUNTS_T}::test_counts_follow_inserts_updates_deletes_and_truncate",
         f"{CONSOLE_T}::test_overview_counts_equal_the_database_after_every_kind_of_write"),
    ),
    Mutation(
        "state_count_compaction_keeps_the_deltas",
        "SPEC §12 (issue 29): compaction moves each delta into the counts exactly once",
        STATUS_SQL,
        "    DELETE FROM ai.state_count_delta RETURNING stage, status, n",
        "    SELECT stage, status, n FROM ai.state_count_delta",
        (f"{COUNTS_T}::test_counts_follow_inserts_updates_deletes_and_truncate",
         f"{COUNTS_T}::test_compaction_keeps_a_writers_uncommitted_deltas"),
    ),
    Mutation(
        "command_asks_a_server_of_another_database",
        "issue 29: the command asks only a server of the same database (server.json fingerprint)",
        REMOTE_PY,
        '            or recorded.get("database") != fingerprint\n',
        "",
        (f"{CLI_SERVER_T}::test_commands_ask_the_running_server_and_print_the_same_json",),
    ),
    Mutation(
        "command_loads_every_module",
        "issue 29: a command a server answers loads no model, database driver or ai module",
        CLI_INIT,
        '    load((wanted,) if wanted and "--help" not in args else GROUPS)',
        "    load(GROUPS)",
        (f"{CLI_SERVER_T}::test_commands_ask_the_running_server_and_print_the_same_json",),
    ),
    Mutation(
        "doubt_from_the_callers_rule",
        "SPEC §9.1/§10: a doubted record needs the doubt strength of the profile that answered",
        LEXICAL,
        "        doubt_strength = response.doubt_or(rule.doubt_strength)\n",
        "        doubt_strength = rule.doubt_strength\n",
        (f"{CHANNEL_RULES_T}::test_the_doubt_is_the_answering_profiles_not_the_callers",),
    ),
    Mutation(
        "answer_carries_no_doubt_strength",
        "SPEC §9.1/§10: the vector and score answers say whose doubt strength their strengths need",
        AI_CHANNELS,
        '        return response.model_copy(update={"doubt_strength": self.rule.doubt_strength})',
        "        return response",
        (f"{PROFILES_T}::test_the_doubt_strength_follows_the_active_profile_through_a_switch",),
    ),
    Mutation(
        "scored_answer_drops_the_doubt_strength",
        "SPEC §9.1/§10: the kernel keeps the answer's doubt strength when it adds the scored contexts",
        FLOW,
        "        answer = answer.model_copy(update=update)",
        '        answer = SearchResponse(results=answer.results, scored=update["scored"])',
        ("tests/unit/test_channels_flow.py::"
         "test_the_answers_doubt_strength_reaches_the_channels_after_the_score_request",),
    ),
    Mutation(
        "later_answers_doubt_ignored",
        "SPEC §9.1/§10: the score answer's doubt strength (its strengths') wins over the first one's",
        FLOW,
        "        if extra.carries_doubt_strength:\n",
        "        if False:\n",
        ("tests/unit/test_channels_flow.py::"
         "test_the_answers_doubt_strength_reaches_the_channels_after_the_score_request",),
    ),
    Mutation(
        "doubt_strength_sent_unasked",
        "SPEC §10 rolling upgrade: doubtStrength is answered only when the request asks for it",
        AI_CHANNELS,
        "        if not request.with_doubt_strength:\n",
        "        if False:\n",
        ("tests/integration/search/test_internal_route.py::"
         "test_the_doubt_strength_is_answered_only_when_asked_and_null_survives_the_wire",),
    ),
    Mutation(
        "null_doubt_strength_dropped_on_the_wire",
        "SPEC §9.1/§10: a null doubtStrength (the profile has none) reaches the caller as null",
        "src/pinlog/ai/search_api.py",
        '        answer["doubtStrength"] = response.doubt_strength\n',
        "        pass\n",
        ("tests/integration/search/test_internal_route.py::"
         "test_the_doubt_strength_is_answered_only_when_asked_and_null_survives_the_wire",),
    ),
    Mutation(
        "live_dispatch_gives_up_when_busy",
        "SPEC §5.1/§7.2: the live dispatch re-sends a refused (503) request, paced, until accepted",
        DISPATCH_PY,
        "        wait = 0.0 if self.busy_gave_up or self._stopping else self.busy_wait\n",
        "        wait = 0.0\n",
        ("tests/unit/core/test_dispatcher.py::"
         "test_a_busy_ai_side_gets_the_live_request_again_once_its_queue_has_room",
         f"{IMPORT_T}::test_a_refused_live_dispatch_is_sent_again_once_the_queue_has_room"),
    ),
    Mutation(
        "busy_dispatch_never_gives_up",
        "SPEC §9.1/§7.2: after one full busy wait the live dispatch sends once until an accept",
        DISPATCH_PY,
        "            self.busy_gave_up = True\n",
        "            pass\n",
        (f"{DISPATCHER_T}::test_after_one_full_busy_wait_requests_go_once_until_one_is_accepted",),
    ),
    Mutation(
        "busy_dispatch_gives_up_for_good",
        "SPEC §7.2: an accepted request resumes the live dispatch's busy waits",
        DISPATCH_PY,
        "            self.busy_gave_up = False\n",
        "            pass\n",
        (f"{DISPATCHER_T}::test_after_one_full_busy_wait_requests_go_once_until_one_is_accepted",),
    ),
    Mutation(
        "shutdown_waits_out_busy_re_sends",
        "SPEC §4/§7.2: a shutdown ends the busy re-sends at their next pause",
        DISPATCH_PY,
        "            if status != 503 or stopping():\n",
        "            if status != 503:\n",
        (f"{DISPATCHER_T}::test_stop_ends_the_busy_re_sends_instead_of_waiting_them_out",),
    ),
    Mutation(
        "paced_busy_logged_per_re_send",
        "SPEC §12: a paced busy send logs one WARNING, not one per re-send",
        DISPATCH_PY,
        "    elif outcome == BUSY and _PACED.get():\n",
        "    elif False:\n",
        (f"{DISPATCHER_T}::test_a_paced_busy_send_logs_one_warning_not_one_per_re_send",),
    ),
    Mutation(
        "live_dispatch_not_given_the_busy_wait",
        "SPEC §5.1/§7.2: the runtime's dispatcher gets PINLOG_RESCAN_BUSY_WAIT",
        "src/pinlog/core/runtime.py",
        "                                     workers=config.dispatch.workers,\n"
        "                                     busy_wait=config.dispatch.busy_wait)",
        "                                     workers=config.dispatch.workers)",
        ("tests/unit/core/test_dispatcher.py::test_the_runtime_dispatcher_waits_out_a_busy_ai_side",
         f"{IMPORT_T}::test_a_refused_live_dispatch_is_sent_again_once_the_queue_has_room"),
    ),
    Mutation(
        "batch_start_ignores_a_take_over_in_flight",
        "SPEC §7.3.1: a batch start waits for this process's take-over statement in flight",
        AI_RUNTIME,
        "            async with self._take_over_lock:  # the statement in flight: wait for its commit\n"
        "                pass\n",
        "            pass\n",
        (f"{API_BATCH_T}::test_a_take_over_in_flight_never_splits_the_batch_its_rows_join",),
    ),
    Mutation(
        "claimed_rows_still_taken_over",
        "SPEC §7.3.1: rows a worker claims leave the take-over list",
        AI_RUNTIME,
        "        dropped = claimed.intersection(self._taken)\n",
        "        dropped = set()\n",
        (f"{API_BATCH_T}::test_the_rows_a_worker_claims_are_not_taken_over_behind_its_back",),
    ),
    Mutation(
        "batch_stopped_before_its_claim_not_taken_over",
        "SPEC §7.3.1: rows a batch stopped before its claim are listed again for the take-over",
        AI_RUNTIME,
        "        if again:\n",
        "        if False:\n",
        (f"{API_BATCH_T}::test_a_batch_stopped_before_its_claim_takes_its_rows_over_after_all[pre_check]",),
    ),
    Mutation(
        "crashed_batch_not_taken_over",
        "SPEC §7.3.1: the rows of a batch that raised (or was cancelled) are listed again for the take-over",
        AI_RUNTIME,
        "            self._after_batch(dropped, jobs, None)\n",
        "            pass\n",
        (f"{API_BATCH_T}::test_a_batch_stopped_before_its_claim_takes_its_rows_over_after_all[whole_batch]",),
    ),
    Mutation(
        "finished_rows_taken_over_late",
        "SPEC §7.3.1: a row with no PENDING work left (missing, finished) is not listed again",
        AI_RUNTIME,
        "_NOTHING_TO_OWN = frozenset({None, \"missing\", \"finished\"})",
        "_NOTHING_TO_OWN = frozenset({None})",
        (f"{API_BATCH_T}::test_a_finished_row_of_a_batch_is_not_taken_over_late",),
    ),
    Mutation(
        "closed_connection_handed_out",
        "SPEC §6: a pooled connection the server closed is noticed at checkout (its socket) and "
        "replaced, not handed out to fail the statement",
        ENGINE_PY,
        "        return bool(poller.poll(0))\n",
        "        return False\n",
        (f"{LIVENESS_T}::test_a_connection_the_server_closed_is_replaced_before_it_is_used",),
    ),
    Mutation(
        "failed_ping_not_a_disconnect",
        "SPEC §6: a ping that finds the connection closed invalidates it (the pool opens another)",
        ENGINE_PY,
        "            raise exc.InvalidatePoolError() from err\n",
        "            raise\n",
        (f"{LIVENESS_T}::test_a_connection_the_server_closed_is_replaced_before_it_is_used",),
    ),
    Mutation(
        "idle_connection_never_pinged",
        "issue 25: a connection idle for PING_AFTER_IDLE or more is pinged before it is handed out",
        ENGINE_PY,
        "        if clock() - since < idle and not _may_be_closed(dbapi_connection):\n",
        "        if not _may_be_closed(dbapi_connection):\n",
        (f"{LIVENESS_T}::test_a_connection_used_moments_ago_is_not_pinged_one_idle_long_enough_is",),
    ),
    Mutation(
        "every_checkout_pinged",
        "issue 25: a connection used moments ago with a quiet socket is handed out without a ping",
        ENGINE_PY,
        "        if clock() - since < idle and not _may_be_closed(dbapi_connection):\n",
        "        if False:\n",
        (f"{LIVENESS_T}::test_a_connection_used_moments_ago_is_not_pinged_one_idle_long_enough_is",),
    ),
    Mutation(
        "disconnect_replaces_only_one_connection",
        "SPEC §6: a ping that finds a disconnect replaces every pooled connection older than it "
        "(after a restart all are dead), as the pre-ping does",
        ENGINE_PY,
        "            raise exc.InvalidatePoolError() from err\n",
        "            raise exc.DisconnectionError() from err\n",
        (f"{LIVENESS_T}::test_a_disconnect_found_by_a_ping_replaces_every_older_connection_too",),
    ),
    Mutation(
        "every_ping_error_a_disconnect",
        "SPEC §6: a ping error that is not a disconnect reaches the caller (the connection is "
        "not silently replaced)",
        ENGINE_PY,
        "        if dialect.is_disconnect(err, dbapi_connection, None):\n",
        "        if True:\n",
        (f"{LIVENESS_T}::test_a_ping_error_that_is_not_a_disconnect_propagates",),
    ),
    Mutation(
        "uninspectable_connection_trusted",
        "SPEC §6: a connection whose socket cannot be inspected is pinged, not trusted",
        ENGINE_PY,
        "        return True\n\n\ndef _ping(",
        "        return False\n\n\ndef _ping(",
        (f"{LIVENESS_T}::test_a_connection_that_cannot_be_inspected_counts_as_maybe_closed",),
    ),
    Mutation(
        "batch_fill_ignores_its_batch",
        "SPEC §5.4 (issue 25): a call is filled with its head request's batch before other "
        "texts, so a backfill's model answer is saved in one transaction, not in fragments",
        BATCHING,
        "            return 0 if request.group is None else 1 if request.group is head.group else 2\n",
        "            return 0\n",
        (f"{BATCHING_T}::test_a_call_is_filled_with_its_head_requests_batch_before_shorter_others",
         f"{BATCH_T}::test_two_batches_queued_together_are_each_embedded_and_saved_whole"),
    ),
    Mutation(
        "batch_texts_not_grouped",
        "SPEC §5.4 (issue 25): the batch path submits one batch's texts as one group "
        "(EMBED_GROUP), so the micro-batcher keeps them in one call",
        BATCH_PY,
        "        group = object()\n",
        "        group = None\n",
        (f"{BATCH_T}::test_two_batches_queued_together_are_each_embedded_and_saved_whole",),
    ),
    Mutation(
        "batch_lexical_terms_without_the_save_guard",
        "SPEC §10 (issue 28), §3: the batch path's lexical terms are stored only under the "
        "embedding save's guard (a context cancelled while its batch is embedded gets none)",
        STATE_SQL,
        "                place_terms text[]) ON t.context_id = c.context_id\n"
        " WHERE {embedding_savable}\n",
        "                place_terms text[]) ON t.context_id = c.context_id\n"
        " WHERE true\n",
        (f"{BATCH_T}::test_a_context_deleted_while_its_batch_is_embedded_is_never_stored",),
    ),
    Mutation(
        "paced_batch_busy_logged_as_lost",
        "SPEC §12: a busy answer a paced batch send sends again is DEBUG, not a WARNING that "
        "the rescan will retry (issue 25: a backfill meets a full queue all the time)",
        DISPATCH_PY,
        "    token = _PACED.set(True)\n    try:\n        statuses = list(await client.send_batch(",
        "    token = _PACED.set(False)\n    try:\n        statuses = list(await client.send_batch(",
        ("tests/unit/core/test_batch_pacing.py::"
         "test_busy_answers_that_are_sent_again_log_no_warning",),
    ),
    Mutation(
        "paced_batch_still_busy_not_warned",
        "SPEC §12: items still busy when a paced batch send gives up are one WARNING",
        DISPATCH_PY,
        "    if busy:\n        log.warning(\"process batch not delivered",
        "    if False:\n        log.warning(\"process batch not delivered",
        ("tests/unit/core/test_batch_pacing.py::"
         "test_items_still_busy_when_the_busy_wait_ends_log_one_warning",),
    ),
    Mutation(
        "batch_transient_first_attempt_not_retried",
        "SPEC §6 (issue 25): a batch's model call is each text's first attempt; a transient "
        "failure goes on with the single job's attempts, not straight to the rescan",
        BATCH_PY,
        "                    if future in first and isinstance(outcome, TransientModelError):\n",
        "                    if False:\n",
        (f"{BATCH_T}::test_a_transient_failure_of_a_batch_call_is_retried_for_each_of_its_texts",),
    ),
    Mutation(
        "batch_first_attempt_not_counted",
        "SPEC §6: the batch's call counts as the first attempt (or its throttle is waited out): "
        "a text never gets more than PINLOG_MODEL_ATTEMPTS calls",
        PIPELINE_PY,
        "        replay = [failed] if failed is not None else []\n",
        "        replay = []\n",
        (f"{BATCH_T}::test_a_batch_text_that_keeps_failing_gets_the_single_jobs_attempts_and_no_more",
         f"{BATCH_T}::test_a_throttle_of_a_batch_call_is_waited_out_without_spending_an_attempt"),
    ),
    Mutation(
        "batch_stage_without_budget",
        "SPEC §6 budget: a batch's texts still waiting for the model when the stage budget ends "
        "fail transiently then (before a re-claim could duplicate them)",
        BATCH_PY,
        "timeout=max(0.0, deadline - loop.time()),",
        "timeout=None,",
        (f"{BATCH_T}::test_a_batch_text_still_waiting_when_the_stage_budget_ends_fails_transiently",),
    ),
    Mutation(
        "batcher_degenerate_row_unchecked",
        "SPEC §9: a degenerate row of a model answer fails its own request (never stored), "
        "checked once per answer",
        BATCHING,
        "            if bad and any(offset <= i < offset + n for i in bad):\n",
        "            if False:\n",
        (f"{BATCHING_T}::test_embed_each_fails_only_the_future_of_a_degenerate_or_refused_text",
         f"{BATCH_T}::test_a_degenerate_vector_in_a_batch_fails_only_its_context"),
    ),
    Mutation(
        "embed_each_without_its_batch_group",
        "SPEC §5.4 (issue 25): texts queued at once keep the batch group they were queued "
        "with (the fair fill's origin)",
        BATCHING,
        "        now, group = asyncio.get_running_loop().time(), EMBED_GROUP.get()\n",
        "        now, group = asyncio.get_running_loop().time(), None\n",
        (f"{BATCHING_T}::test_embed_each_queues_every_text_as_its_own_request_in_one_call",
         f"{BATCH_T}::test_two_batches_queued_together_are_each_embedded_and_saved_whole"),
    ),
    Mutation(
        "search_channels_read_before_prepare",
        "issue 28: a search's vector side prepares (embeds a query for a model on this CPU) "
        "before the channels read",
        FLOW,
        "    await vector.prepare(query)\n    found, answer",
        "    found, answer",
        ("tests/unit/test_channels_flow.py::test_a_vector_search_that_embeds_here_prepares_before_the_channels_read",),
    ),
    Mutation(
        "search_prepare_ignores_where_the_model_runs",
        "issue 28: only a model on this machine's CPU embeds the query before the channels read "
        "(a remote one embeds while they read)",
        "src/pinlog/ai/channels.py",
        '        if getattr(self.provider, "on_this_cpu", False) and not is_filler(query.text):\n',
        "        if not is_filler(query.text):\n",
        ("tests/integration/search/test_public_search.py::test_a_model_on_this_cpu_embeds_the_query_before_cores_channels_read[False]",),
    ),
    Mutation(
        "search_prepare_never_embeds",
        "issue 28: with the model on this CPU the query is embedded before core's channels read",
        "src/pinlog/ai/channels.py",
        '        if getattr(self.provider, "on_this_cpu", False) and not is_filler(query.text):\n',
        "        if False:\n",
        ("tests/integration/search/test_public_search.py::test_a_model_on_this_cpu_embeds_the_query_before_cores_channels_read[True]",),
    ),
    Mutation(
        "batcher_hides_where_the_model_runs",
        "issue 28: the micro-batcher says whether its provider computes on this CPU",
        BATCHING,
        '        self.on_this_cpu = bool(getattr(provider, "on_this_cpu", False))',
        "        self.on_this_cpu = False",
        ("tests/integration/search/test_public_search.py::test_a_model_on_this_cpu_embeds_the_query_before_cores_channels_read[True]",),
    ),
    Mutation(
        "core_search_prepare_hook_unused",
        "issue 28: core's vector search calls the in-process client's prepare hook",
        "src/pinlog/core/search.py",
        "        if prepare is not None:\n            await prepare(",
        "        if False:\n            await prepare(",
        ("tests/integration/search/test_public_search.py::test_a_model_on_this_cpu_embeds_the_query_before_cores_channels_read[True]",),
    ),
    Mutation(
        "in_process_prepare_not_forwarded",
        "issue 28: the in-process search client forwards prepare to the ai runtime",
        COMPOSITION_PY,
        "            await self._runtime.prepare_search(request)\n",
        "            pass\n",
        ("tests/integration/search/test_public_search.py::test_a_model_on_this_cpu_embeds_the_query_before_cores_channels_read[True]",),
    ),
    Mutation(
        "core_lexical_read_in_a_transaction",
        "issue 28: core's lexical read runs in autocommit (no BEGIN/ROLLBACK round trips)",
        "src/pinlog/core/channels/lexical.py",
        "        async with autocommit(self.engine).connect() as conn:",
        "        async with self.engine.connect() as conn:",
        ("tests/integration/search/test_public_search.py::test_the_searchs_reads_run_without_begin_or_rollback",),
    ),
    Mutation(
        "search_verification_in_a_transaction",
        "issue 28: the re-verification of a search's hits reads in autocommit",
        "src/pinlog/core/search.py",
        "    async with autocommit(engine).connect() as conn:",
        "    async with engine.connect() as conn:",
        ("tests/integration/search/test_public_search.py::test_the_searchs_reads_run_without_begin_or_rollback",),
    ),
    Mutation(
        "ai_lexical_read_in_a_transaction",
        "issue 28: the ai side's lexical read runs in autocommit",
        "src/pinlog/ai/channels.py",
        "        async with autocommit(self.engine).connect() as conn:",
        "        async with self.engine.connect() as conn:",
        ("tests/integration/search/test_ai_lexical.py::test_the_ai_sides_lexical_read_runs_without_begin_or_rollback",),
    ),
    Mutation(
        "autocommit_proxy_keeps_transactions",
        "issue 28: db.engine.autocommit gives an engine in autocommit",
        ENGINE_PY,
        'engine.execution_options(isolation_level="AUTOCOMMIT")',
        'engine.execution_options(isolation_level="READ COMMITTED")',
        ("tests/integration/search/test_public_search.py::test_the_searchs_reads_run_without_begin_or_rollback",
         "tests/integration/search/test_ai_lexical.py::test_the_ai_sides_lexical_read_runs_without_begin_or_rollback"),
    ),
    Mutation(
        "query_lane_per_provider",
        "issue 28: every local-e5 provider of a process queries on one thread (one lasting "
        "OpenMP pool)",
        "src/pinlog/ai/providers/local_e5.py",
        "        self._query_executor = _query_lane()\n",
        '        self._query_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="q")\n',
        ("tests/unit/ai/test_providers.py::test_local_e5_passage_calls_run_on_threads_that_end_with_them",),
    ),
    Mutation(
        "passage_on_a_lasting_thread",
        "issue 28: a local-e5 passage call runs on a thread that ends with it (its OpenMP pool "
        "would otherwise slow every query embedding ~3x)",
        "src/pinlog/ai/providers/local_e5.py",
        "        return on_a_passing_thread(lambda: self._model.passage(texts))\n",
        "        return self._model.passage(texts)\n",
        ("tests/unit/ai/test_providers.py::test_local_e5_passage_calls_run_on_threads_that_end_with_them",),
    ),
    Mutation(
        "passage_thread_at_normal_priority",
        "issue 28: local-e5 passage calls run at background priority, so a search query wins the CPU",
        "src/pinlog/ai/providers/local_e5.py",
        "    def run() -> None:\n        _background_priority()\n",
        "    def run() -> None:\n",
        ("tests/unit/ai/test_providers.py::test_local_e5_passage_calls_run_on_threads_that_end_with_them",),
    ),
    Mutation(
        "gc_threshold_not_applied",
        "issue 25: the components run with PINLOG_GC_THRESHOLD's collector tuning",
        COMPOSITION_PY,
        "    with tuned_collector(config.settings.gc_threshold):\n",
        "    with tuned_collector(0):\n",
        ("tests/unit/test_collector.py::test_running_components_apply_the_setting",),
    ),
    Mutation(
        "gc_tuning_not_restored",
        "issue 25: the interpreter's collector thresholds come back when the components stop",
        COMPOSITION_PY,
        "            gc.set_threshold(*_BEFORE)\n",
        "            pass\n",
        ("tests/unit/test_collector.py::test_the_block_tunes_the_young_generation_freezes_and_restores",),
    ),
    Mutation(
        "gc_tuning_restored_by_the_first_replica_out",
        "issue 25: overlapping blocks (replicas in one process) keep the tuning until the last "
        "one ends",
        COMPOSITION_PY,
        "        if not _TUNED:  # the last one out restores it\n",
        "        if True:  # the last one out restores it\n",
        ("tests/unit/test_collector.py::test_overlapping_blocks_restore_only_when_the_last_one_ends",),
    ),
    Mutation(
        "batch_save_per_answer",
        "issue 25 (group commit): a batch runs one save at a time; the answers that arrive "
        "meanwhile go into the next save together, not into a transaction each",
        BATCH_PY,
        "        if not self.tasks or self.tasks[-1].done():\n",
        "        if True:\n",
        (f"{BATCH_T}::test_answers_that_arrive_while_a_save_runs_are_saved_together",),
    ),
    Mutation(
        "batch_answers_left_after_a_save",
        "issue 25 (group commit): what arrived while a save ran is saved by the next one "
        "(never left unsaved)",
        BATCH_PY,
        "        while self.backlog:\n            items, self.backlog = self.backlog, []\n",
        "        if self.backlog:\n            items, self.backlog = self.backlog, []\n",
        (f"{BATCH_T}::test_answers_that_arrive_while_a_save_runs_are_saved_together",),
    ),
    Mutation(
        "batch_group_left_behind",
        "SPEC §5.4 (issue 25): the batch group is set only while one batch's texts are "
        "submitted; the worker's later single jobs run without it",
        BATCH_PY,
        "            EMBED_GROUP.reset(batch_group)\n",
        "            pass\n",
        (f"{BATCH_T}::test_two_batches_queued_together_are_each_embedded_and_saved_whole",),
    ),
    Mutation(
        "single_job_fills_after_batches",
        "SPEC §5.4 fair fill: a single job's request rides along with the next call, before "
        "the texts of any batch",
        BATCHING,
        "            return 0 if request.group is None else 1 if request.group is head.group else 2\n",
        "            return 0 if request.group is head.group else 1 if request.group is None else 2\n",
        (f"{BATCHING_T}::test_a_call_is_filled_with_its_head_requests_batch_before_shorter_others",),
    ),
    Mutation(
        "batcher_linger_loses_its_cancel",
        "SPEC §5.4, §7.3.1: shutdown closes the micro-batcher even when a request woke its "
        "loop in the tick of the cancel (asyncio.wait_for drops that cancel on Python 3.11, "
        "the Python CI runs; aclose then waited forever)",
        BATCHING,
        "                            async with asyncio.timeout(deadline - loop.time()):\n"
        "                                await wakeup.wait()\n",
        "                            await asyncio.wait_for(wakeup.wait(), deadline - loop.time())\n",
        (f"{BATCHING_T}::test_aclose_returns_when_a_request_arrived_in_the_tick_before_it",),
    ),
    Mutation(
        "lexical_member_terms_keyed_otherwise",
        "SPEC §10, issue 28: the query's terms are keyed by the member exactly as "
        "core.member_terms keys the rows (migration 0012), so the index finds what @@ finds",
        "src/pinlog/core/channels/lexical.py",
        '            "member_terms": [f"{member_id} {term}" for term in terms],\n',
        '            "member_terms": [f"{member_id}:{term}" for term in terms],\n',
        (f"{LEXICAL_T}::test_lexical_match_on_a_note_word_a_place_name_and_an_english_note",),
    ),
    Mutation(
        "member_terms_function_keys_otherwise",
        "SPEC §10, issue 28: core.member_terms keys each term as '<member id> <term>', the key "
        "lexical_params gives the query's terms (migration 0012)",
        "src/pinlog/db/migrations/versions/0012_member_terms_index.py",
        "member_id::text || ' ' || t",
        "member_id::text || ':' || t",
        (f"{LEXICAL_T}::test_lexical_match_on_a_note_word_a_place_name_and_an_english_note",
         "tests/integration/test_migrations.py::test_migrate_creates_exactly_the_spec_schema"),
    ),
)
