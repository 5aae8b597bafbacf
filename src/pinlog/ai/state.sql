-- Guarded statements of the ai side (SPEC §3, §5.2, §5.5, §5.6).
--
-- Every status write carries its precondition in its WHERE clause (never an application `if`)
-- and keeps it even when the row is already locked FOR UPDATE. Affected rows = 0 is a normal
-- outcome: the stage is owned by a live worker, finished, failed, cancelled or missing.
-- Every status change writes its ai.context_ai_event row in the SAME statement (a data-modifying
-- CTE), so an event exists exactly when the change happened.
-- `{stage}` / `{other}` / `{label}` are replaced only by a pinlog.states.Stage value, and
-- `{@name}` by that stage's own fragment `<label>_name` (e.g. `{@startable}`: embedding_startable
-- or keyword_startable), so one statement serves both stages; everything else is a bound
-- parameter. This file names no core.* table (SPEC §1 boundary).
--
-- Fragments (`owner_gone`, `startable`, `embedding_startable`, `keyword_startable`,
-- `stage_started`, `owns_claim`, `job_claim`, `batch_claims`, `embedding_savable`,
-- `keyword_savable`, `embedding_completion`, `keyword_completion`, `completed_event`,
-- `profile_is_active`, `profile_is_building`, `embedding_replaced`, `shadow_replaced`,
-- `lexical_replaced`, `analysis_replaced`, `job_owns_stage`) are not statements: each guard is
-- written ONCE here and spliced by name (pinlog.db.sql.Queries) into both the single-context
-- statement and the batch statement (`*_batch`, SPEC §5.4, docs ARCHITECTURE "Batch path") that
-- apply it — or one statement serves both (`start_stage`'s claim, `complete_stage`, `precheck`)
-- — so the single and the batch path can never disagree on when a stage may start or be saved. They
-- refer to the state row as `s` and to the job's claim as `c` (owner, claimed_at: one claim
-- for a single statement, job_claim; one per context for a batch, batch_claims).


-- name: owner_gone
-- Rule: SPEC §7.3.1 — the row's recorded owner is gone: that process's heartbeat lease ended (it
-- crashed, or stopped cleanly and released its work; gone_owners of the kernel's
-- process_settings.sql). The record counts only while owned_at is at least the row's rescan age
-- greatest(updated_at, rescanned_at): a later status change or claim by a process that records
-- no owner (an older version, the reference backend) makes the owner unknown (NULL-like), and
-- then only the expiry re-claims. A fragment (alias s = ai.context_ai_state).
(s.owner IN {gone_owners}
 AND s.owned_at >= greatest(s.updated_at, coalesce(s.rescanned_at, s.updated_at)))


-- name: startable
-- Rule: SPEC §3 start, §7.3, §7.3.1 — THE predicate of a guarded start, written once for the
-- single and the batch start statements of both stages ({stage}/{label}: the stage; alias s =
-- ai.context_ai_state): the stage may start when it is PENDING, or re-claim a PROCESSING stage
-- when
--   * its updated_at (alone, never rescanned_at: §7.3) is older than the processing expiry, or
--   * the row's retry_count is higher than when the stage started (label_start_retry, §7.3
--     last paragraph: a backend that keeps the reference's rescan bumps retry_count AND refreshes
--     updated_at when it gives an attempt up; NULL = not recorded: this clause never holds), or
--   * its recorded owner is gone (owner_gone, §7.3.1) — at once, before the expiry.
-- A PROCESSING stage whose owner is live (however slow) or unknown waits for the expiry. FAILED,
-- COMPLETED and CANCELLED never start.
(s.{stage} = 'PENDING'
 OR (s.{stage} = 'PROCESSING'
     AND (s.updated_at < now() - :expiry
          OR s.retry_count > s.{label}_start_retry
          OR {owner_gone})))


-- name: keyword_startable
-- Rule: SPEC §3 start (keyword) — startable for the keyword stage, and additionally
-- embedding_status = 'COMPLETED': a keyword stage never starts without a stored vector. The
-- keyword stage's `{@startable}` in start_stage and start_stage_batch.
(s.embedding_status = 'COMPLETED' AND {startable})


