-- core: member / record / context lifecycle, invalidation, keyword views (SPEC §2.1, §4, §8).
--
-- Every statement is named and bound (:param). The only ai tables written here are the ones core
-- owns per SPEC §1: state rows created PENDING, CANCELLED, embedding is_deleted, event rows
-- (actor 'core'). core never writes PROCESSING / COMPLETED / a job-error FAILED.

-- ===== members ===============================================================================

-- name: insert_member
-- SPEC §2.1: external_ref is unique among active members; a taken ref returns no row.
INSERT INTO core.member (external_ref)
VALUES (:external_ref)
ON CONFLICT (external_ref) WHERE deleted_at IS NULL AND external_ref IS NOT NULL DO NOTHING
RETURNING id;

-- name: active_member_by_id
SELECT id FROM core.member WHERE id = :member_id AND deleted_at IS NULL;

-- name: active_member_by_ref
SELECT id FROM core.member WHERE external_ref = :external_ref AND deleted_at IS NULL;

-- name: share_lock_member
-- Taken by every write on a member's records/contexts: a concurrent withdrawal (which UPDATEs
-- the member row) waits for it, so no record or context can be created behind a withdrawal.
SELECT id FROM core.member WHERE id = :member_id AND deleted_at IS NULL FOR SHARE;

-- name: soft_delete_member
-- SPEC §4 member withdrawal (guarded: only an active member).
UPDATE core.member SET deleted_at = now()
WHERE id = :member_id AND deleted_at IS NULL
RETURNING id;

