-- QueueBox V12: the state of each destination, one row per destination name: a pause by an
-- operator, the circuit breaker and the clock of the rate limit (docs/destination-state.md). An
-- extension of the documented schema: without it QueueBox delivers as before, without the
-- delivery controls. Safe to run twice.
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
