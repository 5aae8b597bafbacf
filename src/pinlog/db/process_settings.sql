-- Process settings registry (issue 16 #7): the settings the rules depend on, per live process.
-- Shared kernel: used by every process kind (core, ai, rescan) at start-up and by `pinlog status`.
-- It is also the heartbeat the owner rule reads (SPEC §7.3.1): a process's row carries a lease,
-- `alive_until`, that each heartbeat extends by the process's own PINLOG_HEARTBEAT_TIMEOUT and a
-- clean stop ends at once. The fragments `live_owner` and `gone_owners` below are the one
-- definition of "live" and "gone" that ai/state.sql and core/rescan.sql splice in.


-- name: register
-- Rule: SPEC §6/§7 — processing expiry, timeouts, attempts and backoff must agree between
-- replicas (a replica with a shorter expiry re-claims another's live work). Each process records
-- its values when it starts; seen_at is refreshed by its heartbeat. SPEC §7.3.1: the row's lease
-- (alive_until) starts here; a re-registration (the row vanished) takes it up again.
-- version: the pinlog version it runs (shown by the console, never compared).
INSERT INTO ai.process_settings (process_id, host, pid, components, settings, version,
                                 alive_until)
VALUES (:process_id, :host, :pid, :components, CAST(:settings AS jsonb), :version,
        now() + make_interval(secs => :lease_seconds))
ON CONFLICT (process_id) DO UPDATE
   SET settings = EXCLUDED.settings, version = EXCLUDED.version, seen_at = now(),
       alive_until = EXCLUDED.alive_until;


-- name: heartbeat
-- Rule: SPEC §7.3.1 — a process is "live" while its lease has not run out; each heartbeat
-- extends it by the process's own timeout (database clock), so replicas never judge each other
-- with their own setting. 0 rows: the row is gone (the caller registers again). Rows of stopped
-- or crashed processes age out of the settings comparison by themselves.
UPDATE ai.process_settings
   SET seen_at = now(), alive_until = now() + make_interval(secs => :lease_seconds)
 WHERE process_id = :process_id
RETURNING process_id;


-- name: live_processes
-- Rule: the live processes (heartbeat within :live_seconds and lease not ended by a clean stop;
-- a row written by an older version has no lease: NULL), oldest first, with their values.
SELECT process_id, host, pid, components, settings, started_at, seen_at, version
  FROM ai.process_settings
 WHERE seen_at > now() - make_interval(secs => :live_seconds)
   AND (alive_until IS NULL OR alive_until > now())
 ORDER BY started_at, process_id;


-- name: unregister
-- Rule: SPEC §7.3.1 — a process that stops cleanly ends its lease at once (alive_until = now()),
-- AFTER its components stopped: every stage it still owns and every PENDING row it was to send
-- is released to the rescan of any live process immediately, instead of after an expiry. The row
-- stays as a tombstone (it is what makes the owner "gone" rather than unknown); tombstones and
-- rows of crashed processes older than :forget_seconds are deleted (by then every expiry passed).
WITH released AS (
    UPDATE ai.process_settings SET alive_until = now() WHERE process_id = :process_id
    RETURNING process_id
)
DELETE FROM ai.process_settings
 WHERE seen_at < now() - make_interval(secs => :forget_seconds)
   AND process_id NOT IN (SELECT process_id FROM released);


-- name: live_owner
-- Rule: SPEC §7.3.1 — what a claim records as its owner: :owner when that process's lease is
-- running, else NULL (owner unknown: the expiry stays the backstop). Recording only a live id
-- means an unregistered process (a one-shot command, a registry that could not start) never
-- leaves an owner that looks gone at once. A fragment (spliced as live_owner).
(SELECT ps.process_id FROM ai.process_settings ps
  WHERE ps.process_id = CAST(:owner AS text) AND ps.alive_until > now())


-- name: gone_owners
-- Rule: SPEC §7.3.1 — the processes whose lease has ended: they crashed (no heartbeat for their
-- PINLOG_HEARTBEAT_TIMEOUT) or stopped cleanly (lease ended at stop). An owner id with no row at
-- all is unknown, not gone (the expiry decides). A fragment (spliced as gone_owners); small:
-- one row per process of the last day.
(SELECT ps.process_id FROM ai.process_settings ps WHERE ps.alive_until <= now())
