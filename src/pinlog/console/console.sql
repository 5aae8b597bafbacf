-- The operator console's reads (issue 29) and its action log. Read-only but for
-- record_action / finish_action (core.console_action). Never a note's body: the console shows
-- ids, statuses, times and last_error (redacted by its writers), never text.
-- Each overview read is bounded by an index (cost O(what it shows), not O(table)); the counts
-- per stage x status come from core/status.sql's maintained counts.

-- name: ended_failed
-- Fragment: a row that ended with a FAILED stage (none left to run) — the predicate of the
-- partial indexes context_ai_state_failed_idx / _failure_reason_idx (0008_operator_console),
-- verbatim. A dead end (keyword PENDING behind a FAILED embedding) shows up once the
-- finalizer has ended it (the next rescan round).
(embedding_status = 'FAILED' OR keyword_status = 'FAILED')
      AND embedding_status NOT IN ('PENDING', 'PROCESSING')
      AND keyword_status NOT IN ('PENDING', 'PROCESSING')

-- name: failure_reasons
-- Failures grouped by reason: last_error with its numbers folded (retry counts, HTTP codes
-- vary), rows that ended FAILED only. The inner grouping reads the partial index
-- context_ai_state_failure_reason_idx alone (last_error, updated_at); the folding runs once per
-- distinct error, not per row. Newest failure per reason.
SELECT left(regexp_replace(coalesce(last_error, 'no error recorded'), '[0-9]+', 'N', 'g'), 160)
           AS reason,
       sum(n) AS n,
       max(last_at) AS last_at
FROM (SELECT last_error, count(*) AS n, max(updated_at) AS last_at
      FROM ai.context_ai_state
      WHERE {ended_failed}
      GROUP BY last_error) AS distinct_errors
GROUP BY 1
ORDER BY n DESC, reason
LIMIT :limit

-- name: failures_for_reason
-- The failed rows of one reason (as failure_reasons folds it), newest first, one page.
SELECT context_id, embedding_status, keyword_status, retry_count, last_error,
       coalesce(last_error_at, updated_at) AS at
FROM ai.context_ai_state
WHERE {ended_failed}
  AND left(regexp_replace(coalesce(last_error, 'no error recorded'), '[0-9]+', 'N', 'g'), 160)
      = :reason
ORDER BY updated_at DESC, context_id DESC
LIMIT :limit OFFSET :offset

-- name: finished_per_minute
-- Stages finished per clock minute since :since (epoch seconds, a minute boundary), from the
-- partial index context_ai_event_finished_at_idx alone: contexts completed (their keyword stage,
-- the last one) and stages failed. The caller keeps the minutes that are over (reads.py).
SELECT extract(epoch FROM date_trunc('minute', at))::bigint AS minute,
       count(*) FILTER (WHERE stage = 'keyword' AND to_status = 'COMPLETED') AS completed,
       count(*) FILTER (WHERE to_status = 'FAILED') AS failed
FROM ai.context_ai_event
WHERE to_status IN ('COMPLETED', 'FAILED')
  AND at >= to_timestamp(:since)
GROUP BY 1

-- name: clock_minute
-- The database clock's current minute (epoch seconds): the chart's "now".
SELECT extract(epoch FROM date_trunc('minute', now()))::bigint AS minute

-- name: recent_contexts
-- The newest state rows (primary key, backwards) with their owner and record: ids, statuses,
-- times; never the body.
SELECT s.context_id, c.member_id, c.record_id, s.embedding_status, s.keyword_status,
       s.retry_count, s.updated_at, c.created_at, c.deleted_at
FROM ai.context_ai_state AS s
LEFT JOIN core.context AS c ON c.id = s.context_id
ORDER BY s.context_id DESC
LIMIT :limit

-- name: context_state
-- One context's state row and its owner (member, record) — never the body.
SELECT s.context_id, s.embedding_status, s.keyword_status, s.retry_count, s.updated_at,
       s.rescanned_at, s.last_error, s.last_error_at,
       c.member_id, c.record_id, c.created_at, c.deleted_at
FROM ai.context_ai_state AS s
LEFT JOIN core.context AS c ON c.id = s.context_id
WHERE s.context_id = :context_id

-- name: context_events
-- One context's timeline: every status change and classified error, oldest first.
SELECT id, stage, from_status, to_status, actor, reason, at
FROM ai.context_ai_event
WHERE context_id = :context_id
ORDER BY id
LIMIT :limit

-- name: profile_coverage
-- Embeddings per profile: live (not deleted) and all. One pass over ai.context_embedding (the
-- profiles page only, not the overview).
SELECT embedding_profile, count(*) FILTER (WHERE NOT is_deleted) AS live, count(*) AS stored
FROM ai.context_embedding
GROUP BY embedding_profile
ORDER BY embedding_profile

-- name: preset_profiles
-- Preset vectors per profile (the presets a profile can judge with).
SELECT embedding_profile, count(*) AS presets
FROM ai.keyword_preset_embedding
GROUP BY embedding_profile
ORDER BY embedding_profile

-- name: presets
-- Every preset with its version and how often it is picked by a COMPLETED keyword stage (the
-- keywords members see), most picked first. One pass over ai.context_keyword (profiles page).
SELECT p.id, p.code, p.display_name, p.category, p.visibility, p.is_active, p.version,
       coalesce(k.picks, 0) AS picks
FROM ai.keyword_preset AS p
LEFT JOIN (
    SELECT ck.keyword_id, count(*) AS picks
    FROM ai.context_keyword AS ck
    JOIN ai.context_ai_state AS s ON s.context_id = ck.context_id
    WHERE s.keyword_status = 'COMPLETED'
    GROUP BY ck.keyword_id
) AS k ON k.keyword_id = p.id
ORDER BY picks DESC, p.id

-- name: record_action
-- Rule: issue 29 — every confirmed console action is recorded (role, action, parameters and
-- outcome as JSON; never note text) before or as it runs.
INSERT INTO core.console_action (role, action, params, outcome, request_id)
VALUES (:role, :action, CAST(:params AS jsonb), CAST(:outcome AS jsonb), :request_id)
RETURNING id, at

-- name: finish_action
-- A long action (reprocess) records its outcome when it ends.
UPDATE core.console_action SET outcome = CAST(:outcome AS jsonb) WHERE id = :id

-- name: recent_actions
-- The action log, newest first.
SELECT id, at, role, action, params, outcome
FROM core.console_action
ORDER BY id DESC
LIMIT :limit
