package outbox_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/alternayte/queuebox/shared/connect/webhook"
	"github.com/alternayte/queuebox/shared/outbox"
	"github.com/alternayte/queuebox/shared/route"
	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/store/postgres"
	"github.com/alternayte/queuebox/shared/store/postgres/dbtest"
)

// The child mode of TestKilledWorkerLosesNothing: a poller in its own process.
func init() {
	dbURL, receiverURL := os.Getenv("QB_TEST_CHILD_DB"), os.Getenv("QB_TEST_CHILD_RECEIVER")
	if dbURL == "" || receiverURL == "" {
		return
	}
	pool, err := pgxpool.New(context.Background(), dbURL)
	if err != nil {
		os.Exit(3)
	}
	st, err := postgres.New(pool, store.DefaultNames())
	if err != nil {
		os.Exit(3)
	}
	pub, err := webhook.New(webhook.Config{Name: "receiver", BaseURL: receiverURL, Timeout: time.Minute}, nil)
	if err != nil {
		os.Exit(3)
	}
	p, err := outbox.New(outbox.Options{
		Store:        st,
		Config:       outbox.Config{ClaimTimeout: 500 * time.Millisecond, PollInterval: 10 * time.Millisecond, ClaimMode: os.Getenv("QB_TEST_CHILD_CLAIM_MODE")},
		Routes:       route.NewTable([]route.Route{{Pattern: route.MustCompile("**"), Destination: "receiver"}}),
		Destinations: []outbox.Destination{{Name: "receiver", Publisher: pub}},
	})
	if err != nil {
		os.Exit(3)
	}
	p.Run(context.Background(), outbox.RunOptions{})
	os.Exit(0)
}

// TestKilledWorkerLosesNothing kills a delivering process with SIGKILL in the middle of its
// publish: the row stays processing until its lease expires, another replica delivers it
// with attempt 0, and the receiver sees the same X-Message-Id twice.
func TestKilledWorkerLosesNothing(t *testing.T) {
	t.Parallel()
	pool, dbURL := dbtest.Migrated(t)
	st, err := postgres.New(pool, store.DefaultNames())
	if err != nil {
		t.Fatal(err)
	}
	hung := make(chan struct{})
	release := make(chan struct{})
	defer close(release)
	rc := newReceiver(t, func(r *http.Request, n int) int {
		if n == 1 {
			close(hung)
			select { // the first publish never gets an answer
			case <-release:
			case <-r.Context().Done():
			}
		}
		return http.StatusOK
	})
	id := insert(t, st, store.OutboxInsertParams{Topic: "order.created", Key: "k1", Payload: json.RawMessage(`{"n":1}`)})

	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), "QB_TEST_CHILD_DB="+dbURL, "QB_TEST_CHILD_RECEIVER="+rc.srv.URL)
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-hung:
	case <-time.After(30 * time.Second):
		_ = child.Process.Kill()
		t.Fatal("the child never published")
	}
	if err := child.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	_ = child.Wait()
	if s := readRow(t, pool, id); s.State != "processing" {
		t.Fatalf("after the kill the row is %+v, want processing", s)
	}

	p := newPoller(t, st, outbox.Config{ClaimTimeout: rescueLease, PollInterval: 10 * time.Millisecond}, rc, nil)
	runPoller(t, p)
	waitFor(t, 20*time.Second, "another replica to deliver the row", func() bool { return readRow(t, pool, id).State == "sent" })
	if s := readRow(t, pool, id); s.Attempt != 0 {
		t.Errorf("attempt = %d, want 0", s.Attempt)
	}
	// At least twice: a busy machine may delay the child's renewals past its short lease,
	// which adds duplicates that at-least-once allows.
	reqs := rc.requests()
	if len(reqs) < 2 {
		t.Errorf("receiver saw %d requests, want the same message at least twice", len(reqs))
	}
	for i, r := range reqs {
		if got := r.Header.Get("X-Message-Id"); got != id {
			t.Errorf("request %d X-Message-Id = %q, want %q", i, got, id)
		}
	}
}
