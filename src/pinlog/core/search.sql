-- core's re-verification of search hits (SPEC §10). core is the source of truth for what a
-- member may see: the ai side's filters are necessary, this check is the final word.

-- name: verify_hits
-- SPEC §10 / §11 #3, #19: a hit survives only if the context is still active, belongs to this
-- member, and its record is active and also this member's. Deleted or superseded (edited)
-- contexts never come back, even if their ai rows were not yet invalidated.
SELECT c.id AS context_id, c.record_id, c.body,
       p.external_place_id, p.name, p.address, p.road_address, p.lat, p.lng
FROM core.context AS c
JOIN core.record AS r ON r.id = c.record_id
JOIN core.place AS p ON p.id = r.place_id
WHERE c.id = ANY(CAST(:context_ids AS bigint[]))
  AND c.member_id = :member_id
  AND c.deleted_at IS NULL
  AND r.member_id = :member_id
  AND r.deleted_at IS NULL

-- name: lexical_matches
-- SPEC §10 lexical channel: the member's active notes and saved places whose terms meet any
-- query term (GIN indexes on core.context.lexemes / core.place.lexemes), then every active
-- context of those records with the query terms found in its body and in its place. Filters
-- as verify_hits: only this member's active records and active contexts, so an edited or
-- deleted note, a deleted record or another member's words never match (SPEC §11 #3, #19).
-- :tsquery is 'term' | 'term' … of the same terms (each a \w+ run, no quoting needed).
WITH q AS (
    SELECT CAST(:terms AS text[]) AS terms, CAST(:tsquery AS tsquery) AS tsq
),
matched_records AS (
    SELECT c.record_id
    FROM core.context AS c, q
    WHERE c.member_id = :member_id AND c.deleted_at IS NULL AND c.lexemes @@ q.tsq
    UNION
    SELECT r.id
    FROM core.record AS r
    JOIN core.place AS p ON p.id = r.place_id, q
    WHERE r.member_id = :member_id AND r.deleted_at IS NULL AND p.lexemes @@ q.tsq
)
SELECT c.id AS context_id, c.record_id,
       ARRAY(SELECT unnest(tsvector_to_array(c.lexemes))
             INTERSECT SELECT unnest(q.terms)) AS note_terms,
       ARRAY(SELECT unnest(tsvector_to_array(p.lexemes))
             INTERSECT SELECT unnest(q.terms)) AS place_terms
FROM matched_records AS m
JOIN core.record AS r ON r.id = m.record_id
JOIN core.place AS p ON p.id = r.place_id
JOIN core.context AS c ON c.record_id = r.id, q
WHERE r.member_id = :member_id AND r.deleted_at IS NULL
  AND c.member_id = :member_id AND c.deleted_at IS NULL
ORDER BY cardinality(ARRAY(SELECT unnest(tsvector_to_array(c.lexemes))
                           INTERSECT SELECT unnest(q.terms))) DESC, c.id
LIMIT :max_rows
