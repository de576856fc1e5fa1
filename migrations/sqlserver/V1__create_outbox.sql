-- QueueBox V1: the outbox table and its first indexes.
-- Batches end at lines that read exactly GO, as sqlcmd splits them. Run with sqlcmd -b -I.
SET ANSI_NULLS ON;
SET QUOTED_IDENTIFIER ON;
GO

IF OBJECT_ID(N'outbox', N'U') IS NULL
    CREATE TABLE outbox (
        id            UNIQUEIDENTIFIER NOT NULL DEFAULT NEWID() PRIMARY KEY,
        topic         NVARCHAR(255) NOT NULL,
        [key]         NVARCHAR(255) NULL,
        payload       NVARCHAR(MAX) NOT NULL,
        headers       NVARCHAR(MAX) NOT NULL DEFAULT '{}',
        state         NVARCHAR(50) NOT NULL DEFAULT 'pending',
        attempt       INT NOT NULL DEFAULT 0,
        max_attempts  INT NOT NULL DEFAULT 5,
        scheduled_at  DATETIME2 NOT NULL DEFAULT GETUTCDATE(),
        created_at    DATETIME2 NOT NULL DEFAULT GETUTCDATE(),
        updated_at    DATETIME2 NOT NULL DEFAULT GETUTCDATE()
    );
GO

IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE object_id = OBJECT_ID(N'outbox') AND name = N'idx_outbox_pending_scheduled')
    CREATE INDEX idx_outbox_pending_scheduled ON outbox (state, scheduled_at) WHERE state = 'pending';
GO

IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE object_id = OBJECT_ID(N'outbox') AND name = N'idx_outbox_state_updated')
    CREATE INDEX idx_outbox_state_updated ON outbox (state, updated_at);
GO
