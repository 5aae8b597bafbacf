-- Embedding profiles side by side (SPEC §9.1, issue 24): the roles, the backfill of the
-- building profile, activation, drop, the keyword re-judge after an activation, coverage.
--
-- ai.embedding_profile holds one row per profile the switch knows (role active / building /
-- kept); no row at all means "the replicas' configured profile is active" (before any switch).
-- ai.context_embedding keeps context_id as its key and holds the ACTIVE profile's vectors only;
-- every other profile's vectors live in ai.context_embedding_shadow (context_id, profile).
--
-- Serialisation: activation takes the transaction-scoped advisory lock {profile_lock} in
-- EXCLUSIVE mode; every write that places a vector by role (the embedding save, the backfill's
-- batch write, the re-judge) takes it SHARED first, so such a write sees the roles either
-- before or after an activation, never in between. Searches need no lock: they read the roles
-- and the vectors in one REPEATABLE READ snapshot (ai/search.sql active_profile).
-- Only ai.* tables appear here (SPEC §1 boundary).


-- name: profile_lock
hashtext('pinlog.ai.embedding_profile')

-- name: lock_profiles_exclusive
-- Rule: SPEC §9.1 — activation and drop are atomic for every replica: they wait for the vector
-- writes in flight and hold new ones back until they commit.
SELECT pg_advisory_xact_lock({profile_lock});

-- name: lock_profiles_shared
-- Rule: SPEC §9.1 — a write that places vectors by role takes the profile lock shared.
SELECT pg_advisory_xact_lock_shared({profile_lock});

-- name: try_build_lock
-- Rule: one backfill at a time (a second would make duplicate model calls). Session-scoped: a
-- crashed build's lock goes with its connection, so a restart can resume at once.
SELECT pg_try_advisory_lock(hashtext('pinlog.ai.embedding_profile.build')) AS locked;

-- name: release_build_lock
SELECT pg_advisory_unlock(hashtext('pinlog.ai.embedding_profile.build'));

-- name: read_roles
-- The active and the building profile (NULL when none is recorded).
SELECT max(profile) FILTER (WHERE role = 'active')   AS active,
       max(profile) FILTER (WHERE role = 'building') AS building
  FROM ai.embedding_profile;

-- name: lock_roles
-- Every row, locked (under the exclusive profile lock; activation, build start and drop).
SELECT profile, role, dimension, build_after, activated_at
  FROM ai.embedding_profile
 ORDER BY profile
   FOR UPDATE;

