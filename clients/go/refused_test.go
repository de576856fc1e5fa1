package queuebox_test

import (
	"context"
	"database/sql"
	"errors"
	"net"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	queuebox "github.com/alternayte/queuebox/clients/go"
	"github.com/alternayte/queuebox/clients/go/internal/pgtest"
)

// TestRunEndsWhenTheDatabaseRefusesTheWorker: a login that PostgreSQL refuses (no such role:
// SQLSTATE 28000) and a database that does not exist (3D000) cannot recover by waiting: Run
// returns that error. A server that does not answer can come back: Run keeps claiming, logs
// each failure, and returns nil when stopped.
func TestRunEndsWhenTheDatabaseRefusesTheWorker(t *testing.T) {
	t.Parallel()
	base, err := url.Parse(pgtest.ServerURL())
	if err != nil {
		t.Fatal(err)
	}
	admin, err := sql.Open("pgx", base.String())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if err := admin.Ping(); err != nil {
		t.Fatalf("PostgreSQL does not answer (%v); %s", err, pgtest.StartHint)
	}
	wrongUser := *base
	wrongUser.User = url.User("qb_no_such_role_5c1e")
	wrongDB := *base
	wrongDB.Path = "/qb_no_such_database_5c1e"

	for _, tc := range []struct {
		name, url, state string
	}{
		{"refused login", wrongUser.String(), "28000"},
		{"unknown database", wrongDB.String(), "3D000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			db, err := sql.Open("pgx", tc.url)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			var logged atomic.Int32
			w, err := queuebox.NewInboxWorker(db, queuebox.Options{Source: "orders", PollInterval: 20 * time.Millisecond,
				Logger: funcLogger(func(level, msg string, _ map[string]any) {
					if level == "ERROR" && strings.Contains(msg, "refused") {
						logged.Add(1)
					}
				})})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() { done <- w.Run(ctx, func(context.Context, queuebox.Message, *sql.Tx) error { return nil }) }()
			select {
			case err = <-done:
			case <-time.After(time.Minute):
				cancel()
				<-done
				t.Fatal("Run did not return within a minute; it retries an error that cannot recover")
			}
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || pgErr.SQLState() != tc.state {
				t.Fatalf("Run = %v, want an error with SQLSTATE %s", err, tc.state)
			}
			if logged.Load() != 1 {
				t.Errorf("%d error lines name the refusal, want 1", logged.Load())
			}
		})
	}

	t.Run("server away", func(t *testing.T) {
		t.Parallel()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		away := ln.Addr().String()
		_ = ln.Close() // nothing listens there now: the connection is refused
		u := *base
		u.Host = away
		db, err := sql.Open("pgx", u.String())
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		var failures atomic.Int32
		w, err := queuebox.NewInboxWorker(db, queuebox.Options{Source: "orders", PollInterval: 20 * time.Millisecond,
			Logger: funcLogger(func(level, msg string, _ map[string]any) {
				if level == "ERROR" && strings.Contains(msg, "claiming") {
					failures.Add(1)
				}
			})})
		if err != nil {
			t.Fatal(err)
		}
		stop := running(t, w, func(context.Context, queuebox.Message, *sql.Tx) error { return nil })
		waitUntil(t, "two failed claims are logged", 30*time.Second, func() bool { return failures.Load() >= 2 })
		if err := stop(); err != nil {
			t.Errorf("Run after a stop = %v, want nil: a server that does not answer may come back", err)
		}
	})
}
