-- The session runtime records which node runs a live session (so a node that restarts after a
-- crash ends exactly the sessions it left behind) and the provider's latest resumption handle
-- with the time it was issued (so `resume_session_id` can resume natively while it is warm).
ALTER TABLE sessions ADD COLUMN node_id TEXT;
ALTER TABLE sessions ADD COLUMN resumption_handle TEXT;
ALTER TABLE sessions ADD COLUMN resumption_handle_us BIGINT;
