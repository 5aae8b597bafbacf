-- Guarded statements of the ai side (SPEC §3, §5.2, §5.5, §5.6).
--
-- Every status write carries its precondition in its WHERE clause (never an application `if`)
-- and keeps it even when the row is already locked FOR UPDATE. Affected rows = 0 is a normal
-- outcome: the stage is owned by a live worker, finished, failed, cancelled or missing.
-- Every status change writes its ai.context_ai_event row in the SAME statement (a data-modifying
-- CTE), so an event exists exactly when the change happened.
-- `{stage}` / `{other}` are replaced only by a pinlog.states.Stage value; everything else is a
-- bound parameter. This file names no core.* table (SPEC §1 boundary).


-- name: precheck
-- Rule: SPEC §5.2 step 1 — cheap pre-check, no lock. Reads both statuses and what is stored for
-- the embedding (profile, text hash) so the job can stop early, reuse a stored vector (§5.2 step 2)
-- or detect a contract violation (§5.6). Saves model cost only; correctness comes from the guards.
SELECT s.embedding_status,
       s.keyword_status,
       e.embedding_profile,
       e.text_sha256
  FROM ai.context_ai_state s
  LEFT JOIN ai.context_embedding e
         ON e.context_id = s.context_id AND NOT e.is_deleted
 WHERE s.context_id = :context_id;


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
-- Rule: SPEC §3 start, §7.3, §7.3.1 — THE predicate of a guarded start, written once for both
-- stages' start statements (and any batch start): stage may start when it is PENDING, or
-- re-claim a PROCESSING stage when
--   * its updated_at (alone, never rescanned_at: §7.3) is older than the processing expiry, or
--   * the row's retry_count is higher than when the stage started (label_start_retry, §7.3
--     last paragraph: a backend that keeps the reference's rescan bumps retry_count AND refreshes
--     updated_at when it gives an attempt up; NULL = not recorded: this clause never holds), or
--   * its recorded owner is gone (owner_gone, §7.3.1) — at once, before the expiry.
-- A PROCESSING stage whose owner is live (however slow) or unknown waits for the expiry. FAILED,
-- COMPLETED and CANCELLED never start. A fragment (alias s = ai.context_ai_state).
(s.{stage} = 'PENDING'
 OR (s.{stage} = 'PROCESSING'
     AND (s.updated_at < now() - :expiry
          OR s.retry_count > s.{label}_start_retry
          OR {owner_gone})))