-- name: owns_claim
-- Rule: SPEC §7.3.1 — the job still owns the claim its start took: the row's owner is the one
-- the start recorded (c.owner; NULL when the process was not live-registered) and nobody started
-- or claimed the row since (owned_at and updated_at are still the start's now(), c.claimed_at).
-- Every save, fail and error write of a stage carries it — single or batch (there c is the
-- row's own claim) — so a process whose claim was taken over — re-claimed by any start (ours or
-- an older version's: updated_at moved), or claimed by the rescan (owner and owned_at moved) —
-- writes nothing: 0 rows, the result is discarded. Never two live owners, never a late
-- overwrite. A fragment (aliases s = ai.context_ai_state, c = the claim).
(s.owner IS NOT DISTINCT FROM c.owner
 AND s.owned_at = c.claimed_at
 AND s.updated_at = c.claimed_at)


-- name: job_claim
-- Rule: SPEC §7.3.1 — the claim of a single-context write: the job's :owner / :claimed_at (its
-- start's returned claim) as the one-row relation c that owns_claim compares with. A fragment
-- (a FROM item).
(SELECT CAST(:owner AS text) AS owner, CAST(:claimed_at AS timestamptz) AS claimed_at) AS c


-- name: batch_claims
-- Rule: SPEC §7.3.1 — the claims of a batch write, one per context: (:context_ids[i],
-- :owners[i], :claimed_ats[i]) as the relation c (context_id, owner, claimed_at) that owns_claim
-- compares each row with (the claim its batch start returned for that row). A fragment (a FROM
-- item).
unnest(CAST(:context_ids AS bigint[]), CAST(:owners AS text[]),
       CAST(:claimed_ats AS timestamptz[])) AS c(context_id, owner, claimed_at)


-- name: embedding_savable
-- Rule: SPEC §3 complete (embedding), §5.2 step 2 save, §7.3.1 — THE guard of every write of an
-- embedding result (single and batch: the vector upserts of both profiles and the guarded
-- complete): the embedding stage is PROCESSING and the job still owns its claim (owns_claim).
-- Never revives CANCELLED/FAILED, never touches a COMPLETED stage, never a taken-over one.
-- Aliases s, c.
(s.embedding_status = 'PROCESSING' AND {owns_claim})


-- name: keyword_savable
-- Rule: SPEC §3 complete (keyword), §5.2 step 3 save, §7.3.1 — THE guard of every write of a
-- keyword result (single and batch: delete and insert of keyword rows, the analysis row, the
-- guarded complete): keyword PROCESSING and embedding COMPLETED and the job still owns its claim
-- (owns_claim). Aliases s, c.
(s.keyword_status = 'PROCESSING' AND s.embedding_status = 'COMPLETED' AND {owns_claim})


-- name: profile_is_active
-- Rule: SPEC §9.1 — ai.context_embedding holds the ACTIVE profile's vectors only: :profile is
-- the recorded active one (no row in ai.embedding_profile = before any switch: the caller's
-- profile is the active one). A fragment of both embedding saves (single and batch).
NOT EXISTS (SELECT 1 FROM ai.embedding_profile p
             WHERE p.role = 'active' AND p.profile <> CAST(:profile AS text))


-- name: profile_is_building
-- Rule: SPEC §9.1 — a shadow vector is written only while :profile is the building one. A
-- fragment of both shadow saves (single and batch), through shadow_replaced.
EXISTS (SELECT 1 FROM ai.embedding_profile p
         WHERE p.profile = CAST(:profile AS text) AND p.role = 'building')


-- name: shadow_replaced
-- Rule: SPEC §9.1 — the tail of both shadow upserts (upsert_shadow_embedding and
-- upsert_shadow_embeddings_batch): only while :profile is the building profile
-- (profile_is_building); a new vector of the context for that profile replaces the old one. A
-- fragment.
{profile_is_building}
ON CONFLICT (context_id, embedding_profile) DO UPDATE
   SET embedding = EXCLUDED.embedding,
       text_sha256 = EXCLUDED.text_sha256,
       updated_at = now()


-- name: embedding_startable
-- Rule: SPEC §3 start (embedding) — the embedding stage's start predicate is startable itself (the
-- per-stage `{@startable}` of start_stage and start_stage_batch; keyword: keyword_startable).
{startable}


-- name: stage_started
-- Rule: SPEC §3 start, §7.3, §7.3.1 — the claim and the event of every start, single and batch,
-- both stages: CTEs that follow the start's pick `picked` (context_id, previous_status, expired,
-- owner_gone; alias p). The UPDATE repeats the stage's start predicate ({@startable}:
-- embedding_startable / keyword_startable) under the lock and records the claim: retry_count in
-- {label}_start_retry (§7.3), the owner (live_owner: this process while its lease runs, else
-- NULL) and owned_at = updated_at = now(). It returns each started row with its status BEFORE
-- the update (PENDING = fresh start, PROCESSING = re-claim) and its claim (owner, owned_at) that
-- every later write of the job must still own (owns_claim); one event row per started row,
-- naming why a re-claim happened. A fragment.
started AS (
    UPDATE ai.context_ai_state s
       SET {stage} = 'PROCESSING',
           updated_at = now(),
           {label}_start_retry = s.retry_count,
           owner = {live_owner},
           owned_at = now()
      FROM picked p
     WHERE s.context_id = p.context_id
       AND {@startable}
    RETURNING s.context_id, p.previous_status, p.expired, p.owner_gone, s.owner, s.owned_at
), event AS (
    INSERT INTO ai.context_ai_event (context_id, stage, from_status, to_status, actor, reason)
    SELECT context_id, '{label}', previous_status, 'PROCESSING', 'ai',
           CASE WHEN previous_status <> 'PROCESSING' THEN 'started'
                WHEN expired THEN 'reclaimed after processing expiry'
                WHEN owner_gone THEN 'reclaimed: its owner is gone (no heartbeat)'
                ELSE 'reclaimed: retry_count rose since the stage started' END
      FROM started
)


