package outbox_test

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/alternayte/queuebox/shared/connect/webhook"
	"github.com/alternayte/queuebox/shared/forwarded"
	"github.com/alternayte/queuebox/shared/outbox"
	"github.com/alternayte/queuebox/shared/route"
	"github.com/alternayte/queuebox/shared/store"
)

// headerMetrics counts the outbox.HeaderMetrics calls besides the spec/28 measurements.
type headerMetrics struct{ *countingMetrics }

func (m headerMetrics) HeaderNotCarried(d, action string) { m.inc("headers/"+d+"/"+action, 1) }

// jsonLines returns the JSON log lines of b whose msg starts with prefix.
func jsonLines(b *lockedBuffer, prefix string) []map[string]any {
	var out []map[string]any
	for _, line := range b.lines() {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil {
			if msg, _ := m["msg"].(string); strings.HasPrefix(msg, prefix) {
				out = append(out, m)
			}
		}
	}
	return out
}

// TestHeadersThatCannotTravelOverHTTP: on a real receiver and PostgreSQL, three relayed rows
// that carry a header name that is no HTTP token and a value with a control character are
// sent at their first attempt without the first and with the second in the base64: form; the
// process warns once per header and logs the repeats at debug level, and counts each header.
// An application row with the same headers is dead at its first attempt, nothing is sent for
// it, and its last_error names the header and the destination, never the value.
func TestHeadersThatCannotTravelOverHTTP(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	rc := newReceiver(t, nil)
	pub, err := webhook.New(webhook.Config{Name: "receiver", BaseURL: rc.srv.URL, Path: "/events", Timeout: 5 * time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pub.Close() })
	logs := &lockedBuffer{}
	m := headerMetrics{newCountingMetrics()}
	p, err := outbox.New(outbox.Options{
		Store:        f.store,
		Routes:       route.NewTable([]route.Route{{Pattern: route.MustCompile("order.**"), Destination: "receiver"}}),
		Destinations: []outbox.Destination{{Name: "receiver", Publisher: pub, Headers: forwarded.HTTP}},
		Metrics:      m,
		Logger:       slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		t.Fatal(err)
	}
	var relayed []string
	for range 3 {
		relayed = append(relayed, insert(t, f.store, store.OutboxInsertParams{Topic: "order.relayed", Payload: []byte(`{}`),
			Headers: []byte(`{"x-inbox-id":"i-1","x-source":"s","bad name":"v","x-ctl":"secret\u0001value","x-ok":"fine"}`)}))
	}
	app := insert(t, f.store, store.OutboxInsertParams{Topic: "order.app", Payload: []byte(`{}`),
		Headers: []byte(`{"bad name":"v","x-ctl":"secret\u0001value"}`)})
	runPoller(t, p)

	waitFor(t, 30*time.Second, "every row sent or dead", func() bool {
		for _, id := range append(relayed, app) {
			if s := readRow(t, f.pool, id).State; s != "sent" && s != "dead" {
				return false
			}
		}
		return true
	})
	for _, id := range relayed {
		if s := readRow(t, f.pool, id); s.State != "sent" || s.Attempt != 0 {
			t.Errorf("relayed row %s = %+v, want sent at attempt 0", id, s)
		}
	}
	reqs := rc.requests()
	if len(reqs) != 3 {
		t.Fatalf("the receiver got %d requests, want the 3 relayed rows", len(reqs))
	}
	for _, r := range reqs {
		if got := r.Header.Get("X-Ctl"); got != "base64:c2VjcmV0AXZhbHVl" {
			t.Errorf("X-Ctl = %q, want base64:c2VjcmV0AXZhbHVl", got)
		}
		if got := r.Header.Get("X-Ok"); got != "fine" {
			t.Errorf("X-Ok = %q, want fine", got)
		}
	}
	s := readRow(t, f.pool, app)
	if s.State != "dead" || s.Attempt != 0 {
		t.Errorf("application row = %+v, want dead at attempt 0", s)
	}
	if want := `row header "bad name" cannot travel to destination receiver (http): its name is not a header name`; !strings.Contains(s.LastError, want) ||
		!strings.Contains(s.LastError, "1 more") || strings.Contains(s.LastError, "secret") {
		t.Errorf("last_error = %q, want it to hold %q and the count of the others, and no value", s.LastError, want)
	}

	warns, debugs := 0, 0
	for _, l := range jsonLines(logs, "a relayed header cannot travel") {
		switch l["level"] {
		case "WARN":
			warns++
		case "DEBUG":
			debugs++
		}
		if strings.Contains(l["msg"].(string)+l["header"].(string), "secret") {
			t.Errorf("a log line holds a header value: %v", l)
		}
	}
	if warns != 2 || debugs != 4 {
		t.Errorf("log lines: %d at warn and %d at debug, want one warning per header (2) and 4 debug lines", warns, debugs)
	}
	for k, want := range map[string]int{"headers/receiver/dropped": 3, "headers/receiver/encoded": 3, "headers/receiver/refused": 2} {
		if got := m.get(k); got != want {
			t.Errorf("%s = %d, want %d", k, got, want)
		}
	}
}
