-- QueueBox V3: the claim time on both tables.
-- Batches end at lines that read exactly GO, as sqlcmd splits them. Run with sqlcmd -b -I.
-- The indexes sit in batches after the ALTER TABLE, because SQL Server compiles a whole batch
-- before it runs it and would not know the new column yet.
SET ANSI_NULLS ON;
SET QUOTED_IDENTIFIER ON;
GO

IF COL_LENGTH(N'outbox', N'claimed_at') IS NULL
    ALTER TABLE outbox ADD claimed_at DATETIME2 NULL;
GO

IF COL_LENGTH(N'inbox', N'claimed_at') IS NULL
    ALTER TABLE inbox ADD claimed_at DATETIME2 NULL;
GO

IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE object_id = OBJECT_ID(N'outbox') AND name = N'idx_outbox_processing_claimed')
    CREATE INDEX idx_outbox_processing_claimed ON outbox (claimed_at) WHERE state = 'processing';
GO

IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE object_id = OBJECT_ID(N'inbox') AND name = N'idx_inbox_processing_claimed')
    CREATE INDEX idx_inbox_processing_claimed ON inbox (claimed_at) WHERE state = 'processing';
GO