-- name: start_stage
-- Rule: SPEC §3 start, §7.3, §7.3.1 — the guarded start of one context's stage ({stage}; one
-- statement for both stages): its start predicate {@startable} is embedding_startable, or
-- keyword_startable (startable, and embedding_status = 'COMPLETED': a keyword stage never starts
-- without a stored vector). The row is locked FOR UPDATE first (the locked subquery), then
-- stage_started repeats the predicate, records the claim and writes the event row in the same
-- statement. Returns the status BEFORE the update, so a fresh start and a re-claim are told
-- apart in one statement without a second racy read, plus the claim (owner as recorded,
-- claimed_at).
WITH picked AS (
    SELECT s.context_id, s.{stage} AS previous_status,
           s.updated_at < now() - :expiry AS expired,
           coalesce({owner_gone}, false) AS owner_gone
      FROM ai.context_ai_state s
     WHERE s.context_id = :context_id
       FOR UPDATE
), {stage_started}
SELECT previous_status, owner, owned_at AS claimed_at FROM started;


-- name: lock_state
-- Rule: SPEC §5.2 save transaction — lock the state row FOR UPDATE first, so a concurrent
-- cancellation (core) either happened before (then the guards below see CANCELLED) or waits until
-- this save commits. Only the state row is locked; nothing else is waited on (§5.2 step 4).
SELECT embedding_status, keyword_status
  FROM ai.context_ai_state
 WHERE context_id = :context_id
   FOR UPDATE;


-- name: lock_profiles_shared
-- Rule: SPEC §9.1 — the embedding save (single or batch) places its vectors by the profiles'
-- roles, so it takes the profile lock shared first (ai/profiles.sql: an activation holds it
-- exclusive): the roles its statements read are those before or after an activation, never in
-- between.
SELECT pg_advisory_xact_lock_shared({profile_lock});


-- name: embedding_replaced
-- Rule: SPEC §5.2 step 2, §9.1 — the tail of both embedding upserts (upsert_embedding and
-- save_embeddings_batch): only while :profile is the active profile (profile_is_active: a vector
-- of another profile — an activation committed while the job was embedding — is never written
-- to ai.context_embedding); ON CONFLICT never touches is_deleted (core only): its update list
-- omits it, and a row core marked deleted is never overwritten (a deleted context's data must
-- never come back). A fragment (alias s = ai.context_ai_state).
{profile_is_active}
ON CONFLICT (context_id) DO UPDATE
   SET user_id = EXCLUDED.user_id,
       record_id = EXCLUDED.record_id,
       embedding = EXCLUDED.embedding,
       embedding_profile = EXCLUDED.embedding_profile,
       text_sha256 = EXCLUDED.text_sha256,
       updated_at = now()
 WHERE NOT ai.context_embedding.is_deleted


-- name: upsert_embedding
-- Rule: SPEC §5.2 step 2 save, §7.3.1 — store the vector only while embedding_savable (embedding
-- PROCESSING and the job owns its claim; guards in the statement, even under the lock), and
-- (embedding_replaced) only under the active profile (SPEC §9.1), never over a row core marked
-- deleted, never touching is_deleted. 0 rows → the save is discarded.
INSERT INTO ai.context_embedding
       (context_id, user_id, record_id, embedding, embedding_profile, text_sha256, updated_at)
SELECT s.context_id, :user_id, :record_id, CAST(:embedding AS vector), CAST(:profile AS text),
       :text_sha256, now()
  FROM ai.context_ai_state s, {job_claim}
 WHERE s.context_id = :context_id
   AND {embedding_savable}
   AND {embedding_replaced};


-- name: upsert_shadow_embedding
-- Rule: SPEC §9.1 — a context embedded while a profile is building gets a vector in both
-- profiles: the building profile's goes to the shadow table in the same save transaction,
-- under the same guard (embedding_savable: embedding PROCESSING, the job owns its claim; the
-- state row locked) and only while :profile is the building one (shadow_replaced). Its row
-- count never decides the save (the backfill fills any gap).
INSERT INTO ai.context_embedding_shadow
       (context_id, embedding_profile, embedding, text_sha256, updated_at)
SELECT s.context_id, :profile, CAST(:embedding AS vector), :text_sha256, now()
  FROM ai.context_ai_state s, {job_claim}
 WHERE s.context_id = :context_id
   AND {embedding_savable}
   AND {shadow_replaced};


-- name: lexical_replaced
-- Rule: SPEC §10 (issue 28) — the tail of both lexical upserts (single and batch): never over a
-- context whose embedding core marked deleted; a new save replaces the row's terms. A fragment
-- (alias s = ai.context_ai_state).
NOT EXISTS (SELECT 1 FROM ai.context_embedding AS e
             WHERE e.context_id = s.context_id AND e.is_deleted)
ON CONFLICT (context_id) DO UPDATE
   SET user_id = EXCLUDED.user_id,
       record_id = EXCLUDED.record_id,
       note_terms = EXCLUDED.note_terms,
       place_terms = EXCLUDED.place_terms,
       updated_at = now()


