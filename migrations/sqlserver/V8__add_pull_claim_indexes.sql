-- QueueBox V8: the two indexes of the pull claim.
-- A plain CREATE INDEX blocks inbox inserts while it builds; on a populated inbox build them
-- first with WITH (ONLINE = ON) where the edition allows it (see the upgrade guide).
-- Batches end at lines that read exactly GO, as sqlcmd splits them. Run with sqlcmd -b -I:
-- a filtered index needs QUOTED_IDENTIFIER ON.
SET ANSI_NULLS ON;
SET QUOTED_IDENTIFIER ON;
GO

IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE object_id = OBJECT_ID(N'inbox') AND name = N'idx_inbox_pull_pending')
    CREATE INDEX idx_inbox_pull_pending ON inbox (source, scheduled_at, created_at, id)
        WHERE consumption = 'pull' AND state = 'pending';
GO

IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE object_id = OBJECT_ID(N'inbox') AND name = N'idx_inbox_pull_busy')
    CREATE INDEX idx_inbox_pull_busy ON inbox (source, aggregate_id, lease_expires_at)
        WHERE consumption = 'pull' AND state = 'processing';
GO
