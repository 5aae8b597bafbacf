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
-- SPEC §10 lexical channel: the member's active notes and active records whose saved place's
-- terms meet any query term, then every active context of those records with the terms of its
-- body (note_terms) and of its place (place_terms) where they meet the query (else NULL); the
-- caller intersects them with the query's terms. Filters as verify_hits: only
-- this member's active records and active contexts, so an edited or deleted note, a deleted
-- record or another member's words never match (SPEC §11 #3, #19). :tsquery is
-- 'term' | 'term' … of :terms (each a \w+ run, no quoting needed).
-- Cost is O(the member's rows) at any table size: the member's notes and records are read
-- through their member indexes first (MATERIALIZED), then tested with @@. A GIN index over all
-- members' terms was measured slower at 1M rows: a common term's posting list is mostly other
-- members' rows (17,690 fetched for 200 of the member's). The place's terms are copied onto the
-- record (core.record.place_lexemes) when the record is created, so places are not joined.
WITH q AS (
    SELECT CAST(:terms AS text[]) AS terms, CAST(:tsquery AS tsquery) AS tsq
),
member_notes AS MATERIALIZED (
    SELECT c.id, c.record_id, c.lexemes
    FROM core.context AS c
    WHERE c.member_id = :member_id AND c.deleted_at IS NULL
),
member_records AS MATERIALIZED (
    SELECT r.id, r.place_lexemes
    FROM core.record AS r
    WHERE r.member_id = :member_id AND r.deleted_at IS NULL
),
matched AS (
    SELECT n.record_id FROM member_notes AS n, q WHERE n.lexemes @@ q.tsq
    UNION
    SELECT r.id FROM member_records AS r, q WHERE r.place_lexemes @@ q.tsq
),
rows AS (
    SELECT n.id AS context_id, n.record_id,
           CASE WHEN n.lexemes @@ q.tsq THEN tsvector_to_array(n.lexemes) END AS note_terms,
           CASE WHEN r.place_lexemes @@ q.tsq THEN tsvector_to_array(r.place_lexemes) END
               AS place_terms
    FROM matched AS m
    JOIN member_records AS r ON r.id = m.record_id
    JOIN member_notes AS n ON n.record_id = m.record_id, q
)
SELECT context_id, record_id, note_terms, place_terms
FROM rows