-- name: upsert_lexical
-- Rule: SPEC §10 "The same decision for adopters" (issue 28) — the ai side's own lexical terms of
-- the context (its text and its placeMeta name/address, from the process request; nothing read
-- from core.*), stored, replaced and invalidated exactly with the embedding: written in the same
-- save transaction after upsert_embedding, under the same guards (embedding_status =
-- 'PROCESSING', the job owns its claim (owns_claim, §7.3.1); never over a context whose embedding core marked deleted), replaced on conflict.
-- It is read only through the embedding's own filters (ai/search.sql lexical_matches), so it
-- stops matching the moment the embedding is invalidated. 0 rows → the save is discarded.
INSERT INTO ai.context_lexical (context_id, user_id, record_id, note_terms, place_terms, updated_at)
SELECT s.context_id, :user_id, :record_id, array_to_tsvector(CAST(:note_terms AS text[])),
       array_to_tsvector(CAST(:place_terms AS text[])), now()
  FROM ai.context_ai_state s, {job_claim}
 WHERE s.context_id = :context_id
   AND {embedding_savable}
   AND {lexical_replaced};


-- name: embedding_completion
-- Rule: SPEC §3 complete (embedding), §7.3.1 — what completing the embedding stage writes
-- (complete_stage and save_embeddings_batch; a fragment: the SET list, alias s): COMPLETED,
-- updated_at = now(), and owned_at moves with updated_at: the job that completed the embedding
-- stays responsible for the keyword stage it starts next (if it dies in between, the row is
-- released like any other of its work). Clears last_error/last_error_at (the failures that
-- preceded it stay in ai.context_ai_event), unless the keyword stage is FAILED: then last_error
-- still explains that stage.
embedding_status = 'COMPLETED',
           updated_at = now(),
           owned_at = now(),
           last_error = CASE WHEN keyword_status = 'FAILED' THEN last_error END,
           last_error_at = CASE WHEN keyword_status = 'FAILED' THEN last_error_at END


-- name: keyword_completion
-- Rule: SPEC §3 complete (keyword) — what completing the keyword stage writes (complete_stage; a
-- fragment: the SET list): COMPLETED, updated_at = now(); both stages are then COMPLETED, so
-- last_error/last_error_at are cleared (the history of earlier failures stays in
-- ai.context_ai_event).
keyword_status = 'COMPLETED',
           updated_at = now(),
           last_error = NULL,
           last_error_at = NULL


-- name: completed_event
-- Rule: SPEC §2.2, §3 complete — the event row of every completion (complete_stage and
-- save_embeddings_batch, both stages): one per row of the CTE `completed`, PROCESSING →
-- COMPLETED, actor ai, :reason. A fragment (a CTE).
event AS (
    INSERT INTO ai.context_ai_event (context_id, stage, from_status, to_status, actor, reason)
    SELECT context_id, '{label}', 'PROCESSING', 'COMPLETED', 'ai', :reason
      FROM completed
)


-- name: complete_stage
-- Rule: SPEC §3 complete, §7.3.1 — the guarded complete of a stage ({stage}; one statement for
-- both stages, for one context or many: the single job's and the batch's claims alike come as
-- batch_claims, one per context), only while the stage's save guard holds with the row's own
-- claim ({@savable}: embedding_savable — from PROCESSING, never revives CANCELLED/FAILED, never
-- touches a COMPLETED stage, only while the job owns its claim — or keyword_savable, which also
-- needs embedding COMPLETED). Run inside the save transaction after lock_state /
-- lock_states_batch (under the lock the keyword writes before it used the same guard, so a row
-- is completed exactly when its keyword rows and analysis row were written); writes
-- {@completion} (embedding_completion / keyword_completion) and one event row per completed row
-- (completed_event).
WITH completed AS (
    UPDATE ai.context_ai_state s
       SET {@completion}
      FROM {batch_claims}
     WHERE s.context_id = c.context_id
       AND {@savable}
    RETURNING s.context_id
), {completed_event}
SELECT context_id FROM completed ORDER BY context_id;


-- name: delete_keywords
-- Rule: SPEC §5.2 step 3 save — keywords are delete-then-insert (a rerun replaces, never doubles),
-- only while keyword_savable (keyword PROCESSING, embedding COMPLETED, the job owns its claim,
-- §7.3.1; kept under the lock).
DELETE FROM ai.context_keyword k
 USING ai.context_ai_state s, {job_claim}
 WHERE k.context_id = :context_id
   AND s.context_id = k.context_id
   AND {keyword_savable};


-- name: insert_keywords
-- Rule: SPEC §5.2 step 3 save, §8 — insert the mapped picks (zero is fine: arrays may be empty),
-- only while keyword_savable (§7.3.1 included). Ids were already restricted to candidates.
INSERT INTO ai.context_keyword (context_id, keyword_id, confidence, preset_version)
SELECT s.context_id, pick.keyword_id, pick.confidence, :preset_version
  FROM ai.context_ai_state s, {job_claim},
       unnest(CAST(:keyword_ids AS integer[]), CAST(:confidences AS numeric[]))
           AS pick(keyword_id, confidence)
 WHERE s.context_id = :context_id
   AND {keyword_savable};


