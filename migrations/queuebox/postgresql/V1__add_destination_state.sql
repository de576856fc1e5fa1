-- V1 of the QueueBox track (migrations/queuebox, recorded in queuebox_schema_history): the
-- state of each destination, one row per destination name: a pause by an operator, the circuit
-- breaker and the clock of the rate limit (docs/destination-state.md). Earlier builds shipped it
-- as V12 of the main track. An extension of the documented schema. Safe to run twice.
CREATE TABLE IF NOT EXISTS queuebox_destination_state (
    destination        VARCHAR(255) PRIMARY KEY,
    paused             BOOLEAN NOT NULL DEFAULT FALSE,
    paused_at          TIMESTAMP WITH TIME ZONE,
    open_until         TIMESTAMP WITH TIME ZONE,
    failures           INTEGER NOT NULL DEFAULT 0,
    window_started_at  TIMESTAMP WITH TIME ZONE,
    rate_tat           TIMESTAMP WITH TIME ZONE,
    updated_at         TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT CURRENT_TIMESTAMP
);
