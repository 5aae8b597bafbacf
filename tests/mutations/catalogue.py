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
PRESETS_PY = "src/pinlog/ai/presets.py"
HEAD_MIGRATION = "src/pinlog/db/migrations/versions/0006_any_preset_category.py"

GUARDS = "tests/integration/ai/test_state_guards.py"
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
MIGRATION_FILES_T = "tests/unit/test_migration_files.py"
PRESET_FILE_T = "tests/unit/ai/judges/test_preset_file.py"
NO_DATABASE_T = "tests/unit/test_no_database.py"


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
    Mutation(
        "start_embedding_reclaims_live_processing",
        "SPEC §3 start (embedding): a PROCESSING stage is re-claimed only after the expiry",
        STATE_SQL,
        "OR (s.embedding_status = 'PROCESSING'\n                AND (s.updated_at < now() - :expiry\n",
        "OR (s.embedding_status = 'PROCESSING'\n                AND (true\n",
        (f"{GUARDS}::test_embedding_start_only_from_pending",
         f"{GUARDS}::test_processing_younger_than_expiry_is_not_reclaimed"),
    ),
    Mutation(
        "start_embedding_reclaims_on_any_retry_count",
        "SPEC §7.3 (last paragraph): only a retry_count HIGHER than at the stage's start re-claims",
        STATE_SQL,
        "OR s.retry_count > s.embedding_start_retry)))",
        "OR s.retry_count >= s.embedding_start_retry)))",
        (f"{RECLAIM}::test_backend_claim_after_a_crash_lets_the_resend_reclaim",),
    ),
    Mutation(
        "start_embedding_from_failed_or_cancelled",
        "SPEC §3 start (embedding): only from PENDING (never FAILED → PROCESSING, never out of "
        "CANCELLED)",
        STATE_SQL,
        "AND (s.embedding_status = 'PENDING'",
        "AND (s.embedding_status IN ('PENDING', 'FAILED', 'CANCELLED')",
        (f"{GUARDS}::test_embedding_start_only_from_pending",),
    ),
    Mutation(
        "start_keyword_without_completed_embedding",
        "SPEC §3 start (keyword): requires embedding_status = COMPLETED",
        STATE_SQL,
        "       AND s.embedding_status = 'COMPLETED'\n       AND (s.keyword_status = 'PENDING'",
        "       AND (s.keyword_status = 'PENDING'",
        (f"{GUARDS}::test_keyword_start_needs_pending_and_embedding_completed",
         f"{GUARDS}::test_keyword_reclaim_also_needs_embedding_completed"),
    ),
    Mutation(
        "start_keyword_from_completed",
        "SPEC §3: the ai side never changes a COMPLETED stage (keyword start only from PENDING)",
        STATE_SQL,
        "AND (s.keyword_status = 'PENDING'",
        "AND (s.keyword_status IN ('PENDING', 'COMPLETED')",
        (f"{GUARDS}::test_keyword_start_needs_pending_and_embedding_completed",
         f"{PIPELINE}::test_a_finished_keyword_stage_is_never_restarted_by_the_job"),
    ),
    Mutation(
        "start_keyword_reclaims_live_processing",
        "SPEC §3 start (keyword): a PROCESSING stage is re-claimed only after the expiry",
        STATE_SQL,
        "OR (s.keyword_status = 'PROCESSING'\n                AND (s.updated_at < now() - :expiry\n",
        "OR (s.keyword_status = 'PROCESSING'\n                AND (true\n",
        (f"{GUARDS}::test_keyword_start_needs_pending_and_embedding_completed",),
    ),
    Mutation(
        "start_keyword_reclaims_on_any_retry_count",
        "SPEC §7.3 (last paragraph): only a retry_count HIGHER than at the stage's start re-claims",
        STATE_SQL,
        "OR s.retry_count > s.keyword_start_retry)))",
        "OR s.retry_count >= s.keyword_start_retry)))",
        (f"{RECLAIM}::test_backend_claim_after_a_crash_lets_the_resend_reclaim",),
    ),
    Mutation(
        "complete_embedding_not_only_from_processing",
        "SPEC §3 complete (embedding): only from PROCESSING (never revives CANCELLED)",
        STATE_SQL,
        "       AND embedding_status = 'PROCESSING'\n    RETURNING context_id",
        "       AND embedding_status IN ('PROCESSING', 'CANCELLED', 'FAILED')\n    RETURNING context_id",
        (f"{GUARDS}::test_complete_embedding_only_from_processing",),
    ),
    Mutation(
        "complete_keyword_not_only_from_processing",
        "SPEC §3 complete (keyword): only from PROCESSING",
        STATE_SQL,
        "       AND keyword_status = 'PROCESSING'\n       AND embedding_status = 'COMPLETED'\n"
        "    RETURNING context_id",
        "       AND keyword_status IN ('PROCESSING', 'CANCELLED', 'FAILED')\n"
        "       AND embedding_status = 'COMPLETED'\n    RETURNING context_id",
        (f"{GUARDS}::test_complete_keyword_only_from_processing_with_embedding_completed",),
    ),
    Mutation(
        "complete_keyword_without_completed_embedding",
        "SPEC §3 complete (keyword): and embedding_status = COMPLETED",
        STATE_SQL,
        "       AND keyword_status = 'PROCESSING'\n       AND embedding_status = 'COMPLETED'\n"
        "    RETURNING context_id",
        "       AND keyword_status = 'PROCESSING'\n    RETURNING context_id",
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
        "   AND s.embedding_status = 'PROCESSING'\nON CONFLICT (context_id) DO UPDATE",
        "ON CONFLICT (context_id) DO UPDATE",
        (f"{GUARDS}::test_embedding_upsert_only_while_processing",),
    ),
    Mutation(
        "keyword_insert_without_guard",
        "SPEC §5.2 step 3 save: keyword rows only while keyword PROCESSING and embedding COMPLETED",
        STATE_SQL,
        " WHERE s.context_id = :context_id\n   AND s.keyword_status = 'PROCESSING'\n"
        "   AND s.embedding_status = 'COMPLETED';",
        " WHERE s.context_id = :context_id;",
        (f"{GUARDS}::test_keyword_writes_are_guarded",),
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
        "algorithms=[settings.jwt_algorithm]",
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