-- name: upsert_keyword_analysis
-- Rule: SPEC §2.2, §5.2 step 3 — one analysis row per context (preset version, unmatched concepts,
-- the judge model that actually answered, the judge's evidence per pick and near miss), written even for zero candidates / zero picks (§11 #14),
-- only while keyword_savable (§7.3.1 included).
-- It records the embedding profile whose vector and presets were judged (SPEC §9.1: after an
-- activation the keywords of another profile are re-judged).
INSERT INTO ai.context_keyword_analysis
       (context_id, preset_version, unmatched_concepts, model_profile, evidence,
        embedding_profile, updated_at)
SELECT s.context_id, :preset_version, CAST(:unmatched_concepts AS jsonb), :model_profile,
       CAST(:evidence AS jsonb), :embedding_profile, now()
  FROM ai.context_ai_state s, {job_claim}
 WHERE s.context_id = :context_id
   AND {keyword_savable}
{analysis_replaced};


-- name: analysis_replaced
-- Rule: SPEC §2.2 — one analysis row per context: a new judgement replaces every field of the
-- old one (a fragment, also used by the batch upsert and the re-judge of ai/profiles.sql).
ON CONFLICT (context_id) DO UPDATE
   SET preset_version = EXCLUDED.preset_version,
       unmatched_concepts = EXCLUDED.unmatched_concepts,
       model_profile = EXCLUDED.model_profile,
       evidence = EXCLUDED.evidence,
       embedding_profile = EXCLUDED.embedding_profile,
       updated_at = now()


-- name: job_owns_stage
-- Rule: SPEC §5.5, §7.3.1 — the guard of a job's fail and error writes (fail_stage,
-- record_error): the job's own row (:context_id, its claim as job_claim) while its stage
-- ({stage}) is PROCESSING and the job still owns the claim (owns_claim). The status guard is what
-- keeps CANCELLED (and COMPLETED) from ever being overwritten by a job's failure or error; a
-- taken-over job never touches the new owner's stage. A fragment (the FROM item and the WHERE
-- clause of an UPDATE of s).
FROM {job_claim}
     WHERE s.context_id = :context_id
       AND s.{stage} = 'PROCESSING'
       AND {owns_claim}


-- name: fail_stage
-- Rule: SPEC §3 fail, §5.5 permanent error — PROCESSING → FAILED only, and only by the job that
-- still owns the claim (job_owns_stage, §7.3.1: a taken-over job never fails the new owner's
-- stage; never over CANCELLED or COMPLETED). Records last_error with the status change
-- (updated_at = now(): this IS a status change) and writes the event. The batch path fails its
-- rows one by one with this statement, each with its own claim.
WITH failed AS (
    UPDATE ai.context_ai_state s
       SET {stage} = 'FAILED',
           updated_at = now(),
           last_error = :error,
           last_error_at = now()
      {job_owns_stage}
    RETURNING s.context_id
), event AS (
    INSERT INTO ai.context_ai_event (context_id, stage, from_status, to_status, actor, reason)
    SELECT context_id, :stage_label, 'PROCESSING', 'FAILED', 'ai', :error
      FROM failed
)
SELECT context_id FROM failed;


-- name: record_error
-- Rule: SPEC §5.5 transient error — the stage stays PROCESSING (the rescan re-sends after the
-- expiry); only last_error / last_error_at are written, NEVER updated_at (§2.2: updated_at is the
-- time of the last status change, and the ai re-claim measures from it). Only against a stage this
-- job still owns (job_owns_stage: PROCESSING and owns_claim, §7.3.1), so an error never lands on
-- a cancelled context nor on a stage another job took over. One event row (no status change:
-- from/to null, reason filled). The batch path records its rows' errors one by one with this
-- statement.
WITH recorded AS (
    UPDATE ai.context_ai_state s
       SET last_error = :error,
           last_error_at = now()
      {job_owns_stage}
    RETURNING s.context_id
), event AS (
    INSERT INTO ai.context_ai_event (context_id, stage, from_status, to_status, actor, reason)
    SELECT context_id, :stage_label, NULL, NULL, 'ai', :error
      FROM recorded
)
SELECT context_id FROM recorded;


-- name: insert_event
-- Rule: SPEC §2.2 — append-only history written by the ai side (actor 'ai'): one row per status
-- change and per classified error. Status statements above write their own; this one is for any
-- other classified event the pipeline reports.
INSERT INTO ai.context_ai_event (context_id, stage, from_status, to_status, actor, reason)
VALUES (:context_id, :stage_label, :from_status, :to_status, 'ai', :reason);


-- name: read_embedding
-- Rule: SPEC §5.2 step 3 — the stored vector of a context for its keyword stage (and for reuse,
-- §5.2 step 2). A row core marked deleted is never used.
SELECT embedding, embedding_profile, text_sha256
  FROM ai.context_embedding
 WHERE context_id = :context_id
   AND NOT is_deleted;


