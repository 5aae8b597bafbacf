-- Process settings registry (issue 16 #7): the settings the rules depend on, per live process.
-- Shared kernel: used by every process kind (core, ai, rescan) at start-up and by `pinlog status`.


-- name: register
-- Rule: SPEC §6/§7 — processing expiry, timeouts, attempts and backoff must agree between
-- replicas (a replica with a shorter expiry re-claims another's live work). Each process records
-- its values when it starts; seen_at is refreshed by its heartbeat.
-- version: the pinlog version it runs (shown by the console, never compared).
INSERT INTO ai.process_settings (process_id, host, pid, components, settings, version)
VALUES (:process_id, :host, :pid, :components, CAST(:settings AS jsonb), :version)
ON CONFLICT (process_id) DO UPDATE
   SET settings = EXCLUDED.settings, version = EXCLUDED.version, seen_at = now();


-- name: heartbeat
-- Rule: a process is "live" while its heartbeat is recent; rows of stopped or crashed processes
-- age out of the comparison by themselves.
UPDATE ai.process_settings SET seen_at = now() WHERE process_id = :process_id;


-- name: live_processes
-- Rule: the live processes (heartbeat within :live_seconds), oldest first, with their values.
SELECT process_id, host, pid, components, settings, started_at, seen_at, version
  FROM ai.process_settings
 WHERE seen_at > now() - make_interval(secs => :live_seconds)
 ORDER BY started_at, process_id;


-- name: unregister
-- Rule: a process that stops cleanly removes its row; old rows of crashed processes go too.
DELETE FROM ai.process_settings
 WHERE process_id = :process_id
    OR seen_at < now() - make_interval(secs => :forget_seconds);
