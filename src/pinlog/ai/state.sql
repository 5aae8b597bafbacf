-- Guarded statements of the ai side (SPEC §3, §5.2, §5.5, §5.6).
--
-- Every status write carries its precondition in its WHERE clause (never an application `if`)
-- and keeps it even when the row is already locked FOR UPDATE. Affected rows = 0 is a normal
-- outcome: the stage is owned by a live worker, finished, failed, cancelled or missing.
-- Every status change writes its ai.context_ai_event row in the SAME statement (a data-modifying
-- CTE), so an event exists exactly when the change happened.
-- `{stage}` / `{other}` / `{label}` are replaced only by a pinlog.states.Stage value; everything
-- else is a bound parameter. This file names no core.* table (SPEC §1 boundary).
--
-- Fragments (`startable`, `keyword_startable`, `embedding_savable`, `keyword_savable`) are not
-- statements: each guard is written ONCE here and spliced by name (pinlog.db.sql.Queries) into
-- both the single-context statement and the batch statement (`*_batch`, SPEC §5.4, docs
-- ARCHITECTURE "Batch path") that apply it, so the single and the batch path can never disagree
-- on when a stage may start or be saved. They refer to the state row as `s`.


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


-- name: startable
-- Rule: SPEC §3 start, §7.3 — THE predicate of a guarded start, written once for the single and
-- the batch start statements of both stages ({stage}/{label}: the stage; alias s =
-- ai.context_ai_state): the stage is PENDING, or re-claim a PROCESSING stage
--   * whose updated_at (alone, never rescanned_at: §7.3) is older than the processing expiry, or
--   * whose row's retry_count is higher than when the stage started ({label}_start_retry, §7.3
--     last paragraph: a backend that keeps the reference's rescan bumps retry_count AND refreshes
--     updated_at when it gives an attempt up and re-sends, so age alone would strand a crashed
--     stage; NULL = not recorded: age only).
-- FAILED, COMPLETED, CANCELLED and a live PROCESSING stage never start.
(s.{stage} = 'PENDING'
 OR (s.{stage} = 'PROCESSING'
     AND (s.updated_at < now() - :expiry
          OR s.retry_count > s.{label}_start_retry)))


-- name: keyword_startable
-- Rule: SPEC §3 start (keyword) — {startable} for the keyword stage, and additionally
-- embedding_status = 'COMPLETED': a keyword stage never starts without a stored vector. Used by
-- start_keyword and start_keyword_batch.
(s.embedding_status = 'COMPLETED' AND {startable})


-- name: embedding_savable
-- Rule: SPEC §3 complete (embedding), §5.2 step 2 save — THE guard of every write of an embedding
-- result (single and batch: the vector upsert and the guarded complete): the embedding stage is
-- PROCESSING. Never revives CANCELLED/FAILED, never touches a COMPLETED stage. Alias s.
(s.embedding_status = 'PROCESSING')


-- name: keyword_savable
-- Rule: SPEC §3 complete (keyword), §5.2 step 3 save — THE guard of every write of a keyword
-- result (single and batch: delete and insert of keyword rows, the analysis row, the guarded
-- complete): keyword PROCESSING and embedding COMPLETED. Alias s.
(s.keyword_status = 'PROCESSING' AND s.embedding_status = 'COMPLETED')


