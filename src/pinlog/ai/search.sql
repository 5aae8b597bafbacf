-- Personal search (SPEC §10). One visible place for the ai side's search SQL.

-- name: search_member
-- SPEC §10: exact cosine over one member's embeddings. Every filter is required and each alone
-- excludes stale data (SPEC §11 #3): the user filter keeps other members out (#19), is_deleted
-- and the COMPLETED join both hide a deleted/edited context, the profile filter never compares
-- vectors of different spaces. One row per record keeping its best context (DISTINCT ON), then
-- ordered by similarity and limited AFTER the aggregation (#20).
-- Defence in depth (SPEC §9, degenerate vectors): pgvector's cosine of a zero-norm vector (stored
-- or query) is NaN, and PostgreSQL sorts NaN above every number; a NaN similarity is never
-- ranked, so one bad row can never become the "top hit" (degenerate vectors are also refused
-- before they are stored or used as a query). Likewise a stored vector of another length under
-- the same profile (start-up refuses that, SPEC §9) is skipped instead of failing the query.
WITH scored AS (
    SELECT e.record_id,
           e.context_id,
           1 - (e.embedding <=> CAST(:query_vector AS vector)) AS similarity
    FROM ai.context_embedding AS e
    JOIN ai.context_ai_state AS s ON s.context_id = e.context_id
    WHERE e.user_id = :user_id                      -- filter: member
      AND e.is_deleted = false                      -- filter: is_deleted
      AND s.embedding_status = 'COMPLETED'          -- filter: status
      AND e.embedding_profile = :profile            -- filter: profile
      AND vector_dims(e.embedding) = vector_dims(CAST(:query_vector AS vector))  -- never a 500
),
best_per_record AS (
    SELECT DISTINCT ON (record_id) record_id, context_id, similarity
    FROM scored
    WHERE similarity <> 'NaN'::float8               -- NaN is never ranked
    ORDER BY record_id, similarity DESC, context_id
)
SELECT record_id, context_id, similarity
FROM best_per_record
ORDER BY similarity DESC, record_id
LIMIT :limit
