-- V2 of the QueueBox track (migrations/queuebox, recorded in queuebox_schema_history): the
-- console sessions that a logout ended, so that every replica and every Lambda invocation
-- refuses their cookie until it expires (docs/console.md). session_hash is the hex SHA-256 of
-- the session's nonce, never the cookie; expires_at is the cookie's own expiry, after which the
-- row may go. An extension of the documented schema. Safe to run twice.
CREATE TABLE IF NOT EXISTS queuebox_revoked_session (
    session_hash  VARCHAR(64) PRIMARY KEY,
    expires_at    TIMESTAMP WITH TIME ZONE NOT NULL,
    revoked_at    TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT CURRENT_TIMESTAMP
);
CREATE INDEX IF NOT EXISTS idx_queuebox_revoked_session_expires ON queuebox_revoked_session (expires_at);
