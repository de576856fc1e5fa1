package pull

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/alternayte/queuebox/shared/store/postgres/dbtest"
)

// dbtx is what a contract statement runs on: the pool (autocommit) or a transaction.
type dbtx interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// contract holds the five PostgreSQL statements and a migrated database to run them on.
type contract struct {
	pool                                *pgxpool.Pool
	base                                time.Time // seeded rows are created at base + their order
	claim, renew, complete, retry, dead statement
}

func newContract(t *testing.T) *contract {
	t.Helper()
	pool, _ := dbtest.Migrated(t)
	var base time.Time
	if err := pool.QueryRow(context.Background(), `SELECT clock_timestamp() - interval '1 hour'`).Scan(&base); err != nil {
		t.Fatal(err)
	}
	return &contract{
		pool:     pool,
		base:     base,
		claim:    loadPostgres(t, "claim"),
		renew:    loadPostgres(t, "renew"),
		complete: loadPostgres(t, "complete"),
		retry:    loadPostgres(t, "retry"),
		dead:     loadPostgres(t, "dead"),
	}
}

// message is one row that the claim returned.
type message struct {
	ID             string
	Source         string
	IdempotencyKey string
	AggregateID    *string
	EventType      *string
	Payload        json.RawMessage
	Headers        map[string]string
	Attempt        int
	CorrelationID  *string
	Token          string
}

// candLimit is the cand_limit that every client binds.
func candLimit(batch int) int { return min(max(3*batch, 50), 500) }

// claimOn runs claim.sql as a single autocommit statement on db.
func (c *contract) claimOn(ctx context.Context, db dbtx, source string, batch, leaseMS, cand int) ([]message, error) {
	args, err := c.claim.args(map[string]any{
		"source": source, "batch": batch, "lease_ms": leaseMS, "cand_limit": cand,
	})
	if err != nil {
		return nil, err
	}
	rows, err := db.Query(ctx, c.claim.sql, args...)
	if err != nil {
		return nil, fmt.Errorf("claiming pull rows: %w", err)
	}
	got, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (message, error) {
		var m message
		err := row.Scan(&m.ID, &m.Source, &m.IdempotencyKey, &m.AggregateID, &m.EventType,
			&m.Payload, &m.Headers, &m.Attempt, &m.CorrelationID, &m.Token)
		return m, err
	})
	if err != nil {
		return nil, fmt.Errorf("reading claimed rows: %w", err)
	}
	return got, nil
}

