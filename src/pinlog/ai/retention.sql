-- The ai side of the retention job (issue 31). Names no core.* table (SPEC §1 boundary): what is
-- dead is read from the state row alone — both stages CANCELLED, which only core writes (delete,
-- edit, record delete, withdrawal; SPEC §3/§4) and which nothing ever leaves.
--
-- Statements with :apply run in two modes: true deletes, false only counts (`pinlog purge
-- --dry-run`); both modes pick the same rows with the same guards.
--
-- Every ai table keyed by context_id that holds a context's derived data has ONE statement
-- named `context_rows_<table>` below; pinlog.ai.retention runs every statement with that prefix
-- (in file order) for the contexts being purged. Adding such a table = adding its statement.


-- name: cancelled_past_window
-- Rule: issue 31 + SPEC §4/§5 — a state row may go (and with it the context's AI data) when both
-- stages are CANCELLED and its cancellation (updated_at, the time of its last status change) is
-- older than PINLOG_RETENTION_DELETED AND than the late-result window
-- (Settings.late_result_window: processing expiry + the longest stage budget). A result can reach
-- a save only until that window after the stage's last start, and the last start came before the
-- cancellation (CANCELLED never starts), so no late result is still on its way when the row goes;
-- until then the CANCELLED row is what refuses it (the guarded saves select from it).
-- The first two lines are literally the partial index ai.context_ai_state_cancelled_idx.
(embedding_status = 'CANCELLED' AND keyword_status = 'CANCELLED'
 AND updated_at < now() - greatest(CAST(:retention AS interval),
                                   CAST(:late_result_window AS interval)))


-- name: pick_cancelled_contexts
-- Rule: issue 31 — the next batch of purgeable contexts, oldest cancellation first, in key order
-- after (:after_at, :after_id) (NULL = from the start; the dry run pages with it because it
-- deletes nothing), FOR UPDATE SKIP LOCKED: replicas purging at once take disjoint batches, and a
-- row locked by a save in flight is skipped (a later round takes it). The lock is held until the
-- batch commits, so no save can run for these contexts meanwhile.
SELECT context_id, updated_at
  FROM ai.context_ai_state
 WHERE {cancelled_past_window}
   AND (updated_at, context_id) > (coalesce(CAST(:after_at AS timestamptz), '-infinity'),
                                   CAST(:after_id AS bigint))
 ORDER BY updated_at, context_id
 LIMIT :batch_size
   FOR UPDATE SKIP LOCKED


-- name: given_contexts
-- Fragment: the rows of the contexts being purged (:context_ids, a bigint array). Each
-- context_rows_<table> statement counts them (the dry run's answer) and, with :apply, deletes them.
context_id = ANY(CAST(:context_ids AS bigint[]))


-- name: context_rows_context_embedding
-- Rule: issue 31, SPEC §9 ("invalidation applies to every profile's vectors") — the vector of
-- each given context, whatever its profile (this table holds one row per context). Run only for
-- contexts whose state is CANCELLED and locked (pick_cancelled_contexts, lock_erasable_states).
WITH found AS (SELECT context_id FROM ai.context_embedding WHERE {given_contexts}),
     purged AS (DELETE FROM ai.context_embedding WHERE {given_contexts} AND CAST(:apply AS boolean))
SELECT count(*) FROM found


-- name: context_rows_context_keyword
-- Rule: issue 31 — the keyword rows of each given context (CANCELLED and locked, as above).
WITH found AS (SELECT context_id FROM ai.context_keyword WHERE {given_contexts}),
     purged AS (DELETE FROM ai.context_keyword WHERE {given_contexts} AND CAST(:apply AS boolean))
SELECT count(*) FROM found


-- name: context_rows_context_keyword_analysis
-- Rule: issue 31 — the keyword analysis of each given context (its unmatched concepts and the
-- judge's evidence come from the note's words; CANCELLED and locked, as above).
WITH found AS (SELECT context_id FROM ai.context_keyword_analysis WHERE {given_contexts}),
     purged AS (DELETE FROM ai.context_keyword_analysis WHERE {given_contexts} AND CAST(:apply AS boolean))
SELECT count(*) FROM found


-- name: delete_cancelled_states
-- Rule: issue 31 — the state rows of a purged batch, last (after their data), in the batch's
-- transaction. Guarded: the whole predicate is repeated under the lock. From here on a request
-- or a late save for the context finds no row: the pre-check stops, every guarded start and save
-- selects from the row and writes nothing (SPEC §3: 0 rows is a normal outcome).
WITH found AS (
    SELECT context_id FROM ai.context_ai_state
     WHERE {given_contexts} AND {cancelled_past_window}
), purged AS (
    DELETE FROM ai.context_ai_state AS s
     USING found AS f
     WHERE s.context_id = f.context_id AND CAST(:apply AS boolean)
)
SELECT count(*) FROM found


-- name: purge_old_events
-- Rule: issue 31 — history rows older than PINLOG_RETENTION_EVENTS, whatever their context:
-- nothing that decides reads them (the rescan, the finalizer, the saves and the views read the
-- state row, whose last_error stays). Oldest first in key order after (:after_at, :after_id),
-- FOR UPDATE SKIP LOCKED (replicas take disjoint batches), at most :batch_size rows. Returns how
-- many were picked and the last key.
WITH picked AS (
    SELECT id, at
      FROM ai.context_ai_event
     WHERE at < now() - CAST(:retention AS interval)
       AND (at, id) > (coalesce(CAST(:after_at AS timestamptz), '-infinity'),
                       CAST(:after_id AS bigint))
     ORDER BY at, id
     LIMIT :batch_size
       FOR UPDATE SKIP LOCKED
), purged AS (
    DELETE FROM ai.context_ai_event AS e
     USING picked AS p
     WHERE e.id = p.id AND CAST(:apply AS boolean)
)
SELECT count(*) AS n,
       (array_agg(at ORDER BY at DESC, id DESC))[1] AS last_at,
       (array_agg(id ORDER BY at DESC, id DESC))[1] AS last_id
  FROM picked


-- name: lock_erasable_states
-- Rule: issue 31 erasure (`pinlog purge --member`) — of the given contexts, lock the state rows
-- whose two stages are CANCELLED (FOR UPDATE, waiting: a save in flight commits first and then
-- finds them CANCELLED); only those contexts' data is erased now. Their state rows stay (ids
-- and statuses only) until cancelled_past_window holds and the regular purge takes them: they
-- refuse a late result meanwhile.
SELECT context_id
  FROM ai.context_ai_state
 WHERE context_id = ANY(CAST(:context_ids AS bigint[]))
   AND embedding_status = 'CANCELLED' AND keyword_status = 'CANCELLED'
 ORDER BY context_id
   FOR UPDATE


-- name: state_rows_of
-- The given contexts that have a state row (a context without one has nothing that could write
-- for it: every guarded statement selects from the row).
SELECT context_id FROM ai.context_ai_state WHERE context_id = ANY(CAST(:context_ids AS bigint[]))


-- name: oldest_cancelled
-- The age in seconds of the oldest CANCELLED state row still retained (NULL: none), for the
-- retention gauge; the min of the partial index's first column.
SELECT extract(epoch FROM now() - min(updated_at)) AS age
  FROM ai.context_ai_state
 WHERE embedding_status = 'CANCELLED' AND keyword_status = 'CANCELLED'