-- name: records_deleted
-- SPEC §4 — how records are soft-deleted (a record delete, a member's withdrawal): deleted_at and
-- updated_at = now(), only while active (guarded: a second delete changes nothing). A fragment:
-- the UPDATE before its filter; each statement adds which records (AND …) and RETURNING id.
UPDATE core.record SET deleted_at = now(), updated_at = now()
WHERE deleted_at IS NULL

-- name: contexts_deleted
-- SPEC §4 — how notes are soft-deleted (a note delete or edit, a record delete, a member's
-- withdrawal): deleted_at = now(), only while active (guarded). A fragment, as records_deleted.
UPDATE core.context SET deleted_at = now()
WHERE deleted_at IS NULL

-- name: soft_delete_member_records
-- SPEC §4 withdrawal: every active record of the member (records_deleted).
{records_deleted} AND member_id = :member_id
RETURNING id;

-- name: soft_delete_member_contexts
-- SPEC §4 withdrawal: every active note of the member (contexts_deleted).
{contexts_deleted} AND member_id = :member_id
RETURNING id;

-- name: mark_member_embeddings_deleted
-- SPEC §4 withdrawal: every embedding of the member is hidden from search (is_deleted is core's).
UPDATE ai.context_embedding SET is_deleted = true
WHERE user_id = :member_id AND NOT is_deleted;

-- ===== places and records ====================================================================

-- name: upsert_place
-- SPEC §2.1: a place is a snapshot taken on first save and never updated (SPEC §10: its lexical
-- terms — name, address, road address — are written with it). Returns the id of
-- the new or the existing row (none only when a concurrent insert committed after this
-- statement's snapshot: then place_by_external_id, a new statement, sees it).
WITH ins AS (
    INSERT INTO core.place (external_place_id, name, address, road_address, lat, lng, lexemes)
    VALUES (:external_place_id, :name, :address, :road_address, :lat, :lng,
            array_to_tsvector(CAST(:lexemes AS text[])))
    ON CONFLICT (external_place_id) DO NOTHING
    RETURNING id
)
SELECT id FROM ins
UNION ALL
SELECT id FROM core.place WHERE external_place_id = :external_place_id
LIMIT 1;

-- name: place_by_external_id
SELECT id FROM core.place WHERE external_place_id = :external_place_id;

-- name: insert_record
-- SPEC §2.1: at most one active record per (member, place) — a conflict returns no row. SPEC §10:
-- the place's lexical terms are copied onto the record (a place is never updated, so the copy
-- never goes stale): the lexical channel then reads only the member's own rows.
INSERT INTO core.record (member_id, place_id, place_lexemes)
VALUES (:member_id, :place_id, (SELECT p.lexemes FROM core.place AS p WHERE p.id = :place_id))
ON CONFLICT (member_id, place_id) WHERE deleted_at IS NULL DO NOTHING
RETURNING id;

-- name: active_record_for_place
SELECT r.id
FROM core.record r
JOIN core.place p ON p.id = r.place_id
WHERE r.member_id = :member_id AND p.external_place_id = :external_place_id
  AND r.deleted_at IS NULL;

-- name: lock_record
-- Every change to a record's contexts locks the record row first (SPEC §4 "lock the record"),
-- so the last-context guard and concurrent edits/deletes are serialized. Owner-scoped: another
-- member's record is simply not found.
SELECT id FROM core.record
WHERE id = :record_id AND member_id = :member_id AND deleted_at IS NULL
FOR UPDATE;

-- name: touch_record
UPDATE core.record SET updated_at = now() WHERE id = :record_id AND deleted_at IS NULL;

-- name: soft_delete_record
-- SPEC §4 record delete: the record, while active (records_deleted).
{records_deleted} AND id = :record_id
RETURNING id;

-- name: soft_delete_record_contexts
-- SPEC §4 record delete: every active note of the record (contexts_deleted).
{contexts_deleted} AND record_id = :record_id
RETURNING id;

-- name: record_removal_summary
-- What a forced record delete would remove (the 409 LAST_CONTEXT / RECORD_HAS_CONTEXTS body).
SELECT r.id AS record_id, p.name AS place_name,
       (SELECT count(*) FROM core.context c
         WHERE c.record_id = r.id AND c.deleted_at IS NULL) AS contexts
FROM core.record r
JOIN core.place p ON p.id = r.place_id
WHERE r.id = :record_id;

-- ===== contexts ==============================================================================

-- name: context_record
-- Unlocked lookup of an active context's record (owner-scoped); the record is locked next and
-- the context re-read under that lock (active_context_in_record).
SELECT record_id FROM core.context
WHERE id = :context_id AND member_id = :member_id AND deleted_at IS NULL;

-- name: record_place
-- SPEC §5.1 placeMeta / §10 (issue 28): the saved place of a record (the snapshot taken on first
-- save), sent with every process request so the ai side can keep its own lexical evidence.
SELECT p.external_place_id, p.name, p.address, p.road_address
FROM core.record AS r
JOIN core.place AS p ON p.id = r.place_id
WHERE r.id = :record_id;

-- name: active_context_in_record
SELECT id, body FROM core.context
WHERE id = :context_id AND record_id = :record_id AND deleted_at IS NULL;

-- name: count_active_contexts
SELECT count(*) FROM core.context WHERE record_id = :record_id AND deleted_at IS NULL;

-- name: insert_context
-- SPEC §2.1: contexts are immutable; an edit is a new row. SPEC §10: the lexical terms of the
-- body (pinlog.text.lexical_terms) are written with it and never change; the lexical channel
-- reads only active contexts, so they stop matching the moment the context is invalidated.
INSERT INTO core.context (record_id, member_id, body, lexemes)
VALUES (:record_id, :member_id, :body, array_to_tsvector(CAST(:lexemes AS text[])))
RETURNING id;

-- name: insert_state
-- SPEC §3/§4: the state row is created PENDING/PENDING, retry 0, in the same transaction as its
-- context. ON CONFLICT DO NOTHING — never an upsert that could revive a row. One event row per
-- stage (actor 'core') for the rows really inserted. SPEC §7.3.1: the creating process is the
-- sender of the row's PENDING work and records itself as its owner (live_owner: NULL when it is
-- not live-registered), so its death or stop before the work starts releases the row at once.
WITH ins AS (
    INSERT INTO ai.context_ai_state (context_id, embedding_status, keyword_status, retry_count,
                                     updated_at, owner, owned_at)
    VALUES (:context_id, 'PENDING', 'PENDING', 0, now(), {live_owner}, now())
    ON CONFLICT (context_id) DO NOTHING
    RETURNING context_id
)
INSERT INTO ai.context_ai_event (context_id, stage, from_status, to_status, actor, reason)
SELECT ins.context_id, v.stage, NULL, 'PENDING', 'core', :reason
FROM ins CROSS JOIN (VALUES ('embedding'), ('keyword')) AS v(stage)
RETURNING context_id;

-- name: soft_delete_contexts
-- SPEC §4 note delete / edit: the named notes, while active (contexts_deleted).
{contexts_deleted} AND id = ANY(CAST(:context_ids AS bigint[]))
RETURNING id;

-- ===== invalidation (SPEC §4), always inside the caller's transaction ========================

-- name: cancel_stages
-- SPEC §3 "any → CANCELLED" / §4: both stages of the given contexts become CANCELLED
-- unconditionally (COMPLETED and FAILED too — CANCELLED always wins), updated_at = now()
-- (a status change). The rows are locked first (FOR UPDATE, in id order) so the event rows carry
-- the latest committed status; an event is written for each stage that really changed.
-- Returns the number of state rows cancelled.
WITH old AS (
    SELECT context_id, embedding_status, keyword_status
    FROM ai.context_ai_state
    WHERE context_id = ANY(CAST(:context_ids AS bigint[]))
    ORDER BY context_id
    FOR UPDATE
), cancelled AS (
    UPDATE ai.context_ai_state s
    SET embedding_status = 'CANCELLED', keyword_status = 'CANCELLED', updated_at = now()
    FROM old
    WHERE s.context_id = old.context_id
    RETURNING s.context_id, old.embedding_status AS old_embedding, old.keyword_status AS old_keyword
), events AS (
    INSERT INTO ai.context_ai_event (context_id, stage, from_status, to_status, actor, reason)
    SELECT c.context_id, v.stage, v.from_status, 'CANCELLED', 'core', :reason
    FROM cancelled c
    CROSS JOIN LATERAL (VALUES ('embedding', c.old_embedding),
                               ('keyword', c.old_keyword)) AS v(stage, from_status)
    WHERE v.from_status <> 'CANCELLED'
    RETURNING 1
)
SELECT count(*) FROM cancelled;

-- name: mark_embeddings_deleted
-- SPEC §4: hide the contexts' embeddings from search (is_deleted is written by core only).
-- Zero rows is normal (no embedding yet): then CANCELLED alone blocks a late insert.
UPDATE ai.context_embedding SET is_deleted = true
WHERE context_id = ANY(CAST(:context_ids AS bigint[])) AND NOT is_deleted;

-- name: delete_shadow_vectors
-- SPEC §9.1: invalidation holds for every profile — the contexts' vectors of the building and
-- kept profiles (ai.context_embedding_shadow) are removed with them, in the same transaction as
-- cancel_stages (whose FOR UPDATE on the state rows orders this against the backfill's write).
-- A deleted context's building vector never becomes searchable, in any profile.
DELETE FROM ai.context_embedding_shadow
WHERE context_id = ANY(CAST(:context_ids AS bigint[]));

-- ===== texts for the ai side's backfill (SPEC §9.1) ========================================

-- name: active_context_texts
-- SPEC §9.1: the texts of the given contexts that are still active (context, record and member
-- not deleted), for the profile backfill and the keyword re-judge — what the rescan re-sends
-- (rescan.sql reread_context), read in bulk. A deleted or missing context is simply absent.
SELECT c.id AS context_id, c.body
FROM core.context AS c
JOIN core.record AS r ON r.id = c.record_id
JOIN core.member AS m ON m.id = c.member_id
WHERE c.id = ANY(CAST(:context_ids AS bigint[]))
  AND c.deleted_at IS NULL AND r.deleted_at IS NULL AND m.deleted_at IS NULL;

-- ===== views (SPEC §8 visibility) ============================================================

-- name: member_records
-- The member's active records with their place, newest first (by id: stable, so a cursor page
-- never skips or repeats a record when others are added meanwhile); :before is the cursor
-- (the last id of the previous page) or NULL for the first page.
SELECT r.id AS record_id, p.external_place_id, p.name, p.address, p.road_address, p.lat, p.lng,
       r.created_at, r.updated_at
FROM core.record r
JOIN core.place p ON p.id = r.place_id
WHERE r.member_id = :member_id AND r.deleted_at IS NULL
  AND (CAST(:before AS bigint) IS NULL OR r.id < CAST(:before AS bigint))
ORDER BY r.id DESC
LIMIT :limit OFFSET :offset;

-- name: member_record_count
-- How many active records the member has (the total of a record page).
SELECT count(*) FROM core.record WHERE member_id = :member_id AND deleted_at IS NULL;

-- name: member_record
SELECT r.id AS record_id, p.external_place_id, p.name, p.address, p.road_address, p.lat, p.lng,
       r.created_at, r.updated_at
FROM core.record r
JOIN core.place p ON p.id = r.place_id
WHERE r.id = :record_id AND r.member_id = :member_id AND r.deleted_at IS NULL;

-- name: active_record
-- Any member's active record (public keyword view: no owner filter, no text).
SELECT r.id AS record_id, p.external_place_id, p.name, p.address, p.road_address, p.lat, p.lng
FROM core.record r
JOIN core.place p ON p.id = r.place_id
WHERE r.id = :record_id AND r.deleted_at IS NULL;

-- name: record_contexts
-- Active contexts of the given records with both stage statuses, oldest first.
SELECT c.id AS context_id, c.record_id, c.body, c.created_at,
       s.embedding_status, s.keyword_status
FROM core.context c
LEFT JOIN ai.context_ai_state s ON s.context_id = c.id
WHERE c.record_id = ANY(CAST(:record_ids AS bigint[])) AND c.deleted_at IS NULL
ORDER BY c.record_id, c.id;

-- name: owner_keywords
-- SPEC §8 owner view: keywords of COMPLETED keyword stages (the join on the state table hides
-- a cancelled context's rows without deleting them), active presets, PUBLIC or PRIVATE_ONLY
-- (BLOCKED never shown). Display names, best confidence first.
SELECT ck.context_id, p.id AS keyword_id, p.display_name
FROM ai.context_keyword ck
JOIN ai.context_ai_state s ON s.context_id = ck.context_id AND s.keyword_status = 'COMPLETED'
JOIN ai.keyword_preset p ON p.id = ck.keyword_id
                        AND p.is_active AND p.visibility IN ('PUBLIC', 'PRIVATE_ONLY')
WHERE ck.context_id = ANY(CAST(:context_ids AS bigint[]))
ORDER BY ck.context_id, ck.confidence DESC NULLS LAST, p.id;

-- name: public_keywords
-- SPEC §8 view for anybody else: PUBLIC presets only, of the record's active contexts whose
-- keyword stage is COMPLETED; no text, no context ids. Display names, best confidence first.
SELECT p.display_name
FROM core.context c
JOIN ai.context_ai_state s ON s.context_id = c.id AND s.keyword_status = 'COMPLETED'
JOIN ai.context_keyword ck ON ck.context_id = c.id
JOIN ai.keyword_preset p ON p.id = ck.keyword_id AND p.is_active AND p.visibility = 'PUBLIC'
WHERE c.record_id = :record_id AND c.deleted_at IS NULL
GROUP BY p.id, p.display_name
ORDER BY max(ck.confidence) DESC NULLS LAST, p.id;
