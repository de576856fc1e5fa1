package health_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/alternayte/queuebox/shared/health"
	"github.com/alternayte/queuebox/shared/outbox"
	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/store/postgres"
)

// syncBuffer is a log destination that the test reads while the handler writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// closedPort returns a loopback port on which nothing listens.
func closedPort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	return port
}

// While the database is unreachable, the unauthenticated readiness body says which components
// are down and why in general terms, but not the database error, which names the user, the
// host and the database; the log has that error.
func TestReadyBodyKeepsTheDatabaseErrorInTheLog(t *testing.T) {
	t.Parallel()
	const user, database = "qb_health_user", "qb_health_db"
	hostPort := "127.0.0.1:" + strconv.Itoa(closedPort(t))
	pool, err := pgxpool.New(context.Background(),
		"postgres://"+user+":hunter2@"+hostPort+"/"+database+"?connect_timeout=2")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	st, err := postgres.New(pool, store.DefaultNames())
	if err != nil {
		t.Fatal(err)
	}

	// The outbox poller over the unreachable database: its claims fail.
	poller, err := outbox.New(outbox.Options{Store: st, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		poller.Run(ctx, outbox.RunOptions{})
	}()
	t.Cleanup(func() { cancel(); <-done })
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := poller.Check(context.Background())
		if err != nil && strings.Contains(err.Error(), user) {
			break // the last claim failed with the database's error
		}
		if time.Now().After(deadline) {
			t.Fatalf("the poller's check never reported the failed claim: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}

	var logs syncBuffer
	mux := http.NewServeMux()
	health.New(
		health.Check{Name: "database", Decides: true, Probe: st.Ping},
		health.Check{Name: "outbox-poller", Decides: true, Probe: poller.Check},
	).WithLogger(slog.New(slog.NewJSONHandler(&logs, nil))).Register(mux)

	for _, path := range []string{"/health/ready", "/health"} {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		body := rec.Body.String()
		if rec.Code != http.StatusServiceUnavailable {
			t.Errorf("%s = %d, want 503", path, rec.Code)
		}
		var rep health.Report
		if err := json.Unmarshal(rec.Body.Bytes(), &rep); err != nil {
			t.Fatalf("%s: body %q: %v", path, body, err)
		}
		want := map[string]health.Component{
			"database":      {Status: "down", Error: health.GenericReason},
			"outbox-poller": {Status: "down", Error: "the last cycle failed"},
		}
		if rep.Status != "unhealthy" || len(rep.Components) != len(want) {
			t.Errorf("%s body = %s", path, body)
		}
		for name, c := range want {
			if rep.Components[name] != c {
				t.Errorf("%s: component %s = %+v, want %+v", path, name, rep.Components[name], c)
			}
		}
		for _, secret := range []string{user, database, hostPort, "127.0.0.1", "hunter2"} {
			if strings.Contains(body, secret) {
				t.Errorf("%s body names %q: %s", path, secret, body)
			}
		}
	}

	log := logs.String()
	for _, detail := range []string{user, database, hostPort, `"component":"database"`, `"component":"outbox-poller"`} {
		if !strings.Contains(log, detail) {
			t.Errorf("the log lacks %q: %s", detail, log)
		}
	}
	if strings.Contains(log, "hunter2") {
		t.Errorf("the log holds the password: %s", log)
	}
}
