-- QueueBox V5: the correlation identifier of an inbox message.
ALTER TABLE inbox ADD COLUMN IF NOT EXISTS correlation_id VARCHAR(128);
