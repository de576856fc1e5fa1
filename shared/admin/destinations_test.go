package admin_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/alternayte/queuebox/shared/admin"
	"github.com/alternayte/queuebox/shared/store"
)

// do sends a request with no body and returns the status and the body.
func (e *env) do(t *testing.T, method, path string, auth bool) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, e.server.URL+path, nil)
	if auth {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s %s: Content-Type = %q", method, path, ct)
	}
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func decodeStatus(t *testing.T, body string) admin.DestinationStatus {
	t.Helper()
	var s admin.DestinationStatus
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	return s
}

func (e *env) list(t *testing.T) map[string]admin.DestinationStatus {
	t.Helper()
	code, body := e.do(t, "GET", "/admin/destinations", true)
	if code != 200 {
		t.Fatalf("GET /admin/destinations: status %d: %s", code, body)
	}
	var got struct{ Destinations []admin.DestinationStatus }
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	out := map[string]admin.DestinationStatus{}
	var names []string
	for _, d := range got.Destinations {
		out[d.Name] = d
		names = append(names, d.Name)
	}
	if strings.Join(names, ",") != "archive,billing" {
		t.Fatalf("GET /admin/destinations lists %v, want every configured destination by name: %s", names, body)
	}
	return out
}

func TestDestinationsWithoutAStateRowAreClosedAndNotPaused(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	code, body := e.do(t, "GET", "/admin/destinations", true)
	if code != 200 {
		t.Fatalf("status %d: %s", code, body)
	}
	want := `{"destinations":[` +
		`{"name":"archive","paused":false,"pausedAt":null,"circuit":"closed","openRemainingMs":0,"failures":0},` +
		`{"name":"billing","paused":false,"pausedAt":null,"circuit":"closed","openRemainingMs":0,"failures":0}]}`
	if body != want {
		t.Errorf("body = %s\nwant   %s", body, want)
	}
}

func TestPauseAndResumeAreIdempotentAndAnswerTheNewState(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	ctx := context.Background()

	code, body := e.do(t, "POST", "/admin/destinations/billing/pause", true)
	if code != 200 {
		t.Fatalf("pause: status %d: %s", code, body)
	}
	first := decodeStatus(t, body)
	if first.Name != "billing" || !first.Paused || first.PausedAt == nil || first.Circuit != "closed" {
		t.Fatalf("pause answered %s", body)
	}
	code, body = e.do(t, "POST", "/admin/destinations/billing/pause", true)
	again := decodeStatus(t, body)
	if code != 200 || !again.Paused || again.PausedAt == nil || !again.PausedAt.Equal(*first.PausedAt) {
		t.Fatalf("a second pause: status %d, %s; want paused with the first pause's pausedAt %v", code, body, first.PausedAt)
	}
	rows, err := e.store.DestinationStates(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].Destination != "billing" || !rows[0].Paused {
		t.Fatalf("DestinationStates = %+v, want billing paused", rows)
	}
	if l := e.list(t); !l["billing"].Paused || l["archive"].Paused {
		t.Errorf("the list after the pause: %+v", l)
	}

	for range 2 {
		code, body = e.do(t, "POST", "/admin/destinations/billing/resume", true)
		if s := decodeStatus(t, body); code != 200 || s.Paused || s.PausedAt != nil || s.Name != "billing" {
			t.Fatalf("resume: status %d, %s", code, body)
		}
	}
	// Resuming a destination that was never paused creates its row, resumed.
	code, body = e.do(t, "POST", "/admin/destinations/archive/resume", true)
	if s := decodeStatus(t, body); code != 200 || s.Paused {
		t.Fatalf("resume of archive: status %d, %s", code, body)
	}
	rows, err = e.store.DestinationStates(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.Paused {
			t.Errorf("%s is still paused after the resume", r.Destination)
		}
	}
}

