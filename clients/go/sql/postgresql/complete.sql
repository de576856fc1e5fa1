-- QueueBox pull complete (PostgreSQL). Run it inside the handler's transaction, after the
-- business writes. Fenced: it must change exactly one row; zero rows means the claim is lost,
-- so roll the whole transaction back. Parameters: id, token. See ../../README.md.
UPDATE inbox AS t
SET state = 'processed',
    processed_at = clock_timestamp(),
    claim_token = NULL,
    lease_expires_at = NULL
WHERE t.id = CAST(:id AS UUID)
  AND t.state = 'processing'
  AND t.claim_token = CAST(:token AS UUID)
  AND t.lease_expires_at > clock_timestamp();
