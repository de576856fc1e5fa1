-- QueueBox pull renew (SQL Server). Sets the lease to `lease_ms` from now. Fenced: it must
-- change exactly one row; zero rows means the claim is lost, so stop the work.
-- Parameters: id, token, lease_ms. See ../../README.md.
UPDATE inbox
SET lease_expires_at = DATEADD(MILLISECOND, CAST(:lease_ms AS INT), SYSUTCDATETIME())
WHERE id = :id
  AND state = N'processing'
  AND claim_token = :token
  AND lease_expires_at > SYSUTCDATETIME();
