-- Operational reprocessing (SPEC §7.5): the only COMPLETED → PENDING path. Owned by core.
--
-- Fragments `profile_outdated` / `presets_outdated` are written once and spliced by name
-- (`{profile_outdated}`, `{presets_outdated}`) into the count and the batch statements and into
-- the batch UPDATE's guard (pinlog.db.sql.SqlStatements). They refer to the state row as `s`.
-- Batches walk the primary key (keyset: context_id > :after), so a run over N rows costs O(N),
-- not O(N²/batch). Old embedding/keyword rows are never deleted here: each is replaced inside the
-- save transaction of its new result (SPEC §7.5); while a stage is not COMPLETED its rows are
-- hidden by the status filters.

-- name: profile_outdated
-- Rule: SPEC §7.5 --profile — an embedding stage COMPLETED whose stored embedding was made with
-- another profile than the current one (:profile).
(
    s.embedding_status = 'COMPLETED'
    AND EXISTS (SELECT 1 FROM ai.context_embedding AS e
                WHERE e.context_id = s.context_id AND e.embedding_profile <> :profile)
)

-- name: presets_outdated
-- Rule: SPEC §7.5 --presets — a keyword stage COMPLETED whose analysis was judged against an
-- older preset version than :preset_version (a missing analysis row counts as version 0). The
-- embedding stage must be COMPLETED so the keyword stage can actually rerun (reusing the vector).
(
    s.keyword_status = 'COMPLETED' AND s.embedding_status = 'COMPLETED'
    AND coalesce((SELECT a.preset_version FROM ai.context_keyword_analysis AS a
                  WHERE a.context_id = s.context_id), 0) < :preset_version
)

-- name: active_profile
-- SPEC §9.1: the profile in force is the one ai.embedding_profile records as active (a switch
-- activates a profile for every replica); this process's configured one while none is recorded.
SELECT coalesce((SELECT profile FROM ai.embedding_profile WHERE role = 'active'),
                CAST(:profile AS text))

-- name: current_preset_version
-- The preset version the ai side judges against for :profile: the highest version among active,
-- non-BLOCKED presets that have an embedding for that profile (what the ai's snapshot uses).
-- NULL when no preset is loaded for the profile.
SELECT max(p.version)
FROM ai.keyword_preset AS p
WHERE p.is_active AND p.visibility <> 'BLOCKED'
  AND EXISTS (SELECT 1 FROM ai.keyword_preset_embedding AS pe
              WHERE pe.preset_id = p.id AND pe.embedding_profile = :profile)

-- name: count_profile
-- --dry-run / progress total for --profile.
SELECT count(*) FROM ai.context_ai_state AS s WHERE {profile_outdated}

-- name: count_presets
-- --dry-run / progress total for --presets.
SELECT count(*) FROM ai.context_ai_state AS s WHERE {presets_outdated}

-- name: reprocess_profile_batch
-- Rule: SPEC §7.5 --profile — both stages back to PENDING: the embedding (guarded: still
-- COMPLETED with another profile) and the keyword stage if it is COMPLETED (keywords were chosen
-- with the old vectors; a keyword stage in any other status is left as it is: FAILED → PENDING
-- and anything out of CANCELLED are not transitions of SPEC §3). retry_count 0, rescanned_at
-- cleared, updated_at = now(). Plain FOR UPDATE (not SKIP LOCKED): a row briefly locked by an ai
-- save transaction is waited for instead of being skipped forever by the keyset walk.
-- Returns every picked id with whether it moved (the keyset advances past both).
WITH picked AS (
    SELECT s.context_id, s.keyword_status AS keyword_before
    FROM ai.context_ai_state AS s
    WHERE s.context_id > :after AND {profile_outdated}
    ORDER BY s.context_id
    LIMIT :batch_size
    FOR UPDATE
), moved AS (
    UPDATE ai.context_ai_state AS s
    SET embedding_status = 'PENDING',
        keyword_status = CASE WHEN s.keyword_status = 'COMPLETED' THEN 'PENDING'
                              ELSE s.keyword_status END,
        retry_count = 0, rescanned_at = NULL, updated_at = now()
    FROM picked AS p
    WHERE s.context_id = p.context_id AND {profile_outdated}
    RETURNING s.context_id, p.keyword_before
), events AS (
    INSERT INTO ai.context_ai_event (context_id, stage, from_status, to_status, actor, reason)
    SELECT context_id, 'embedding', 'COMPLETED', 'PENDING', 'core',
           'reprocess --profile: embedding profile changed'
    FROM moved
    UNION ALL
    SELECT context_id, 'keyword', 'COMPLETED', 'PENDING', 'core',
           'reprocess --profile: embedding profile changed'
    FROM moved WHERE keyword_before = 'COMPLETED'
)
SELECT p.context_id, (m.context_id IS NOT NULL) AS moved
FROM picked AS p LEFT JOIN moved AS m ON m.context_id = p.context_id
ORDER BY p.context_id

-- name: reprocess_presets_batch
-- Rule: SPEC §7.5 --presets — the keyword stage only back to PENDING (guarded: still COMPLETED,
-- embedding COMPLETED, analysis older than :preset_version); retry_count 0, rescanned_at cleared,
-- updated_at = now(). The embedding stage is untouched (its vector is reused, SPEC §5.2).
WITH picked AS (
    SELECT s.context_id
    FROM ai.context_ai_state AS s
    WHERE s.context_id > :after AND {presets_outdated}
    ORDER BY s.context_id
    LIMIT :batch_size
    FOR UPDATE
), moved AS (
    UPDATE ai.context_ai_state AS s
    SET keyword_status = 'PENDING', retry_count = 0, rescanned_at = NULL, updated_at = now()
    FROM picked AS p
    WHERE s.context_id = p.context_id AND {presets_outdated}
    RETURNING s.context_id
), events AS (
    INSERT INTO ai.context_ai_event (context_id, stage, from_status, to_status, actor, reason)
    SELECT context_id, 'keyword', 'COMPLETED', 'PENDING', 'core',
           'reprocess --presets: preset version ' || CAST(:preset_version AS integer)
    FROM moved
)
SELECT p.context_id, (m.context_id IS NOT NULL) AS moved
FROM picked AS p LEFT JOIN moved AS m ON m.context_id = p.context_id
ORDER BY p.context_id
