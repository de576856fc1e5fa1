package outbox_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/alternayte/queuebox/shared/connect/webhook"
	"github.com/alternayte/queuebox/shared/outbox"
	"github.com/alternayte/queuebox/shared/route"
	"github.com/alternayte/queuebox/shared/store"
)

// logRecord is one line that a recordingHandler kept.
type logRecord struct {
	Level   slog.Level
	Message string
	Attrs   map[string]string
}

// recordingHandler keeps every log line, across the loggers derived from it.
type recordingHandler struct {
	mu    *sync.Mutex
	recs  *[]logRecord
	attrs []slog.Attr
}

func newRecordingHandler() *recordingHandler {
	return &recordingHandler{mu: &sync.Mutex{}, recs: &[]logRecord{}}
}

func (h *recordingHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *recordingHandler) Handle(_ context.Context, r slog.Record) error {
	rec := logRecord{Level: r.Level, Message: r.Message, Attrs: map[string]string{}}
	for _, a := range h.attrs {
		rec.Attrs[a.Key] = a.Value.String()
	}
	r.Attrs(func(a slog.Attr) bool {
		rec.Attrs[a.Key] = a.Value.String()
		return true
	})
	h.mu.Lock()
	*h.recs = append(*h.recs, rec)
	h.mu.Unlock()
	return nil
}

func (h *recordingHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &recordingHandler{mu: h.mu, recs: h.recs, attrs: append(append([]slog.Attr(nil), h.attrs...), attrs...)}
}

func (h *recordingHandler) WithGroup(string) slog.Handler { return h }

// count returns how many lines have message msg and, when id is not empty, message_id id.
func (h *recordingHandler) count(msg, id string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, r := range *h.recs {
		if r.Message == msg && (id == "" || r.Attrs["message_id"] == id) {
			n++
		}
	}
	return n
}

const lostClaimWarning = "outbox lease renewal lost the claim; cancelling the publish"

// gatedRenewals holds the first lease renewal until the test lets it go, so that the test
// decides what happens between the renewer's choice of rows and its statement.
type gatedRenewals struct {
	store.OutboxStore
	once    sync.Once
	entered chan struct{} // closed when the first renewal starts
	proceed chan struct{} // the first renewal waits for it
}

func newGatedRenewals(st store.OutboxStore) *gatedRenewals {
	return &gatedRenewals{OutboxStore: st, entered: make(chan struct{}), proceed: make(chan struct{})}
}

func (g *gatedRenewals) OutboxRenew(ctx context.Context, p store.OutboxRenewParams) ([]store.Claim, error) {
	first := false
	g.once.Do(func() {
		first = true
		close(g.entered)
	})
	if first {
		<-g.proceed
		// The renewal's own timeout may have run out while it was held; the statement still
		// runs, as it would have without the hold.
		ctx = context.WithoutCancel(ctx)
	}
	return g.OutboxStore.OutboxRenew(ctx, p)
}

// loggingPoller is newPoller with a recording logger.
func loggingPoller(t *testing.T, st store.OutboxStore, cfg outbox.Config, rc *receiver, h slog.Handler) *outbox.Poller {
	t.Helper()
	pub, err := webhook.New(webhook.Config{Name: "receiver", BaseURL: rc.srv.URL, Path: "/events", Timeout: 30 * time.Second}, nil)
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
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// The renewer chooses the rows whose publish runs, then the publish returns and the finisher
// marks the row sent, then the renewal statement runs and does not find the row held. That
// row was not lost: it was delivered once and finished by this process, so no lost-claim
// warning is logged. The order of the three steps is forced, not timed.
func TestRenewalRacingTheFinisherIsNoLostClaim(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	release := make(chan struct{})
	rc := newReceiver(t, func(*http.Request, int) int {
		<-release
		return http.StatusOK
	})
	id := insert(t, fx.store, store.OutboxInsertParams{Topic: "order.created", Payload: json.RawMessage(`{}`)})
	gate := newGatedRenewals(fx.store)
	logs := newRecordingHandler()
	// The lease only has to outlast the test's steps (the finishing write is fenced on it);
	// the renewer runs every third of it.
	p := loggingPoller(t, gate, outbox.Config{ClaimTimeout: 9 * time.Second}, rc, logs)
	done := make(chan outbox.Summary, 1)
	go func() { done <- p.RunOnce(context.Background()) }()

	// 1. The renewer took the row, whose publish is still running, and its statement waits.
	waitFor(t, 30*time.Second, "the publish", func() bool { return rc.count() == 1 })
	select {
	case <-gate.entered:
	case <-time.After(30 * time.Second):
		t.Fatal("no lease renewal started")
	}
	// 2. The publish returns and the finisher marks the row sent.
	close(release)
	waitFor(t, 30*time.Second, "the row to be sent", func() bool { return readRow(t, fx.pool, id).State == "sent" })
	// 3. The renewal runs and does not find the row held.
	close(gate.proceed)
	var sum outbox.Summary
	select {
	case sum = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the run did not end")
	}

	if sum.Sent != 1 || sum.ClaimsLost != 0 {
		t.Errorf("summary = %+v, want one row sent and no lost claim", sum)
	}
	if n := logs.count(lostClaimWarning, id); n != 0 {
		t.Errorf("%d lost-claim warnings for a row this process delivered and finished", n)
	}
	if rc.count() != 1 {
		t.Errorf("the row was delivered %d times", rc.count())
	}
}

// A claim that another owner took while the publish runs is lost: the renewal logs the
// warning and cancels the publish, and the finishing write counts the lost claim.
func TestRenewalReportsAClaimTakenByAnotherOwner(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	release := make(chan struct{})
	cancelled := make(chan struct{})
	rc := newReceiver(t, func(r *http.Request, _ int) int {
		select {
		case <-r.Context().Done():
			close(cancelled)
		case <-release:
		}
		return http.StatusOK
	})
	defer close(release)
	id := insert(t, fx.store, store.OutboxInsertParams{Topic: "order.created", Payload: json.RawMessage(`{}`)})
	logs := newRecordingHandler()
	p := loggingPoller(t, fx.store, outbox.Config{ClaimTimeout: 6 * time.Second}, rc, logs)
	done := make(chan outbox.Summary, 1)
	go func() { done <- p.RunOnce(context.Background()) }()

	waitFor(t, 30*time.Second, "the publish", func() bool { return rc.count() == 1 })
	// Another owner takes the claim, as a replica that reclaimed and claimed the row would.
	if _, err := fx.pool.Exec(context.Background(),
		`UPDATE outbox SET claim_token = gen_random_uuid() WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the lost-claim warning", func() bool { return logs.count(lostClaimWarning, id) == 1 })
	select {
	case <-cancelled:
	case <-time.After(30 * time.Second):
		t.Fatal("the publish of the lost row was not cancelled")
	}
	var sum outbox.Summary
	select {
	case sum = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the run did not end")
	}
	if sum.ClaimsLost != 1 || sum.Sent != 0 {
		t.Errorf("summary = %+v, want one lost claim", sum)
	}
	if st := readRow(t, fx.pool, id).State; st != "processing" {
		t.Errorf("the other owner's row is %s, want it left processing", st)
	}
}
