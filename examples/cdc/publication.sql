-- The publication of PostgreSQL logical capture (spec/08-capture-changes.md, "Prepare the
-- database"): QueueBox never creates or drops it. Run after the migrations, since it names the
-- outbox table. Idempotent, so a second run of the stack or of smoke-test.sh changes nothing.
DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = 'queuebox_outbox') THEN
    CREATE PUBLICATION queuebox_outbox FOR TABLE outbox;
  END IF;
END
$$;
