-- V1 of the QueueBox track (migrations/queuebox, recorded in queuebox_schema_history): the
-- state of each destination, one row per destination name: a pause by an operator, the circuit
-- breaker and the clock of the rate limit (docs/destination-state.md). Earlier builds shipped it
-- as V12 of the main track. An extension of the documented schema. Safe to run twice.
-- Batches end at lines that read exactly GO, as sqlcmd splits them. Run with sqlcmd -b -I.
SET ANSI_NULLS ON;
SET QUOTED_IDENTIFIER ON;
GO

IF OBJECT_ID(N'queuebox_destination_state', N'U') IS NULL
    CREATE TABLE queuebox_destination_state (
        destination        NVARCHAR(255) NOT NULL PRIMARY KEY,
        paused             BIT NOT NULL DEFAULT 0,
        paused_at          DATETIME2 NULL,
        open_until         DATETIME2 NULL,
        failures           INT NOT NULL DEFAULT 0,
        window_started_at  DATETIME2 NULL,
        rate_tat           DATETIME2 NULL,
        updated_at         DATETIME2 NOT NULL DEFAULT SYSUTCDATETIME()
    );
GO
