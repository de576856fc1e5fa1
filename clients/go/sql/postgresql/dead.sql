-- QueueBox pull dead letter (PostgreSQL). Moves the row to dead with the redacted reason
-- `error`; attempt stays as it is. Fenced: it must change exactly one row; zero rows means the
-- claim is lost. Parameters: id, token, error. See ../../README.md.
UPDATE inbox AS t
SET state = 'dead',
    last_error = CAST(:error AS TEXT),
    claim_token = NULL,
    lease_expires_at = NULL
WHERE t.id = CAST(:id AS UUID)
  AND t.state = 'processing'
  AND t.claim_token = CAST(:token AS UUID)
  AND t.lease_expires_at > clock_timestamp();
