-- QueueBox V5: the correlation identifier of an inbox message.
-- Batches end at lines that read exactly GO, as sqlcmd splits them. Run with sqlcmd -b -I.
SET ANSI_NULLS ON;
SET QUOTED_IDENTIFIER ON;
GO

IF COL_LENGTH(N'inbox', N'correlation_id') IS NULL
    ALTER TABLE inbox ADD correlation_id NVARCHAR(128) NULL;
GO
