-- QueueBox V10: the received headers of an inbox message, one string value per name.
ALTER TABLE inbox ADD COLUMN IF NOT EXISTS headers JSONB NOT NULL DEFAULT '{}';
