package consumetest_test

import (
	"context"
	"testing"

	"github.com/alternayte/queuebox/shared/connect/consumetest"
	"github.com/alternayte/queuebox/shared/store"
)

func TestFailingSinkFailsWhileDownAndPerKey(t *testing.T) {
	in := &inbox{rows: map[string]consumetest.Row{}}
	fs := consumetest.NewFailingSink(in)
	ctx := context.Background()
	p := func(key string) store.InboxInsertParams {
		return store.InboxInsertParams{Source: "s", IdempotencyKey: key, Payload: []byte(`{}`)}
	}

	fs.SetDown(true)
	if _, err := fs.InboxInsert(ctx, p("a")); err == nil {
		t.Fatal("insert while down succeeded")
	}
	if _, err := fs.InboxInsertBatch(ctx, []store.InboxInsertParams{p("a"), p("b")}); err == nil {
		t.Fatal("batch while down succeeded")
	}
	if got := fs.DownFailures(); got != 2 {
		t.Errorf("DownFailures = %d, want 2", got)
	}
	fs.WaitDownFailures(t, 2, consumetest.WaitLimit)
	if len(in.all()) != 0 {
		t.Fatalf("rows stored while down: %v", in.all())
	}

	fs.SetDown(false)
	fs.FailKey("b", 2)
	for i := range 2 {
		if _, err := fs.InboxInsertBatch(ctx, []store.InboxInsertParams{p("a"), p("b")}); err == nil {
			t.Fatalf("batch %d with a failing key succeeded", i)
		}
	}
	if _, err := fs.InboxInsertBatch(ctx, []store.InboxInsertParams{p("a"), p("b")}); err != nil {
		t.Fatalf("batch after the key's failures: %v", err)
	}
	if got := fs.Attempts("a"); got != 5 {
		t.Errorf("Attempts(a) = %d, want 5", got)
	}
	if got := fs.Attempts("b"); got != 4 {
		t.Errorf("Attempts(b) = %d, want 4", got)
	}
	if got := len(in.all()); got != 2 {
		t.Errorf("%d rows, want 2", got)
	}
}

// blocking is a source that runs until its context ends.
type blocking struct{}

func (blocking) Run(ctx context.Context, _ consumetest.Sink) error {
	<-ctx.Done()
	return ctx.Err()
}

func TestStartStopsTheSource(t *testing.T) {
	r := consumetest.Start(t, blocking{}, &inbox{rows: map[string]consumetest.Row{}})
	if err := r.Stop(); err != context.Canceled {
		t.Fatalf("Stop = %v, want context.Canceled", err)
	}
	if err := r.Stop(); err != context.Canceled {
		t.Fatalf("second Stop = %v, want the same", err)
	}
}
