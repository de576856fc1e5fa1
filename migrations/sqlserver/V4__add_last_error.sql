-- QueueBox V4: the reason of the last failed delivery.
-- Batches end at lines that read exactly GO, as sqlcmd splits them. Run with sqlcmd -b -I.
SET ANSI_NULLS ON;
SET QUOTED_IDENTIFIER ON;
GO

IF COL_LENGTH(N'outbox', N'last_error') IS NULL
    ALTER TABLE outbox ADD last_error NVARCHAR(MAX) NULL;
GO
