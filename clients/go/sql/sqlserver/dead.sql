-- QueueBox pull dead letter (SQL Server). Moves the row to dead with the redacted reason
-- `error`; attempt stays as it is. Fenced: it must change exactly one row; zero rows means the
-- claim is lost. Parameters: id, token, error. See ../../README.md.
UPDATE inbox
SET state = N'dead',
    last_error = :error,
    claim_token = NULL,
    lease_expires_at = NULL
WHERE id = :id
  AND state = N'processing'
  AND claim_token = :token
  AND lease_expires_at > SYSUTCDATETIME();
