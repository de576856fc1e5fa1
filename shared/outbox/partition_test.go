package outbox_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/alternayte/queuebox/shared/connect/connecttest"
	"github.com/alternayte/queuebox/shared/connect/webhook"
	"github.com/alternayte/queuebox/shared/outbox"
	"github.com/alternayte/queuebox/shared/route"
	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/store/postgres"
	"github.com/alternayte/queuebox/shared/store/postgres/dbtest"
)

// acceptance is one delivery that the partition receiver accepted (answered 2xx).
type acceptance struct {
	replica string // a or b: the path the replica posts to
	key     string
	n       int
}

// partitionReceiver is the destination of the partition tests: it accepts replica B's
// deliveries at once; it holds replica A's first delivery until the test releases it or A
// closes the connection, and accepts A's other deliveries at once. It records every accepted
// delivery, in the order of acceptance, before it answers.
type partitionReceiver struct {
	srv     *httptest.Server
	release chan struct{} // closed by the test: the held delivery may be answered
	held    chan struct{} // closed when A's first delivery arrived
	heldEnd chan struct{} // closed when the held delivery was answered or abandoned by A

	mu        sync.Mutex
	accepted  []acceptance
	requestsA []acceptance // every delivery A sent, accepted or not
	heldKey   string
	heldGone  bool // A closed the held delivery's connection before the release
}

func newPartitionReceiver(t *testing.T) *partitionReceiver {
	t.Helper()
	rc := &partitionReceiver{release: make(chan struct{}), held: make(chan struct{}), heldEnd: make(chan struct{})}
	first := true
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var p struct {
			K string `json:"k"`
			N int    `json:"n"`
		}
		if err := json.Unmarshal(body, &p); err != nil {
			http.Error(w, "not a test payload", http.StatusBadRequest)
			return
		}
		a := acceptance{replica: r.URL.Path[1:], key: p.K, n: p.N}
		rc.mu.Lock()
		hold := false
		if a.replica == "a" {
			rc.requestsA = append(rc.requestsA, a)
			hold, first = first, false
			if hold {
				rc.heldKey = a.key
			}
		}
		rc.mu.Unlock()
		if hold {
			close(rc.held)
			defer close(rc.heldEnd)
			select {
			case <-r.Context().Done():
			case <-rc.release:
			}
			if r.Context().Err() != nil {
				// The sender closed the connection: the delivery is not accepted.
				rc.mu.Lock()
				rc.heldGone = true
				rc.mu.Unlock()
				return
			}
		}
		rc.mu.Lock()
		rc.accepted = append(rc.accepted, a)
		rc.mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

// acceptedN is how many deliveries of key with number n were accepted.
func (rc *partitionReceiver) acceptedN(key string, n int) int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	c := 0
	for _, a := range rc.accepted {
		if a.key == key && a.n == n {
			c++
		}
	}
	return c
}

// orderViolations walks every accepted delivery, duplicates included, in the order of
// acceptance: a delivery of a key's row n accepted after one of a later row of the key breaks
// the key's order.
func orderViolations(accepted []acceptance) []string {
	var out []string
	highest := map[string]acceptance{}
	for i, a := range accepted {
		if h, ok := highest[a.key]; ok && a.n < h.n {
			out = append(out, fmt.Sprintf("acceptance %d: key %s row %d (replica %s) after row %d (replica %s)", i, a.key, a.n, a.replica, h.n, h.replica))
			continue
		}
		highest[a.key] = a
	}
	return out
}

// finishRecorder records the fenced writes that spend an attempt or end a row: a retry and a
// dead letter.
type finishRecorder struct {
	store.OutboxStore
	mu     sync.Mutex
	writes []string
}

func (f *finishRecorder) OutboxRetry(ctx context.Context, retries []store.OutboxRetryParams) ([]string, error) {
	f.mu.Lock()
	for _, r := range retries {
		f.writes = append(f.writes, "retry of "+r.ID+": "+r.LastError)
	}
	f.mu.Unlock()
	return f.OutboxStore.OutboxRetry(ctx, retries)
}

func (f *finishRecorder) OutboxMarkDead(ctx context.Context, deads []store.OutboxDeadParams) ([]string, error) {
	f.mu.Lock()
	for _, d := range deads {
		f.writes = append(f.writes, "dead letter of "+d.ID+": "+d.LastError)
	}
	f.mu.Unlock()
	return f.OutboxStore.OutboxMarkDead(ctx, deads)
}

func (f *finishRecorder) recorded() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.writes...)
}

