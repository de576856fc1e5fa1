-- QueueBox pull retry (PostgreSQL). Returns the row to pending, due `delay_ms` from now, with
-- attempt raised by one and the redacted reason `error`. Fenced: it must change exactly one
-- row; zero rows means the claim is lost. Parameters: id, token, delay_ms, error.
-- See ../../README.md.
UPDATE inbox AS t
SET state = 'pending',
    scheduled_at = clock_timestamp() + CAST(:delay_ms AS BIGINT) * INTERVAL '1 millisecond',
    attempt = t.attempt + 1,
    last_error = CAST(:error AS TEXT),
    claim_token = NULL,
    lease_expires_at = NULL
WHERE t.id = CAST(:id AS UUID)
  AND t.state = 'processing'
  AND t.claim_token = CAST(:token AS UUID)
  AND t.lease_expires_at > clock_timestamp();
