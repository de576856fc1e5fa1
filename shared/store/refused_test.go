package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/alternayte/queuebox/shared/migrate"
	"github.com/alternayte/queuebox/shared/store"
)

var errRefused = errors.New("FATAL: password authentication failed for user \"qb\" password=hunter2")

func classify(err error) *store.RefusedError {
	if errors.Is(err, errRefused) {
		return store.NewRefusedError("the database refused the login (SQLSTATE 28P01)", "check database.username and database.password", err)
	}
	return nil
}

// TestWaitUnlessRefusedStopsAtTheFirstRefusal: transient errors are retried by the wait, the
// first refusal ends it with the refusal (redacted), however long the startup timeout.
func TestWaitUnlessRefusedStopsAtTheFirstRefusal(t *testing.T) {
	t.Parallel()
	attempts := 0
	connect := func(context.Context) error {
		attempts++
		if attempts < 3 {
			return errors.New("connection refused")
		}
		return errRefused
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := store.WaitUnlessRefused(ctx, migrate.WaitForDatabase, connect, 10*time.Minute, classify)
	if ctx.Err() != nil {
		t.Fatal("the wait went on after the refusal until the test's deadline")
	}
	refused, ok := errors.AsType[*store.RefusedError](err)
	if !ok {
		t.Fatalf("err = %v, want a *store.RefusedError", err)
	}
	if attempts != 3 {
		t.Errorf("attempts = %d, want 3 (two transient errors, then the refusal)", attempts)
	}
	if strings.Contains(refused.Error(), "hunter2") || !strings.Contains(refused.Error(), "does not pass by waiting") {
		t.Errorf("error text = %q", refused.Error())
	}
}

func TestWaitUnlessRefusedKeepsTheWaitOfOtherErrors(t *testing.T) {
	t.Parallel()
	attempts := 0
	connect := func(context.Context) error {
		attempts++
		if attempts < 3 {
			return errors.New("the database system is starting up")
		}
		return nil
	}
	if err := store.WaitUnlessRefused(context.Background(), migrate.WaitForDatabase, connect, time.Minute, classify); err != nil {
		t.Fatalf("err = %v", err)
	}
	err := store.WaitUnlessRefused(context.Background(), migrate.WaitForDatabase, func(context.Context) error {
		return errors.New("connection refused")
	}, 300*time.Millisecond, classify)
	if !errors.Is(err, migrate.ErrStartupTimeout) {
		t.Errorf("err = %v, want the startup timeout", err)
	}
}
