-- QueueBox pull retry (SQL Server). Returns the row to pending, due `delay_ms` from now, with
-- attempt raised by one and the redacted reason `error`. Fenced: it must change exactly one
-- row; zero rows means the claim is lost. Parameters: id, token, delay_ms, error.
-- See ../../README.md.
UPDATE inbox
SET state = N'pending',
    scheduled_at = DATEADD(MILLISECOND, CAST(:delay_ms AS INT), SYSUTCDATETIME()),
    attempt = attempt + 1,
    last_error = :error,
    claim_token = NULL,
    lease_expires_at = NULL
WHERE id = :id
  AND state = N'processing'
  AND claim_token = :token
  AND lease_expires_at > SYSUTCDATETIME();
