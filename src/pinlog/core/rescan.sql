-- Rescan, FAILED finalizer and operational reprocessing (SPEC §7). Owned by core.
--
-- Fragments. `age`, `unfinished`, `expired` and `oldest_batch` are not statements: they are
-- written ONCE here and spliced by name into the statements below by pinlog.db.sql.Queries
-- (`{age}`, `{unfinished}`, `{expired}`, `{oldest_batch}` markers; static SQL text from this
-- file only — never data; the Stage enum stays the only runtime value interpolated into SQL,
-- SPEC §3). The claim and the finalizer therefore share literally the same expiry predicate and
-- the same ordered, limited, locked scan.
--
-- Bound parameters used by the fragments: :pending_expiry, :processing_expiry (intervals,
-- from PINLOG_PENDING_EXPIRY / PINLOG_PROCESSING_EXPIRY). Clock: the database's now().
--
-- SPEC §7.3.1 (re-claim by owner): besides expired rows, the claim takes rows whose work is
-- *released* — the process recorded as their owner (ai.context_ai_state.owner: the sender of
-- PENDING work, the claimer of a re-send, the ai process running a stage) is gone (its heartbeat
-- lease in ai.process_settings ended: crashed, or stopped cleanly and handed its work back).
-- Liveness is the kernel's definition (pinlog/db/process_settings.sql: `{gone_owners}`,
-- `{live_owner}`), spliced in. The finalizer keeps the expiry alone.

-- name: age
-- Rule: SPEC §7.3 — the rescan and the finalizer measure age from greatest(updated_at,
-- rescanned_at) (the ai side's re-claim uses updated_at alone). This exact expression is the key
-- of the partial index ai.context_ai_state_rescan_idx; ORDER BY must use it verbatim.
greatest(updated_at, coalesce(rescanned_at, updated_at))

-- name: unfinished
-- Rule: SPEC §2.2 — literally the predicate of the partial index context_ai_state_rescan_idx,
-- so every statement that includes it can be planned on that index (cost O(unfinished rows)).
(embedding_status IN ('PENDING','PROCESSING') OR keyword_status IN ('PENDING','PROCESSING'))

-- name: expired
-- Rule: SPEC §7.3 — a row is *expired* when any of its unfinished stages is expired: a PENDING
-- stage older than the PENDING expiry, a PROCESSING stage older than the PROCESSING expiry.
-- Mixed pairs (worked through):
--   embedding PENDING    + keyword PENDING     → PENDING expiry (the embedding clause)
--   embedding PROCESSING + keyword PENDING     → PROCESSING expiry: the keyword waits for the
--       embedding and cannot start before it completes, so its clock is the embedding's (using
--       the shorter PENDING expiry would re-send while a live worker still owns the embedding)
--   embedding COMPLETED  + keyword PENDING     → PENDING expiry
--   embedding COMPLETED  + keyword PROCESSING  → PROCESSING expiry
--   embedding FAILED     + keyword PENDING     → never expired: a dead end (SPEC §7.2), ended by
--       finalize_dead_ends every round; no retry is spent on it
--   any stage CANCELLED                        → never expired: the context was invalidated,
--       CANCELLED always wins and nothing is re-sent or FAILED (core cancels both stages in one
--       statement, so a half-cancelled row is an anomaly: finalize_half_cancelled ends its
--       unfinished stage CANCELLED every round, SPEC §7.2)
--   nothing unfinished (COMPLETED/FAILED/CANCELLED pairs) → never expired.
-- The first two lines are index conditions: the partial index predicate (verbatim) and an age
-- bound, so the ordered LIMIT scan stops at the first row that cannot be expired.
(
    {unfinished}
    AND embedding_status <> 'CANCELLED' AND keyword_status <> 'CANCELLED'
    AND {age} < now() - least(CAST(:pending_expiry AS interval), CAST(:processing_expiry AS interval))
    AND (
           (embedding_status = 'PENDING'    AND {age} < now() - CAST(:pending_expiry AS interval))
        OR (embedding_status = 'PROCESSING' AND {age} < now() - CAST(:processing_expiry AS interval))
        OR (keyword_status = 'PENDING' AND embedding_status = 'COMPLETED'
                                        AND {age} < now() - CAST(:pending_expiry AS interval))
        OR (keyword_status = 'PROCESSING' AND {age} < now() - CAST(:processing_expiry AS interval))
    )
)

