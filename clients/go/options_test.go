package queuebox

import (
	"database/sql"
	"strings"
	"testing"
	"time"
)

func TestNewInboxWorkerOptions(t *testing.T) {
	t.Parallel()
	// NewInboxWorker does not touch the database.
	db := sql.OpenDB(&fakeConnector{&fakeServer{}})
	defer db.Close()
	schema := func(change func(*Schema)) *Schema {
		s := DefaultSchema()
		change(&s)
		return &s
	}
	tests := []struct {
		name    string
		db      *sql.DB
		opts    Options
		wantErr string
		check   func(t *testing.T, o Options)
	}{
		{name: "defaults", db: db, opts: Options{Source: "orders"}, check: func(t *testing.T, o Options) {
			if o.BatchSize != 10 || o.LeaseMS != 30_000 || o.MaxConcurrency != 1 ||
				o.PollInterval != time.Second || o.ShutdownGrace != 30*time.Second ||
				o.Dialect != DialectPostgreSQL || o.RetryPolicy == nil || *o.Schema != DefaultSchema() {
				t.Errorf("defaults = %+v", o)
			}
		}},
		{name: "no db", opts: Options{Source: "orders"}, wantErr: "needs a *sql.DB"},
		{name: "no source", db: db, opts: Options{}, wantErr: "Source is required"},
		{name: "negative batch", db: db, opts: Options{Source: "s", BatchSize: -1}, wantErr: "BatchSize"},
		{name: "lease too short", db: db, opts: Options{Source: "s", LeaseMS: 2}, wantErr: "LeaseMS"},
		{name: "lease beyond an INT", db: db, opts: Options{Source: "s", LeaseMS: 1 << 31}, wantErr: "LeaseMS"},
		{name: "negative concurrency", db: db, opts: Options{Source: "s", MaxConcurrency: -2}, wantErr: "MaxConcurrency"},
		{name: "negative poll", db: db, opts: Options{Source: "s", PollInterval: -time.Second}, wantErr: "PollInterval"},
		{name: "negative grace", db: db, opts: Options{Source: "s", ShutdownGrace: -time.Second}, wantErr: "ShutdownGrace"},
		{name: "unknown dialect", db: db, opts: Options{Source: "s", Dialect: "mysql"}, wantErr: "Dialect"},
		{name: "mapped schema", db: db, opts: Options{Source: "s", Schema: schema(func(s *Schema) { s.Table, s.IdempotencyKey = "qb_inbox", "dedup_key" })}},
		{name: "empty names keep their defaults", db: db, opts: Options{Source: "s", Schema: &Schema{Table: "qb_inbox"}}, check: func(t *testing.T, o Options) {
			want := DefaultSchema()
			want.Table = "qb_inbox"
			if *o.Schema != want {
				t.Errorf("schema = %+v", *o.Schema)
			}
		}},
		{name: "table with a quote", db: db, opts: Options{Source: "s", Schema: schema(func(s *Schema) { s.Table = `qb"inbox` })}, wantErr: "Schema.Table"},
		{name: "table with a bracket", db: db, opts: Options{Source: "s", Schema: schema(func(s *Schema) { s.Table = `qb]inbox` })}, wantErr: "Schema.Table"},
		{name: "table with SQL", db: db, opts: Options{Source: "s", Schema: schema(func(s *Schema) { s.Table = "inbox; DROP TABLE orders" })}, wantErr: "Schema.Table"},
		{name: "qualified table", db: db, opts: Options{Source: "s", Schema: schema(func(s *Schema) { s.Table = "app.inbox" })}, wantErr: "Schema.Table"},
		{name: "column with a space", db: db, opts: Options{Source: "s", Schema: schema(func(s *Schema) { s.IdempotencyKey = "dedup key" })}, wantErr: "Schema.IdempotencyKey"},
		{name: "column starting with a digit", db: db, opts: Options{Source: "s", Schema: schema(func(s *Schema) { s.Payload = "1body" })}, wantErr: "Schema.Payload"},
		{name: "column named like a computed column", db: db, opts: Options{Source: "s", Schema: schema(func(s *Schema) { s.Payload = "QB_NOW" })}, wantErr: "Schema.Payload"},
		{name: "table named like a WITH part", db: db, opts: Options{Source: "s", Schema: schema(func(s *Schema) { s.Table = "due" })}, wantErr: "Schema.Table"},
		{name: "two columns with one name", db: db, opts: Options{Source: "s", Schema: schema(func(s *Schema) { s.Payload = "State" })}, wantErr: "is also the name of Schema.Payload"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			w, err := NewInboxWorker(tt.db, tt.opts)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("NewInboxWorker() error = %v, want one that names %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("NewInboxWorker() error = %v", err)
			}
			if tt.check != nil {
				tt.check(t, w.opts)
			}
		})
	}
}

func TestCandidateLimit(t *testing.T) {
	t.Parallel()
	for batch, want := range map[int]int{1: 50, 10: 50, 16: 50, 17: 51, 100: 300, 166: 498, 167: 500, 1000: 500} {
		if got := candidateLimit(batch); got != want {
			t.Errorf("candidateLimit(%d) = %d, want %d", batch, got, want)
		}
	}
}

func TestBackoff(t *testing.T) {
	t.Parallel()
	tests := []struct {
		poll time.Duration
		n    int
		want time.Duration
	}{
		{time.Second, 1, time.Second},
		{time.Second, 2, 2 * time.Second},
		{time.Second, 4, 8 * time.Second},
		{time.Second, 10, 30 * time.Second},
		{10 * time.Millisecond, 1, 100 * time.Millisecond},
		{time.Minute, 1, 30 * time.Second},
	}
	for _, tt := range tests {
		if got := backoff(tt.poll, tt.n); got != tt.want {
			t.Errorf("backoff(%s, %d) = %s, want %s", tt.poll, tt.n, got, tt.want)
		}
	}
}
