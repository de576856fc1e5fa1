-- QueueBox pull renew (PostgreSQL). Sets the lease to `lease_ms` from now. Fenced: it must
-- change exactly one row; zero rows means the claim is lost, so stop the work.
-- Parameters: id, token, lease_ms. See ../../README.md.
UPDATE inbox AS t
SET lease_expires_at = clock_timestamp() + CAST(:lease_ms AS BIGINT) * INTERVAL '1 millisecond'
WHERE t.id = CAST(:id AS UUID)
  AND t.state = 'processing'
  AND t.claim_token = CAST(:token AS UUID)
  AND t.lease_expires_at > clock_timestamp();
