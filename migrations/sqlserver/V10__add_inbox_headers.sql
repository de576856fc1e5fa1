-- QueueBox V10: the received headers of an inbox message, one string value per name.
-- Batches end at lines that read exactly GO, as sqlcmd splits them. Run with sqlcmd -b -I.
SET ANSI_NULLS ON;
SET QUOTED_IDENTIFIER ON;
GO

IF COL_LENGTH(N'inbox', N'headers') IS NULL
    ALTER TABLE inbox ADD headers NVARCHAR(MAX) NOT NULL DEFAULT '{}';
GO