-- name: oldest_batch
-- Rule: SPEC §7.2, §7.4 — how every locked scan of the rescan and the finalizer ends (the two scans
-- of claim, finalize_exhausted, finalize_dead_ends, finalize_half_cancelled): oldest first by the
-- rescan age ({age}: verbatim the key of context_ai_state_rescan_idx, so the ordered LIMIT scan
-- runs on the index), at most :batch_size rows, FOR UPDATE SKIP LOCKED (several rescan loops
-- share the work: a row another one holds is skipped, never waited for). A fragment (it ends a
-- SELECT's WHERE).
ORDER BY {age}
    LIMIT :batch_size
    FOR UPDATE SKIP LOCKED

-- name: sendable
-- Rule: SPEC §7.2, §7.3 — the row has work the rescan can re-send: no CANCELLED stage, and an
-- unfinished stage that can progress (embedding PENDING or PROCESSING, keyword PROCESSING, or
-- keyword PENDING behind a COMPLETED embedding). A keyword PENDING behind a FAILED embedding is
-- a dead end (finalize_dead_ends), never sent. The stage clauses of `expired` without their ages.
(
    embedding_status <> 'CANCELLED' AND keyword_status <> 'CANCELLED'
    AND (embedding_status IN ('PENDING','PROCESSING') OR keyword_status = 'PROCESSING'
         OR (keyword_status = 'PENDING' AND embedding_status = 'COMPLETED'))
)

-- name: released
-- Rule: SPEC §7.3.1 — a row whose work is released is claimable NOW, whatever its age: it is
-- unfinished and sendable, and its recorded owner is gone (`{gone_owners}`: that process's lease
-- ended). The record counts only while owned_at is at least the row's age ({age}): a later
-- status change or claim by a process that records no owner (an older version, the reference
-- backend) makes the owner unknown, and then only `expired` applies (the backstop). A live owner
-- (however slow) or an unknown one never releases a row. The first line is the predicate of the
-- partial index context_ai_state_owner_idx (= `unfinished`), so the claim finds the rows of the
-- few gone owners through it.
(
    {unfinished}
    AND owner IN {gone_owners}
    AND owned_at >= {age}
    AND {sendable}
)

-- name: finalize_dead_ends
-- Rule: SPEC §7.2 (dead end) — a keyword stage PENDING while its embedding stage is FAILED can
-- never start (the keyword start requires embedding COMPLETED). Every round, whatever the retry
-- count and without waiting for expiry, end it FAILED (reason: embedding failed). Guarded: the
-- UPDATE repeats the precondition. last_error is kept: it already names the embedding failure,
-- the root cause; the event row carries the reason of this transition.
WITH picked AS (
    SELECT context_id
    FROM ai.context_ai_state
    WHERE {unfinished} AND keyword_status = 'PENDING' AND embedding_status = 'FAILED'
    {oldest_batch}
), failed AS (
    UPDATE ai.context_ai_state AS s
    SET keyword_status = 'FAILED', updated_at = now()
    FROM picked AS p
    WHERE s.context_id = p.context_id
      AND s.keyword_status = 'PENDING' AND s.embedding_status = 'FAILED'
    RETURNING s.context_id
), events AS (
    INSERT INTO ai.context_ai_event (context_id, stage, from_status, to_status, actor, reason)
    SELECT context_id, 'keyword', 'PENDING', 'FAILED', 'finalizer', 'embedding failed'
    FROM failed
)
SELECT context_id FROM failed ORDER BY context_id

-- name: finalize_half_cancelled
-- Rule: SPEC §7.2 (anomaly) — a row with one stage CANCELLED and the other still PENDING or
-- PROCESSING (core cancels both in one statement, so this only follows a manual fix or an
-- adopted database) would stay unfinished forever: no claim or finalizer touches a CANCELLED
-- row. Every round, whatever the retry count and without waiting for expiry, the unfinished
-- stage ends CANCELLED too (an invalidation always wins), with one event row per changed stage
-- (actor finalizer, reason names the anomaly). Guarded: the UPDATE repeats the precondition.
WITH picked AS (
    SELECT context_id, embedding_status AS embedding_before, keyword_status AS keyword_before
    FROM ai.context_ai_state
    WHERE {unfinished} AND (embedding_status = 'CANCELLED' OR keyword_status = 'CANCELLED')
    {oldest_batch}
), cancelled AS (
    UPDATE ai.context_ai_state AS s
    SET embedding_status = 'CANCELLED', keyword_status = 'CANCELLED', updated_at = now()
    FROM picked AS p
    WHERE s.context_id = p.context_id
      AND (s.embedding_status = 'CANCELLED' OR s.keyword_status = 'CANCELLED')
      AND (s.embedding_status IN ('PENDING','PROCESSING')
           OR s.keyword_status IN ('PENDING','PROCESSING'))
    RETURNING s.context_id, p.embedding_before, p.keyword_before
), events AS (
    INSERT INTO ai.context_ai_event (context_id, stage, from_status, to_status, actor, reason)
    SELECT context_id, 'embedding', embedding_before, 'CANCELLED', 'finalizer',
           'anomaly: half-cancelled row (keyword stage CANCELLED); invalidation wins'
    FROM cancelled WHERE embedding_before IN ('PENDING','PROCESSING')
    UNION ALL
    SELECT context_id, 'keyword', keyword_before, 'CANCELLED', 'finalizer',
           'anomaly: half-cancelled row (embedding stage CANCELLED); invalidation wins'
    FROM cancelled WHERE keyword_before IN ('PENDING','PROCESSING')
)
SELECT context_id, embedding_before, keyword_before FROM cancelled ORDER BY context_id

-- name: finalize_exhausted
-- Rule: SPEC §7.2 step 1 — rows whose retries are exhausted (retry_count >= max) and that are
-- expired (§7.3, the shared predicate), oldest first, SKIP LOCKED, batch size. Whitelist: only
-- PENDING/PROCESSING stages become FAILED; COMPLETED, FAILED and CANCELLED are kept (CANCELLED
-- always wins, SPEC §11 #16/#17). updated_at = now() (a status change); last_error = retries
-- exhausted + the previous error. Guarded: the UPDATE repeats the whole precondition even under
-- the lock. One event row per stage that changed. Never calls the ai side.
WITH picked AS (
    SELECT context_id, embedding_status AS embedding_before, keyword_status AS keyword_before
    FROM ai.context_ai_state
    WHERE retry_count >= :max_retries AND {expired}
    {oldest_batch}
), failed AS (
    UPDATE ai.context_ai_state AS s
    SET embedding_status = CASE WHEN s.embedding_status IN ('PENDING','PROCESSING')
                                THEN 'FAILED' ELSE s.embedding_status END,
        keyword_status   = CASE WHEN s.keyword_status IN ('PENDING','PROCESSING')
                                THEN 'FAILED' ELSE s.keyword_status END,
        updated_at = now(),
        last_error = left('retries exhausted after ' || s.retry_count || ' attempts; last: '
                          || coalesce(s.last_error, 'none recorded'), 500),
        last_error_at = now()
    FROM picked AS p
    WHERE s.context_id = p.context_id
      AND s.retry_count >= :max_retries AND {expired}
    RETURNING s.context_id, p.embedding_before, p.keyword_before, s.retry_count, s.last_error
), events AS (
    INSERT INTO ai.context_ai_event (context_id, stage, from_status, to_status, actor, reason)
    SELECT context_id, 'embedding', embedding_before, 'FAILED', 'finalizer', last_error
    FROM failed WHERE embedding_before IN ('PENDING','PROCESSING')
    UNION ALL
    SELECT context_id, 'keyword', keyword_before, 'FAILED', 'finalizer', last_error
    FROM failed WHERE keyword_before IN ('PENDING','PROCESSING')
)
SELECT context_id, embedding_before, keyword_before, retry_count
FROM failed ORDER BY context_id

-- name: claim
-- Rule: SPEC §7.2 step 2, §7.3.1 — rows with retries left that are expired (the shared
-- predicate) or released (their owner is gone), oldest first (ORDER BY the partial index's
-- expression), FOR UPDATE SKIP LOCKED (several rescan loops share the work, SPEC §7.4), batch
-- size. Two ordered, locked, limited scans — by age through context_ai_state_rescan_idx, by gone
-- owner through context_ai_state_owner_idx — so each stays O(batch), then the oldest batch of
-- both. retry_count + 1 and rescanned_at = now(); updated_at is NOT touched (SPEC §7.3: the ai
-- side re-claims a stale PROCESSING stage by updated_at alone, so the re-sent request can recover
-- it); the claimer records itself as the row's owner (live_owner; SPEC §7.3.1: it is now the
-- sender of the re-send — if it dies before the work starts, the row is released again, and the
-- attempt it gave up can no longer save). Guarded: the UPDATE repeats the precondition. One
-- event row per claim (actor rescan) on the stage the re-send targets. The budget is spent here,
-- before the call, so it is spent even when the call fails.
WITH by_age AS (
    SELECT context_id, {age} AS age
    FROM ai.context_ai_state
    WHERE retry_count < :max_retries AND {expired}
    {oldest_batch}
), by_owner AS (
    SELECT context_id, {age} AS age
    FROM ai.context_ai_state
    WHERE retry_count < :max_retries AND {released}
    {oldest_batch}
), picked AS (
    SELECT context_id
    FROM (SELECT context_id, age FROM by_age UNION SELECT context_id, age FROM by_owner) AS due
    ORDER BY age
    LIMIT :batch_size
), claimed AS (
    UPDATE ai.context_ai_state AS s
    SET retry_count = s.retry_count + 1, rescanned_at = now(),
        owner = {live_owner}, owned_at = now()
    FROM picked AS p
    WHERE s.context_id = p.context_id
      AND s.retry_count < :max_retries AND ({expired} OR {released})
    RETURNING s.context_id, s.retry_count, s.embedding_status, s.keyword_status
), events AS (
    INSERT INTO ai.context_ai_event (context_id, stage, from_status, to_status, actor, reason)
    SELECT context_id,
           CASE WHEN embedding_status IN ('PENDING','PROCESSING') THEN 'embedding' ELSE 'keyword' END,
           CASE WHEN embedding_status IN ('PENDING','PROCESSING') THEN embedding_status ELSE keyword_status END,
           CASE WHEN embedding_status IN ('PENDING','PROCESSING') THEN embedding_status ELSE keyword_status END,
           'rescan',
           'rescan re-send, attempt ' || retry_count || ' of ' || CAST(:max_retries AS integer)
    FROM claimed
)
SELECT context_id, retry_count, embedding_status, keyword_status
FROM claimed ORDER BY context_id

-- name: next_expiry
-- Rule: SPEC §7.2 "Recovery speed" + §7.3 + §7.3.1 — when does the next unfinished row become
-- claimable? The loop sleeps until then (never longer than the interval), and `pinlog rescan
-- --once` explains "claimed 0" with it. Per row, the expiry that applies is the one the `expired`
-- fragment uses for its stages (PENDING expiry for a PENDING embedding, or a PENDING keyword
-- after a COMPLETED embedding; PROCESSING expiry for a PROCESSING stage — least() of those that
-- apply; PostgreSQL's least() ignores NULLs), counted on the rescan clock ({age}); and, for a row
-- with retries left whose recorded owner counts (owned_at >= age), the end of that owner's lease
-- (alive_until): a gone owner's row is claimable now (`released`), a live owner's when its lease
-- would run out — so a loop notices a crashed process within one heartbeat timeout. Rows that can
-- never expire (a CANCELLED stage; a dead-end keyword stage) get NULL and are not counted.
-- Read-only; O(unfinished rows) through the partial rescan index.
SELECT count(*) FILTER (WHERE expires_at > now()) AS waiting,
       count(*) FILTER (WHERE expires_at <= now()) AS expired,
       extract(epoch FROM min(expires_at) FILTER (WHERE expires_at > now()) - now())
           AS first_expires_in
FROM (
    SELECT least(
               {age} + least(
                   CASE WHEN embedding_status = 'PENDING'
                             OR (embedding_status = 'COMPLETED' AND keyword_status = 'PENDING')
                        THEN CAST(:pending_expiry AS interval) END,
                   CASE WHEN embedding_status = 'PROCESSING' OR keyword_status = 'PROCESSING'
                        THEN CAST(:processing_expiry AS interval) END),
               CASE WHEN retry_count < :max_retries AND owned_at >= {age} AND {sendable}
                    THEN (SELECT ps.alive_until FROM ai.process_settings ps
                           WHERE ps.process_id = owner) END) AS expires_at
    FROM ai.context_ai_state
    WHERE {unfinished} AND 'CANCELLED' NOT IN (embedding_status, keyword_status)
) AS t
WHERE expires_at IS NOT NULL

-- name: reread_contexts
-- Rule: SPEC §7.2 step 3 — re-read the contexts from core (outside any transaction that holds a
-- state lock) before re-sending: a deleted or superseded context (soft-deleted context, record or
-- member) gets no call. The state is returned so a missed invalidation (deleted but not
-- CANCELLED) can be logged. One read for a whole batch of re-sends (one id for a single re-send).
-- One row per existing state row; a state row without a context row yields context_id NULL; an
-- id without a state row is absent. The saved place goes with the re-sent request as placeMeta,
-- as with the first one (SPEC §10, issue 28).
SELECT s.context_id AS state_id,
       c.id AS context_id, c.member_id, c.record_id, c.body,
       (c.id IS NOT NULL AND c.deleted_at IS NULL AND r.deleted_at IS NULL
        AND m.deleted_at IS NULL) AS active,
       s.embedding_status, s.keyword_status,
       p.external_place_id, p.name, p.address, p.road_address
FROM ai.context_ai_state AS s
LEFT JOIN core.context AS c ON c.id = s.context_id
LEFT JOIN core.record AS r ON r.id = c.record_id
LEFT JOIN core.member AS m ON m.id = c.member_id
LEFT JOIN core.place AS p ON p.id = r.place_id
WHERE s.context_id = ANY(CAST(:context_ids AS bigint[]))
