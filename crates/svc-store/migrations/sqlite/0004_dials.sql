-- Phone dial-outs (`POST /realtime/session/{id}/dial`): at most one per session (the contract's
-- `session_already_dialed`, enforced by the unique session_id), and the meter of a workspace's
-- dial minutes. No foreign key to sessions on purpose: a dial outlives the deletion of its
-- session's history, so deleting history never gives minutes back.
CREATE TABLE dials (
    id TEXT PRIMARY KEY,
    workspace_id TEXT NOT NULL REFERENCES workspaces(id),
    session_id TEXT NOT NULL UNIQUE,
    phone_number TEXT NOT NULL,
    caller_number TEXT,
    created_us BIGINT NOT NULL,
    answered_us BIGINT,
    ended_us BIGINT,
    outcome TEXT,
    billed_seconds BIGINT NOT NULL DEFAULT 0
);

CREATE INDEX dials_by_workspace ON dials (workspace_id, created_us);
