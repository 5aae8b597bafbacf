-- The core side of the retention job (issue 31): hard-deletes the text of deleted and superseded
-- notes (with their lexical terms, columns of the same rows), deleted records and withdrawn
-- members, past PINLOG_RETENTION_DELETED — and, for an erasure request, one withdrawn member now.
-- Owned by core; run only when core is ours (pinlog.db.migrate.owns_core: never on an adopted
-- database, whose core schema is the backend's). Reads ai.context_ai_state (core creates and
-- cancels those rows) but never deletes an ai row: that is the ai part's job (ai/retention.sql).
--
-- Statements with :apply run in two modes: true deletes, false only counts (`pinlog purge
-- --dry-run`). In count mode nothing was deleted before, so "no row left that references it"
-- becomes "no row left that will not go too" (the `:apply OR NOT …` tests below).

-- name: state_invalidated
-- Rule: issue 31 — core never purges what it has not invalidated: the note `c` goes only when
-- it has no state row or both its stages are CANCELLED (SPEC §3: nothing leaves CANCELLED, so no
-- job can write for it again). A deleted note whose state is not CANCELLED (a missed
-- invalidation, `pinlog status` anomaly deleted_not_cancelled) is kept, and reported.
NOT EXISTS (SELECT 1 FROM ai.context_ai_state AS s
             WHERE s.context_id = c.id
               AND (s.embedding_status <> 'CANCELLED' OR s.keyword_status <> 'CANCELLED'))

-- name: context_due
-- Rule: issue 31 — a note `c` is due when it was deleted (or superseded by an edit: the old
-- context is soft-deleted, SPEC §4) longer ago than the retention, and invalidated. An active
-- note is never due (deleted_at IS NULL).
(c.deleted_at < now() - CAST(:retention AS interval) AND {state_invalidated})

-- name: record_due
-- Rule: issue 31 — a record `r` is due when it was deleted longer ago than the retention and no
-- note row still refers to it (count mode: none that will not go too).
(r.deleted_at < now() - CAST(:retention AS interval)
 AND NOT EXISTS (SELECT 1 FROM core.context AS c
                  WHERE c.record_id = r.id AND (CAST(:apply AS boolean) OR NOT {context_due})))

-- name: member_due
-- Rule: issue 31 — a member `m` is due when it withdrew longer ago than the retention and no
-- record or note row still refers to it (count mode: none that will not go too).
(m.deleted_at < now() - CAST(:retention AS interval)
 AND NOT EXISTS (SELECT 1 FROM core.record AS r
                  WHERE r.member_id = m.id AND (CAST(:apply AS boolean) OR NOT {record_due}))
 AND NOT EXISTS (SELECT 1 FROM core.context AS c
                  WHERE c.member_id = m.id AND (CAST(:apply AS boolean) OR NOT {context_due})))

