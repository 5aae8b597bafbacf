-- Personal search (SPEC §10). One visible place for the ai side's search SQL.

-- name: search_member
-- SPEC §10: exact cosine over one member's embeddings. Every filter is required and each alone
-- excludes stale data (SPEC §11 #3): the user filter keeps other members out (#19), is_deleted
-- and the COMPLETED join both hide a deleted/edited context, the profile filter never compares
-- vectors of different spaces. One row per record keeping its best context (DISTINCT ON), then
-- ordered and limited AFTER the aggregation (#20). The status is checked by a correlated
-- primary-key probe (a scalar subquery is never turned into a join): a join let the planner
-- hash the whole state table (a sequential scan of every member's rows, ~285 ms at 1M rows);
-- the probe runs only for the contexts that reached the strength (the calibrated CTE is
-- MATERIALIZED so the planner cannot move the probe below the cut), O(the member's rows) at
-- any table size.
-- Per-query calibration (issue 28, ai/search.py Background): a context's strength is its
-- cosine against the query's cosines to the background notes of the language group whose
-- centroid (:centroids, in the order of :means/:sds) is nearest to the context's vector:
-- (similarity - mean) / sd. The best context of a record is the one of highest strength; no
-- centroid (an uncalibrated profile) → strength NULL, the best cosine decides.
-- Defence in depth (SPEC §9, degenerate vectors): pgvector's cosine of a zero-norm vector (stored
-- or query) is NaN, and PostgreSQL sorts NaN above every number; a NaN similarity is never
-- ranked, so one bad row can never become the "top hit" (degenerate vectors are also refused
-- before they are stored or used as a query). Likewise a stored vector of another length under
-- the same profile (start-up refuses that, SPEC §9) is skipped instead of failing the query.
WITH scored AS (
    SELECT e.record_id,
           e.context_id,
           e.embedding,
           1 - (e.embedding <=> CAST(:query_vector AS vector)) AS similarity
    FROM ai.context_embedding AS e
    WHERE e.user_id = :user_id                      -- filter: member
      AND e.is_deleted = false                      -- filter: is_deleted
      AND e.embedding_profile = :profile            -- filter: profile
      AND vector_dims(e.embedding) = vector_dims(CAST(:query_vector AS vector))  -- never a 500
      -- cut: below the vector channel's floor a context can never be a hit (ai/search.py
      -- apply_cuts; calibrated: the lowest cosine any language group needs for the strength;
      -- -2 = no cut), so only contexts near the query pay for the calibration and the probe.
      -- The best context of a record and the top :limit records above the cut are the same
      -- with or without it.
      AND 1 - (e.embedding <=> CAST(:query_vector AS vector)) >= :min_similarity
),
calibrated AS MATERIALIZED (
    SELECT s.record_id, s.context_id, s.similarity, {strength} AS strength
    FROM scored AS s
    {nearest_group}
    WHERE similarity <> 'NaN'::float8               -- NaN is never ranked
),
best_per_record AS (
    SELECT DISTINCT ON (record_id) record_id, context_id, similarity, strength
    FROM calibrated AS k
    WHERE (strength IS NULL OR strength >= :min_strength)
      AND (SELECT s.embedding_status FROM ai.context_ai_state AS s WHERE s.context_id = k.context_id) = 'COMPLETED' -- filter: status
    ORDER BY record_id, strength DESC NULLS LAST, similarity DESC, context_id
)
SELECT record_id, context_id, similarity, strength
FROM best_per_record
ORDER BY strength DESC NULLS LAST, similarity DESC, record_id
LIMIT :limit

-- name: score_records
-- SPEC §10: cosine and calibrated strength (as search_member) of every context of the records
-- the other channels named (the decision merges the channels). The same four filters as
-- search_member, each alone sufficient to exclude stale data (SPEC §11 #3, #19): a context of
-- another member, deleted, not COMPLETED or of another profile is simply not returned.
-- Degenerate vectors as in search_member: another length is skipped, a NaN cosine (zero-norm
-- vector) is never returned.
WITH scored AS (
    SELECT e.record_id, e.context_id, e.embedding,
           1 - (e.embedding <=> CAST(:query_vector AS vector)) AS similarity
    FROM ai.context_embedding AS e
    JOIN ai.context_ai_state AS s ON s.context_id = e.context_id
    WHERE e.record_id = ANY(CAST(:record_ids AS bigint[]))
      AND e.user_id = :user_id                          -- filter: member
      AND e.is_deleted = false                          -- filter: is_deleted
      AND s.embedding_status = 'COMPLETED'              -- filter: status
      AND e.embedding_profile = :profile                -- filter: profile
  AND vector_dims(e.embedding) = vector_dims(CAST(:query_vector AS vector))  -- never a 500
  AND NOT (1 - (e.embedding <=> CAST(:query_vector AS vector))) = 'NaN'::float8  -- NaN never scored
)
SELECT s.record_id, s.context_id, s.similarity, {strength} AS strength
FROM scored AS s
{nearest_group}

-- name: lexical_matches
-- SPEC §10 "The same decision for adopters" (issue 28): the ai side's own lexical evidence
-- (ai.context_lexical, written with the embedding from the process request's text and
-- placeMeta; never core.*). Read only through the embedding's four filters, each alone
-- sufficient (SPEC §11 #3, #19): another member's, a deleted (edited/superseded) one, one not
-- COMPLETED or of another profile never matches — the lexical row is invalidated exactly with
-- the embedding. Per context: the search terms (:terms) found in its note and in its place
-- (rows where either meets :tsquery; v − (v − terms) by two ts_delete calls), the rows with
-- most terms first, at most :max_rows.
-- Cost O(the member's rows): the member index, then @@ (core's lexical_matches reads a
-- member-keyed terms index instead: migration 0012_member_terms_index).
SELECT context_id, record_id, note_terms, place_terms
FROM (
    SELECT l.context_id, l.record_id,
           tsvector_to_array(ts_delete(l.note_terms, tsvector_to_array(
               ts_delete(l.note_terms, CAST(:terms AS text[]))))) AS note_terms,
           tsvector_to_array(ts_delete(l.place_terms, tsvector_to_array(
               ts_delete(l.place_terms, CAST(:terms AS text[]))))) AS place_terms
    FROM ai.context_lexical AS l
    JOIN ai.context_embedding AS e ON e.context_id = l.context_id
    WHERE l.user_id = :user_id
      AND e.user_id = :user_id                      -- filter: member
      AND e.is_deleted = false                      -- filter: is_deleted
      AND (SELECT s.embedding_status FROM ai.context_ai_state AS s WHERE s.context_id = l.context_id) = 'COMPLETED' -- filter: status
      AND e.embedding_profile = :profile            -- filter: profile
      AND (l.note_terms @@ CAST(:tsquery AS tsquery) OR l.place_terms @@ CAST(:tsquery AS tsquery))
) AS m
ORDER BY cardinality(note_terms) + cardinality(place_terms) DESC, context_id
LIMIT :max_rows

-- name: nearest_group
-- Fragment of search_member and score_records (issue 28, ai/search.py Background): the
-- language group of a scored context s — the index g.i (1-based, the order of :means/:sds) of
-- the background centroid (:centroids) nearest to its vector; NULL without centroids (an
-- uncalibrated profile). One expression per context, not a sorted subquery over the array (that
-- cost ~3 µs per context above the floor: a short query's thousands of them made search_member's
-- p95): each group's cosine distance, floored to 1e-7 and tagged with the group's index
-- (distance × 1e7 × 8 + index), and LEAST of the tags; ties within 1e-7 go to the lower index.
-- pgvector (>= 0.5, the floor README states) clamps a cosine distance to [0, 2] (v <=> v was
-- exactly 0 for 20,000 random vectors; a context equal to a centroid is tested), so a tag is never
-- negative, % 8 gives the index back and the tags, below 2^28, are exact in float8. NULLIF is
-- defence only: both statements drop a NaN cosine (a zero-norm vector) before this runs.
-- Up to four groups (script_group's four, MAX_GROUPS in ai/search.py): a centroid the array
-- lacks is NULL and LEAST skips NULLs. A NaN distance (a zero-norm vector, never ranked anyway)
-- gives NULL, never an error. OFFSET 0 keeps the subquery from being pulled up, which would
-- repeat the expression wherever g.i is used.
CROSS JOIN LATERAL (
    SELECT (NULLIF(least(
        floor((s.embedding <=> (CAST(:centroids AS vector[]))[1]) * 1e7) * 8 + 1,
        floor((s.embedding <=> (CAST(:centroids AS vector[]))[2]) * 1e7) * 8 + 2,
        floor((s.embedding <=> (CAST(:centroids AS vector[]))[3]) * 1e7) * 8 + 3,
        floor((s.embedding <=> (CAST(:centroids AS vector[]))[4]) * 1e7) * 8 + 4
    ), 'NaN')::bigint % 8)::int AS i
    OFFSET 0
) AS g

-- name: strength
-- Fragment: the per-query calibrated strength of s in its group g (NULL without a group).
(s.similarity - (CAST(:means AS float8[]))[g.i]) / (CAST(:sds AS float8[]))[g.i]

-- name: keyword_matched_records
-- SPEC §10 / issue 14 (the reference's `keywordMatched`): which of the hit records have a
-- keyword among the query's own best presets. Only keywords of a COMPLETED keyword stage of an
-- active (not deleted) context of the same member count — the same stale-data filters as above.
SELECT DISTINCT e.record_id
FROM ai.context_keyword AS k
JOIN ai.context_ai_state AS s ON s.context_id = k.context_id
JOIN ai.context_embedding AS e ON e.context_id = k.context_id
WHERE e.user_id = :user_id
  AND e.is_deleted = false
  AND s.keyword_status = 'COMPLETED'
  AND e.record_id = ANY(CAST(:record_ids AS bigint[]))
  AND k.keyword_id = ANY(CAST(:keyword_ids AS integer[]))
