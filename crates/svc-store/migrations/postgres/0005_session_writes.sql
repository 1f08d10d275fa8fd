-- The batches a running session's writer has stored, by number: a batch retried because the
-- answer to its commit was lost (the database went away at that moment) is recognized here and
-- not stored twice. Rows go with their session.
CREATE TABLE session_writes (
    session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    batch BIGINT NOT NULL,
    PRIMARY KEY (session_id, batch)
);