-- ===== batch path (SPEC §5.4; docs/ARCHITECTURE.md "Batch path") ===============================
-- The same transitions for many contexts at once: one statement per step, arrays as parameters
-- (:context_ids bigint[] …, unique ids). Every row repeats exactly the guard of the single
-- statement (the same fragment), so a batch can never do what a single job could not; rows whose
-- guard fails are simply absent from the result (0 rows for that context, a normal outcome).
-- Each batch start returns every started row's claim (owner, claimed_at), and every batch save
-- carries each row's own claim (batch_claims, or the claim columns of its input: alias c), so
-- owns_claim holds per row exactly as in the single statement (SPEC §7.3.1).
-- Results are ordered by context_id.


-- name: precheck
-- Rule: SPEC §5.2 step 1 — cheap pre-check, no lock, of one context or many (the single job's
-- and the batch's alike: :context_ids). Reads both statuses and what is stored for the embedding
-- (profile, text hash; never a row core marked deleted) so the job can stop early, reuse a stored
-- vector (§5.2 step 2) or detect a contract violation (§5.6): one row per existing state row (a
-- missing row is absent). Saves model cost only; correctness comes from the guards.
SELECT s.context_id,
       s.embedding_status,
       s.keyword_status,
       e.embedding_profile,
       e.text_sha256
  FROM ai.context_ai_state s
  LEFT JOIN ai.context_embedding e
         ON e.context_id = s.context_id AND NOT e.is_deleted
 WHERE s.context_id = ANY(CAST(:context_ids AS bigint[]))
 ORDER BY s.context_id;


-- name: start_stage_batch
-- Rule: SPEC §3 start, §7.3.1, §7.4 — the start of one stage ({stage}) for many contexts: each
-- row is picked only while the single start's predicate ({@startable}: embedding_startable /
-- keyword_startable) holds, locked FOR UPDATE SKIP LOCKED (a row another transaction holds — a
-- concurrent start, save or cancellation — is skipped, never waited for; two batches never claim
-- the same row), and stage_started repeats the predicate under the lock and records the claim as
-- start_stage does ({label}_start_retry, owner = live_owner, owned_at = updated_at = now()).
-- Returns each started row with its status BEFORE the update (PENDING = fresh start, PROCESSING
-- = re-claim) and its claim (owner, claimed_at); one event row per started row.
WITH picked AS (
    SELECT s.context_id, s.{stage} AS previous_status,
           s.updated_at < now() - :expiry AS expired,
           coalesce({owner_gone}, false) AS owner_gone
      FROM ai.context_ai_state s
     WHERE s.context_id = ANY(CAST(:context_ids AS bigint[]))
       AND {@startable}
     ORDER BY s.context_id
       FOR UPDATE SKIP LOCKED
), {stage_started}
SELECT context_id, previous_status, owner, owned_at AS claimed_at
  FROM started ORDER BY context_id;


-- name: lock_states_batch
-- Rule: SPEC §5.2 save transaction — lock the state rows of a batch FOR UPDATE first (in
-- context_id order, so two transactions locking overlapping sets cannot deadlock on each other's
-- order), so a concurrent cancellation either happened before (the guards below see CANCELLED)
-- or waits until this save commits. Only state rows are locked.
SELECT context_id
  FROM ai.context_ai_state
 WHERE context_id = ANY(CAST(:context_ids AS bigint[]))
 ORDER BY context_id
   FOR UPDATE;


