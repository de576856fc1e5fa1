-- QueueBox pull complete (SQL Server). Run it inside the handler's transaction, after the
-- business writes. Fenced: it must change exactly one row; zero rows means the claim is lost,
-- so roll the whole transaction back. Parameters: id, token. See ../../README.md.
UPDATE inbox
SET state = N'processed',
    processed_at = SYSUTCDATETIME(),
    claim_token = NULL,
    lease_expires_at = NULL
WHERE id = :id
  AND state = N'processing'
  AND claim_token = :token
  AND lease_expires_at > SYSUTCDATETIME();
