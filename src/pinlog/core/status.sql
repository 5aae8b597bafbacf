-- The database picture for /metrics and `pinlog status` (SPEC §12). Read-only. Owned by core.
-- The `unfinished` and `age` markers are rescan.sql's fragments (written once there; spliced by
-- pinlog.db.sql.Queries).

-- name: state_counts_maintained
-- Whether migration 0008_operator_console keeps the counts below (not on an adopted database).
SELECT to_regclass('ai.state_count') IS NOT NULL AS maintained

-- name: state_counts
-- Rule: SPEC §12 state rows per stage × status, without reading the state table: the maintained
-- counts plus the deltas the triggers of ai.context_ai_state appended since the last compaction
-- (one snapshot, so a concurrent compaction is seen whole or not at all). O(deltas).
SELECT stage, status, sum(n)::bigint AS n
FROM (SELECT stage, status, n FROM ai.state_count
      UNION ALL
      SELECT stage, status, n FROM ai.state_count_delta) AS counted
GROUP BY stage, status

-- name: compact_state_counts_lock
-- One compaction at a time (others skip: the counts are right either way).
SELECT pg_try_advisory_xact_lock(hashtext('pinlog.state_count')) AS locked

-- name: compact_state_counts
-- Rule: SPEC §12 — fold the deltas into ai.state_count in one statement: only deltas this
-- snapshot sees are deleted and added (a writer's uncommitted deltas stay for the next round),
-- so no change is lost or counted twice.
WITH moved AS (
    DELETE FROM ai.state_count_delta RETURNING stage, status, n
), sums AS (
    SELECT stage, status, sum(n) AS n FROM moved GROUP BY stage, status
)
INSERT INTO ai.state_count AS c (stage, status, n)
SELECT stage, status, n FROM sums
ON CONFLICT (stage, status) DO UPDATE SET n = c.n + EXCLUDED.n

-- name: rows_per_stage_status
-- State rows per stage × status. One pass over the table: only where the counts are not
-- maintained (an adopted database, whose core is the backend's).
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

-- name: anomalies
-- Rows the state machine should never produce, by kind (SPEC §3, §7.2), for `pinlog status`.
-- half_cancelled: one stage CANCELLED, the other unfinished (the next round ends it CANCELLED);
-- dead_end_keyword: keyword PENDING behind a FAILED embedding (the next round ends it FAILED);
-- keyword_ahead_of_embedding: keyword PROCESSING/COMPLETED while the embedding is neither
-- COMPLETED nor CANCELLED (the keyword start requires a COMPLETED embedding);
-- deleted_not_cancelled: the context, its record or member is deleted but a stage is not
-- CANCELLED (an invalidation was missed; the rescan skips it and logs a WARN);
-- state_without_context: a state row whose core.context row does not exist — unless both its
-- stages are CANCELLED: that is a purged note's tombstone, kept (at least the late-result
-- window) after the retention job or an erasure removed the note (issue 31).
-- One pass over the state table joined to core (O(table), like rows_per_stage_status).
SELECT kind, n FROM (
    SELECT 1 AS ord, 'half_cancelled' AS kind,
           count(*) FILTER (WHERE {unfinished}
                            AND (s.embedding_status = 'CANCELLED' OR s.keyword_status = 'CANCELLED')) AS n
    FROM ai.context_ai_state AS s
    UNION ALL
    SELECT 2, 'dead_end_keyword',
           count(*) FILTER (WHERE s.keyword_status = 'PENDING' AND s.embedding_status = 'FAILED')
    FROM ai.context_ai_state AS s
    UNION ALL
    SELECT 3, 'keyword_ahead_of_embedding',
           count(*) FILTER (WHERE s.keyword_status IN ('PROCESSING','COMPLETED')
                            AND s.embedding_status NOT IN ('COMPLETED','CANCELLED'))
    FROM ai.context_ai_state AS s
    UNION ALL
    SELECT 4, 'deleted_not_cancelled',
           count(*) FILTER (WHERE c.id IS NOT NULL
                            AND (c.deleted_at IS NOT NULL OR r.deleted_at IS NOT NULL
                                 OR m.deleted_at IS NOT NULL)
                            AND (s.embedding_status <> 'CANCELLED' OR s.keyword_status <> 'CANCELLED'))
    FROM ai.context_ai_state AS s
    LEFT JOIN core.context AS c ON c.id = s.context_id
    LEFT JOIN core.record AS r ON r.id = c.record_id
    LEFT JOIN core.member AS m ON m.id = c.member_id
    UNION ALL
    SELECT 5, 'state_without_context',
           count(*) FILTER (WHERE c.id IS NULL
                            AND NOT (s.embedding_status = 'CANCELLED' AND s.keyword_status = 'CANCELLED'))
    FROM ai.context_ai_state AS s
    LEFT JOIN core.context AS c ON c.id = s.context_id
) AS t
ORDER BY ord
