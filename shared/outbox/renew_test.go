package outbox_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/alternayte/queuebox/shared/outbox"
	"github.com/alternayte/queuebox/shared/route"
	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/webhook"
)

// renewAfterFinish is the real store, except for the first lease renewal that holds row: it
// lets the row's publish return and waits until the poller has marked the row sent before it
// runs the real statement. That is a renewal whose statement reaches the database after the
// row's publish ended and the row was finished, which a busy machine produces on its own.
type renewAfterFinish struct {
	store.OutboxStore
	pool     *pgxpool.Pool
	row      string
	once     sync.Once
	renewing chan struct{} // closed when the renewal that holds row begins
}

func (s *renewAfterFinish) OutboxRenew(ctx context.Context, p store.OutboxRenewParams) ([]store.Claim, error) {
	first := false
	for _, c := range p.Claims {
		if c.ID == s.row {
			s.once.Do(func() { first = true })
		}
	}
	if !first {
		return s.OutboxStore.OutboxRenew(ctx, p)
	}
	close(s.renewing)
	for {
		var state string
		if err := s.pool.QueryRow(ctx, `SELECT state FROM outbox WHERE id = $1`, s.row).Scan(&state); err != nil {
			return nil, err
		}
		if state == "sent" {
			break
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
	return s.OutboxStore.OutboxRenew(ctx, p)
}

// lockedBuffer is a log sink that the poller's goroutines can share.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// A renewal that misses a row because the row's publish returned and the row was marked sent
// in the meantime is not a lost claim: the poller must not log one (the chaos suite saw such
// warnings at load 20-30 with no other owner and no duplicate).
func TestRenewalOfAFinishedRowIsNotALostClaim(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	id := insert(t, fx.store, store.OutboxInsertParams{Topic: "order.renewed", Key: "k", Payload: json.RawMessage(`{}`)})
	st := &renewAfterFinish{OutboxStore: fx.store, pool: fx.pool, row: id, renewing: make(chan struct{})}
	rc := newReceiver(t, func(*http.Request, int) int {
		// The publish runs until a renewal has taken the row into its statement.
		select {
		case <-st.renewing:
		case <-time.After(10 * time.Second):
		}
		return http.StatusOK
	})
	pub, err := webhook.New(webhook.Config{Name: "receiver", BaseURL: rc.srv.URL, Path: "/events", Timeout: 15 * time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pub.Close() })
	logs := &lockedBuffer{}
	p, err := outbox.New(outbox.Options{
		Store:        st,
		Config:       outbox.Config{ClaimTimeout: 3 * time.Second, PollInterval: 10 * time.Millisecond},
		Routes:       route.NewTable([]route.Route{{Pattern: route.MustCompile("order.**"), Destination: "receiver"}}),
		Destinations: []outbox.Destination{{Name: "receiver", Publisher: pub}},
		Logger:       slog.New(slog.NewTextHandler(logs, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	// RunOnce returns after the row is finished and the renewer has stopped.
	sum := p.RunOnce(context.Background())
	select {
	case <-st.renewing:
	default:
		t.Fatal("no renewal held the row while its publish ran")
	}
	if s := readRow(t, fx.pool, id); s.State != "sent" || sum.Sent != 1 || sum.ClaimsLost != 0 {
		t.Fatalf("row %+v, summary %+v: want sent once, no lost claim", s, sum)
	}
	if strings.Contains(logs.String(), "lost the claim") {
		t.Errorf("the poller logged a lost claim for a row it had finished:\n%s", logs.String())
	}
	if rc.count() != 1 {
		t.Errorf("deliveries = %d, want 1", rc.count())
	}
}
