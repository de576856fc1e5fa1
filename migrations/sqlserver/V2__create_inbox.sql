-- QueueBox V2: the inbox table, its deduplication constraint and its indexes.
-- Batches end at lines that read exactly GO, as sqlcmd splits them. Run with sqlcmd -b -I.
SET ANSI_NULLS ON;
SET QUOTED_IDENTIFIER ON;
GO

IF OBJECT_ID(N'inbox', N'U') IS NULL
    CREATE TABLE inbox (
        id               UNIQUEIDENTIFIER NOT NULL DEFAULT NEWID() PRIMARY KEY,
        source           NVARCHAR(255) NOT NULL,
        idempotency_key  NVARCHAR(255) NOT NULL,
        aggregate_id     NVARCHAR(255) NULL,
        event_type       NVARCHAR(255) NULL,
        payload          NVARCHAR(MAX) NOT NULL,
        state            NVARCHAR(50) NOT NULL DEFAULT 'pending',
        created_at       DATETIME2 NOT NULL DEFAULT GETUTCDATE(),
        processed_at     DATETIME2 NULL,
        CONSTRAINT uq_inbox_source_idempotency UNIQUE (source, idempotency_key)
    );
GO

IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE object_id = OBJECT_ID(N'inbox') AND name = N'idx_inbox_state')
    CREATE INDEX idx_inbox_state ON inbox (state);
GO

IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE object_id = OBJECT_ID(N'inbox') AND name = N'idx_inbox_aggregate_state')
    CREATE INDEX idx_inbox_aggregate_state ON inbox (aggregate_id, state);
GO

IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE object_id = OBJECT_ID(N'inbox') AND name = N'idx_inbox_state_created')
    CREATE INDEX idx_inbox_state_created ON inbox (state, created_at);
GO
