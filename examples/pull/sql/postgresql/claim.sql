-- QueueBox pull claim (PostgreSQL). Run it alone in its own transaction and commit it before
-- any handler starts. Claims up to `batch` rows of the source `source`, at most one per
-- aggregate, and returns each with a new claim token. Parameters: source, batch, lease_ms,
-- cand_limit = LEAST(GREATEST(3 * batch, 50), 500). See ../../README.md.
WITH clock AS (
    -- One reading of the database clock for the whole statement. Most uses read it through a
    -- scalar subquery, (SELECT qb_now FROM clock), rather than a join: the value is the same,
    -- the planner has fewer joins to plan on every call, and the scans of due and expired rows
    -- bound their index range with it.
    SELECT clock_timestamp() AS qb_now
), due AS (
    -- Pending pull rows of the source whose time has come.
    SELECT i.id, i.aggregate_id, i.scheduled_at, i.created_at
    FROM inbox AS i
    WHERE i.source = CAST(:source AS TEXT)
      AND i.consumption = 'pull'
      AND i.state = 'pending'
      AND i.scheduled_at <= (SELECT qb_now FROM clock)
    ORDER BY i.scheduled_at, i.created_at, i.id
    LIMIT CAST(:cand_limit AS INTEGER)
), expired AS (
    -- Claimed pull rows of the source whose lease ran out: the claim reclaims them itself.
    SELECT i.id, i.aggregate_id, i.scheduled_at, i.created_at
    FROM inbox AS i
    WHERE i.source = CAST(:source AS TEXT)
      AND i.consumption = 'pull'
      AND i.state = 'processing'
      AND i.lease_expires_at <= (SELECT qb_now FROM clock)
    ORDER BY i.scheduled_at, i.created_at, i.id
    LIMIT CAST(:cand_limit AS INTEGER)
), heads AS (
    -- The first candidate of each aggregate; a row without an aggregate is its own head.
    SELECT DISTINCT ON (COALESCE(c.aggregate_id, '#' || CAST(c.id AS TEXT)))
           c.id, c.aggregate_id, c.scheduled_at, c.created_at
    FROM (SELECT * FROM due UNION ALL SELECT * FROM expired) AS c
    ORDER BY COALESCE(c.aggregate_id, '#' || CAST(c.id AS TEXT)), c.scheduled_at, c.created_at, c.id
), ready AS (
    -- Skip a head whose aggregate already has a row under a live lease in this source. The
    -- clock is joined here, not read through a subquery, so that the check stays one probe of
    -- the busy index per head, instead of a read of every live lease of the source.
    SELECT h.id, h.scheduled_at, h.created_at
    FROM heads AS h, clock AS k
    WHERE h.aggregate_id IS NULL
       OR NOT EXISTS (
            SELECT 1
            FROM inbox AS b
            WHERE b.source = CAST(:source AS TEXT)
              AND b.consumption = 'pull'
              AND b.state = 'processing'
              AND b.aggregate_id = h.aggregate_id
              AND b.lease_expires_at > k.qb_now)
    ORDER BY h.scheduled_at, h.created_at, h.id
), locked AS (
    -- Lock up to batch heads; a row that another claim holds is skipped, never waited for.
    -- The limit comes after SKIP LOCKED, so two claims at the same moment take different
    -- rows instead of both taking the first batch and skipping each other to nothing. The
    -- state is checked again on the row as it is when locked, so a row that another claim
    -- took and committed after this statement began (now processing under a live lease) does
    -- not count toward the limit: the claim takes the next head instead of coming back short
    -- or empty.
    SELECT i.id
    FROM inbox AS i
    JOIN ready AS r ON r.id = i.id
    WHERE i.state = 'pending' OR i.lease_expires_at <= (SELECT qb_now FROM clock)
    ORDER BY r.scheduled_at, r.created_at, r.id
    LIMIT CAST(:batch AS INTEGER)
    FOR UPDATE OF i SKIP LOCKED
), claimed AS (
    UPDATE inbox AS t
    SET state = 'processing',
        claim_token = gen_random_uuid(),
        claimed_at = (SELECT qb_now FROM clock),
        lease_expires_at = (SELECT qb_now FROM clock) + CAST(:lease_ms AS BIGINT) * INTERVAL '1 millisecond'
    FROM locked AS l
    WHERE t.id = l.id
      -- The readiness predicate again, on the row as it is now: a worker that lost the race
      -- for this row between the read and the lock claims nothing.
      AND t.source = CAST(:source AS TEXT)
      AND t.consumption = 'pull'
      AND ((t.state = 'pending' AND t.scheduled_at <= (SELECT qb_now FROM clock))
        OR (t.state = 'processing' AND t.lease_expires_at <= (SELECT qb_now FROM clock)))
    RETURNING t.id, t.source, t.idempotency_key, t.aggregate_id, t.event_type, t.payload,
              t.headers, t.attempt, t.correlation_id, t.claim_token, t.scheduled_at, t.created_at
)
SELECT c.id, c.source, c.idempotency_key, c.aggregate_id, c.event_type, c.payload,
       c.headers, c.attempt, c.correlation_id, c.claim_token
FROM claimed AS c
ORDER BY c.scheduled_at, c.created_at, c.id;
