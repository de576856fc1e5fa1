-- V3 of the QueueBox track (migrations/queuebox, recorded in queuebox_schema_history): how
-- many times a replay moved each outbox row back to pending, one row per replayed outbox row.
-- A destination that drops a message whose deduplication id it has seen (a JetStream stream:
-- Nats-Msg-Id) gets the row id on the first delivery and on its retries, and the row id with
-- the generation after each replay, so that a replay is delivered again (docs/headers.md).
-- Kept outside the outbox table, whose columns are documented. An extension of the documented
-- schema. Safe to run twice.
-- Batches end at lines that read exactly GO, as sqlcmd splits them. Run with sqlcmd -b -I.
SET ANSI_NULLS ON;
SET QUOTED_IDENTIFIER ON;
GO

IF OBJECT_ID(N'queuebox_replay_generation', N'U') IS NULL
    CREATE TABLE queuebox_replay_generation (
        outbox_id    UNIQUEIDENTIFIER NOT NULL PRIMARY KEY,
        generation   BIGINT NOT NULL,
        replayed_at  DATETIME2 NOT NULL DEFAULT SYSUTCDATETIME()
    );
GO
