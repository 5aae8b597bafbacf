-- `pinlog import` / `pinlog demo` read-outs (core side: the state of the contexts it created).

-- name: member_by_external_ref
-- The active member an import line's `member` key names: by external_ref only, never by id
-- (SPEC §2.1: external_ref is the key an importer uses; unique among active members).
SELECT id FROM core.member WHERE external_ref = :external_ref AND deleted_at IS NULL

-- name: unfinished_count
-- How many of the given contexts can still progress: a stage PENDING or PROCESSING, except a
-- keyword stage behind a FAILED/CANCELLED embedding (a dead end the finalizer ends, SPEC §7.2).
SELECT count(*) FROM ai.context_ai_state
WHERE context_id = ANY(CAST(:context_ids AS bigint[]))
  AND (embedding_status IN ('PENDING', 'PROCESSING')
       OR (keyword_status IN ('PENDING', 'PROCESSING')
           AND embedding_status NOT IN ('FAILED', 'CANCELLED')))

-- name: pending_ids
-- Contexts with a stage still PENDING (never accepted, or dropped): candidates for a nudge.
SELECT context_id FROM ai.context_ai_state
WHERE context_id = ANY(CAST(:context_ids AS bigint[]))
  AND (embedding_status = 'PENDING'
       OR (keyword_status = 'PENDING' AND embedding_status NOT IN ('FAILED', 'CANCELLED')))
ORDER BY context_id

-- name: status_counts
-- Final state per stage of the given contexts (summary).
SELECT 'embedding' AS stage, embedding_status AS status, count(*) AS n
FROM ai.context_ai_state WHERE context_id = ANY(CAST(:context_ids AS bigint[]))
GROUP BY embedding_status
UNION ALL
SELECT 'keyword', keyword_status, count(*)
FROM ai.context_ai_state WHERE context_id = ANY(CAST(:context_ids AS bigint[]))
GROUP BY keyword_status

-- name: keyword_count
-- Keywords assigned to the given contexts whose keyword stage is COMPLETED (SPEC §8 reads).
SELECT count(*) FROM ai.context_keyword ck
JOIN ai.context_ai_state s ON s.context_id = ck.context_id AND s.keyword_status = 'COMPLETED'
WHERE ck.context_id = ANY(CAST(:context_ids AS bigint[]))

-- name: failures
-- Contexts with a stage not COMPLETED, with their (already redacted) last error.
SELECT context_id, embedding_status, keyword_status, last_error
FROM ai.context_ai_state
WHERE context_id = ANY(CAST(:context_ids AS bigint[]))
  AND (embedding_status <> 'COMPLETED' OR keyword_status <> 'COMPLETED')
ORDER BY context_id

-- name: active_context_ids
-- Active contexts of the given records (a demo re-run on an existing data dir reports them too).
SELECT c.id FROM core.context AS c
WHERE c.record_id = ANY(CAST(:record_ids AS bigint[])) AND c.deleted_at IS NULL
ORDER BY c.id