-- name: next_batch
-- Fragment: the next batch of a purge over one table — rows whose (deleted_at, id) comes after
-- the key the previous batch ended at (:after_at NULL = from the start), in key order (the order
-- of the table's (deleted_at, id) partial index), at most :batch_size, FOR UPDATE SKIP LOCKED:
-- replicas purging at once take disjoint batches. Ends the statement's WHERE.
(deleted_at, id) > (coalesce(CAST(:after_at AS timestamptz), '-infinity'), CAST(:after_id AS bigint))
 ORDER BY deleted_at, id
 LIMIT :batch_size
   FOR UPDATE SKIP LOCKED

-- name: batch_taken
-- Fragment: what a purge batch returns — how many rows it picked and the last key.
SELECT count(*) AS n,
       (array_agg(deleted_at ORDER BY deleted_at DESC, id DESC))[1] AS last_at,
       (array_agg(id ORDER BY deleted_at DESC, id DESC))[1] AS last_id
  FROM picked

-- name: purge_contexts
-- Rule: issue 31 — the next batch of due notes, oldest deletion first (next_batch: key order,
-- FOR UPDATE SKIP LOCKED, at most :batch_size); deleted when :apply. Returns how many and the
-- last key.
WITH picked AS (SELECT c.id, c.deleted_at FROM core.context AS c
                 WHERE c.deleted_at IS NOT NULL AND {context_due} AND {next_batch}),
     purged AS (DELETE FROM core.context AS c USING picked AS p
                 WHERE c.id = p.id AND CAST(:apply AS boolean))
{batch_taken}

-- name: purge_records
-- Rule: issue 31 — as purge_contexts, for due records (after their notes went).
WITH picked AS (SELECT r.id, r.deleted_at FROM core.record AS r
                 WHERE r.deleted_at IS NOT NULL AND {record_due} AND {next_batch}),
     purged AS (DELETE FROM core.record AS r USING picked AS p
                 WHERE r.id = p.id AND CAST(:apply AS boolean))
{batch_taken}

-- name: purge_members
-- Rule: issue 31 — as purge_contexts, for due withdrawn members (after their records and notes).
WITH picked AS (SELECT m.id, m.deleted_at FROM core.member AS m
                 WHERE m.deleted_at IS NOT NULL AND {member_due} AND {next_batch}),
     purged AS (DELETE FROM core.member AS m USING picked AS p
                 WHERE m.id = p.id AND CAST(:apply AS boolean))
{batch_taken}

-- name: kept_not_invalidated
-- Deleted notes past the retention that stay because their state is not CANCELLED (reported).
SELECT count(*)
  FROM core.context AS c
 WHERE c.deleted_at IS NOT NULL AND c.deleted_at < now() - CAST(:retention AS interval)
   AND NOT {state_invalidated}

-- name: oldest_deleted
-- Ages in seconds of the oldest soft-deleted note, record and member still kept (NULL: none),
-- for the retention gauge; each the min of its (deleted_at, id) partial index.
SELECT (SELECT extract(epoch FROM now() - min(deleted_at)) FROM core.context
         WHERE deleted_at IS NOT NULL) AS context,
       (SELECT extract(epoch FROM now() - min(deleted_at)) FROM core.record
         WHERE deleted_at IS NOT NULL) AS record,
       (SELECT extract(epoch FROM now() - min(deleted_at)) FROM core.member
         WHERE deleted_at IS NOT NULL) AS member

-- ===== erasure of one withdrawn member now (`pinlog purge --member`) ===========================

-- name: named_members
-- The members an operator names: by id and/or by external ref (NULL = not by that), active or
-- withdrawn (several withdrawn members may share a ref; only active refs are unique).
SELECT id, deleted_at IS NOT NULL AS withdrawn
  FROM core.member
 WHERE id = CAST(:member_id AS bigint) OR external_ref = CAST(:external_ref AS text)
 ORDER BY id

-- name: lock_withdrawn_member
-- Rule: issue 31 erasure — only a withdrawn member (SPEC §4: its records and notes are
-- soft-deleted and invalidated by the withdrawal); locked for the erasure's transaction.
SELECT id FROM core.member WHERE id = :member_id AND deleted_at IS NOT NULL FOR UPDATE

-- name: member_context_ids
-- Every note id of the member (their AI data is erased first, by the ai part).
SELECT id FROM core.context WHERE member_id = :member_id ORDER BY id

-- name: context_erasable
-- Rule: issue 31 erasure — a note `c` of the withdrawn member goes now, whatever its age, when
-- deleted and invalidated (state_invalidated).
(c.deleted_at IS NOT NULL AND {state_invalidated})

-- name: erase_member_contexts
-- Rule: issue 31 erasure — the withdrawn member's erasable notes (its lock is held).
WITH picked AS (
    SELECT c.id FROM core.context AS c
     WHERE c.member_id = :member_id AND {context_erasable}
       FOR UPDATE OF c),
     purged AS (DELETE FROM core.context AS c USING picked AS p
                 WHERE c.id = p.id AND CAST(:apply AS boolean))
SELECT count(*) FROM picked

-- name: erase_member_records
-- Rule: issue 31 erasure — the withdrawn member's deleted records that no note row refers to
-- any more (count mode: none that will not go too).
WITH picked AS (
    SELECT r.id FROM core.record AS r
     WHERE r.member_id = :member_id AND r.deleted_at IS NOT NULL
       AND NOT EXISTS (SELECT 1 FROM core.context AS c WHERE c.record_id = r.id
                        AND (CAST(:apply AS boolean) OR NOT {context_erasable}))
       FOR UPDATE OF r),
     purged AS (DELETE FROM core.record AS r USING picked AS p
                 WHERE r.id = p.id AND CAST(:apply AS boolean))
SELECT count(*) FROM picked

-- name: erase_member
-- Rule: issue 31 erasure — the withdrawn member's own row (its external ref is personal data),
-- once no record or note row refers to it (count mode: none that will not go too).
WITH picked AS (
    SELECT m.id FROM core.member AS m
     WHERE m.id = :member_id AND m.deleted_at IS NOT NULL
       AND NOT EXISTS (SELECT 1 FROM core.record AS r WHERE r.member_id = m.id
                        AND (CAST(:apply AS boolean) OR r.deleted_at IS NULL
                             OR EXISTS (SELECT 1 FROM core.context AS c WHERE c.record_id = r.id
                                         AND NOT {context_erasable})))
       AND NOT EXISTS (SELECT 1 FROM core.context AS c WHERE c.member_id = m.id
                        AND (CAST(:apply AS boolean) OR NOT {context_erasable}))
       FOR UPDATE OF m),
     purged AS (DELETE FROM core.member AS m USING picked AS p
                 WHERE m.id = p.id AND CAST(:apply AS boolean))
SELECT count(*) FROM picked
