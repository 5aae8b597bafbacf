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
-- SPEC §10 lexical channel: the member's active notes (context_id, record_id, note_terms) and
-- active records whose saved place's terms (place_terms) meet any search term of the query
-- (pinlog.channels.lexical.LexicalQuery.search_terms); each row carries the search terms
-- (:terms) it contains. Filters as verify_hits: only this member's active contexts (a deleted
-- record's contexts are deleted with it) and active records, so an edited or deleted note, a
-- deleted record or another member's words never match (SPEC §11 #3, #19).
-- :tsquery is 'term' | 'term' … of the search terms (each a \w+ run, no quoting needed).
-- Bounded (issue 28): at most :max_rows notes and :max_rows places, those with the most terms
-- first (the rest could give only weaker evidence). A row's terms among :terms are
-- v − (v − terms), two ts_delete calls (cheaper than an INTERSECT of unnested arrays).
-- Read through the member's terms index (migration 0012_member_terms_index): each term keyed by
-- its member (core.member_terms: '<member id> <term>', :member_terms the same for the query), so
-- the statement reads the member's rows that contain a search term, not all the member's rows
-- (10,000 notes of one member among 1M rows: p95 34.1 -> 13.2 ms, python -m bench --only
-- search, the two statements side by side). The rows found are
-- exactly those @@ finds (the overlap of plain terms is an OR tsquery); @@ stays as the filter
-- of what the index found, so a plan that reads the member's rows instead tests @@ first and
-- never evaluates core.member_terms for a row without a search term. The place's terms are
-- copied onto the record (core.record.place_lexemes) when the record is created, so places are
-- not joined.
(SELECT context_id, record_id, note_terms, NULL::text[] AS place_terms
 FROM (SELECT c.id AS context_id, c.record_id,
              tsvector_to_array(ts_delete(c.lexemes, tsvector_to_array(
                  ts_delete(c.lexemes, CAST(:terms AS text[]))))) AS note_terms
       FROM core.context AS c
       WHERE c.member_id = :member_id AND c.deleted_at IS NULL
         AND core.member_terms(c.member_id, c.lexemes) && CAST(:member_terms AS text[])
         AND c.lexemes @@ CAST(:tsquery AS tsquery)) AS notes
 ORDER BY cardinality(note_terms) DESC, context_id
 LIMIT :max_rows)
UNION ALL
(SELECT NULL, record_id, NULL, place_terms
 FROM (SELECT r.id AS record_id,
              tsvector_to_array(ts_delete(r.place_lexemes, tsvector_to_array(
                  ts_delete(r.place_lexemes, CAST(:terms AS text[]))))) AS place_terms
       FROM core.record AS r
       WHERE r.member_id = :member_id AND r.deleted_at IS NULL
         AND core.member_terms(r.member_id, r.place_lexemes) && CAST(:member_terms AS text[])
         AND r.place_lexemes @@ CAST(:tsquery AS tsquery)) AS places
 ORDER BY cardinality(place_terms) DESC, record_id
 LIMIT :max_rows)
