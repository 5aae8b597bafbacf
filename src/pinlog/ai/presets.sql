-- Keyword presets and their embeddings (SPEC §2.2, §8). Loaded by pinlog.ai.presets.
-- Only ai.* tables appear here (SPEC §1 boundary).

-- name: lock_preset_load
-- Serialises concurrent `pinlog presets load` runs (transaction-scoped advisory lock), so the
-- code-immutability check and the upserts see one consistent preset table.
SELECT pg_advisory_xact_lock(hashtext('pinlog.ai.keyword_preset.load'));

-- name: all_presets
-- Every preset row, active or retired (retired ids keep their code forever: SPEC §2.2).
SELECT id, code, display_name, category, description, examples, visibility, is_active, version,
       cues
FROM ai.keyword_preset
ORDER BY id;

-- name: embedded_preset_ids
-- Which presets already have a vector for this embedding profile (SPEC §9: one per profile).
SELECT preset_id
FROM ai.keyword_preset_embedding
WHERE embedding_profile = :profile;

-- name: upsert_preset
-- Rule: the code of an existing id is immutable (SPEC §2.2) — the DO UPDATE only applies while
-- the stored code equals the file's code, and only when something actually differs, so a
-- second load of the same file writes nothing. RETURNING tells insert from update; no row
-- back means unchanged (or refused: the loader checks codes before it gets here).
-- Rule: SPEC §8 — :version was computed under the load lock (pinlog.ai.presets.versions_for):
-- a content change (name, category, description, examples, cues, visibility) comes with a new
-- list revision, so the version never stays put while the content moves.
INSERT INTO ai.keyword_preset
    (id, code, display_name, category, description, examples, visibility, is_active, version,
     cues)
VALUES
    (:id, :code, :display_name, :category, :description, :examples, :visibility, true, :version,
     :cues)
ON CONFLICT (id) DO UPDATE
SET display_name = EXCLUDED.display_name,
    category     = EXCLUDED.category,
    description  = EXCLUDED.description,
    examples     = EXCLUDED.examples,
    visibility   = EXCLUDED.visibility,
    is_active    = true,
    version      = EXCLUDED.version,
    cues         = EXCLUDED.cues
WHERE ai.keyword_preset.code = EXCLUDED.code
  AND (ai.keyword_preset.display_name, ai.keyword_preset.category,
       ai.keyword_preset.description, ai.keyword_preset.examples,
       ai.keyword_preset.visibility, ai.keyword_preset.is_active, ai.keyword_preset.version,
       ai.keyword_preset.cues)
      IS DISTINCT FROM
      (EXCLUDED.display_name, EXCLUDED.category, EXCLUDED.description, EXCLUDED.examples,
       EXCLUDED.visibility, true, EXCLUDED.version, EXCLUDED.cues)
RETURNING id, (xmax = 0) AS inserted;

-- name: upsert_preset_embedding
-- One vector per (preset, profile) (SPEC §2.2); the dimension was checked in code (SPEC §9).
INSERT INTO ai.keyword_preset_embedding (preset_id, embedding_profile, embedding, updated_at)
VALUES (:preset_id, :profile, :embedding, now())
ON CONFLICT (preset_id, embedding_profile) DO UPDATE
SET embedding = EXCLUDED.embedding,
    updated_at = now();

-- name: delete_other_profile_embeddings
-- When a preset's embedding text changed, vectors of OTHER profiles describe the old text:
-- drop them so that loading the file with that profile re-embeds instead of trusting them.
DELETE FROM ai.keyword_preset_embedding
WHERE preset_id = :preset_id
  AND embedding_profile <> :profile;

-- name: retire_missing_presets
-- Presets absent from the loaded file are retired, never deleted (SPEC §2.2): context_keyword
-- rows keep their FK and core's views hide inactive presets.
UPDATE ai.keyword_preset
SET is_active = false
WHERE is_active
  AND NOT (id = ANY(:ids))
RETURNING id;

-- name: snapshot_presets
-- The candidate pool of one profile (SPEC §8): active, never BLOCKED (SPEC §11 #15), and only
-- presets with a vector of exactly this profile (vectors of different profiles are never
-- compared, SPEC §9).
SELECT p.id, p.code, p.display_name, p.category, p.description, p.examples, p.visibility,
       p.is_active, p.version, p.cues, e.embedding
FROM ai.keyword_preset p
JOIN ai.keyword_preset_embedding e
  ON e.preset_id = p.id AND e.embedding_profile = :profile
WHERE p.is_active
  AND p.visibility <> 'BLOCKED'
ORDER BY p.id;

-- name: preset_overview
-- `pinlog presets list`: every preset and whether it has a vector for the given profile.
SELECT p.id, p.code, p.display_name, p.category, p.visibility, p.is_active, p.version,
       (e.preset_id IS NOT NULL) AS embedded
FROM ai.keyword_preset p
LEFT JOIN ai.keyword_preset_embedding e
  ON e.preset_id = p.id AND e.embedding_profile = :profile
ORDER BY p.id;