func TestTheListShowsTheCircuitState(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	ctx := context.Background()
	// Two failures of a threshold of three: still closed, counted.
	for range 2 {
		if _, err := e.store.DestinationRecordFailure(ctx, store.BreakerFailureParams{
			Destination: "archive", Threshold: 3, Window: time.Hour, CoolDown: time.Hour,
		}); err != nil {
			t.Fatal(err)
		}
	}
	// A threshold of one opens at once, for an hour.
	if _, err := e.store.DestinationRecordFailure(ctx, store.BreakerFailureParams{
		Destination: "billing", Threshold: 1, Window: time.Hour, CoolDown: time.Hour,
	}); err != nil {
		t.Fatal(err)
	}
	l := e.list(t)
	if a := l["archive"]; a.Circuit != "closed" || a.Failures != 2 || a.OpenRemainingMs != 0 {
		t.Errorf("archive = %+v, want closed with 2 failures", a)
	}
	if b := l["billing"]; b.Circuit != "open" || b.OpenRemainingMs <= 3_500_000 || b.OpenRemainingMs > 3_600_000 || b.Paused {
		t.Errorf("billing = %+v, want open for about an hour", b)
	}
	// A cool-down of zero has passed at once: half-open.
	if _, err := e.store.DestinationRecordFailure(ctx, store.BreakerFailureParams{
		Destination: "archive", Threshold: 1, Window: time.Hour, CoolDown: 0,
	}); err != nil {
		t.Fatal(err)
	}
	if a := e.list(t)["archive"]; a.Circuit != "half-open" || a.OpenRemainingMs != 0 {
		t.Errorf("archive = %+v, want half-open", a)
	}
}

func TestAnUnknownDestinationIs404(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	for _, action := range []string{"pause", "resume"} {
		code, body := e.do(t, "POST", "/admin/destinations/nowhere/"+action, true)
		want := `{"error":"Unknown destination \"nowhere\": it is not configured under destinations"}`
		if code != 404 || body != want {
			t.Errorf("%s: status %d, %s; want 404 %s", action, code, body, want)
		}
	}
	rows, err := e.store.DestinationStates(context.Background())
	if err != nil || len(rows) != 0 {
		t.Errorf("an unknown name wrote a row: %+v, %v", rows, err)
	}
}

func TestTheDestinationRoutesNeedTheAdminCredentials(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	for _, r := range []struct{ method, path string }{
		{"GET", "/admin/destinations"},
		{"POST", "/admin/destinations/billing/pause"},
		{"POST", "/admin/destinations/billing/resume"},
		{"POST", "/admin/destinations/nowhere/pause"},
	} {
		code, body := e.do(t, r.method, r.path, false)
		if code != 401 || !strings.HasPrefix(body, `{"error":`) {
			t.Errorf("%s %s without credentials: status %d, %s", r.method, r.path, code, body)
		}
	}
	rows, err := e.store.DestinationStates(context.Background())
	if err != nil || len(rows) != 0 {
		t.Errorf("a request without credentials wrote: %+v, %v", rows, err)
	}
}

func TestAMissingStateTableIs503(t *testing.T) {
	t.Parallel()
	e := newEnv(t, false)
	if _, err := e.pool.Exec(context.Background(), "DROP TABLE "+store.DestinationStateTable); err != nil {
		t.Fatal(err)
	}
	want := `{"error":"The destination state table queuebox_destination_state does not exist: apply QueueBox's own migration V1__add_destination_state.sql (queuebox migrate), then retry"}`
	for _, r := range []struct{ method, path string }{
		{"GET", "/admin/destinations"},
		{"POST", "/admin/destinations/billing/pause"},
		{"POST", "/admin/destinations/billing/resume"},
	} {
		code, body := e.do(t, r.method, r.path, true)
		if code != 503 || body != want {
			t.Errorf("%s %s: status %d, %s; want 503 %s", r.method, r.path, code, body, want)
		}
	}
	// The unknown name is checked first: it needs no table.
	if code, _ := e.do(t, "POST", "/admin/destinations/nowhere/pause", true); code != 404 {
		t.Errorf("an unknown name without the table: status %d, want 404", code)
	}
}

// replayOnly is a store of the replay route only: it keeps no destination state.
type replayOnly struct{}

func (replayOnly) OutboxReplay(context.Context, store.OutboxReplayParams) (int64, error) {
	return 0, nil
}
func (replayOnly) OutboxFinishedTopics(context.Context) ([]string, error) { return nil, nil }

func TestWithoutAStateStoreTheDestinationRoutesAre503(t *testing.T) {
	t.Parallel()
	h, err := admin.New(admin.Options{Engine: engine, Store: replayOnly{}, Destinations: []string{"billing"}})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	h.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	e := &env{server: srv}
	for _, r := range []struct{ method, path string }{
		{"GET", "/admin/destinations"},
		{"POST", "/admin/destinations/billing/pause"},
	} {
		code, body := e.do(t, r.method, r.path, false)
		want := `{"error":"The destination routes are not available: this store keeps no destination state"}`
		if code != 503 || body != want {
			t.Errorf("%s %s: status %d, %s; want 503 %s", r.method, r.path, code, body, want)
		}
	}
}