-- name: start_embedding
-- Rule: SPEC §3 start (embedding) — {startable} for the embedding stage: PENDING → PROCESSING, or
-- re-claim a stale PROCESSING stage (expiry, or retry_count above embedding_start_retry, §7.3).
-- The start records retry_count in embedding_start_retry for the latter test. Returns the status BEFORE the update (the locked subquery), so a fresh start and a re-claim are
-- told apart in one statement without a second racy read. FAILED, COMPLETED, CANCELLED and a live
-- PROCESSING stage never start (0 rows). Writes the event row in the same statement.
WITH previous AS (
    SELECT context_id, embedding_status AS previous_status,
           updated_at < now() - :expiry AS expired
      FROM ai.context_ai_state
     WHERE context_id = :context_id
       FOR UPDATE
), started AS (
    UPDATE ai.context_ai_state s
       SET embedding_status = 'PROCESSING',
           updated_at = now(),
           embedding_start_retry = s.retry_count
      FROM previous p
     WHERE s.context_id = p.context_id
       AND {startable}
    RETURNING p.previous_status, p.expired
), event AS (
    INSERT INTO ai.context_ai_event (context_id, stage, from_status, to_status, actor, reason)
    SELECT :context_id, 'embedding', previous_status, 'PROCESSING', 'ai',
           CASE WHEN previous_status <> 'PROCESSING' THEN 'started'
                WHEN expired THEN 'reclaimed after processing expiry'
                ELSE 'reclaimed: retry_count rose since the stage started' END
      FROM started
)
SELECT previous_status FROM started;


-- name: start_keyword
-- Rule: SPEC §3 start (keyword) — {keyword_startable}: as start_embedding (expiry or retry_count
-- above keyword_start_retry, §7.3), and additionally requires embedding_status = 'COMPLETED': a
-- keyword stage never starts without a stored vector. Records retry_count in keyword_start_retry.
-- Returns the status before the update; writes the event row in the same statement.
WITH previous AS (
    SELECT context_id, keyword_status AS previous_status,
           updated_at < now() - :expiry AS expired
      FROM ai.context_ai_state
     WHERE context_id = :context_id
       FOR UPDATE
), started AS (
    UPDATE ai.context_ai_state s
       SET keyword_status = 'PROCESSING',
           updated_at = now(),
           keyword_start_retry = s.retry_count
      FROM previous p
     WHERE s.context_id = p.context_id
       AND {keyword_startable}
    RETURNING p.previous_status, p.expired
), event AS (
    INSERT INTO ai.context_ai_event (context_id, stage, from_status, to_status, actor, reason)
    SELECT :context_id, 'keyword', previous_status, 'PROCESSING', 'ai',
           CASE WHEN previous_status <> 'PROCESSING' THEN 'started'
                WHEN expired THEN 'reclaimed after processing expiry'
                ELSE 'reclaimed: retry_count rose since the stage started' END
      FROM started
)
SELECT previous_status FROM started;


-- name: lock_state
-- Rule: SPEC §5.2 save transaction — lock the state row FOR UPDATE first, so a concurrent
-- cancellation (core) either happened before (then the guards below see CANCELLED) or waits until
-- this save commits. Only the state row is locked; nothing else is waited on (§5.2 step 4).
SELECT embedding_status, keyword_status
  FROM ai.context_ai_state
 WHERE context_id = :context_id
   FOR UPDATE;