// claimN claims with the cand_limit formula and fails the test on error.
func (c *contract) claimN(t *testing.T, source string, batch int) []message {
	t.Helper()
	got, err := c.claimOn(context.Background(), c.pool, source, batch, 60_000, candLimit(batch))
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// run executes a fenced statement and returns the number of rows it changed.
func (c *contract) run(ctx context.Context, db dbtx, s statement, values map[string]any) (int64, error) {
	args, err := s.args(values)
	if err != nil {
		return 0, err
	}
	tag, err := db.Exec(ctx, s.sql, args...)
	if err != nil {
		return 0, fmt.Errorf("running %s: %w", s.file, err)
	}
	return tag.RowsAffected(), nil
}

func (c *contract) mustRun(t *testing.T, s statement, values map[string]any) int64 {
	t.Helper()
	n, err := c.run(context.Background(), c.pool, s, values)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// row is the stored state of one inbox row, read back for assertions.
type row struct {
	State         string
	Attempt       int
	LastError     *string
	Token         *string
	LeaseLeft     *time.Duration // lease_expires_at - clock_timestamp()
	ScheduledLeft time.Duration  // scheduled_at - clock_timestamp()
	ProcessedAt   *time.Time
	ClaimedAt     *time.Time
}

func (c *contract) read(t *testing.T, id string) row {
	t.Helper()
	var r row
	var lease, sched *float64
	err := c.pool.QueryRow(context.Background(), `
		SELECT state, attempt, last_error, claim_token::text,
		       extract(epoch FROM lease_expires_at - clock_timestamp())::float8,
		       extract(epoch FROM scheduled_at - clock_timestamp())::float8,
		       processed_at, claimed_at
		FROM inbox WHERE id = $1`, id).Scan(&r.State, &r.Attempt, &r.LastError, &r.Token,
		&lease, &sched, &r.ProcessedAt, &r.ClaimedAt)
	if err != nil {
		t.Fatalf("reading inbox row %s: %v", id, err)
	}
	if lease != nil {
		d := time.Duration(*lease * float64(time.Second))
		r.LeaseLeft = &d
	}
	r.ScheduledLeft = time.Duration(*sched * float64(time.Second))
	return r
}

// seed is one inbox row to insert. Rows are created at c.base (one hour ago) plus order
// milliseconds, and are due dueIn later.
type seed struct {
	source, key string
	aggregate   *string
	consumption string // pull when empty
	state       string // pending when empty
	order       int
	dueIn       time.Duration
	attempt     int
}

func agg(s string) *string { return &s }

// insert stores the rows and returns their ids by idempotency key.
func (c *contract) insert(t *testing.T, rows ...seed) map[string]string {
	t.Helper()
	ids := make(map[string]string, len(rows))
	batch := &pgx.Batch{}
	for _, r := range rows {
		consumption, state := r.consumption, r.state
		if consumption == "" {
			consumption = "pull"
		}
		if state == "" {
			state = "pending"
		}
		batch.Queue(`
			INSERT INTO inbox (source, idempotency_key, aggregate_id, payload, consumption, state,
			                   attempt, created_at, scheduled_at)
			VALUES ($1, $2::text, $3, jsonb_build_object('key', $2::text), $4, $5, $6,
			        $9::timestamptz + $7::int * interval '1 millisecond',
			        $9::timestamptz + $7::int * interval '1 millisecond' + $8::bigint * interval '1 millisecond')
			RETURNING id::text`,
			r.source, r.key, r.aggregate, consumption, state, r.attempt, r.order, r.dueIn.Milliseconds(), c.base,
		).QueryRow(func(row pgx.Row) error {
			var id string
			if err := row.Scan(&id); err != nil {
				return err
			}
			ids[r.key] = id
			return nil
		})
	}
	if err := c.pool.SendBatch(context.Background(), batch).Close(); err != nil {
		t.Fatalf("seeding inbox rows: %v", err)
	}
	return ids
}

// expire moves the lease of a row into the past, as if its owner had stopped renewing.
func (c *contract) expire(t *testing.T, id string) {
	t.Helper()
	dbtest.Exec(t, c.pool, `UPDATE inbox SET lease_expires_at = clock_timestamp() - interval '1 second' WHERE id = $1`, id)
}

func keysOf(ms []message) []string {
	out := make([]string, 0, len(ms))
	for _, m := range ms {
		out = append(out, m.IdempotencyKey)
	}
	slices.Sort(out)
	return out
}

func TestClaimReturnsTheMessageFields(t *testing.T) {
	t.Parallel()
	c := newContract(t)
	ids := c.insert(t, seed{source: "orders", key: "k1", aggregate: agg("A"), attempt: 2})
	dbtest.Exec(t, c.pool, `UPDATE inbox SET event_type = 'order.created', correlation_id = 'corr-1',
		headers = '{"x-tenant":"acme"}', payload = '{"id":"o-1","total":5}' WHERE id = $1`, ids["k1"])

	got := c.claimN(t, "orders", 10)
	if len(got) != 1 {
		t.Fatalf("claimed %d rows, want 1", len(got))
	}
	m := got[0]
	if m.ID != ids["k1"] || m.Source != "orders" || m.IdempotencyKey != "k1" || *m.AggregateID != "A" ||
		*m.EventType != "order.created" || *m.CorrelationID != "corr-1" || m.Attempt != 2 {
		t.Errorf("claimed message = %+v", m)
	}
	var payload map[string]any
	if err := json.Unmarshal(m.Payload, &payload); err != nil || payload["id"] != "o-1" {
		t.Errorf("payload = %s (%v)", m.Payload, err)
	}
	if !reflect.DeepEqual(m.Headers, map[string]string{"x-tenant": "acme"}) {
		t.Errorf("headers = %v", m.Headers)
	}
	r := c.read(t, m.ID)
	if r.State != "processing" || r.Token == nil || *r.Token != m.Token || r.ClaimedAt == nil {
		t.Errorf("stored row after claim = %+v, token %s", r, m.Token)
	}
	if r.LeaseLeft == nil || *r.LeaseLeft < 55*time.Second || *r.LeaseLeft > 60*time.Second {
		t.Errorf("lease left = %v, want about 60s", r.LeaseLeft)
	}
	if r.Attempt != 2 {
		t.Errorf("attempt after claim = %d, want 2 (a claim leaves attempt unchanged)", r.Attempt)
	}
}

func TestClaimTakesOnlyDuePullRowsOfTheSource(t *testing.T) {
	t.Parallel()
	c := newContract(t)
	c.insert(t,
		seed{source: "orders", key: "due", order: 1},
		seed{source: "orders", key: "due-now", order: 2, dueIn: time.Hour - time.Second},
		seed{source: "orders", key: "future", order: 3, dueIn: 2 * time.Hour},
		seed{source: "orders", key: "push", order: 4, consumption: "push"},
		seed{source: "payments", key: "other-source", order: 5},
		seed{source: "orders", key: "processed", order: 6, state: "processed"},
		seed{source: "orders", key: "dead", order: 7, state: "dead"},
	)
	live := c.insert(t, seed{source: "orders", key: "live-lease", order: 8})
	dbtest.Exec(t, c.pool, `UPDATE inbox SET state = 'processing', claim_token = gen_random_uuid(),
		lease_expires_at = clock_timestamp() + interval '1 minute' WHERE id = $1`, live["live-lease"])

	got := keysOf(c.claimN(t, "orders", 100))
	if want := []string{"due", "due-now"}; !reflect.DeepEqual(got, want) {
		t.Errorf("claimed %q, want %q", got, want)
	}
	if again := c.claimN(t, "orders", 100); len(again) != 0 {
		t.Errorf("second claim took %q, want nothing", keysOf(again))
	}
}

func TestClaimTakesOneRowPerAggregateInOrder(t *testing.T) {
	t.Parallel()
	c := newContract(t)
	c.insert(t,
		seed{source: "orders", key: "a2", aggregate: agg("A"), order: 2},
		seed{source: "orders", key: "a1", aggregate: agg("A"), order: 1},
		seed{source: "orders", key: "a3", aggregate: agg("A"), order: 3},
		seed{source: "orders", key: "b1", aggregate: agg("B"), order: 4},
		seed{source: "orders", key: "b2", aggregate: agg("B"), order: 5},
	)
	first := c.claimN(t, "orders", 10)
	if got, want := keysOf(first), []string{"a1", "b1"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("first claim = %q, want %q", got, want)
	}
	if again := c.claimN(t, "orders", 10); len(again) != 0 {
		t.Fatalf("claim while A and B are busy took %q, want nothing", keysOf(again))
	}
	for _, m := range first {
		if m.IdempotencyKey == "a1" {
			if n := c.mustRun(t, c.complete, map[string]any{"id": m.ID, "token": m.Token}); n != 1 {
				t.Fatalf("complete changed %d rows, want 1", n)
			}
		}
	}
	if got, want := keysOf(c.claimN(t, "orders", 10)), []string{"a2"}; !reflect.DeepEqual(got, want) {
		t.Errorf("claim after a1 completed = %q, want %q", got, want)
	}
}

func TestBusyAggregateDoesNotBlockAnotherSource(t *testing.T) {
	t.Parallel()
	c := newContract(t)
	c.insert(t,
		seed{source: "orders", key: "o1", aggregate: agg("A"), order: 1},
		seed{source: "orders", key: "o2", aggregate: agg("A"), order: 2},
		seed{source: "payments", key: "p1", aggregate: agg("A"), order: 3},
	)
	if got := keysOf(c.claimN(t, "orders", 10)); !reflect.DeepEqual(got, []string{"o1"}) {
		t.Fatalf("orders claim = %q, want [o1]", got)
	}
	if got := keysOf(c.claimN(t, "orders", 10)); len(got) != 0 {
		t.Fatalf("orders claim while A is busy = %q, want nothing", got)
	}
	if got := keysOf(c.claimN(t, "payments", 10)); !reflect.DeepEqual(got, []string{"p1"}) {
		t.Errorf("payments claim while A is busy on orders = %q, want [p1]", got)
	}
}

func TestNullAggregatesAreClaimedInParallel(t *testing.T) {
	t.Parallel()
	c := newContract(t)
	var rows []seed
	for i := range 6 {
		rows = append(rows, seed{source: "orders", key: fmt.Sprintf("n%d", i), order: i})
	}
	rows = append(rows, seed{source: "orders", key: "x1", aggregate: agg("X"), order: 10},
		seed{source: "orders", key: "x2", aggregate: agg("X"), order: 11})
	c.insert(t, rows...)

	first := c.claimN(t, "orders", 3)
	second := c.claimN(t, "orders", 10)
	if got, want := keysOf(first), []string{"n0", "n1", "n2"}; !reflect.DeepEqual(got, want) {
		t.Errorf("first claim = %q, want %q", got, want)
	}
	if got, want := keysOf(second), []string{"n3", "n4", "n5", "x1"}; !reflect.DeepEqual(got, want) {
		t.Errorf("second claim while the first three run = %q, want %q", got, want)
	}
}

func TestExpiredLeaseIsReclaimedByTheClaim(t *testing.T) {
	t.Parallel()
	c := newContract(t)
	ids := c.insert(t,
		seed{source: "orders", key: "a1", aggregate: agg("A"), order: 1, attempt: 3},
		seed{source: "orders", key: "a2", aggregate: agg("A"), order: 2},
	)
	first := c.claimN(t, "orders", 10)
	if len(first) != 1 || first[0].ID != ids["a1"] {
		t.Fatalf("first claim = %q, want [a1]", keysOf(first))
	}
	old := first[0].Token
	if got := c.claimN(t, "orders", 10); len(got) != 0 {
		t.Fatalf("claim under a live lease = %q, want nothing", keysOf(got))
	}

	c.expire(t, ids["a1"])
	second := c.claimN(t, "orders", 10)
	if len(second) != 1 || second[0].ID != ids["a1"] {
		t.Fatalf("claim after the lease expired = %q, want [a1] (the expired head, not a2)", keysOf(second))
	}
	fresh := second[0].Token
	if fresh == old {
		t.Fatalf("reclaim kept the token %s, want a new one", old)
	}
	if second[0].Attempt != 3 {
		t.Errorf("attempt after reclaim = %d, want 3 (unchanged)", second[0].Attempt)
	}

	oldToken := []struct {
		name   string
		s      statement
		values map[string]any
	}{
		{"renew", c.renew, map[string]any{"id": ids["a1"], "token": old, "lease_ms": 60_000}},
		{"complete", c.complete, map[string]any{"id": ids["a1"], "token": old}},
		{"retry", c.retry, map[string]any{"id": ids["a1"], "token": old, "delay_ms": 0, "error": "late"}},
		{"dead", c.dead, map[string]any{"id": ids["a1"], "token": old, "error": "late"}},
	}
	for _, tt := range oldToken {
		if n := c.mustRun(t, tt.s, tt.values); n != 0 {
			t.Errorf("%s with the old token changed %d rows, want 0", tt.name, n)
		}
	}
	r := c.read(t, ids["a1"])
	if r.State != "processing" || r.Token == nil || *r.Token != fresh || r.Attempt != 3 || r.LastError != nil {
		t.Errorf("row after the old owner's writes = %+v, want it untouched under the new token", r)
	}
	if n := c.mustRun(t, c.complete, map[string]any{"id": ids["a1"], "token": fresh}); n != 1 {
		t.Errorf("complete with the new token changed %d rows, want 1", n)
	}
}

func TestFence(t *testing.T) {
	t.Parallel()
	c := newContract(t)
	stranger := "00000000-0000-0000-0000-000000000001"
	tests := []struct {
		name    string
		prepare func(t *testing.T, id string) // runs after the claim
		token   func(claimed string) any
		want    int64
	}{
		{name: "own token, live lease", token: func(s string) any { return s }, want: 1},
		{name: "another token", token: func(string) any { return stranger }, want: 0},
		{name: "null token", token: func(string) any { return nil }, want: 0},
		{name: "own token, expired lease", prepare: c.expire, token: func(s string) any { return s }, want: 0},
		{name: "own token, row no longer processing",
			prepare: func(t *testing.T, id string) {
				dbtest.Exec(t, c.pool, `UPDATE inbox SET state = 'processed' WHERE id = $1`, id)
			},
			token: func(s string) any { return s }, want: 0},
	}
	for i, tt := range tests {
		for _, stmt := range []string{"renew", "complete", "retry", "dead"} {
			t.Run(tt.name+"/"+stmt, func(t *testing.T) {
				source := fmt.Sprintf("fence-%d-%s", i, stmt)
				ids := c.insert(t, seed{source: source, key: "k"})
				got := c.claimN(t, source, 1)
				if len(got) != 1 {
					t.Fatalf("claimed %d rows, want 1", len(got))
				}
				if tt.prepare != nil {
					tt.prepare(t, ids["k"])
				}
				values := map[string]any{"id": ids["k"], "token": tt.token(got[0].Token)}
				var s statement
				switch stmt {
				case "renew":
					s, values["lease_ms"] = c.renew, 60_000
				case "complete":
					s = c.complete
				case "retry":
					s, values["delay_ms"], values["error"] = c.retry, 1000, "boom"
				case "dead":
					s, values["error"] = c.dead, "boom"
				}
				if n := c.mustRun(t, s, values); n != tt.want {
					t.Errorf("%s changed %d rows, want %d", stmt, n, tt.want)
				}
			})
		}
	}
}

func TestRenewSetsTheLeaseFromNow(t *testing.T) {
	t.Parallel()
	c := newContract(t)
	ids := c.insert(t, seed{source: "orders", key: "k"})
	got, err := c.claimOn(context.Background(), c.pool, "orders", 1, 2_000, candLimit(1))
	if err != nil || len(got) != 1 {
		t.Fatalf("claim = %v, %v", got, err)
	}
	if n := c.mustRun(t, c.renew, map[string]any{"id": ids["k"], "token": got[0].Token, "lease_ms": 120_000}); n != 1 {
		t.Fatalf("renew changed %d rows, want 1", n)
	}
	r := c.read(t, ids["k"])
	if r.LeaseLeft == nil || *r.LeaseLeft < 115*time.Second || *r.LeaseLeft > 120*time.Second {
		t.Errorf("lease left after renew = %v, want about 120s", r.LeaseLeft)
	}
	if r.State != "processing" || r.Token == nil || *r.Token != got[0].Token {
		t.Errorf("row after renew = %+v, want it still claimed under the same token", r)
	}
}

func TestCompleteRunsInTheHandlerTransaction(t *testing.T) {
	t.Parallel()
	c := newContract(t)
	ids := c.insert(t, seed{source: "orders", key: "k", attempt: 1})
	got := c.claimN(t, "orders", 1)
	ctx := context.Background()
	values := map[string]any{"id": ids["k"], "token": got[0].Token}

	tx, err := c.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := c.run(ctx, tx, c.complete, values); err != nil || n != 1 {
		t.Fatalf("complete in the handler transaction = %d, %v; want 1 row", n, err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if r := c.read(t, ids["k"]); r.State != "processing" || r.Token == nil {
		t.Fatalf("row after a rolled-back completion = %+v, want still processing", r)
	}

	tx, err = c.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := c.run(ctx, tx, c.complete, values); err != nil || n != 1 {
		t.Fatalf("complete in the handler transaction = %d, %v; want 1 row", n, err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r := c.read(t, ids["k"])
	if r.State != "processed" || r.ProcessedAt == nil || r.Token != nil || r.LeaseLeft != nil || r.Attempt != 1 {
		t.Errorf("row after completion = %+v, want processed with processed_at, no token, no lease, attempt 1", r)
	}
	if n := c.mustRun(t, c.complete, values); n != 0 {
		t.Errorf("a second completion changed %d rows, want 0", n)
	}
}

func TestRetry(t *testing.T) {
	t.Parallel()
	c := newContract(t)
	ids := c.insert(t,
		seed{source: "orders", key: "a1", aggregate: agg("A"), order: 1, attempt: 1},
		seed{source: "orders", key: "now", order: 2},
	)
	claimed := c.claimN(t, "orders", 10)
	tokens := map[string]string{}
	for _, m := range claimed {
		tokens[m.IdempotencyKey] = m.Token
	}

	if n := c.mustRun(t, c.retry, map[string]any{"id": ids["a1"], "token": tokens["a1"], "delay_ms": 60_000, "error": "timeout calling ledger"}); n != 1 {
		t.Fatalf("retry changed %d rows, want 1", n)
	}
	r := c.read(t, ids["a1"])
	if r.State != "pending" || r.Attempt != 2 || r.LastError == nil || *r.LastError != "timeout calling ledger" ||
		r.Token != nil || r.LeaseLeft != nil {
		t.Errorf("row after retry = %+v, want pending, attempt 2, last_error, no token, no lease", r)
	}
	if r.ScheduledLeft < 55*time.Second || r.ScheduledLeft > 60*time.Second {
		t.Errorf("scheduled_at - clock = %v, want about 60s", r.ScheduledLeft)
	}
	if got := c.claimN(t, "orders", 10); len(got) != 0 {
		t.Errorf("claim before the retry is due = %q, want nothing", keysOf(got))
	}

	if n := c.mustRun(t, c.retry, map[string]any{"id": ids["now"], "token": tokens["now"], "delay_ms": 0, "error": "x"}); n != 1 {
		t.Fatalf("retry without delay changed %d rows, want 1", n)
	}
	if got := keysOf(c.claimN(t, "orders", 10)); !reflect.DeepEqual(got, []string{"now"}) {
		t.Errorf("claim after a retry without delay = %q, want [now]", got)
	}

	dbtest.Exec(t, c.pool, `UPDATE inbox SET scheduled_at = clock_timestamp() - interval '1 millisecond' WHERE id = $1`, ids["a1"])
	again := c.claimN(t, "orders", 10)
	if len(again) != 1 || again[0].ID != ids["a1"] || again[0].Attempt != 2 || again[0].Token == tokens["a1"] {
		t.Errorf("claim once the retry is due = %+v, want a1 with attempt 2 and a new token", again)
	}
}

func TestDeadLeavesAttempt(t *testing.T) {
	t.Parallel()
	c := newContract(t)
	ids := c.insert(t, seed{source: "orders", key: "k", aggregate: agg("A"), attempt: 5},
		seed{source: "orders", key: "next", aggregate: agg("A"), order: 1})
	got := c.claimN(t, "orders", 1)
	if len(got) != 1 || got[0].ID != ids["k"] {
		t.Fatalf("claim = %q, want [k]", keysOf(got))
	}
	if n := c.mustRun(t, c.dead, map[string]any{"id": ids["k"], "token": got[0].Token, "error": "payload does not parse"}); n != 1 {
		t.Fatalf("dead changed %d rows, want 1", n)
	}
	r := c.read(t, ids["k"])
	if r.State != "dead" || r.Attempt != 5 || r.LastError == nil || *r.LastError != "payload does not parse" ||
		r.Token != nil || r.LeaseLeft != nil || r.ProcessedAt != nil {
		t.Errorf("row after dead = %+v, want dead, attempt 5, last_error, no token, no lease", r)
	}
	if got := keysOf(c.claimN(t, "orders", 10)); !reflect.DeepEqual(got, []string{"next"}) {
		t.Errorf("claim after the dead letter = %q, want [next] (a dead row is never claimed and frees its aggregate)", got)
	}
}

func TestCandLimitBoundsTheCandidates(t *testing.T) {
	t.Parallel()
	c := newContract(t)
	var rows []seed
	for i := range 10 {
		rows = append(rows, seed{source: "orders", key: fmt.Sprintf("a%02d", i), aggregate: agg("A"), order: i})
	}
	for i := range 10 {
		rows = append(rows, seed{source: "orders", key: fmt.Sprintf("n%02d", i), order: 100 + i})
	}
	c.insert(t, rows...)
	ctx := context.Background()

	tests := []struct {
		name      string
		candLimit int
		want      int
	}{
		// The five oldest due rows all belong to A: one head.
		{name: "five candidates", candLimit: 5, want: 1},
		// Eleven candidates: the ten rows of A (one head) and one null-aggregate row.
		{name: "eleven candidates", candLimit: 11, want: 2},
		{name: "every row a candidate", candLimit: candLimit(20), want: 11},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tx, err := c.pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback(ctx) }()
			got, err := c.claimOn(ctx, tx, "orders", 20, 60_000, tt.candLimit)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != tt.want {
				t.Errorf("claimed %q with cand_limit %d, want %d rows", keysOf(got), tt.candLimit, tt.want)
			}
		})
	}

	t.Run("each branch has its own limit", func(t *testing.T) {
		var expired []seed
		for i := range 4 {
			expired = append(expired, seed{source: "reclaim", key: fmt.Sprintf("e%d", i), order: i})
		}
		for i := range 4 {
			expired = append(expired, seed{source: "reclaim", key: fmt.Sprintf("p%d", i), order: 10 + i})
		}
		ids := c.insert(t, expired...)
		for i := range 4 {
			dbtest.Exec(t, c.pool, `UPDATE inbox SET state = 'processing', claim_token = gen_random_uuid(),
				lease_expires_at = clock_timestamp() - interval '1 second' WHERE id = $1`, ids[fmt.Sprintf("e%d", i)])
		}
		got, err := c.claimOn(ctx, c.pool, "reclaim", 20, 60_000, 2)
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{"e0", "e1", "p0", "p1"}; !reflect.DeepEqual(keysOf(got), want) {
			t.Errorf("claim with cand_limit 2 = %q, want %q (two of each branch)", keysOf(got), want)
		}
	})
}

func TestConcurrentClaimersNeverClaimARowTwice(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		expired bool // the rows start in processing with an expired lease
	}{
		{name: "pending rows"},
		{name: "expired leases", expired: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := newContract(t)
			const total = 600
			var rows []seed
			for i := range total {
				s := seed{source: "orders", key: fmt.Sprintf("k%04d", i), order: i}
				if i%2 == 0 {
					s.aggregate = agg(fmt.Sprintf("agg-%d", i))
				}
				rows = append(rows, s)
			}
			ids := c.insert(t, rows...)
			if tt.expired {
				dbtest.Exec(t, c.pool, `UPDATE inbox SET state = 'processing', claim_token = gen_random_uuid(),
					lease_expires_at = clock_timestamp() - interval '1 second'`)
			}

			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			var (
				mu      sync.Mutex
				claimed = map[string][]string{} // id -> tokens
				count   atomic.Int64
				wg      sync.WaitGroup
				errs    = make(chan error, 8)
			)
			for w := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					batch := 3 + w
					for count.Load() < total && ctx.Err() == nil {
						got, err := c.claimOn(ctx, c.pool, "orders", batch, 60_000, candLimit(batch))
						if err != nil {
							errs <- err
							return
						}
						mu.Lock()
						for _, m := range got {
							claimed[m.ID] = append(claimed[m.ID], m.Token)
						}
						mu.Unlock()
						count.Add(int64(len(got)))
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			if ctx.Err() != nil {
				t.Fatalf("claimers stopped after %d of %d rows: %v", count.Load(), total, ctx.Err())
			}
			for id, tokens := range claimed {
				if len(tokens) != 1 {
					t.Errorf("row %s claimed %d times", id, len(tokens))
				}
			}
			if len(claimed) != total || count.Load() != total {
				t.Errorf("claimed %d distinct rows in %d claims, want %d", len(claimed), count.Load(), total)
			}
			var processing, distinctTokens int
			if err := c.pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT claim_token) FROM inbox
				WHERE state = 'processing' AND lease_expires_at > clock_timestamp()`).Scan(&processing, &distinctTokens); err != nil {
				t.Fatal(err)
			}
			if processing != total || distinctTokens != total {
				t.Errorf("stored: %d rows under a live lease with %d tokens, want %d", processing, distinctTokens, total)
			}
			for key, id := range ids {
				if toks := claimed[id]; len(toks) == 1 {
					var stored string
					if err := c.pool.QueryRow(ctx, `SELECT claim_token::text FROM inbox WHERE id = $1`, id).Scan(&stored); err != nil {
						t.Fatal(err)
					}
					if stored != toks[0] {
						t.Errorf("row %s holds token %s, but its claimer got %s", key, stored, toks[0])
					}
				}
			}
		})
	}
}

// TestOneProcessingRowPerSourceAndAggregate runs 4 workers over 2 sources with 50 aggregates
// each. Every worker claims, handles each row in a transaction that writes an application row
// and completes the inbox row, and commits. The test checks, in memory and in the database,
// that no aggregate of a source ever has two rows in flight, that every row is handled once,
// and that the rows of an aggregate complete in created_at order.
func TestOneProcessingRowPerSourceAndAggregate(t *testing.T) {
	t.Parallel()
	c := newContract(t)
	dbtest.Exec(t, c.pool, `CREATE TABLE handled (source TEXT, idempotency_key TEXT, PRIMARY KEY (source, idempotency_key))`)

	sources := []string{"orders", "payments"}
	const aggregates, perAggregate, nullRows = 50, 20, 50
	want := map[string][]string{} // source/aggregate -> keys in created_at order
	var rows []seed
	for _, source := range sources {
		// A random interleaving of the aggregates, so the oldest rows sometimes crowd into a
		// few aggregates and sometimes spread over many.
		var slots []int
		for a := range aggregates {
			for range perAggregate {
				slots = append(slots, a)
			}
		}
		rand.Shuffle(len(slots), func(i, j int) { slots[i], slots[j] = slots[j], slots[i] })
		order := 0
		for _, a := range slots {
			aggregate := fmt.Sprintf("agg-%02d", a)
			slot := source + "/" + aggregate
			key := fmt.Sprintf("%s-a%02d-%02d", source, a, len(want[slot]))
			rows = append(rows, seed{source: source, key: key, aggregate: agg(aggregate), order: order})
			want[slot] = append(want[slot], key)
			order++
		}
		for n := range nullRows {
			rows = append(rows, seed{source: source, key: fmt.Sprintf("%s-null-%02d", source, n), order: order})
			order++
		}
	}
	rand.Shuffle(len(rows), func(i, j int) { rows[i], rows[j] = rows[j], rows[i] })
	c.insert(t, rows...)
	total := int64(len(rows))

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var (
		mu       sync.Mutex
		inFlight = map[string]string{}   // source/aggregate -> key
		done     = map[string][]string{} // source/aggregate -> keys in completion order
		handled  atomic.Int64
		failures = make(chan error, 16)
		workers  sync.WaitGroup
	)
	fail := func(err error) {
		select {
		case failures <- err:
		default:
		}
		cancel()
	}

	handle := func(m message) error {
		slot := ""
		if m.AggregateID != nil {
			slot = m.Source + "/" + *m.AggregateID
		}
		tx, err := c.pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback(ctx) }()
		if _, err := tx.Exec(ctx, `INSERT INTO handled VALUES ($1, $2)`, m.Source, m.IdempotencyKey); err != nil {
			return fmt.Errorf("handling %s: %w", m.IdempotencyKey, err)
		}
		n, err := c.run(ctx, tx, c.complete, map[string]any{"id": m.ID, "token": m.Token})
		if err != nil {
			return err
		}
		if n != 1 {
			return fmt.Errorf("completing %s changed %d rows: the claim was lost", m.IdempotencyKey, n)
		}
		// Leave the slot before the commit makes the next row of the aggregate claimable.
		if slot != "" {
			mu.Lock()
			delete(inFlight, slot)
			done[slot] = append(done[slot], m.IdempotencyKey)
			mu.Unlock()
		}
		if err := tx.Commit(ctx); err != nil {
			return err
		}
		handled.Add(1)
		return nil
	}

	for w := range 4 {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for turn := w; handled.Load() < total && ctx.Err() == nil; turn++ {
				source := sources[turn%len(sources)]
				got, err := c.claimOn(ctx, c.pool, source, 10, 60_000, candLimit(10))
				if err != nil {
					fail(err)
					return
				}
				mu.Lock()
				for _, m := range got {
					if m.AggregateID == nil {
						continue
					}
					slot := m.Source + "/" + *m.AggregateID
					if other, busy := inFlight[slot]; busy {
						mu.Unlock()
						fail(fmt.Errorf("claimed %s while %s of the same aggregate is in flight", m.IdempotencyKey, other))
						return
					}
					inFlight[slot] = m.IdempotencyKey
				}
				mu.Unlock()
				for _, m := range got {
					if err := handle(m); err != nil {
						fail(err)
						return
					}
				}
			}
		}()
	}

	// A watcher reads the table while the workers run: no two live claims of one aggregate.
	watching := make(chan struct{})
	go func() {
		defer close(watching)
		for handled.Load() < total && ctx.Err() == nil {
			var source, aggregate string
			var n int
			err := c.pool.QueryRow(ctx, `SELECT source, aggregate_id, count(*) FROM inbox
				WHERE state = 'processing' AND lease_expires_at > clock_timestamp() AND aggregate_id IS NOT NULL
				GROUP BY source, aggregate_id HAVING count(*) > 1 LIMIT 1`).Scan(&source, &aggregate, &n)
			switch {
			case errors.Is(err, pgx.ErrNoRows):
			case err != nil && ctx.Err() == nil:
				fail(err)
			case err == nil:
				fail(fmt.Errorf("%d rows of %s/%s under a live lease at once", n, source, aggregate))
			}
		}
	}()
	workers.Wait()
	cancel()
	<-watching
	close(failures)
	for err := range failures {
		t.Fatal(err)
	}

	if handled.Load() != total {
		t.Fatalf("handled %d of %d rows", handled.Load(), total)
	}
	var handledRows, processed int
	if err := c.pool.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM handled),
		(SELECT count(*) FROM inbox WHERE state = 'processed' AND processed_at IS NOT NULL AND claim_token IS NULL)`).
		Scan(&handledRows, &processed); err != nil {
		t.Fatal(err)
	}
	if int64(handledRows) != total || int64(processed) != total {
		t.Errorf("handled rows = %d, processed inbox rows = %d, want %d each", handledRows, processed, total)
	}
	for slot, keys := range want {
		if !reflect.DeepEqual(done[slot], keys) {
			t.Errorf("%s completed in the order %q, want %q", slot, done[slot], keys)
		}
	}
}
