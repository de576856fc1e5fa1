-- V3 of the QueueBox track (migrations/queuebox, recorded in queuebox_schema_history): how
-- many times a replay moved each outbox row back to pending, one row per replayed outbox row.
-- A destination that drops a message whose deduplication id it has seen (a JetStream stream:
-- Nats-Msg-Id) gets the row id on the first delivery and on its retries, and the row id with
-- the generation after each replay, so that a replay is delivered again (docs/headers.md).
-- Kept outside the outbox table, whose columns are documented. An extension of the documented
-- schema. Safe to run twice.
CREATE TABLE IF NOT EXISTS queuebox_replay_generation (
    outbox_id    UUID PRIMARY KEY,
    generation   BIGINT NOT NULL,
    replayed_at  TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT CURRENT_TIMESTAMP
);
