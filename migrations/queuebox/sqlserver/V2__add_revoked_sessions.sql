-- V2 of the QueueBox track (migrations/queuebox, recorded in queuebox_schema_history): the
-- console sessions that a logout ended, so that every replica and every Lambda invocation
-- refuses their cookie until it expires (docs/console.md). session_hash is the hex SHA-256 of
-- the session nonce, never the cookie; expires_at (UTC) is the cookie expiry, after which the
-- row may go. An extension of the documented schema. Safe to run twice.
-- Batches end at lines that read exactly GO, as sqlcmd splits them. Run with sqlcmd -b -I.
SET ANSI_NULLS ON;
SET QUOTED_IDENTIFIER ON;
GO

IF OBJECT_ID(N'queuebox_revoked_session', N'U') IS NULL
    CREATE TABLE queuebox_revoked_session (
        session_hash  NVARCHAR(64) NOT NULL PRIMARY KEY,
        expires_at    DATETIME2 NOT NULL,
        revoked_at    DATETIME2 NOT NULL DEFAULT SYSUTCDATETIME()
    );
GO

IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE object_id = OBJECT_ID(N'queuebox_revoked_session') AND name = N'idx_queuebox_revoked_session_expires')
    CREATE INDEX idx_queuebox_revoked_session_expires ON queuebox_revoked_session (expires_at);
GO