-- name: upsert_shadow_embeddings_batch
-- Rule: SPEC §9.1, §7.3.1 — as upsert_shadow_embedding for many contexts (the building
-- profile's vectors of the rows this replica embedded for it), inside the save transaction after
-- lock_profiles_shared and lock_states_batch and BEFORE save_embeddings_batch completes the
-- rows: each row only while embedding_savable with its own claim (c) and while :profile is the
-- building one (shadow_replaced). Vectors as in save_embeddings_batch. Its row count never
-- decides the save.
WITH c AS (
    SELECT i.context_id, i.owner, i.claimed_at, i.text_sha256,
           CAST(v.flat[(i.n - 1) * :dimension + 1 : i.n * :dimension] AS vector) AS embedding
      FROM unnest(CAST(:context_ids AS bigint[]), CAST(:owners AS text[]),
                  CAST(:claimed_ats AS timestamptz[]), CAST(:text_sha256s AS bytea[]))
               WITH ORDINALITY AS i(context_id, owner, claimed_at, text_sha256, n),
           (SELECT CAST(:embeddings AS real[]) AS flat) AS v
)
INSERT INTO ai.context_embedding_shadow
       (context_id, embedding_profile, embedding, text_sha256, updated_at)
SELECT c.context_id, :profile, c.embedding, c.text_sha256, now()
  FROM c
  JOIN ai.context_ai_state s ON s.context_id = c.context_id
 WHERE {embedding_savable}
   AND {shadow_replaced};


-- name: upsert_lexical_batch
-- Rule: SPEC §10 (issue 28), §7.3.1 — as upsert_lexical for many contexts, inside the batch save
-- transaction after lock_states_batch and BEFORE save_embeddings_batch completes the rows: each
-- row only while embedding_savable with its own claim (c) and while core has not marked its
-- embedding deleted. The claims come as batch_claims, the terms as one JSON array (:rows:
-- context_id, user_id, record_id, note_terms, place_terms). The state rows are reached from the
-- claims (an unnest: each by its primary key), never by scanning ai.context_ai_state for the
-- PROCESSING rows — a JSON recordset alone is estimated at 100 rows, and the plan then read the
-- whole state table once per batch (issue 25). A row written here whose vector the save then
-- discards (another active profile) is rewritten by the save that follows; until then it is read
-- only through the embedding's filters (lexical_matches), so it matches nothing.
INSERT INTO ai.context_lexical (context_id, user_id, record_id, note_terms, place_terms, updated_at)
SELECT t.context_id, t.user_id, t.record_id, array_to_tsvector(t.note_terms),
       array_to_tsvector(t.place_terms), now()
  FROM {batch_claims}
  JOIN ai.context_ai_state s ON s.context_id = c.context_id
  JOIN jsonb_to_recordset(CAST(:rows AS jsonb))
           AS t(context_id bigint, user_id bigint, record_id bigint, note_terms text[],
                place_terms text[]) ON t.context_id = c.context_id
 WHERE {embedding_savable}
   AND {lexical_replaced};


-- name: save_embeddings_batch
-- Rule: SPEC §5.2 step 2 save, §3 complete (embedding), §7.3.1, §9.1 — inside the save
-- transaction after lock_profiles_shared and lock_states_batch: store each row's vector while
-- embedding_savable holds with the row's own claim (c) and :profile is the active profile
-- (embedding_replaced, as upsert_embedding: its update list never includes is_deleted and a
-- row core marked deleted is never overwritten), then complete exactly the
-- rows whose vector was stored, again only while embedding_savable, with embedding_completion
-- and one event row each (completed_event, :reason), as complete_stage. A row whose guard fails writes
-- nothing and stays as it is (discarded), so the transaction always commits what it wrote. The
-- vectors come as one float4 array of n × :dimension values, row i at offset (i-1) ×
-- :dimension (bound in binary: pinlog.ai.vectors.Float4Array).
WITH c AS (
    SELECT i.context_id, i.user_id, i.record_id, i.text_sha256, i.owner, i.claimed_at,
           CAST(v.flat[(i.n - 1) * :dimension + 1 : i.n * :dimension] AS vector) AS embedding
      FROM unnest(CAST(:context_ids AS bigint[]), CAST(:user_ids AS bigint[]),
                  CAST(:record_ids AS bigint[]), CAST(:text_sha256s AS bytea[]),
                  CAST(:owners AS text[]), CAST(:claimed_ats AS timestamptz[]))
               WITH ORDINALITY AS i(context_id, user_id, record_id, text_sha256, owner,
                                    claimed_at, n),
           (SELECT CAST(:embeddings AS real[]) AS flat) AS v
), upserted AS (
    INSERT INTO ai.context_embedding
           (context_id, user_id, record_id, embedding, embedding_profile, text_sha256, updated_at)
    SELECT c.context_id, c.user_id, c.record_id, c.embedding, CAST(:profile AS text),
           c.text_sha256, now()
      FROM c
      JOIN ai.context_ai_state s ON s.context_id = c.context_id
     WHERE {embedding_savable}
       AND {embedding_replaced}
    RETURNING context_id
), completed AS (
    UPDATE ai.context_ai_state s
       SET {embedding_completion}
      FROM upserted u
      JOIN c ON c.context_id = u.context_id
     WHERE s.context_id = u.context_id
       AND {embedding_savable}
    RETURNING s.context_id
), {completed_event}
SELECT context_id FROM completed ORDER BY context_id;


-- name: read_embeddings_batch
-- Rule: SPEC §5.2 step 3 — the stored, not deleted vectors of many contexts (as read_embedding).
SELECT context_id, embedding, embedding_profile, text_sha256
  FROM ai.context_embedding
 WHERE context_id = ANY(CAST(:context_ids AS bigint[]))
   AND NOT is_deleted
 ORDER BY context_id;


-- name: delete_keywords_batch
-- Rule: SPEC §5.2 step 3 save — as delete_keywords for many contexts, each only while
-- keyword_savable with its own claim (batch_claims; inside the save transaction after
-- lock_states_batch).
DELETE FROM ai.context_keyword k
 USING {batch_claims}
  JOIN ai.context_ai_state s ON s.context_id = c.context_id
 WHERE k.context_id = c.context_id
   AND {keyword_savable};


-- name: insert_keywords_batch
-- Rule: SPEC §5.2 step 3 save, §8 — the mapped picks of many contexts, one row per
-- (:pick_context_ids[i], :keyword_ids[i], :confidences[i]), each only while keyword_savable with
-- its context's claim (batch_claims).
INSERT INTO ai.context_keyword (context_id, keyword_id, confidence, preset_version)
SELECT s.context_id, pick.keyword_id, pick.confidence, :preset_version
  FROM unnest(CAST(:pick_context_ids AS bigint[]), CAST(:keyword_ids AS integer[]),
              CAST(:confidences AS numeric[])) AS pick(context_id, keyword_id, confidence)
  JOIN {batch_claims} ON c.context_id = pick.context_id
  JOIN ai.context_ai_state s ON s.context_id = pick.context_id
 WHERE {keyword_savable};


-- name: upsert_keyword_analysis_batch
-- Rule: SPEC §2.2, §5.2 step 3, §9.1 — the analysis rows of many contexts (as
-- upsert_keyword_analysis: written even for zero candidates / zero picks, with the embedding
-- profile judged), each only while keyword_savable with its context's claim (batch_claims).
-- They come as one JSON array of {context_id, unmatched_concepts, model_profile, evidence,
-- embedding_profile} (one parameter).
INSERT INTO ai.context_keyword_analysis
       (context_id, preset_version, unmatched_concepts, model_profile, evidence,
        embedding_profile, updated_at)
SELECT s.context_id, :preset_version, a.unmatched_concepts, a.model_profile, a.evidence,
       a.embedding_profile, now()
  FROM jsonb_to_recordset(CAST(:analyses AS jsonb))
           AS a(context_id bigint, unmatched_concepts jsonb, model_profile text, evidence jsonb,
                embedding_profile text)
  JOIN {batch_claims} ON c.context_id = a.context_id
  JOIN ai.context_ai_state s ON s.context_id = a.context_id
 WHERE {keyword_savable}
{analysis_replaced};


-- name: ai_tables_present
-- Rule: SPEC §2.2 — the ai service refuses to start if its tables are missing (run `pinlog migrate`).
SELECT count(*) AS present
  FROM (VALUES ('ai.context_ai_state'), ('ai.context_embedding'), ('ai.context_keyword'),
               ('ai.context_keyword_analysis'), ('ai.context_ai_event'), ('ai.keyword_preset'),
               ('ai.keyword_preset_embedding'), ('ai.embedding_profile'),
               ('ai.context_embedding_shadow')) AS t(name)
 WHERE to_regclass(t.name) IS NOT NULL;


-- name: preset_fingerprint
-- Rule: SPEC §5.2 step 3 / §8 — the keyword stage takes ONE preset snapshot; the pipeline keeps
-- the last snapshot it built and reuses it only while this fingerprint is unchanged. It is made
-- of the row versions (xmin) of every preset row and of its vector for the profile: any UPDATE
-- (visibility, is_active, version, texts), insert or delete changes it, so a `pinlog presets
-- load`, a retirement or a BLOCKED preset is seen by the very next stage — without re-reading
-- the vectors for every context.
SELECT md5(coalesce(string_agg(p.id::text || ':' || p.xmin::text || ':' || e.xmin::text, ','
                               ORDER BY p.id), '')) AS fingerprint
  FROM ai.keyword_preset p
  JOIN ai.keyword_preset_embedding e
    ON e.preset_id = p.id AND e.embedding_profile = :profile;


-- name: preset_dimensions
-- Rule: SPEC §9 — a profile names one vector space, so every vector stored for it has the
-- provider's dimension. Start-up refuses to run when the preset vectors of the current profile
-- have another length (the model or PINLOG_EMBEDDING_DIMENSION changed under the same name).
SELECT DISTINCT vector_dims(embedding) AS dims
  FROM ai.keyword_preset_embedding
 WHERE embedding_profile = :profile;


-- name: other_embedding_dimension
-- Rule: SPEC §9 — as preset_dimensions, for the stored context embeddings of the current profile:
-- the first one whose length differs from :dimension, if any (start-up check; stops at the
-- first offender, one sequential pass over the profile's rows in the worst case).
SELECT vector_dims(embedding) AS dims
  FROM ai.context_embedding
 WHERE embedding_profile = :profile
   AND vector_dims(embedding) <> :dimension
 LIMIT 1;


-- name: take_over_sending
-- Rule: SPEC §7.3.1 — requests this process accepted over HTTP (queued, not started yet) become
-- its work: it records itself as the row's owner, so when it dies or stops before starting them
-- the rescan of any live process re-sends them at once instead of after the PENDING expiry (their
-- sender, a core process, may well be alive). Only rows whose work is PENDING (embedding PENDING,
-- or keyword PENDING behind a COMPLETED embedding), never a CANCELLED one; only while this
-- process is live (else the sender's record stays); rows it already owns are left alone. No
-- status change (updated_at untouched), never retry_count.
UPDATE ai.context_ai_state s
   SET owner = {live_owner}, owned_at = now()
 WHERE s.context_id = ANY(CAST(:context_ids AS bigint[]))
   AND (s.embedding_status = 'PENDING'
        OR (s.embedding_status = 'COMPLETED' AND s.keyword_status = 'PENDING'))
   AND s.keyword_status <> 'CANCELLED'
   AND s.owner IS DISTINCT FROM CAST(:owner AS text)
   AND {live_owner} IS NOT NULL
RETURNING s.context_id;