-- name: upsert_embedding
-- Rule: SPEC §5.2 step 2 save — store the vector only while {embedding_savable} (embedding
-- PROCESSING; guard in the statement, even under the lock). ON CONFLICT never touches is_deleted (core only):
-- its update list omits it, and a row core marked deleted is never overwritten (a deleted
-- context's data must never come back). 0 rows → the save is discarded.
INSERT INTO ai.context_embedding
       (context_id, user_id, record_id, embedding, embedding_profile, text_sha256, updated_at)
SELECT s.context_id, :user_id, :record_id, CAST(:embedding AS vector), :profile, :text_sha256, now()
  FROM ai.context_ai_state s
 WHERE s.context_id = :context_id
   AND {embedding_savable}
ON CONFLICT (context_id) DO UPDATE
   SET user_id = EXCLUDED.user_id,
       record_id = EXCLUDED.record_id,
       embedding = EXCLUDED.embedding,
       embedding_profile = EXCLUDED.embedding_profile,
       text_sha256 = EXCLUDED.text_sha256,
       updated_at = now()
 WHERE NOT ai.context_embedding.is_deleted;


-- name: complete_embedding
-- Rule: SPEC §3 complete (embedding) — only while {embedding_savable} (from PROCESSING: never
-- revives CANCELLED/FAILED, never touches a COMPLETED stage). Run inside the save transaction after lock_state; writes the event.
-- Clears last_error/last_error_at (the failures that preceded it stay in ai.context_ai_event),
-- unless the keyword stage is FAILED: then last_error still explains that stage.
WITH completed AS (
    UPDATE ai.context_ai_state s
       SET embedding_status = 'COMPLETED',
           updated_at = now(),
           last_error = CASE WHEN keyword_status = 'FAILED' THEN last_error END,
           last_error_at = CASE WHEN keyword_status = 'FAILED' THEN last_error_at END
     WHERE s.context_id = :context_id
       AND {embedding_savable}
    RETURNING s.context_id
), event AS (
    INSERT INTO ai.context_ai_event (context_id, stage, from_status, to_status, actor, reason)
    SELECT context_id, 'embedding', 'PROCESSING', 'COMPLETED', 'ai', :reason
      FROM completed
)
SELECT context_id FROM completed;


-- name: delete_keywords
-- Rule: SPEC §5.2 step 3 save — keywords are delete-then-insert (a rerun replaces, never doubles),
-- only while {keyword_savable} (keyword PROCESSING, embedding COMPLETED; kept under the lock).
DELETE FROM ai.context_keyword k
 USING ai.context_ai_state s
 WHERE k.context_id = :context_id
   AND s.context_id = k.context_id
   AND {keyword_savable};


-- name: insert_keywords
-- Rule: SPEC §5.2 step 3 save, §8 — insert the mapped picks (zero is fine: arrays may be empty),
-- only while {keyword_savable}. Ids were already restricted to candidates.
INSERT INTO ai.context_keyword (context_id, keyword_id, confidence, preset_version)
SELECT s.context_id, pick.keyword_id, pick.confidence, :preset_version
  FROM ai.context_ai_state s,
       unnest(CAST(:keyword_ids AS integer[]), CAST(:confidences AS numeric[]))
           AS pick(keyword_id, confidence)
 WHERE s.context_id = :context_id
   AND {keyword_savable};


-- name: upsert_keyword_analysis
-- Rule: SPEC §2.2, §5.2 step 3 — one analysis row per context (preset version, unmatched concepts,
-- the judge model that actually answered, the judge's evidence per pick and near miss), written even for zero candidates / zero picks (§11 #14),
-- only while {keyword_savable}.
INSERT INTO ai.context_keyword_analysis
       (context_id, preset_version, unmatched_concepts, model_profile, evidence, updated_at)
SELECT s.context_id, :preset_version, CAST(:unmatched_concepts AS jsonb), :model_profile,
       CAST(:evidence AS jsonb), now()
  FROM ai.context_ai_state s
 WHERE s.context_id = :context_id
   AND {keyword_savable}
ON CONFLICT (context_id) DO UPDATE
   SET preset_version = EXCLUDED.preset_version,
       unmatched_concepts = EXCLUDED.unmatched_concepts,
       model_profile = EXCLUDED.model_profile,
       evidence = EXCLUDED.evidence,
       updated_at = now();


-- name: complete_keyword
-- Rule: SPEC §3 complete (keyword) — only while {keyword_savable} (from PROCESSING, and only
-- while embedding_status = 'COMPLETED'). Run inside the save transaction after lock_state; writes the event.
-- Both stages are then COMPLETED: last_error/last_error_at are cleared (the history of earlier
-- failures stays in ai.context_ai_event).
WITH completed AS (
    UPDATE ai.context_ai_state s
       SET keyword_status = 'COMPLETED',
           updated_at = now(),
           last_error = NULL,
           last_error_at = NULL
     WHERE s.context_id = :context_id
       AND {keyword_savable}
    RETURNING s.context_id
), event AS (
    INSERT INTO ai.context_ai_event (context_id, stage, from_status, to_status, actor, reason)
    SELECT context_id, 'keyword', 'PROCESSING', 'COMPLETED', 'ai', :reason
      FROM completed
)
SELECT context_id FROM completed;


-- name: fail_stage
-- Rule: SPEC §3 fail, §5.5 permanent error — PROCESSING → FAILED only. The guard is what keeps
-- CANCELLED (and COMPLETED) from ever being overwritten by a job's failure. Records last_error
-- with the status change (updated_at = now(): this IS a status change) and writes the event.
WITH failed AS (
    UPDATE ai.context_ai_state
       SET {stage} = 'FAILED',
           updated_at = now(),
           last_error = :error,
           last_error_at = now()
     WHERE context_id = :context_id
       AND {stage} = 'PROCESSING'
    RETURNING context_id
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
-- job still owns (PROCESSING), so an error never lands on a cancelled context. One event row
-- (no status change: from/to null, reason filled).
WITH recorded AS (
    UPDATE ai.context_ai_state
       SET last_error = :error,
           last_error_at = now()
     WHERE context_id = :context_id
       AND {stage} = 'PROCESSING'
    RETURNING context_id
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
-- Results are ordered by context_id.


-- name: precheck_batch
-- Rule: SPEC §5.2 step 1 — precheck for many contexts (no lock): both statuses and what is stored
-- for the embedding, one row per existing state row (a missing row is absent).
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


-- name: start_embedding_batch
-- Rule: SPEC §3 start (embedding), §7.4 — claim the embedding stage of many contexts: each row is
-- picked only while {startable} holds, locked FOR UPDATE SKIP LOCKED (a row another transaction
-- holds — a concurrent start, save or cancellation — is skipped, never waited for; two batches
-- never claim the same row), and the UPDATE repeats {startable} under the lock. Records
-- embedding_start_retry as start_embedding does. Returns each started row with its status BEFORE
-- the update (PENDING = fresh start, PROCESSING = re-claim); one event row per started row.
WITH picked AS (
    SELECT s.context_id, s.embedding_status AS previous_status,
           s.updated_at < now() - :expiry AS expired
      FROM ai.context_ai_state s
     WHERE s.context_id = ANY(CAST(:context_ids AS bigint[]))
       AND {startable}
     ORDER BY s.context_id
       FOR UPDATE SKIP LOCKED
), started AS (
    UPDATE ai.context_ai_state s
       SET embedding_status = 'PROCESSING',
           updated_at = now(),
           embedding_start_retry = s.retry_count
      FROM picked p
     WHERE s.context_id = p.context_id
       AND {startable}
    RETURNING s.context_id, p.previous_status, p.expired
), event AS (
    INSERT INTO ai.context_ai_event (context_id, stage, from_status, to_status, actor, reason)
    SELECT context_id, 'embedding', previous_status, 'PROCESSING', 'ai',
           CASE WHEN previous_status <> 'PROCESSING' THEN 'started'
                WHEN expired THEN 'reclaimed after processing expiry'
                ELSE 'reclaimed: retry_count rose since the stage started' END
      FROM started
)
SELECT context_id, previous_status FROM started ORDER BY context_id;


-- name: start_keyword_batch
-- Rule: SPEC §3 start (keyword), §7.4 — as start_embedding_batch for the keyword stage, with
-- {keyword_startable} (embedding COMPLETED) in the pick and again in the UPDATE; records
-- keyword_start_retry; one event row per started row.
WITH picked AS (
    SELECT s.context_id, s.keyword_status AS previous_status,
           s.updated_at < now() - :expiry AS expired
      FROM ai.context_ai_state s
     WHERE s.context_id = ANY(CAST(:context_ids AS bigint[]))
       AND {keyword_startable}
     ORDER BY s.context_id
       FOR UPDATE SKIP LOCKED
), started AS (
    UPDATE ai.context_ai_state s
       SET keyword_status = 'PROCESSING',
           updated_at = now(),
           keyword_start_retry = s.retry_count
      FROM picked p
     WHERE s.context_id = p.context_id
       AND {keyword_startable}
    RETURNING s.context_id, p.previous_status, p.expired
), event AS (
    INSERT INTO ai.context_ai_event (context_id, stage, from_status, to_status, actor, reason)
    SELECT context_id, 'keyword', previous_status, 'PROCESSING', 'ai',
           CASE WHEN previous_status <> 'PROCESSING' THEN 'started'
                WHEN expired THEN 'reclaimed after processing expiry'
                ELSE 'reclaimed: retry_count rose since the stage started' END
      FROM started
)
SELECT context_id, previous_status FROM started ORDER BY context_id;


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


-- name: save_embeddings_batch
-- Rule: SPEC §5.2 step 2 save, §3 complete (embedding) — inside the save transaction after
-- lock_states_batch: store each row's vector while {embedding_savable} (the upsert of
-- upsert_embedding: its update list never includes is_deleted and a row core marked deleted is
-- never overwritten), then complete exactly the rows whose vector was stored, again only while
-- {embedding_savable}, with one event row each. A row whose guard fails writes nothing and stays
-- as it is (discarded), so the transaction always commits what it wrote. The vectors come as one
-- float4 array of n × :dimension values, row i at offset (i-1) × :dimension (bound in binary:
-- pinlog.ai.vectors.Float4Array).
WITH input AS (
    SELECT i.context_id, i.user_id, i.record_id, i.text_sha256,
           CAST(v.flat[(i.n - 1) * :dimension + 1 : i.n * :dimension] AS vector) AS embedding
      FROM unnest(CAST(:context_ids AS bigint[]), CAST(:user_ids AS bigint[]),
                  CAST(:record_ids AS bigint[]), CAST(:text_sha256s AS bytea[]))
               WITH ORDINALITY AS i(context_id, user_id, record_id, text_sha256, n),
           (SELECT CAST(:embeddings AS real[]) AS flat) AS v
), upserted AS (
    INSERT INTO ai.context_embedding
           (context_id, user_id, record_id, embedding, embedding_profile, text_sha256, updated_at)
    SELECT i.context_id, i.user_id, i.record_id, i.embedding, :profile, i.text_sha256, now()
      FROM input i
      JOIN ai.context_ai_state s ON s.context_id = i.context_id
     WHERE {embedding_savable}
    ON CONFLICT (context_id) DO UPDATE
       SET user_id = EXCLUDED.user_id,
           record_id = EXCLUDED.record_id,
           embedding = EXCLUDED.embedding,
           embedding_profile = EXCLUDED.embedding_profile,
           text_sha256 = EXCLUDED.text_sha256,
           updated_at = now()
     WHERE NOT ai.context_embedding.is_deleted
    RETURNING context_id
), completed AS (
    UPDATE ai.context_ai_state s
       SET embedding_status = 'COMPLETED',
           updated_at = now(),
           last_error = CASE WHEN keyword_status = 'FAILED' THEN last_error END,
           last_error_at = CASE WHEN keyword_status = 'FAILED' THEN last_error_at END
      FROM upserted u
     WHERE s.context_id = u.context_id
       AND {embedding_savable}
    RETURNING s.context_id
), event AS (
    INSERT INTO ai.context_ai_event (context_id, stage, from_status, to_status, actor, reason)
    SELECT context_id, 'embedding', 'PROCESSING', 'COMPLETED', 'ai', 'completed'
      FROM completed
)
SELECT context_id FROM completed ORDER BY context_id;


-- name: read_embeddings_batch
-- Rule: SPEC §5.2 step 3 — the stored, not deleted vectors of many contexts (as read_embedding).
SELECT context_id, embedding, embedding_profile, text_sha256
  FROM ai.context_embedding
 WHERE context_id = ANY(CAST(:context_ids AS bigint[]))
   AND NOT is_deleted
 ORDER BY context_id;


-- name: delete_keywords_batch
-- Rule: SPEC §5.2 step 3 save — as delete_keywords for many contexts, only while
-- {keyword_savable} (inside the save transaction after lock_states_batch).
DELETE FROM ai.context_keyword k
 USING ai.context_ai_state s
 WHERE k.context_id = ANY(CAST(:context_ids AS bigint[]))
   AND s.context_id = k.context_id
   AND {keyword_savable};


-- name: insert_keywords_batch
-- Rule: SPEC §5.2 step 3 save, §8 — the mapped picks of many contexts, one row per
-- (:pick_context_ids[i], :keyword_ids[i], :confidences[i]), each only while {keyword_savable}.
INSERT INTO ai.context_keyword (context_id, keyword_id, confidence, preset_version)
SELECT s.context_id, pick.keyword_id, pick.confidence, :preset_version
  FROM unnest(CAST(:pick_context_ids AS bigint[]), CAST(:keyword_ids AS integer[]),
              CAST(:confidences AS numeric[])) AS pick(context_id, keyword_id, confidence)
  JOIN ai.context_ai_state s ON s.context_id = pick.context_id
 WHERE {keyword_savable};


-- name: upsert_keyword_analysis_batch
-- Rule: SPEC §2.2, §5.2 step 3 — the analysis rows of many contexts (as upsert_keyword_analysis:
-- written even for zero candidates / zero picks), each only while {keyword_savable}. They come as
-- one JSON array of {context_id, unmatched_concepts, model_profile, evidence} (one parameter).
INSERT INTO ai.context_keyword_analysis
       (context_id, preset_version, unmatched_concepts, model_profile, evidence, updated_at)
SELECT s.context_id, :preset_version, a.unmatched_concepts, a.model_profile, a.evidence, now()
  FROM jsonb_to_recordset(CAST(:analyses AS jsonb))
           AS a(context_id bigint, unmatched_concepts jsonb, model_profile text, evidence jsonb)
  JOIN ai.context_ai_state s ON s.context_id = a.context_id
 WHERE {keyword_savable}
ON CONFLICT (context_id) DO UPDATE
   SET preset_version = EXCLUDED.preset_version,
       unmatched_concepts = EXCLUDED.unmatched_concepts,
       model_profile = EXCLUDED.model_profile,
       evidence = EXCLUDED.evidence,
       updated_at = now();


-- name: complete_keyword_batch
-- Rule: SPEC §3 complete (keyword) — as complete_keyword for many contexts: only while
-- {keyword_savable}; last_error cleared; one event row per completed row. Under the batch's lock
-- the keyword writes above used the same guard, so a row is completed exactly when its keyword
-- rows and analysis row were written.
WITH completed AS (
    UPDATE ai.context_ai_state s
       SET keyword_status = 'COMPLETED',
           updated_at = now(),
           last_error = NULL,
           last_error_at = NULL
     WHERE s.context_id = ANY(CAST(:context_ids AS bigint[]))
       AND {keyword_savable}
    RETURNING s.context_id
), event AS (
    INSERT INTO ai.context_ai_event (context_id, stage, from_status, to_status, actor, reason)
    SELECT context_id, 'keyword', 'PROCESSING', 'COMPLETED', 'ai', 'completed'
      FROM completed
)
SELECT context_id FROM completed ORDER BY context_id;


-- name: ai_tables_present
-- Rule: SPEC §2.2 — the ai service refuses to start if its tables are missing (run `pinlog migrate`).
SELECT count(*) AS present
  FROM (VALUES ('ai.context_ai_state'), ('ai.context_embedding'), ('ai.context_keyword'),
               ('ai.context_keyword_analysis'), ('ai.context_ai_event'), ('ai.keyword_preset'),
               ('ai.keyword_preset_embedding')) AS t(name)
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
