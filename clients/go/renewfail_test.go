package queuebox_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	queuebox "github.com/alternayte/queuebox/clients/go"
)

// renewalSecret is in the error of a refused renewal; neither a log line nor the handler's
// cause may show it.
const renewalSecret = "hunter2"

// refuseRenewals makes PostgreSQL refuse every lease renewal of the inbox with an error: an
// update that keeps a row processing under the same claim token and moves its
// lease_expires_at. The claim and the completion, retry and dead statements pass.
func refuseRenewals(t *testing.T, db *sql.DB) {
	t.Helper()
	_, err := db.Exec(fmt.Sprintf(`
CREATE FUNCTION qb_test_refuse_renewal() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'lease renewal refused by the test (password=%s)';
END $$;
CREATE TRIGGER qb_test_refuse_renewal BEFORE UPDATE ON inbox FOR EACH ROW
WHEN (OLD.state = 'processing' AND NEW.state = 'processing'
      AND OLD.claim_token IS NOT DISTINCT FROM NEW.claim_token
      AND NEW.lease_expires_at IS DISTINCT FROM OLD.lease_expires_at)
EXECUTE FUNCTION qb_test_refuse_renewal();`, renewalSecret))
	if err != nil {
		t.Fatalf("installing the trigger that refuses renewals: %v", err)
	}
}

// TestARenewalThatFailsCancelsTheHandler: a renewal that fails with an error, rather than
// changing no row, also loses the lease. The handler's context is cancelled at once, with a
// cause that says so (not at the local deadline), its writes roll back, nothing is written to
// the row (no attempt spent, even though the database still answers in the first case), and
// the failure is logged once, redacted. Two failures: PostgreSQL refuses the renewal, and the
// database can no longer be reached (the proxy stops listening and closes its connections).
func TestARenewalThatFailsCancelsTheHandler(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		fail func(f *partitionFixture)
	}{
		{"the database refuses the renewal", func(f *partitionFixture) { refuseRenewals(f.t, f.db) }},
		{"the database cannot be reached", func(f *partitionFixture) { _ = f.proxy.Close() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newPartitionFixture(t)
			key := "renewal/fails"
			f.seed(key)

			var mu sync.Mutex
			var warnings []string
			var leaked []string
			logger := funcLogger(func(level, msg string, fields map[string]any) {
				line := fmt.Sprint(level, " ", msg, " ", fields)
				mu.Lock()
				defer mu.Unlock()
				if strings.Contains(line, renewalSecret) {
					leaked = append(leaked, line)
				}
				if level == "WARN" && strings.HasPrefix(msg, "renewing a lease failed") {
					warnings = append(warnings, line)
				}
			})
			started, ended := make(chan struct{}), make(chan error, 1)
			var once sync.Once
			// The first renewal runs a third of the lease after the claim; the local deadline
			// comes at four fifths of it.
			w, err := queuebox.NewInboxWorker(f.openViaProxy(), queuebox.Options{
				Source: "orders", LeaseMS: 6000, BatchSize: 1, PollInterval: 20 * time.Millisecond, Logger: logger,
			})
			if err != nil {
				t.Fatal(err)
			}
			stop := running(t, w, func(ctx context.Context, m queuebox.Message, tx *sql.Tx) error {
				if _, err := tx.ExecContext(ctx, `INSERT INTO writes VALUES ($1, 'A')`, m.IdempotencyKey); err != nil {
					return err
				}
				first := false
				once.Do(func() { first = true; close(started) })
				<-ctx.Done()
				if first {
					ended <- context.Cause(ctx)
				}
				return ctx.Err()
			})
			select {
			case <-started:
			case <-time.After(time.Minute):
				t.Fatal("the handler did not start")
			}
			tc.fail(f)
			var cause error
			select {
			case cause = <-ended:
			case <-time.After(time.Minute):
				t.Fatal("the handler's context did not end")
			}
			if err := stop(); err != nil {
				t.Fatal(err)
			}

			if cause == nil || !strings.Contains(cause.Error(), "lease was lost") || !strings.Contains(cause.Error(), "renewing it failed") {
				t.Errorf("the handler's context ended with %v, want the lease lost to the failed renewal (not the local deadline)", cause)
			}
			if cause != nil && strings.Contains(cause.Error(), renewalSecret) {
				t.Errorf("the handler's cause shows the password of the renewal's error: %v", cause)
			}
			var state string
			var attempt, writes int
			var lastError sql.NullString
			if err := f.db.QueryRow(`SELECT state, attempt, last_error, (SELECT count(*) FROM writes)
				FROM inbox WHERE idempotency_key = $1`, key).Scan(&state, &attempt, &lastError, &writes); err != nil {
				t.Fatal(err)
			}
			if state != "processing" || attempt != 0 || lastError.Valid || writes != 0 {
				t.Errorf("row: state %s, attempt %d, last_error %v, %d committed writes; want processing at attempt 0, no last_error, no write",
					state, attempt, lastError, writes)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(warnings) != 1 {
				t.Errorf("%d warnings for the failed renewal, want one: %q", len(warnings), warnings)
			}
			for _, l := range leaked {
				t.Errorf("a log line shows the password of the renewal's error: %s", l)
			}
		})
	}
}
