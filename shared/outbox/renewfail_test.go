package outbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
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

// A lease renewal that fails with an error, rather than updating zero rows, also loses the
// claim: the publish that runs is cancelled at once, not at the claim's local deadline, spends
// no attempt and gets no write at all (the database still answers, so a fenced retry would
// have spent one), and counts as a lost claim, with one log line for the renewal whose error
// is redacted. Two failures: PostgreSQL refuses the renewal statement, and the database can
// no longer be reached (the proxy in front of it stops listening and closes its connections).
func TestARenewalThatFailsCancelsThePublish(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// setup returns the poller's store, and what makes its renewals fail once the
		// publish is under way.
		setup func(t *testing.T, pool *pgxpool.Pool, dbURL string) (store.OutboxStore, func())
	}{
		{"the database refuses the renewal", func(t *testing.T, pool *pgxpool.Pool, _ string) (store.OutboxStore, func()) {
			st, err := postgres.New(pool, store.DefaultNames())
			if err != nil {
				t.Fatal(err)
			}
			return st, func() { dbtest.RefuseRenewals(t, pool, "outbox") }
		}},
		{"the database cannot be reached", func(t *testing.T, _ *pgxpool.Pool, dbURL string) (store.OutboxStore, func()) {
			st, px := proxiedStore(t, dbURL)
			return st, px.Close
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pool, dbURL := dbtest.Migrated(t)
			direct, err := postgres.New(pool, store.DefaultNames())
			if err != nil {
				t.Fatal(err)
			}
			st, fail := tc.setup(t, pool, dbURL)
			rec := &finishRecorder{OutboxStore: st}
			release := make(chan struct{})
			t.Cleanup(func() { close(release) })
			cancelled := make(chan struct{})
			rc := newReceiver(t, func(r *http.Request, _ int) int {
				select {
				case <-r.Context().Done():
					close(cancelled)
				case <-release:
				}
				return http.StatusOK
			})
			id := insert(t, direct, store.OutboxInsertParams{Topic: "order.created", Payload: json.RawMessage(`{}`)})
			logs := newRecordingHandler()
			metrics := newCountingMetrics()
			// The first renewal runs a third of the lease after the claim; the local deadline
			// comes at four fifths of it.
			p := renewingPoller(t, rec, outbox.Config{ClaimTimeout: 6 * time.Second}, rc, logs, metrics)
			done := make(chan outbox.Summary, 1)
			go func() { done <- p.RunOnce(context.Background()) }()

			waitFor(t, time.Minute, "the publish", func() bool { return rc.count() == 1 })
			fail()
			waitClosed(t, cancelled, time.Minute, "the cancellation of the publish")
			var sum outbox.Summary
			select {
			case sum = <-done:
			case <-time.After(time.Minute):
				t.Fatal("the run did not end")
			}

			if sum.ClaimsLost != 1 || sum.LeaseExpired != 0 || sum.Sent != 0 || sum.Retried != 0 || sum.Dead != 0 {
				t.Errorf("summary = %+v, want one lost claim: the failed renewal, not the local deadline, stopped the publish", sum)
			}
			if n := metrics.get("claimLost"); n != 1 {
				t.Errorf("queuebox_claims_lost_total moved by %d, want 1", n)
			}
			if n := metrics.get("leaseDeadline:outbox"); n != 0 {
				t.Errorf("queuebox_lease_deadline_total moved by %d, want 0", n)
			}
			if s := readRow(t, pool, id); s.State != "processing" || s.Attempt != 0 || s.LastError != "" {
				t.Errorf("row = %+v, want it left processing at attempt 0 with no last_error, for its lease to expire", s)
			}
			for _, w := range rec.recorded() {
				t.Errorf("a fenced write was made for a row whose renewal failed: %s", w)
			}
			failures := 0
			for _, r := range logs.all() {
				if strings.HasPrefix(r.Message, "renewing outbox leases failed") {
					failures++
					if r.Level != slog.LevelError || r.Attrs["error"] == "" || r.Attrs["cancelled"] != "1" {
						t.Errorf("renewal failure line = %+v, want an error line with the error and one cancelled publish", r)
					}
				}
				if strings.Contains(fmt.Sprint(r), dbtest.RenewalSecret) {
					t.Errorf("a log line shows the password of the renewal's error: %+v", r)
				}
			}
			if failures != 1 {
				t.Errorf("%d log lines for the failed renewal, want one", failures)
			}
		})
	}
}

// renewingPoller is loggingPoller with metrics.
func renewingPoller(t *testing.T, st store.OutboxStore, cfg outbox.Config, rc *receiver, h slog.Handler, m outbox.Metrics) *outbox.Poller {
	t.Helper()
	pub, err := webhook.New(webhook.Config{Name: "receiver", BaseURL: rc.srv.URL, Path: "/events", Timeout: time.Minute}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pub.Close() })
	p, err := outbox.New(outbox.Options{
		Store:        st,
		Config:       cfg,
		Routes:       route.NewTable([]route.Route{{Pattern: route.MustCompile("order.**"), Destination: "receiver"}}),
		Destinations: []outbox.Destination{{Name: "receiver", Publisher: pub}},
		Logger:       slog.New(h),
		Metrics:      m,
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// all returns a copy of every line kept.
func (h *recordingHandler) all() []logRecord {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]logRecord(nil), *h.recs...)
}
