-- The database picture for /metrics and `pinlog status` (SPEC §12). Read-only. Owned by core.
-- The `unfinished` and `age` markers are rescan.sql's fragments (written once there; spliced by
-- pinlog.db.sql.Queries).

-- name: rows_per_stage_status
-- State rows per stage × status. One pass over the table (the only O(table) read here).
SELECT 'embedding' AS stage, embedding_status AS status, count(*) AS n
FROM ai.context_ai_state GROUP BY embedding_status
UNION ALL
SELECT 'keyword', keyword_status, count(*)
FROM ai.context_ai_state GROUP BY keyword_status

-- name: unfinished_by_retry_count
-- retry_count distribution of unfinished rows (rescan.sql's `unfinished` fragment: the partial
-- rescan index's predicate verbatim, so this costs O(unfinished rows)).
SELECT retry_count, count(*) AS n
FROM ai.context_ai_state
WHERE {unfinished}
GROUP BY retry_count ORDER BY retry_count

-- name: unfinished_summary
-- Exhausted-but-unfinished rows (should return to 0 within one interval after their expiry),
-- dead-end keyword stages, and the age in seconds of the oldest unfinished row (rescan clock:
-- greatest(updated_at, rescanned_at), SPEC §7.3), by the database clock.
SELECT
    count(*) FILTER (WHERE retry_count >= :max_retries) AS exhausted_unfinished,
    count(*) FILTER (WHERE keyword_status = 'PENDING' AND embedding_status = 'FAILED') AS dead_ends,
    count(*) AS unfinished,
    extract(epoch FROM now() - min({age}))
        AS oldest_unfinished_seconds
FROM ai.context_ai_state
WHERE {unfinished}

-- name: recent_failures
-- The most recent rows with a FAILED stage and their last_error (already redacted by the writer).
SELECT context_id, embedding_status, keyword_status, retry_count, last_error,
       coalesce(last_error_at, updated_at) AS at
FROM ai.context_ai_state
WHERE embedding_status = 'FAILED' OR keyword_status = 'FAILED'
ORDER BY updated_at DESC
LIMIT :limit