-- name: owns_claim
-- Rule: SPEC §7.3.1 — the job still owns the claim its start took: the row's owner is the one
-- the start recorded (:owner; NULL when the process was not live-registered) and nobody started
-- or claimed the row since (owned_at and updated_at are still the start's now(), :claimed_at).
-- Every save, fail and error write of a stage carries it, so a process whose claim was taken
-- over — re-claimed by any start (ours or an older version's: updated_at moved), or claimed by
-- the rescan (owner and owned_at moved) — writes nothing: 0 rows, the result is discarded.
-- Never two live owners, never a late overwrite. A fragment (alias s = ai.context_ai_state).
(s.owner IS NOT DISTINCT FROM CAST(:owner AS text)
 AND s.owned_at = CAST(:claimed_at AS timestamptz)
 AND s.updated_at = CAST(:claimed_at AS timestamptz))


-- name: start_embedding
-- Rule: SPEC §3 start (embedding), §7.3, §7.3.1 — startable for the embedding stage. Records
-- the claim: retry_count in embedding_start_retry (§7.3), the owner (live_owner: this process
-- while its lease runs, else NULL) and owned_at = updated_at = now(). Returns the status BEFORE
-- the update (the locked subquery), so a fresh start and a re-claim are told apart in one
-- statement without a second racy read, plus the claim (owner as recorded, claimed_at) that
-- every later write of this job must still own (owns_claim). Writes the event row in the same
-- statement, naming why a re-claim happened.
WITH previous AS (
    SELECT s.context_id, s.embedding_status AS previous_status,
           s.updated_at < now() - :expiry AS expired,
           coalesce({owner_gone}, false) AS owner_gone
      FROM ai.context_ai_state s
     WHERE s.context_id = :context_id
       FOR UPDATE
), started AS (
    UPDATE ai.context_ai_state s
       SET embedding_status = 'PROCESSING',
           updated_at = now(),
           embedding_start_retry = s.retry_count,
           owner = {live_owner},
           owned_at = now()
      FROM previous p
     WHERE s.context_id = p.context_id
       AND {startable}
    RETURNING p.previous_status, p.expired, p.owner_gone, s.owner, s.owned_at
), event AS (
    INSERT INTO ai.context_ai_event (context_id, stage, from_status, to_status, actor, reason)
    SELECT :context_id, 'embedding', previous_status, 'PROCESSING', 'ai',
           CASE WHEN previous_status <> 'PROCESSING' THEN 'started'
                WHEN expired THEN 'reclaimed after processing expiry'
                WHEN owner_gone THEN 'reclaimed: its owner is gone (no heartbeat)'
                ELSE 'reclaimed: retry_count rose since the stage started' END
      FROM started
)
SELECT previous_status, owner, owned_at AS claimed_at FROM started;


-- name: start_keyword
-- Rule: SPEC §3 start (keyword), §7.3, §7.3.1 — as start_embedding (startable for the keyword
-- stage, the claim recorded the same way, keyword_start_retry), and additionally requires
-- embedding_status = 'COMPLETED': a keyword stage never starts without a stored vector.
-- Returns the status before the update and the claim; writes the event row in the same statement.
WITH previous AS (
    SELECT s.context_id, s.keyword_status AS previous_status,
           s.updated_at < now() - :expiry AS expired,
           coalesce({owner_gone}, false) AS owner_gone
      FROM ai.context_ai_state s
     WHERE s.context_id = :context_id
       FOR UPDATE
), started AS (
    UPDATE ai.context_ai_state s
       SET keyword_status = 'PROCESSING',
           updated_at = now(),
           keyword_start_retry = s.retry_count,
           owner = {live_owner},
           owned_at = now()
      FROM previous p
     WHERE s.context_id = p.context_id
       AND s.embedding_status = 'COMPLETED'
       AND {startable}
    RETURNING p.previous_status, p.expired, p.owner_gone, s.owner, s.owned_at
), event AS (
    INSERT INTO ai.context_ai_event (context_id, stage, from_status, to_status, actor, reason)
    SELECT :context_id, 'keyword', previous_status, 'PROCESSING', 'ai',
           CASE WHEN previous_status <> 'PROCESSING' THEN 'started'
                WHEN expired THEN 'reclaimed after processing expiry'
                WHEN owner_gone THEN 'reclaimed: its owner is gone (no heartbeat)'
                ELSE 'reclaimed: retry_count rose since the stage started' END
      FROM started
)
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
-- Rule: SPEC §9.1 — the embedding save places its vectors by the profiles' roles, so it takes
-- the profile lock shared first (ai/profiles.sql: an activation holds it exclusive): the roles
-- its statements read are those before or after an activation, never in between.
SELECT pg_advisory_xact_lock_shared({profile_lock});


-- name: upsert_embedding
-- Rule: SPEC §5.2 step 2 save — store the vector only while embedding_status = 'PROCESSING' and
-- the job still owns its claim (owns_claim, §7.3.1) (guards in the statement, even under the
-- lock). ON CONFLICT never touches is_deleted (core only): its update list omits it, and a row
-- core marked deleted is never overwritten (a deleted context's data must never come back).
-- 0 rows → the save is discarded.
-- Rule: SPEC §9.1 — ai.context_embedding holds the ACTIVE profile's vectors only: a vector of
-- another profile than the recorded active one (an activation committed while this job was
-- embedding) is never written here (no row in ai.embedding_profile = before any switch: the
-- caller's profile is the active one).
INSERT INTO ai.context_embedding
       (context_id, user_id, record_id, embedding, embedding_profile, text_sha256, updated_at)
SELECT s.context_id, :user_id, :record_id, CAST(:embedding AS vector), CAST(:profile AS text),
       :text_sha256, now()
  FROM ai.context_ai_state s
 WHERE s.context_id = :context_id
   AND s.embedding_status = 'PROCESSING'
   AND {owns_claim}
   AND NOT EXISTS (SELECT 1 FROM ai.embedding_profile p
                    WHERE p.role = 'active' AND p.profile <> CAST(:profile AS text))
ON CONFLICT (context_id) DO UPDATE
   SET user_id = EXCLUDED.user_id,
       record_id = EXCLUDED.record_id,
       embedding = EXCLUDED.embedding,
       embedding_profile = EXCLUDED.embedding_profile,
       text_sha256 = EXCLUDED.text_sha256,
       updated_at = now()
 WHERE NOT ai.context_embedding.is_deleted;


-- name: upsert_shadow_embedding
-- Rule: SPEC §9.1 — a context embedded while a profile is building gets a vector in both
-- profiles: the building profile's goes to the shadow table in the same save transaction,
-- under the same guard (embedding PROCESSING, the job owns its claim, the state row locked) and
-- only while :profile is the building one. Its row count never decides the save (the backfill fills any gap).
INSERT INTO ai.context_embedding_shadow
       (context_id, embedding_profile, embedding, text_sha256, updated_at)
SELECT s.context_id, :profile, CAST(:embedding AS vector), :text_sha256, now()
  FROM ai.context_ai_state s
 WHERE s.context_id = :context_id
   AND s.embedding_status = 'PROCESSING'
   AND {owns_claim}
   AND EXISTS (SELECT 1 FROM ai.embedding_profile p
                WHERE p.profile = :profile AND p.role = 'building')
ON CONFLICT (context_id, embedding_profile) DO UPDATE
   SET embedding = EXCLUDED.embedding,
       text_sha256 = EXCLUDED.text_sha256,
       updated_at = now();


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
  FROM ai.context_ai_state s
 WHERE s.context_id = :context_id
   AND s.embedding_status = 'PROCESSING'
   AND {owns_claim}
   AND NOT EXISTS (SELECT 1 FROM ai.context_embedding AS e
                    WHERE e.context_id = s.context_id AND e.is_deleted)
ON CONFLICT (context_id) DO UPDATE
   SET user_id = EXCLUDED.user_id,
       record_id = EXCLUDED.record_id,
       note_terms = EXCLUDED.note_terms,
       place_terms = EXCLUDED.place_terms,
       updated_at = now();


-- name: complete_embedding
-- Rule: SPEC §3 complete (embedding) — only from PROCESSING (never revives CANCELLED/FAILED, never
-- touches a COMPLETED stage) and only while the job owns its claim (owns_claim, §7.3.1). Run
-- inside the save transaction after lock_state; writes the event. owned_at moves with updated_at:
-- the job that completed the embedding stays responsible for the keyword stage it starts next
-- (if it dies in between, the row is released like any other of its work).
-- Clears last_error/last_error_at (the failures that preceded it stay in ai.context_ai_event),
-- unless the keyword stage is FAILED: then last_error still explains that stage.
WITH completed AS (
    UPDATE ai.context_ai_state s
       SET embedding_status = 'COMPLETED',
           updated_at = now(),
           owned_at = now(),
           last_error = CASE WHEN keyword_status = 'FAILED' THEN last_error END,
           last_error_at = CASE WHEN keyword_status = 'FAILED' THEN last_error_at END
     WHERE s.context_id = :context_id
       AND s.embedding_status = 'PROCESSING'
       AND {owns_claim}
    RETURNING s.context_id
), event AS (
    INSERT INTO ai.context_ai_event (context_id, stage, from_status, to_status, actor, reason)
    SELECT context_id, 'embedding', 'PROCESSING', 'COMPLETED', 'ai', :reason
      FROM completed
)
SELECT context_id FROM completed;


-- name: delete_keywords
-- Rule: SPEC §5.2 step 3 save — keywords are delete-then-insert (a rerun replaces, never doubles),
-- only while keyword PROCESSING and embedding COMPLETED and the job owns its claim (owns_claim,
-- §7.3.1) (guards kept under the lock).
DELETE FROM ai.context_keyword k
 USING ai.context_ai_state s
 WHERE k.context_id = :context_id
   AND s.context_id = k.context_id
   AND s.keyword_status = 'PROCESSING'
   AND s.embedding_status = 'COMPLETED'
   AND {owns_claim};


-- name: insert_keywords
-- Rule: SPEC §5.2 step 3 save, §8 — insert the mapped picks (zero is fine: arrays may be empty),
-- only while keyword PROCESSING and embedding COMPLETED and the job owns its claim
-- (owns_claim, §7.3.1). Ids were already restricted to candidates.
INSERT INTO ai.context_keyword (context_id, keyword_id, confidence, preset_version)
SELECT s.context_id, pick.keyword_id, pick.confidence, :preset_version
  FROM ai.context_ai_state s,
       unnest(CAST(:keyword_ids AS integer[]), CAST(:confidences AS numeric[]))
           AS pick(keyword_id, confidence)
 WHERE s.context_id = :context_id
   AND s.keyword_status = 'PROCESSING'
   AND s.embedding_status = 'COMPLETED'
   AND {owns_claim};


-- name: upsert_keyword_analysis
-- Rule: SPEC §2.2, §5.2 step 3 — one analysis row per context (preset version, unmatched concepts,
-- the judge model that actually answered, the judge's evidence per pick and near miss), written even for zero candidates / zero picks (§11 #14),
-- only while keyword PROCESSING and embedding COMPLETED and the job owns its claim (owns_claim).
-- It records the embedding profile whose vector and presets were judged (SPEC §9.1: after an
-- activation the keywords of another profile are re-judged).
INSERT INTO ai.context_keyword_analysis
       (context_id, preset_version, unmatched_concepts, model_profile, evidence,
        embedding_profile, updated_at)
SELECT s.context_id, :preset_version, CAST(:unmatched_concepts AS jsonb), :model_profile,
       CAST(:evidence AS jsonb), :embedding_profile, now()
  FROM ai.context_ai_state s
 WHERE s.context_id = :context_id
   AND s.keyword_status = 'PROCESSING'
   AND s.embedding_status = 'COMPLETED'
   AND {owns_claim}
{analysis_replaced};


-- name: analysis_replaced
-- Rule: SPEC §2.2 — one analysis row per context: a new judgement replaces every field of the
-- old one (a fragment, also used by the re-judge of ai/profiles.sql).
ON CONFLICT (context_id) DO UPDATE
   SET preset_version = EXCLUDED.preset_version,
       unmatched_concepts = EXCLUDED.unmatched_concepts,
       model_profile = EXCLUDED.model_profile,
       evidence = EXCLUDED.evidence,
       embedding_profile = EXCLUDED.embedding_profile,
       updated_at = now()


-- name: complete_keyword
-- Rule: SPEC §3 complete (keyword) — only from PROCESSING, only while embedding_status =
-- 'COMPLETED' and only while the job owns its claim (owns_claim, §7.3.1). Run inside the save
-- transaction after lock_state; writes the event.
-- Both stages are then COMPLETED: last_error/last_error_at are cleared (the history of earlier
-- failures stays in ai.context_ai_event).
WITH completed AS (
    UPDATE ai.context_ai_state s
       SET keyword_status = 'COMPLETED',
           updated_at = now(),
           last_error = NULL,
           last_error_at = NULL
     WHERE s.context_id = :context_id
       AND s.keyword_status = 'PROCESSING'
       AND s.embedding_status = 'COMPLETED'
       AND {owns_claim}
    RETURNING s.context_id
), event AS (
    INSERT INTO ai.context_ai_event (context_id, stage, from_status, to_status, actor, reason)
    SELECT context_id, 'keyword', 'PROCESSING', 'COMPLETED', 'ai', :reason
      FROM completed
)
SELECT context_id FROM completed;


-- name: fail_stage
-- Rule: SPEC §3 fail, §5.5 permanent error — PROCESSING → FAILED only, and only by the job that
-- still owns the claim (owns_claim, §7.3.1: a taken-over job never fails the new owner's
-- stage). The status guard is what keeps CANCELLED (and COMPLETED) from ever being overwritten by
-- a job's failure. Records last_error with the status change (updated_at = now(): this IS a
-- status change) and writes the event.
WITH failed AS (
    UPDATE ai.context_ai_state s
       SET {stage} = 'FAILED',
           updated_at = now(),
           last_error = :error,
           last_error_at = now()
     WHERE s.context_id = :context_id
       AND s.{stage} = 'PROCESSING'
       AND {owns_claim}
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
-- job still owns (PROCESSING and owns_claim, §7.3.1), so an error never lands on a cancelled
-- context nor on a stage another job took over. One event row (no status change: from/to null,
-- reason filled).
WITH recorded AS (
    UPDATE ai.context_ai_state s
       SET last_error = :error,
           last_error_at = now()
     WHERE s.context_id = :context_id
       AND s.{stage} = 'PROCESSING'
       AND {owns_claim}
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
