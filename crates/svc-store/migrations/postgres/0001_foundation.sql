-- Foundation schema. Times are integer microseconds since the epoch (`*_us`); booleans are
-- BIGINT 0/1 so both backends decode them the same way through sqlx's Any driver.
CREATE TABLE workspaces (
    id TEXT PRIMARY KEY,
    slug TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL,
    host TEXT NOT NULL,
    settings TEXT NOT NULL,
    created_us BIGINT NOT NULL
);

CREATE TABLE projects (
    id TEXT PRIMARY KEY,
    workspace_id TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    kind TEXT NOT NULL,
    external_user_id TEXT,
    name TEXT NOT NULL,
    created_us BIGINT NOT NULL
);
CREATE UNIQUE INDEX projects_one_default ON projects(workspace_id) WHERE kind = 'default';
CREATE UNIQUE INDEX projects_one_per_end_user ON projects(workspace_id, external_user_id) WHERE kind = 'end_user';

CREATE TABLE api_keys (
    id TEXT PRIMARY KEY,
    workspace_id TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    lookup TEXT NOT NULL UNIQUE,
    secret_hash TEXT NOT NULL,
    scopes TEXT NOT NULL,
    label TEXT,
    created_us BIGINT NOT NULL,
    revoked_us BIGINT
);

CREATE TABLE users (
    id TEXT PRIMARY KEY,
    workspace_id TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    email TEXT NOT NULL,
    roles TEXT NOT NULL,
    capabilities TEXT NOT NULL,
    created_us BIGINT NOT NULL,
    UNIQUE (workspace_id, email)
);

CREATE TABLE tokens (
    id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    workspace_id TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    project_id TEXT REFERENCES projects(id) ON DELETE CASCADE,
    external_user_id TEXT,
    user_id TEXT REFERENCES users(id) ON DELETE CASCADE,
    actor_user_id TEXT REFERENCES users(id) ON DELETE CASCADE,
    created_us BIGINT NOT NULL,
    revoked_us BIGINT
);
CREATE UNIQUE INDEX tokens_one_live_grant_per_end_user
    ON tokens(workspace_id, external_user_id) WHERE kind = 'end_user' AND revoked_us IS NULL;

CREATE TABLE sessions (
    id TEXT PRIMARY KEY,
    workspace_id TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    project_id TEXT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    source TEXT NOT NULL,
    status TEXT NOT NULL,
    usage_status TEXT NOT NULL,
    started_us BIGINT NOT NULL,
    ended_us BIGINT,
    provider TEXT,
    model TEXT,
    title TEXT,
    room_name TEXT,
    has_resumption_handle BIGINT NOT NULL DEFAULT 0,
    turn_count BIGINT,
    user_speaking_ms BIGINT,
    agent_speaking_ms BIGINT,
    tokens TEXT,
    config TEXT,
    created_us BIGINT NOT NULL
);
CREATE INDEX sessions_newest_first ON sessions(project_id, started_us DESC, id DESC);
CREATE INDEX sessions_live_per_workspace ON sessions(workspace_id) WHERE status = 'active';

CREATE TABLE transcript_turns (
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    seq BIGINT NOT NULL,
    ts_us BIGINT NOT NULL,
    role TEXT NOT NULL,
    text TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)
);

CREATE TABLE timeline_events (
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    seq BIGINT NOT NULL,
    ts_us BIGINT NOT NULL,
    kind TEXT NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)
);

CREATE TABLE session_artifacts (
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    kind TEXT NOT NULL,
    path TEXT NOT NULL,
    content_type TEXT NOT NULL,
    bytes BIGINT NOT NULL,
    created_us BIGINT NOT NULL,
    PRIMARY KEY (session_id, kind)
);

CREATE TABLE support_requests (
    id TEXT PRIMARY KEY,
    workspace_id TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    project_id TEXT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    session_id TEXT,
    credential TEXT NOT NULL,
    subject TEXT,
    message TEXT NOT NULL,
    contact_email TEXT,
    diagnostics TEXT,
    status TEXT NOT NULL,
    created_us BIGINT NOT NULL
);

CREATE TABLE agents (
    id TEXT PRIMARY KEY,
    workspace_id TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    description TEXT,
    config TEXT NOT NULL,
    created_us BIGINT NOT NULL,
    updated_us BIGINT NOT NULL,
    UNIQUE (workspace_id, name)
);

CREATE TABLE room_reservations (
    id TEXT PRIMARY KEY,
    workspace_id TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    project_id TEXT NOT NULL REFERENCES projects(id) ON DELETE CASCADE,
    credential_id TEXT NOT NULL,
    room_name TEXT NOT NULL UNIQUE,
    created_us BIGINT NOT NULL,
    expires_us BIGINT NOT NULL,
    consumed_us BIGINT
);
CREATE INDEX room_reservations_open ON room_reservations(credential_id, created_us) WHERE consumed_us IS NULL;

CREATE TABLE caller_numbers (
    workspace_id TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    number TEXT NOT NULL,
    active BIGINT NOT NULL,
    PRIMARY KEY (workspace_id, number)
);

CREATE TABLE do_not_call (
    workspace_id TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    number TEXT NOT NULL,
    PRIMARY KEY (workspace_id, number)
);

CREATE TABLE server_secrets (
    name TEXT PRIMARY KEY,
    value TEXT NOT NULL,
    created_us BIGINT NOT NULL
);
