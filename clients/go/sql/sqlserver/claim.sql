-- QueueBox pull claim (SQL Server). The statement opens its own transaction, takes the
-- per-source application lock and commits; run it alone, never inside another transaction,
-- and before any handler starts. Claims up to `batch` rows of the source `source`, at most
-- one per aggregate, and returns each with a new claim token. Parameters: source, batch,
-- lease_ms, cand_limit = LEAST(GREATEST(3 * batch, 50), 500). Needs READ COMMITTED (with or
-- without READ_COMMITTED_SNAPSHOT). Give the call a driver timeout of at least 30 seconds.
-- Local variables are named qb_* so that none shares a name with a bound parameter (Msg 134).
SET XACT_ABORT ON;

BEGIN TRANSACTION;

DECLARE @qb_lock_result INT;
EXEC @qb_lock_result = sp_getapplock
    @Resource = :source,
    @LockMode = 'Exclusive',
    @LockOwner = 'Transaction',
    @LockTimeout = 10000;

IF @qb_lock_result < 0
BEGIN
    -- A deadlock victim (-3) has lost its transaction already.
    IF @@TRANCOUNT > 0 ROLLBACK TRANSACTION;
    THROW 51000, 'inbox pull claim: sp_getapplock did not acquire the per-source claim lock', 1;
END;

-- One reading of the database clock for the whole claim.
DECLARE @qb_now DATETIME2 = SYSUTCDATETIME();

WITH due AS (
    -- Pending pull rows of the source whose time has come.
    SELECT TOP (:cand_limit) i.id, i.aggregate_id, i.scheduled_at, i.created_at
    FROM inbox AS i WITH (UPDLOCK, READPAST, ROWLOCK)
    WHERE i.source = :source
      AND i.consumption = 'pull'
      AND i.state = N'pending'
      AND i.scheduled_at <= @qb_now
    ORDER BY i.scheduled_at, i.created_at, i.id
), expired AS (
    -- Claimed pull rows of the source whose lease ran out: the claim reclaims them itself.
    SELECT TOP (:cand_limit) i.id, i.aggregate_id, i.scheduled_at, i.created_at
    FROM inbox AS i WITH (UPDLOCK, READPAST, ROWLOCK)
    WHERE i.source = :source
      AND i.consumption = 'pull'
      AND i.state = N'processing'
      AND i.lease_expires_at <= @qb_now
    ORDER BY i.scheduled_at, i.created_at, i.id
), candidates AS (
    SELECT d.id, d.aggregate_id, d.scheduled_at, d.created_at FROM due AS d
    UNION ALL
    SELECT e.id, e.aggregate_id, e.scheduled_at, e.created_at FROM expired AS e
), ranked AS (
    -- The first candidate of each aggregate; a row without an aggregate is its own head.
    SELECT c.id, c.aggregate_id, c.scheduled_at, c.created_at,
           ROW_NUMBER() OVER (
               PARTITION BY COALESCE(c.aggregate_id, N'#' + CONVERT(NVARCHAR(36), c.id))
               ORDER BY c.scheduled_at, c.created_at, c.id) AS qb_rank
    FROM candidates AS c
), ready AS (
    -- Skip a head whose aggregate already has a row under a live lease in this source.
    SELECT TOP (:batch) h.id
    FROM ranked AS h
    WHERE h.qb_rank = 1
      AND (h.aggregate_id IS NULL
        OR NOT EXISTS (
            SELECT 1
            FROM inbox AS b
            WHERE b.source = :source
              AND b.consumption = 'pull'
              AND b.state = N'processing'
              AND b.aggregate_id = h.aggregate_id
              AND b.lease_expires_at > @qb_now))
    ORDER BY h.scheduled_at, h.created_at, h.id
)
UPDATE t
SET state = N'processing',
    claim_token = NEWID(),
    claimed_at = @qb_now,
    lease_expires_at = DATEADD(MILLISECOND, CAST(:lease_ms AS INT), @qb_now)
OUTPUT inserted.id, inserted.source, inserted.idempotency_key, inserted.aggregate_id,
       inserted.event_type, inserted.payload, inserted.headers, inserted.attempt,
       inserted.correlation_id, inserted.claim_token
FROM inbox AS t WITH (UPDLOCK, READPAST, ROWLOCK)
JOIN ready AS r ON r.id = t.id
-- The readiness predicate again, on the row as it is now.
WHERE t.source = :source
  AND t.consumption = 'pull'
  AND ((t.state = N'pending' AND t.scheduled_at <= @qb_now)
    OR (t.state = N'processing' AND t.lease_expires_at <= @qb_now));

COMMIT TRANSACTION;
