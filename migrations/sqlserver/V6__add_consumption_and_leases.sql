-- QueueBox V6: claim tokens and leases on both tables; push and pull consumption on the inbox.
-- Stop every worker of an older version before this migration (see the upgrade guide).
-- Batches end at lines that read exactly GO, as sqlcmd splits them. Run with sqlcmd -b -I.
-- The check constraint and the index sit in batches after the ALTER TABLE statements, because
-- SQL Server compiles a whole batch before it runs it and would not know the new columns yet.
SET ANSI_NULLS ON;
SET QUOTED_IDENTIFIER ON;
GO

IF COL_LENGTH(N'outbox', N'claim_token') IS NULL
    ALTER TABLE outbox ADD claim_token UNIQUEIDENTIFIER NULL;
GO

IF COL_LENGTH(N'outbox', N'lease_expires_at') IS NULL
    ALTER TABLE outbox ADD lease_expires_at DATETIME2 NULL;
GO

IF COL_LENGTH(N'inbox', N'claim_token') IS NULL
    ALTER TABLE inbox ADD claim_token UNIQUEIDENTIFIER NULL;
GO

IF COL_LENGTH(N'inbox', N'lease_expires_at') IS NULL
    ALTER TABLE inbox ADD lease_expires_at DATETIME2 NULL;
GO

IF COL_LENGTH(N'inbox', N'consumption') IS NULL
    ALTER TABLE inbox ADD consumption VARCHAR(4) NOT NULL DEFAULT 'push';
GO

IF COL_LENGTH(N'inbox', N'scheduled_at') IS NULL
    ALTER TABLE inbox ADD scheduled_at DATETIME2 NOT NULL DEFAULT SYSUTCDATETIME();
GO

IF COL_LENGTH(N'inbox', N'attempt') IS NULL
    ALTER TABLE inbox ADD attempt INT NOT NULL DEFAULT 0;
GO

IF COL_LENGTH(N'inbox', N'last_error') IS NULL
    ALTER TABLE inbox ADD last_error NVARCHAR(MAX) NULL;
GO

IF NOT EXISTS (SELECT 1 FROM sys.check_constraints WHERE parent_object_id = OBJECT_ID(N'inbox') AND name = N'ck_inbox_consumption')
    ALTER TABLE inbox ADD CONSTRAINT ck_inbox_consumption CHECK (consumption IN ('push', 'pull'));
GO

IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE object_id = OBJECT_ID(N'inbox') AND name = N'idx_inbox_consumption_pending')
    CREATE INDEX idx_inbox_consumption_pending ON inbox (consumption, state, scheduled_at);
GO
