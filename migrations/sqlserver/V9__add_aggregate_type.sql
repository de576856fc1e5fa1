-- QueueBox V9: the kind of business entity of an outbox row.
-- Batches end at lines that read exactly GO, as sqlcmd splits them. Run with sqlcmd -b -I.
SET ANSI_NULLS ON;
SET QUOTED_IDENTIFIER ON;
GO

IF COL_LENGTH(N'outbox', N'aggregate_type') IS NULL
    ALTER TABLE outbox ADD aggregate_type NVARCHAR(255) NULL;
GO