-- name: record_active
-- Rule: SPEC §9.1 — the first use of the switch records the profile the replicas serve today
-- (the caller's configured profile) as active; an existing active row is kept.
INSERT INTO ai.embedding_profile (profile, role, dimension, activated_at)
VALUES (CAST(:profile AS text), 'active', :dimension, now())
ON CONFLICT DO NOTHING;

-- name: begin_build
-- Rule: SPEC §9.1 — at most one building profile (the partial unique index refuses a second);
-- a kept profile becomes building again (its kept vectors count, the backfill fills the gaps);
-- restarting the build of the building profile keeps its cursor (resumable).
INSERT INTO ai.embedding_profile (profile, role, dimension, build_started_at, build_seen_at)
VALUES (CAST(:profile AS text), 'building', :dimension, now(), now())
ON CONFLICT (profile) DO UPDATE
   SET role = 'building',
       dimension = EXCLUDED.dimension,
       build_after = CASE WHEN ai.embedding_profile.role = 'building'
                          THEN ai.embedding_profile.build_after ELSE 0 END,
       built = CASE WHEN ai.embedding_profile.role = 'building'
                    THEN ai.embedding_profile.built ELSE 0 END,
       build_started_at = CASE WHEN ai.embedding_profile.role = 'building'
                               THEN ai.embedding_profile.build_started_at ELSE now() END,
       build_seen_at = now(),
       build_finished_at = NULL,
       updated_at = now()
 WHERE ai.embedding_profile.role <> 'active'
RETURNING build_after;

-- name: build_batch
-- Rule: SPEC §9.1 — the backfill's fetch: contexts whose embedding stage is COMPLETED, whose
-- vector is not deleted and which have no vector of :profile yet, in context id order after the
-- cursor. Resumable by construction: what was written has its shadow row, so a restart (from the
-- stored cursor, or the final sweep from 0) never embeds it again. Changes no status.
SELECT e.context_id, e.text_sha256
  FROM ai.context_embedding e
 WHERE e.context_id > :after
   AND NOT e.is_deleted
   AND e.embedding_profile <> CAST(:profile AS text)
   AND (SELECT s.embedding_status FROM ai.context_ai_state s
         WHERE s.context_id = e.context_id) = 'COMPLETED'
   AND NOT EXISTS (SELECT 1 FROM ai.context_embedding_shadow sh
                    WHERE sh.context_id = e.context_id AND sh.embedding_profile = CAST(:profile AS text))
   AND NOT (e.context_id = ANY(CAST(:skip AS bigint[])))
 ORDER BY e.context_id
 LIMIT :limit;

-- name: write_build_vectors
-- Rule: SPEC §9.1 invalidation holds for every profile — a building vector is written only for a
-- context whose embedding stage is still COMPLETED and whose vector is not deleted, with the
-- state row locked FOR SHARE (in id order) for the rest of the transaction: a concurrent
-- delete/edit (core's cancel locks the row FOR UPDATE and removes the context's shadow vectors
-- in the same transaction) either waits for this write and then removes it, or ran first and
-- this write skips the context. Changes no status. (Only while :profile is still the building
-- profile: record_build_progress, in the same transaction, rolls it back otherwise.)
WITH locked AS (
    SELECT s.context_id
      FROM ai.context_ai_state s
      JOIN ai.context_embedding e ON e.context_id = s.context_id
     WHERE s.context_id = ANY(CAST(:context_ids AS bigint[]))
       AND s.embedding_status = 'COMPLETED'
       AND NOT e.is_deleted
     ORDER BY s.context_id
       FOR SHARE OF s
)
INSERT INTO ai.context_embedding_shadow (context_id, embedding_profile, embedding, text_sha256)
SELECT v.context_id, CAST(:profile AS text), CAST(v.embedding AS vector), v.text_sha256
  FROM unnest(CAST(:context_ids AS bigint[]), CAST(:embeddings AS text[]),
              CAST(:text_sha256s AS bytea[])) AS v(context_id, embedding, text_sha256)
  JOIN locked l ON l.context_id = v.context_id
ON CONFLICT (context_id, embedding_profile) DO UPDATE
   SET embedding = EXCLUDED.embedding,
       text_sha256 = EXCLUDED.text_sha256,
       updated_at = now();

-- name: record_build_progress
-- Rule: SPEC §9.1 — the backfill's cursor and progress, in the same transaction as its batch
-- write (a crash never leaves the cursor past a batch that was not written; the cursor only
-- moves forward), and only while :profile is the building profile: no row back (activated or
-- dropped meanwhile) rolls the batch back and stops the backfill.
UPDATE ai.embedding_profile
   SET build_after = greatest(build_after, :after),
       built = built + :written,
       build_rate = :rate,
       build_seen_at = now(),
       updated_at = now()
 WHERE profile = CAST(:profile AS text)
   AND role = 'building'
RETURNING profile;

-- name: finish_build
UPDATE ai.embedding_profile
   SET build_finished_at = now(), build_seen_at = now(), updated_at = now()
 WHERE profile = CAST(:profile AS text)
   AND role = 'building';

-- name: missing_vectors
-- Rule: SPEC §9.1 — activation refuses below full coverage: the contexts that should have a
-- vector of :profile (embedding COMPLETED, vector not deleted) and have none.
SELECT count(*) AS missing
  FROM ai.context_embedding e
  JOIN ai.context_ai_state s ON s.context_id = e.context_id
 WHERE s.embedding_status = 'COMPLETED'
   AND NOT e.is_deleted
   AND e.embedding_profile <> CAST(:profile AS text)
   AND NOT EXISTS (SELECT 1 FROM ai.context_embedding_shadow sh
                    WHERE sh.context_id = e.context_id AND sh.embedding_profile = CAST(:profile AS text));

-- name: shadow_dimensions
-- Rule: SPEC §9 — a profile names one vector space: its stored vectors share one length.
SELECT DISTINCT vector_dims(embedding) AS dims
  FROM ai.context_embedding_shadow
 WHERE embedding_profile = CAST(:profile AS text);

-- name: keep_replaced_vectors
-- Rule: SPEC §9.1 — activation keeps the vectors it replaces (activating their profile again is
-- the rollback): every active-table vector that the copy below overwrites moves to the shadow
-- table under its own profile. Same predicate as copy_activated_vectors.
INSERT INTO ai.context_embedding_shadow (context_id, embedding_profile, embedding, text_sha256)
SELECT e.context_id, e.embedding_profile, e.embedding, e.text_sha256
  FROM ai.context_embedding e
  JOIN ai.context_embedding_shadow n
    ON n.context_id = e.context_id AND n.embedding_profile = CAST(:profile AS text)
  JOIN ai.context_ai_state s ON s.context_id = e.context_id
 WHERE s.embedding_status = 'COMPLETED'
   AND NOT e.is_deleted
   AND e.embedding_profile <> CAST(:profile AS text)
ON CONFLICT (context_id, embedding_profile) DO UPDATE
   SET embedding = EXCLUDED.embedding,
       text_sha256 = EXCLUDED.text_sha256,
       updated_at = now();

-- name: copy_activated_vectors
-- Rule: SPEC §9.1 — activation copies only vectors of contexts still COMPLETED and not deleted
-- at that moment (inside the activation transaction): a deleted or edited context's building
-- vector never becomes searchable. ai.context_embedding keeps its key (context_id).
UPDATE ai.context_embedding e
   SET embedding = n.embedding,
       embedding_profile = n.embedding_profile,
       text_sha256 = coalesce(n.text_sha256, e.text_sha256),
       updated_at = now()
  FROM ai.context_embedding_shadow n, ai.context_ai_state s
 WHERE n.context_id = e.context_id
   AND n.embedding_profile = CAST(:profile AS text)
   AND s.context_id = e.context_id
   AND s.embedding_status = 'COMPLETED'
   AND NOT e.is_deleted
   AND e.embedding_profile <> CAST(:profile AS text);

-- name: delete_profile_vectors
-- The shadow vectors of :profile: after an activation they are in ai.context_embedding (the
-- ones not copied belong to contexts no longer COMPLETED or deleted); after a drop, gone.
DELETE FROM ai.context_embedding_shadow WHERE embedding_profile = CAST(:profile AS text);

-- name: demote_active
-- Rule: SPEC §9.1 — the profile that was active is kept (its vectors stay until dropped).
UPDATE ai.embedding_profile
   SET role = 'kept', rejudge_after = NULL, updated_at = now()
 WHERE role = 'active'
   AND profile <> CAST(:profile AS text);

-- name: promote
-- Rule: SPEC §9.1 — :profile becomes the active profile; its keywords are re-judged in the
-- background from context id 0 (rejudge_after), the old ones stay shown meanwhile.
INSERT INTO ai.embedding_profile (profile, role, dimension, activated_at, rejudge_after)
VALUES (CAST(:profile AS text), 'active', :dimension, now(), 0)
ON CONFLICT (profile) DO UPDATE
   SET role = 'active',
       dimension = coalesce(EXCLUDED.dimension, ai.embedding_profile.dimension),
       activated_at = now(),
       rejudge_after = 0,
       updated_at = now();

-- name: usable_presets
-- Presets a keyword stage could use under :profile (active, not BLOCKED, with a vector).
SELECT count(*) AS usable
  FROM ai.keyword_preset p
  JOIN ai.keyword_preset_embedding e ON e.preset_id = p.id AND e.embedding_profile = CAST(:profile AS text)
 WHERE p.is_active AND p.visibility <> 'BLOCKED';

-- name: delete_profile_row
DELETE FROM ai.embedding_profile WHERE profile = CAST(:profile AS text) AND role <> 'active';

-- name: delete_preset_vectors
-- A dropped profile's preset vectors (`pinlog presets load` or a build embeds them again).
DELETE FROM ai.keyword_preset_embedding WHERE embedding_profile = CAST(:profile AS text);

-- name: rejudge_pending
-- Rule: SPEC §9.1 — keywords are re-judged after an activation without any status change, so
-- the old keywords stay shown until each is replaced: COMPLETED keyword stages (embedding
-- COMPLETED, vector of the active :profile, not deleted) whose keywords were judged with another
-- profile (or before profiles were recorded). A fragment (FROM … WHERE).
  FROM ai.context_embedding e
  JOIN ai.context_ai_state s ON s.context_id = e.context_id
  LEFT JOIN ai.context_keyword_analysis a ON a.context_id = e.context_id
 WHERE s.keyword_status = 'COMPLETED'
   AND s.embedding_status = 'COMPLETED'
   AND NOT e.is_deleted
   AND e.embedding_profile = CAST(:profile AS text)
   AND a.embedding_profile IS DISTINCT FROM CAST(:profile AS text)
   AND NOT (e.context_id = ANY(CAST(:skip AS bigint[])))

-- name: rejudge_batch
-- The re-judge's fetch: pending contexts after the cursor, in id order.
SELECT e.context_id, e.embedding, e.text_sha256
{rejudge_pending}
   AND e.context_id > :after
 ORDER BY e.context_id
 LIMIT :limit;

-- name: rejudge_due
-- How many re-judges are pending (progress).
SELECT count(*)
{rejudge_pending};

-- name: rejudged_target
-- Rule: SPEC §9.1 re-judge write — the guard every re-judge statement repeats (a fragment): the
-- keyword stage is still COMPLETED on the active profile's vector, not deleted.
SELECT s.context_id
  FROM ai.context_ai_state s
  JOIN ai.context_embedding e ON e.context_id = s.context_id
 WHERE s.context_id = :context_id
   AND s.keyword_status = 'COMPLETED'
   AND s.embedding_status = 'COMPLETED'
   AND NOT e.is_deleted
   AND e.embedding_profile = CAST(:profile AS text)

-- name: lock_rejudged
-- Rule: SPEC §9.1 re-judge write — lock the state row FOR UPDATE under the guard (a concurrent
-- delete/edit waits, or ran first and the guard matches nothing); every statement after it
-- repeats the guard.
{rejudged_target}
   FOR UPDATE OF s;

-- name: delete_rejudged_keywords
-- Rule: SPEC §9.1 — the re-judged context's old keyword rows, only under the guard.
DELETE FROM ai.context_keyword k
 WHERE k.context_id IN ({rejudged_target});

-- name: insert_rejudged_keywords
-- Rule: SPEC §9.1, §8 — the new picks (zero is fine), only under the guard.
INSERT INTO ai.context_keyword (context_id, keyword_id, confidence, preset_version)
SELECT t.context_id, pick.keyword_id, pick.confidence, :preset_version
  FROM ({rejudged_target}) AS t,
       unnest(CAST(:keyword_ids AS integer[]), CAST(:confidences AS numeric[]))
           AS pick(keyword_id, confidence);

-- name: upsert_rejudged_analysis
-- Rule: SPEC §9.1 — the analysis row records the profile the keywords were judged with, so a
-- re-judged context is not picked again; only under the guard. No status changes.
INSERT INTO ai.context_keyword_analysis
       (context_id, preset_version, unmatched_concepts, model_profile, evidence,
        embedding_profile, updated_at)
SELECT t.context_id, :preset_version, CAST(:unmatched_concepts AS jsonb), :model_profile,
       CAST(:evidence AS jsonb), CAST(:profile AS text), now()
  FROM ({rejudged_target}) AS t
{analysis_replaced};

-- name: record_rejudge_progress
UPDATE ai.embedding_profile
   SET rejudge_after = greatest(rejudge_after, :after), updated_at = now()
 WHERE profile = CAST(:profile AS text)
   AND role = 'active'
   AND rejudge_after IS NOT NULL;

-- name: finish_rejudge
UPDATE ai.embedding_profile
   SET rejudge_after = NULL, updated_at = now()
 WHERE profile = CAST(:profile AS text)
   AND role = 'active';

-- name: rejudge_cursor
SELECT rejudge_after FROM ai.embedding_profile WHERE profile = CAST(:profile AS text) AND role = 'active';

-- name: profile_rows
-- `pinlog profiles`: every recorded profile with its build progress.
SELECT profile, role, dimension, build_after, built, build_rate, build_started_at,
       build_seen_at, build_finished_at, activated_at, rejudge_after,
       build_seen_at > now() - make_interval(secs => :alive_seconds) AS build_alive
  FROM ai.embedding_profile
 ORDER BY CASE role WHEN 'active' THEN 0 WHEN 'building' THEN 1 ELSE 2 END, profile;

-- name: coverage
-- Rule: SPEC §9.1 coverage = contexts embedded ÷ contexts that should be: the contexts that
-- should have a vector (embedding COMPLETED, vector not deleted) and, per profile, how many have
-- one (in the active table or the shadow table); plus how many COMPLETED keyword stages were
-- judged with each profile (the re-judge's progress). One pass over the active table.
WITH eligible AS (
    SELECT e.context_id, e.embedding_profile, s.keyword_status = 'COMPLETED' AS judged
      FROM ai.context_embedding e
      JOIN ai.context_ai_state s ON s.context_id = e.context_id
     WHERE s.embedding_status = 'COMPLETED'
       AND NOT e.is_deleted
), per_profile AS (
    SELECT embedding_profile AS profile, context_id FROM eligible
    UNION ALL
    SELECT sh.embedding_profile, sh.context_id
      FROM ai.context_embedding_shadow sh
      JOIN eligible el ON el.context_id = sh.context_id
     WHERE sh.embedding_profile <> el.embedding_profile
)
SELECT p.profile,
       count(*) AS embedded,
       (SELECT count(*) FROM eligible) AS eligible,
       (SELECT count(*) FROM eligible el
          JOIN ai.context_keyword_analysis a ON a.context_id = el.context_id
         WHERE el.judged AND a.embedding_profile = p.profile) AS keywords_judged,
       (SELECT count(*) FROM eligible WHERE judged) AS keyword_stages
  FROM per_profile p
 GROUP BY p.profile;
