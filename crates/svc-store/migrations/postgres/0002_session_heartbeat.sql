-- The session runtime refreshes `heartbeat_us` while it runs a session. A live session whose
-- heartbeat goes stale (its runtime died with its process, or none was ever dispatched) is ended
-- as `error` with usage `unavailable` by the reaper, so it stops counting against limits.
ALTER TABLE sessions ADD COLUMN heartbeat_us BIGINT;
