package outbox_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alternayte/queuebox/shared/connect/webhook"
	"github.com/alternayte/queuebox/shared/outbox"
	"github.com/alternayte/queuebox/shared/redact"
	"github.com/alternayte/queuebox/shared/route"
	"github.com/alternayte/queuebox/shared/store"
)

// lockedBuffer is a bytes.Buffer that the poller's goroutines may write concurrently.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) lines() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Split(strings.TrimSpace(b.buf.String()), "\n")
}

// TestEveryLogLineAboutARowNamesIt fails a row with an X-Correlation-Id twice against a real
// receiver whose error bodies hold a password, then delivers it: every log line that mentions
// the row carries message_id, destination, topic, attempt and correlation_id; the debug level
// adds a line for each claim and each delivery; and the password reaches no line.
func TestEveryLogLineAboutARowNamesIt(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	const secret = "hunter2-do-not-log"
	var mu sync.Mutex
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		if n <= 2 {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"error":"database down","password":"` + secret + `"}`))
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)

	out := &lockedBuffer{}
	log := slog.New(redact.Handler(slog.NewJSONHandler(out, &slog.HandlerOptions{Level: slog.LevelDebug})))
	pub, err := webhook.New(webhook.Config{Name: "receiver", BaseURL: srv.URL, Path: "/events", Timeout: 5 * time.Second, MaxErrorBodyBytes: 2048}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pub.Close() })
	p, err := outbox.New(outbox.Options{
		Store:        fx.store,
		Config:       outbox.Config{PollInterval: 10 * time.Millisecond, RetryBaseDelay: 10 * time.Millisecond},
		Routes:       route.NewTable([]route.Route{{Pattern: route.MustCompile("order.**"), Destination: "receiver"}}),
		Destinations: []outbox.Destination{{Name: "receiver", Publisher: pub}},
		Logger:       log,
	})
	if err != nil {
		t.Fatal(err)
	}
	const corr = "corr-7f3a9c"
	id := insert(t, fx.store, store.OutboxInsertParams{
		Topic: "order.paid", Key: "order-42", Payload: json.RawMessage(`{"amount":10}`),
		Headers: json.RawMessage(`{"x-correlation-id":"` + corr + `","X-Tenant":"acme"}`), MaxAttempts: 5,
	})
	runPoller(t, p)
	waitFor(t, 20*time.Second, "the row to be sent after two failures", func() bool { return readRow(t, fx.pool, id).State == "sent" })

	lines := out.lines()
	about := 0
	msgs := map[string]int{}
	attempts := map[float64]bool{}
	for _, line := range lines {
		if strings.Contains(line, secret) {
			t.Errorf("a log line holds the receiver's password: %s", line)
		}
		if !strings.Contains(line, id) && !strings.Contains(line, corr) {
			continue
		}
		about++
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line is not JSON: %s", line)
		}
		if rec["message_id"] != id || rec["correlation_id"] != corr || rec["destination"] != "receiver" ||
			rec["topic"] != "order.paid" || rec["attempt"] == nil {
			t.Errorf("a line about the row does not name it (message_id, destination, topic, attempt, correlation_id): %s", line)
			continue
		}
		msgs[rec["msg"].(string)]++
		attempts[rec["attempt"].(float64)] = true
	}
	if about == 0 {
		t.Fatalf("no log line names the row; the log:\n%s", strings.Join(lines, "\n"))
	}
	for msg, least := range map[string]int{
		"outbox row claimed":                     3,
		"outbox delivery failed":                 2,
		"outbox delivery failed; retrying later": 2,
		"outbox delivery succeeded":              1,
	} {
		if msgs[msg] < least {
			t.Errorf("%d lines %q, want at least %d; the lines about the row: %v", msgs[msg], msg, least, msgs)
		}
	}
	for _, a := range []float64{0, 1, 2} {
		if !attempts[a] {
			t.Errorf("no line names attempt %v; attempts seen: %v", a, attempts)
		}
	}
}

func TestCorrelationIDReadsTheHeaderInAnyLetterCase(t *testing.T) {
	for headers, want := range map[string]string{
		`{"X-Correlation-Id":"a1"}`: "a1",
		`{"x-CORRELATION-id":"b2"}`: "b2",
		`{"X-Correlation-Id":42}`:   "42",
		`{"X-Tenant":"acme"}`:       "",
		`[1,2]`:                     "",
		`not json x-correlation-id`: "",
		``:                          "",
	} {
		if got := outbox.CorrelationID(json.RawMessage(headers)); got != want {
			t.Errorf("CorrelationID(%s) = %q, want %q", headers, got, want)
		}
	}
}
