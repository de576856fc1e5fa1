-- QueueBox V11: the insert order of the outbox. The claim orders the rows of one key by it.
-- Existing rows are numbered in created_at, id order after the largest number already given.
-- Every step is safe to run twice. Stop every worker of an older version first.
ALTER TABLE outbox ADD COLUMN IF NOT EXISTS sequence BIGINT;

CREATE SEQUENCE IF NOT EXISTS outbox_sequence_seq OWNED BY outbox.sequence;

WITH base AS (
    SELECT COALESCE(MAX(sequence), 0) AS top FROM outbox
), numbered AS (
    SELECT o.id, base.top + row_number() OVER (ORDER BY o.created_at, o.id) AS n
    FROM outbox o CROSS JOIN base
    WHERE o.sequence IS NULL
)
UPDATE outbox o SET sequence = numbered.n FROM numbered WHERE o.id = numbered.id;

-- The next value is the largest number plus one. A sequence that is already past that point
-- keeps its place, so a second run never hands out a number twice.
SELECT setval('outbox_sequence_seq', GREATEST(
    (SELECT COALESCE(MAX(sequence), 0) + 1 FROM outbox),
    (SELECT CASE WHEN is_called THEN last_value + 1 ELSE last_value END FROM outbox_sequence_seq)
), false);

ALTER TABLE outbox ALTER COLUMN sequence SET DEFAULT nextval('outbox_sequence_seq');
ALTER TABLE outbox ALTER COLUMN sequence SET NOT NULL;

CREATE INDEX IF NOT EXISTS idx_outbox_key_sequence ON outbox (key, sequence) WHERE state IN ('pending', 'processing');
