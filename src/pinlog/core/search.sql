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
