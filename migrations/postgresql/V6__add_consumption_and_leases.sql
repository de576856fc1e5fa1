-- QueueBox V6: claim tokens and leases on both tables; push and pull consumption on the inbox.
-- Stop every worker of an older version before this migration (see the upgrade guide).
ALTER TABLE outbox ADD COLUMN IF NOT EXISTS claim_token UUID;
ALTER TABLE outbox ADD COLUMN IF NOT EXISTS lease_expires_at TIMESTAMPTZ;

ALTER TABLE inbox ADD COLUMN IF NOT EXISTS claim_token UUID;
ALTER TABLE inbox ADD COLUMN IF NOT EXISTS lease_expires_at TIMESTAMPTZ;
ALTER TABLE inbox ADD COLUMN IF NOT EXISTS consumption VARCHAR(4) NOT NULL DEFAULT 'push';
ALTER TABLE inbox ADD COLUMN IF NOT EXISTS scheduled_at TIMESTAMPTZ NOT NULL DEFAULT CURRENT_TIMESTAMP;
ALTER TABLE inbox ADD COLUMN IF NOT EXISTS attempt INT NOT NULL DEFAULT 0;
ALTER TABLE inbox ADD COLUMN IF NOT EXISTS last_error TEXT;

DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conname = 'ck_inbox_consumption' AND conrelid = 'inbox'::regclass) THEN
        ALTER TABLE inbox ADD CONSTRAINT ck_inbox_consumption CHECK (consumption IN ('push', 'pull'));
    END IF;
END
$$;

CREATE INDEX IF NOT EXISTS idx_inbox_consumption_pending ON inbox (consumption, state, scheduled_at);
