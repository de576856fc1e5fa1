-- QueueBox V8: the two indexes of the pull claim.
-- A plain CREATE INDEX blocks inbox inserts while it builds; on a populated inbox build them
-- first with CREATE INDEX CONCURRENTLY outside a transaction (see the upgrade guide).
CREATE INDEX IF NOT EXISTS idx_inbox_pull_pending ON inbox (source, scheduled_at, created_at, id)
    WHERE consumption = 'pull' AND state = 'pending';
CREATE INDEX IF NOT EXISTS idx_inbox_pull_busy ON inbox (source, aggregate_id, lease_expires_at)
    WHERE consumption = 'pull' AND state = 'processing';