// proxiedStore opens a store on the test database through a proxy that the test can freeze.
func proxiedStore(t *testing.T, dbURL string) (*postgres.Store, *connecttest.Proxy) {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	px := connecttest.Listen(t, u.Host)
	u.Host = px.Addr()
	q := u.Query()
	q.Set("connect_timeout", "5")
	u.RawQuery = q.Encode()
	cfg, err := pgxpool.ParseConfig(u.String())
	if err != nil {
		t.Fatal(err)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	// A test that fails while the proxy is frozen must not leave the pool's close waiting for
	// a statement that the proxy holds.
	t.Cleanup(px.Thaw)
	st, err := postgres.New(pool, store.DefaultNames())
	if err != nil {
		t.Fatal(err)
	}
	return st, px
}

// partitionPoller is a poller that posts to path of the receiver.
func partitionPoller(t *testing.T, st store.OutboxStore, cfg outbox.Config, base, path string) *outbox.Poller {
	t.Helper()
	pub, err := webhook.New(webhook.Config{Name: "receiver", BaseURL: base, Path: path, Timeout: time.Minute}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pub.Close() })
	p, err := outbox.New(outbox.Options{
		Store:        st,
		Config:       cfg,
		Routes:       route.NewTable([]route.Route{{Pattern: route.MustCompile("order.**"), Destination: "receiver"}}),
		Destinations: []outbox.Destination{{Name: "receiver", Publisher: pub}},
		Logger:       testLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// runUntil runs a poller until the returned stop is called; stop waits for the run's end and
// returns its summary.
func runUntil(t *testing.T, p *outbox.Poller) func() outbox.Summary {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan outbox.Summary, 1)
	go func() { done <- p.Run(ctx, outbox.RunOptions{}) }()
	var once sync.Once
	var sum outbox.Summary
	stop := func() outbox.Summary {
		once.Do(func() {
			cancel()
			select {
			case sum = <-done:
			case <-time.After(time.Minute):
				t.Error("the run did not end within a minute of its stop")
			}
		})
		return sum
	}
	t.Cleanup(func() { stop() })
	return stop
}

// waitClosed waits for ch to close, up to d.
func waitClosed(t *testing.T, ch <-chan struct{}, d time.Duration, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(d):
		t.Fatalf("timed out after %s waiting for %s", d, what)
	}
}

// Replica A claims a row of each of two keys and publishes one of them to a receiver that
// answers it late; then a partition cuts A off from PostgreSQL (its connections stay open and
// pass nothing), so its renewals fail. Replica B reclaims both rows after A's lease expired and
// delivers both keys' rows 1 and 2. A must stop its publish when a renewal fails (its statement
// times out), or at the latest at its lease's local deadline (the receiver then sees the
// connection close and does not accept it), must never start the publish of the row that it
// claimed ahead (its single publisher was busy), and must spend no attempt on either. Every accepted delivery, duplicates included, keeps each key's order.
func TestAReplicaCutOffFromTheDatabaseStopsPublishingAtItsLeaseDeadline(t *testing.T) {
	t.Parallel()
	pool, dbURL := dbtest.Migrated(t)
	direct, err := postgres.New(pool, store.DefaultNames())
	if err != nil {
		t.Fatal(err)
	}
	proxied, px := proxiedStore(t, dbURL)
	recA := &finishRecorder{OutboxStore: proxied}
	rc := newPartitionReceiver(t)

	ids := map[string]string{}
	for _, r := range []struct {
		key string
		n   int
	}{{"k1", 1}, {"k2", 1}, {"k1", 2}, {"k2", 2}} {
		ids[fmt.Sprintf("%s/%d", r.key, r.n)] = insert(t, direct, store.OutboxInsertParams{
			Topic: "order.updated", Key: r.key, Payload: json.RawMessage(fmt.Sprintf(`{"k":%q,"n":%d}`, r.key, r.n)),
		})
	}

	// A short lease keeps the test quick; one publisher makes A hold the second claimed row
	// in its queue while the first is published.
	cfg := outbox.Config{ClaimTimeout: 3 * time.Second, PollInterval: 50 * time.Millisecond, BatchSize: 10}
	cfgA := cfg
	cfgA.Concurrency = 1
	stopA := runUntil(t, partitionPoller(t, recA, cfgA, rc.srv.URL, "/a"))
	waitClosed(t, rc.held, time.Minute, "replica A's first delivery")
	px.Freeze()

	stopB := runUntil(t, partitionPoller(t, direct, cfg, rc.srv.URL, "/b"))
	waitFor(t, time.Minute, "replica B to deliver row 2 of both keys", func() bool {
		return rc.acceptedN("k1", 2) > 0 && rc.acceptedN("k2", 2) > 0
	})
	// The receiver now answers A's held delivery, if A still waits for it.
	close(rc.release)
	waitClosed(t, rc.heldEnd, time.Minute, "the end of A's held delivery")
	px.Thaw()
	stopB()
	sumA := stopA()

	rc.mu.Lock()
	accepted := append([]acceptance(nil), rc.accepted...)
	requestsA := append([]acceptance(nil), rc.requestsA...)
	heldKey, heldGone := rc.heldKey, rc.heldGone
	rc.mu.Unlock()
	for _, v := range orderViolations(accepted) {
		t.Errorf("order broken: %s (accepted: %v)", v, accepted)
	}
	if !heldGone {
		t.Errorf("A did not close its delivery of %s row 1 when its renewal failed or at its lease's local deadline", heldKey)
	}
	for _, r := range requestsA[1:] {
		t.Errorf("A started a publish (%s row %d) after its claim was lost", r.key, r.n)
	}
	for name, id := range ids {
		if s := readRow(t, pool, id); s.State != "sent" || s.Attempt != 0 || s.LastError != "" {
			t.Errorf("row %s: %+v, want sent at attempt 0 with no last_error", name, s)
		}
	}
	for _, w := range recA.recorded() {
		t.Errorf("A spent an attempt on a publish that its lease stopped: %s", w)
	}
	// A renewal that timed out lost both claims, unless the local deadline came first.
	if sumA.LeaseExpired+sumA.ClaimsLost != 2 || sumA.Sent != 0 || sumA.Retried != 0 || sumA.Dead != 0 {
		t.Errorf("replica A's summary = %+v, want 2 rows stopped by a failed renewal or the lease deadline, and nothing else finished", sumA)
	}
}
