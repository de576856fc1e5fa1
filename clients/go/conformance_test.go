package queuebox_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	queuebox "github.com/alternayte/queuebox/clients/go"
	"github.com/alternayte/queuebox/clients/go/internal/pgtest"
)

// scenariosPath is the conformance suite that every pull-client library interprets; its
// README describes the format.
const scenariosPath = "../../testdata/pull-conformance/scenarios.json"

type scenarioFile struct {
	Version   int        `json:"version"`
	Scenarios []scenario `json:"scenarios"`
}

type scenario struct {
	Name        string      `json:"name"`
	Description string      `json:"description"`
	Schema      *schemaSpec `json:"schema"`
	Steps       []step      `json:"steps"`
}

type schemaSpec struct {
	Table   string            `json:"table"`
	Columns map[string]string `json:"columns"`
}

type step struct {
	Do          string       `json:"do"`
	Rows        []rowSpec    `json:"rows"`
	Worker      string       `json:"worker"`
	Options     *optionsSpec `json:"options"`
	Handler     []action     `json:"handler"`
	Gate        string       `json:"gate"`
	Key         string       `json:"key"`
	TimeoutMs   int          `json:"timeoutMs"`
	Check       *check       `json:"check"`
	WithinMs    int          `json:"withinMs"`
	AtLeastMs   int          `json:"atLeastMs"`
	ExpectError *bool        `json:"expectError"`
	Path        string       `json:"path"`
}

type rowSpec struct {
	Key           string            `json:"key"`
	Source        *string           `json:"source"`
	Aggregate     *string           `json:"aggregate"`
	EventType     *string           `json:"eventType"`
	CorrelationID *string           `json:"correlationId"`
	Headers       map[string]string `json:"headers"`
	Payload       json.RawMessage   `json:"payload"`
}

type optionsSpec struct {
	Source          string      `json:"source"`
	BatchSize       int         `json:"batchSize"`
	LeaseMs         int         `json:"leaseMs"`
	MaxConcurrency  int         `json:"maxConcurrency"`
	PollIntervalMs  int         `json:"pollIntervalMs"`
	ShutdownGraceMs int         `json:"shutdownGraceMs"`
	Schema          *schemaSpec `json:"schema"`
	RetryPolicy     *policySpec `json:"retryPolicy"`
}

type policySpec struct {
	Kind         string  `json:"kind"`
	MaxAttempts  int     `json:"maxAttempts"`
	BaseDelayMs  int     `json:"baseDelayMs"`
	MaxDelayMs   int     `json:"maxDelayMs"`
	Jitter       float64 `json:"jitter"`
	RetryDelayMs int     `json:"retryDelayMs"`
}

type action struct {
	Do      string                     `json:"do"`
	Message map[string]json.RawMessage `json:"message"`
	Error   string                     `json:"error"`
	Field   string                     `json:"field"`
	Gate    string                     `json:"gate"`
	Ms      int                        `json:"ms"`
}

type check struct {
	Rows                      []rowCheck    `json:"rows"`
	Orders                    *[]orderRow   `json:"orders"`
	Writes                    *[]runPattern `json:"writes"`
	Runs                      *[]runPattern `json:"runs"`
	Running                   *[]runPattern `json:"running"`
	RunsInOrder               [][]string    `json:"runsInOrder"`
	MaxConcurrentPerAggregate *int          `json:"maxConcurrentPerAggregate"`
	RetryGaps                 *struct {
		Key       string `json:"key"`
		AtLeastMs []int  `json:"atLeastMs"`
	} `json:"retryGaps"`
	DistinctClaimTokens *struct {
		Key   string `json:"key"`
		Count int    `json:"count"`
	} `json:"distinctClaimTokens"`
	LogsContain []string `json:"logsContain"`
	LogsExclude []string `json:"logsExclude"`
}

type rowCheck struct {
	Key               string          `json:"key"`
	Source            *string         `json:"source"`
	State             *string         `json:"state"`
	Attempt           *int            `json:"attempt"`
	LastError         json.RawMessage `json:"lastError"`
	LastErrorContains *string         `json:"lastErrorContains"`
	HasLastError      *bool           `json:"hasLastError"`
}

type orderRow struct {
	ID    string `json:"id"`
	Total int    `json:"total"`
}

// runPattern matches a handler run or a handler_writes row on the fields it gives.
type runPattern struct {
	Worker  *string `json:"worker"`
	Key     *string `json:"key"`
	Outcome *string `json:"outcome"`
	Attempt *int    `json:"attempt"`
}

func loadScenarios(t *testing.T) scenarioFile {
	t.Helper()
	raw, err := os.ReadFile(scenariosPath)
	if err != nil {
		t.Fatalf("reading the conformance scenarios: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var f scenarioFile
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("decoding the conformance scenarios: %v", err)
	}
	if f.Version != 1 {
		t.Fatalf("conformance scenarios version %d, this interpreter reads version 1", f.Version)
	}
	return f
}

// TestConformance runs every scenario of testdata/pull-conformance against a fresh migrated
// PostgreSQL database each.
func TestConformance(t *testing.T) {
	t.Parallel()
	f := loadScenarios(t)
	seen := map[string]bool{}
	for _, sc := range f.Scenarios {
		if sc.Name == "" || seen[sc.Name] {
			t.Fatalf("scenario name %q is empty or repeated", sc.Name)
		}
		seen[sc.Name] = true
		t.Run(sc.Name, func(t *testing.T) {
			t.Parallel()
			newHarness(t, sc).run()
		})
	}
}

// run is one call of a handler, as the harness saw it.
type run struct {
	worker, key, source, aggregate string
	attempt                        int
	token                          string
	start, end                     time.Time
	outcome                        string // running, succeeded, failed, cancelled
}

type workerState struct {
	cancel     context.CancelFunc
	done       chan struct{}
	err        error
	stopSignal time.Time
	db         *sql.DB
}

type harness struct {
	t      *testing.T
	sc     scenario
	db     *sql.DB
	url    string
	table  string            // the inbox table, quoted
	col    map[string]string // default column name -> quoted mapped name
	schema *queuebox.Schema

	mu        sync.Mutex
	runs      []*run
	gates     map[string]chan struct{}
	workers   map[string]*workerState
	logs      []string
	busy      map[string]int
	maxPerAgg int
}

// columnKeys maps the camelCase keys of a schema in the scenarios to the default column names.
var columnKeys = map[string]string{
	"id": "id", "source": "source", "idempotencyKey": "idempotency_key", "aggregateId": "aggregate_id",
	"eventType": "event_type", "payload": "payload", "headers": "headers", "state": "state",
	"consumption": "consumption", "attempt": "attempt", "lastError": "last_error",
	"scheduledAt": "scheduled_at", "createdAt": "created_at", "processedAt": "processed_at",
	"claimedAt": "claimed_at", "claimToken": "claim_token", "leaseExpiresAt": "lease_expires_at",
	"correlationId": "correlation_id",
}

// toSchema turns a schema of the scenarios into a queuebox.Schema.
func toSchema(t *testing.T, s *schemaSpec) *queuebox.Schema {
	t.Helper()
	if s == nil {
		return nil
	}
	out := queuebox.DefaultSchema()
	if s.Table != "" {
		out.Table = s.Table
	}
	fields := map[string]*string{
		"id": &out.ID, "source": &out.Source, "idempotencyKey": &out.IdempotencyKey,
		"aggregateId": &out.AggregateID, "eventType": &out.EventType, "payload": &out.Payload,
		"headers": &out.Headers, "state": &out.State, "consumption": &out.Consumption,
		"attempt": &out.Attempt, "lastError": &out.LastError, "scheduledAt": &out.ScheduledAt,
		"createdAt": &out.CreatedAt, "processedAt": &out.ProcessedAt, "claimedAt": &out.ClaimedAt,
		"claimToken": &out.ClaimToken, "leaseExpiresAt": &out.LeaseExpiresAt,
		"correlationId": &out.CorrelationID,
	}
	for k, v := range s.Columns {
		p, ok := fields[k]
		if !ok {
			t.Fatalf("schema column key %q is unknown", k)
		}
		*p = v
	}
	return &out
}

func quote(name string) string { return `"` + strings.ReplaceAll(name, `"`, `""`) + `"` }

func newHarness(t *testing.T, sc scenario) *harness {
	db, d := pgtest.New(t)
	h := &harness{
		t: t, sc: sc, db: db, url: d.URL, table: quote("inbox"), col: map[string]string{},
		gates: map[string]chan struct{}{}, workers: map[string]*workerState{}, busy: map[string]int{},
	}
	for _, c := range columnKeys {
		h.col[c] = quote(c)
	}
	ctx := context.Background()
	exec := func(q string) {
		t.Helper()
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("setting up: %s: %v", q, err)
		}
	}
	exec(`CREATE TABLE orders (id TEXT PRIMARY KEY, total INTEGER NOT NULL)`)
	exec(`CREATE TABLE handler_writes (worker TEXT NOT NULL, idempotency_key TEXT NOT NULL)`)
	if sc.Schema != nil {
		h.schema = toSchema(t, sc.Schema)
		for k, mapped := range sc.Schema.Columns {
			exec(`ALTER TABLE inbox RENAME COLUMN ` + quote(columnKeys[k]) + ` TO ` + quote(mapped))
			h.col[columnKeys[k]] = quote(mapped)
		}
		if sc.Schema.Table != "" {
			exec(`ALTER TABLE inbox RENAME TO ` + quote(sc.Schema.Table))
			h.table = quote(sc.Schema.Table)
		}
	}
	t.Cleanup(h.cleanup)
	return h
}

// cleanup opens every gate and stops every worker that a scenario left running.
func (h *harness) cleanup() {
	h.mu.Lock()
	for name, g := range h.gates {
		select {
		case <-g:
		default:
			close(g)
		}
		delete(h.gates, name)
	}
	workers := h.workers
	h.mu.Unlock()
	for _, w := range workers {
		w.cancel()
	}
	for name, w := range workers {
		select {
		case <-w.done:
		case <-time.After(time.Minute):
			h.t.Errorf("worker %s did not stop within a minute", name)
		}
		_ = w.db.Close()
	}
}

func (h *harness) c(name string) string { return h.col[name] }

func (h *harness) run() {
	for i, s := range h.sc.Steps {
		h.step(i, s)
		if h.t.Failed() {
			return
		}
	}
}

func (h *harness) step(i int, s step) {
	t := h.t
	t.Helper()
	where := fmt.Sprintf("step %d (%s)", i+1, s.Do)
	ctx := context.Background()
	switch s.Do {
	case "insert":
		h.insert(where, s.Rows)
	case "start":
		h.start(where, s)
	case "stop":
		h.mu.Lock()
		w := h.workers[s.Worker]
		h.mu.Unlock()
		if w == nil {
			t.Fatalf("%s: no worker %q", where, s.Worker)
		}
		w.stopSignal = time.Now()
		w.cancel()
	case "awaitStopped":
		h.mu.Lock()
		w := h.workers[s.Worker]
		h.mu.Unlock()
		if w == nil || w.stopSignal.IsZero() {
			t.Fatalf("%s: worker %q was not stopped", where, s.Worker)
		}
		timer := time.NewTimer(time.Until(w.stopSignal.Add(time.Duration(s.WithinMs) * time.Millisecond)))
		defer timer.Stop()
		select {
		case <-w.done:
		case <-timer.C:
			t.Fatalf("%s: worker %s did not stop within %d ms of the stop", where, s.Worker, s.WithinMs)
		}
		took := time.Since(w.stopSignal)
		if w.err != nil {
			t.Fatalf("%s: Run of worker %s returned %v", where, s.Worker, w.err)
		}
		if took < time.Duration(s.AtLeastMs)*time.Millisecond {
			t.Fatalf("%s: worker %s stopped after %s, want at least %d ms", where, s.Worker, took, s.AtLeastMs)
		}
	case "openGate":
		close(h.gate(s.Gate))
	case "expireLease":
		res, err := h.db.ExecContext(ctx, `UPDATE `+h.table+` SET `+h.c("lease_expires_at")+` = clock_timestamp() - INTERVAL '1 millisecond' WHERE `+h.c("idempotency_key")+` = $1 AND `+h.c("state")+` = 'processing'`, s.Key)
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			t.Fatalf("%s: expiring the lease of %s changed %d rows, want 1", where, s.Key, n)
		}
	case "waitFor":
		deadline := time.Now().Add(time.Duration(s.TimeoutMs) * time.Millisecond)
		for {
			err := h.evaluate(s.Check)
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not true within %d ms: %v", where, s.TimeoutMs, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	case "check":
		if err := h.evaluate(s.Check); err != nil {
			t.Fatalf("%s: %v", where, err)
		}
	case "newWorker":
		_, err := queuebox.NewInboxWorker(h.db, h.options(s.Options))
		want := s.ExpectError != nil && *s.ExpectError
		if (err != nil) != want {
			t.Fatalf("%s: NewInboxWorker returned %v, want an error: %v", where, err, want)
		}
	case "redactionCorpus":
		raw, err := os.ReadFile(filepath.Join(filepath.Dir(scenariosPath), s.Path))
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		var cases []struct {
			Name, Input, Want string
		}
		if err := json.Unmarshal(raw, &cases); err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		if len(cases) == 0 {
			t.Fatalf("%s: the corpus is empty", where)
		}
		for _, c := range cases {
			if got := queuebox.Sanitize(c.Input); got != c.Want {
				t.Errorf("%s: corpus case %q:\n got: %q\nwant: %q", where, c.Name, got, c.Want)
			}
		}
	default:
		t.Fatalf("%s: unknown step", where)
	}
}

func (h *harness) insert(where string, rows []rowSpec) {
	t := h.t
	ctx := context.Background()
	var base time.Time
	if err := h.db.QueryRowContext(ctx, `SELECT clock_timestamp() - INTERVAL '1 second'`).Scan(&base); err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	q := `INSERT INTO ` + h.table + ` (` + strings.Join([]string{
		h.c("source"), h.c("idempotency_key"), h.c("aggregate_id"), h.c("event_type"),
		h.c("correlation_id"), h.c("headers"), h.c("payload"), h.c("consumption"), h.c("state"),
		h.c("created_at"), h.c("scheduled_at"),
	}, ", ") + `) VALUES ($1, $2, $3, $4, $5, CAST($6 AS JSONB), CAST($7 AS JSONB), 'pull', 'pending', $8, $8)`
	for i, r := range rows {
		source := "orders"
		if r.Source != nil {
			source = *r.Source
		}
		headers := r.Headers
		if headers == nil {
			headers = map[string]string{}
		}
		hb, _ := json.Marshal(headers)
		payload := string(r.Payload)
		if payload == "" {
			payload = "{}"
		}
		at := base.Add(time.Duration(i) * time.Microsecond)
		if _, err := h.db.ExecContext(ctx, q, source, r.Key, r.Aggregate, r.EventType, r.CorrelationID, string(hb), payload, at); err != nil {
			t.Fatalf("%s: inserting %s: %v", where, r.Key, err)
		}
	}
}

func (h *harness) options(o *optionsSpec) queuebox.Options {
	if o == nil {
		h.t.Fatalf("a step needs options")
	}
	opts := queuebox.Options{
		Source:         o.Source,
		BatchSize:      o.BatchSize,
		LeaseMS:        o.LeaseMs,
		MaxConcurrency: o.MaxConcurrency,
		PollInterval:   time.Duration(o.PollIntervalMs) * time.Millisecond,
		ShutdownGrace:  time.Duration(o.ShutdownGraceMs) * time.Millisecond,
		Schema:         h.schema,
		Logger:         logCollector{h},
	}
	if o.Schema != nil {
		opts.Schema = toSchema(h.t, o.Schema)
	}
	if p := o.RetryPolicy; p != nil {
		switch p.Kind {
		case "default":
			opts.RetryPolicy = queuebox.NewDefaultRetryPolicy(p.MaxAttempts,
				time.Duration(p.BaseDelayMs)*time.Millisecond, time.Duration(p.MaxDelayMs)*time.Millisecond, p.Jitter)
		case "deadLetterJsonSyntax":
			delay := time.Duration(p.RetryDelayMs) * time.Millisecond
			opts.RetryPolicy = queuebox.RetryPolicyFunc(func(_ queuebox.Message, failure error) queuebox.FailureAction {
				var syntax *json.SyntaxError
				if errors.As(failure, &syntax) {
					return queuebox.DeadLetter()
				}
				return queuebox.RetryAfter(delay)
			})
		default:
			h.t.Fatalf("retry policy kind %q is unknown", p.Kind)
		}
	}
	return opts
}

func (h *harness) start(where string, s step) {
	t := h.t
	db, err := sql.Open("pgx", h.url)
	if err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	worker, err := queuebox.NewInboxWorker(db, h.options(s.Options))
	if err != nil {
		_ = db.Close()
		t.Fatalf("%s: NewInboxWorker: %v", where, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ws := &workerState{cancel: cancel, done: make(chan struct{}), db: db}
	h.mu.Lock()
	if h.workers[s.Worker] != nil {
		h.mu.Unlock()
		cancel()
		_ = db.Close()
		t.Fatalf("%s: worker %q already exists", where, s.Worker)
	}
	h.workers[s.Worker] = ws
	h.mu.Unlock()
	handler := h.handler(s.Worker, s.Handler)
	go func() {
		defer close(ws.done)
		ws.err = worker.Run(ctx, handler)
	}()
}

func (h *harness) gate(name string) chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	g, ok := h.gates[name]
	if !ok {
		g = make(chan struct{})
		h.gates[name] = g
	}
	return g
}

// handler returns the scripted handler of a worker: it runs the actions in order, and records
// the run.
func (h *harness) handler(worker string, actions []action) queuebox.Handler {
	return func(ctx context.Context, msg queuebox.Message, tx *sql.Tx) error {
		r := h.begin(worker, msg)
		err := h.act(ctx, worker, actions, msg, tx)
		h.finish(r, ctx, err)
		return err
	}
}

func (h *harness) begin(worker string, msg queuebox.Message) *run {
	r := &run{worker: worker, key: msg.IdempotencyKey, source: msg.Source, aggregate: msg.AggregateID,
		attempt: msg.Attempt, start: time.Now(), outcome: "running"}
	// The harness, not the handler, reads the claim token, on a connection of its own.
	var token sql.NullString
	err := h.db.QueryRow(`SELECT CAST(`+h.c("claim_token")+` AS TEXT) FROM `+h.table+` WHERE `+h.c("id")+` = CAST($1 AS UUID)`, msg.ID).Scan(&token)
	if err != nil {
		h.t.Errorf("reading the claim token of %s: %v", msg.IdempotencyKey, err)
	}
	r.token = token.String
	h.mu.Lock()
	defer h.mu.Unlock()
	h.runs = append(h.runs, r)
	if msg.AggregateID != "" {
		k := msg.Source + "\x00" + msg.AggregateID
		h.busy[k]++
		h.maxPerAgg = max(h.maxPerAgg, h.busy[k])
	}
	return r
}

func (h *harness) finish(r *run, ctx context.Context, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	r.end = time.Now()
	switch {
	case err == nil:
		r.outcome = "succeeded"
	case ctx.Err() != nil:
		r.outcome = "cancelled"
	default:
		r.outcome = "failed"
	}
	if r.aggregate != "" {
		h.busy[r.source+"\x00"+r.aggregate]--
	}
}

func (h *harness) act(ctx context.Context, worker string, actions []action, msg queuebox.Message, tx *sql.Tx) error {
	for _, a := range actions {
		switch a.Do {
		case "expectMessage":
			if err := expectMessage(msg, a.Message); err != nil {
				return err
			}
		case "insertOrder":
			var order struct {
				ID    string `json:"id"`
				Total int    `json:"total"`
			}
			if err := msg.UnmarshalPayload(&order); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, "INSERT INTO orders (id, total) VALUES ($1, $2)", order.ID, order.Total); err != nil {
				return err
			}
		case "recordWrite":
			if _, err := tx.ExecContext(ctx, "INSERT INTO handler_writes (worker, idempotency_key) VALUES ($1, $2)", worker, msg.IdempotencyKey); err != nil {
				return err
			}
		case "fail":
			return errors.New(a.Error)
		case "parseJson":
			var payload map[string]any
			if err := msg.UnmarshalPayload(&payload); err != nil {
				return err
			}
			text, _ := payload[a.Field].(string)
			var doc any
			if err := json.Unmarshal([]byte(text), &doc); err != nil {
				return fmt.Errorf("parsing the embedded document: %w", err)
			}
		case "waitGate":
			select {
			case <-h.gate(a.Gate):
			case <-ctx.Done():
				return ctx.Err()
			}
		case "blockUntilCancelled":
			<-ctx.Done()
			return ctx.Err()
		case "sleep":
			timer := time.NewTimer(time.Duration(a.Ms) * time.Millisecond)
			select {
			case <-timer.C:
			case <-ctx.Done():
				timer.Stop()
				return ctx.Err()
			}
		default:
			return fmt.Errorf("unknown handler action %q", a.Do)
		}
	}
	return nil
}

// expectMessage compares the fields that want gives with the message. A null stands for a
// missing value, which Message holds as "".
func expectMessage(msg queuebox.Message, want map[string]json.RawMessage) error {
	for field, raw := range want {
		var got any
		switch field {
		case "source":
			got = msg.Source
		case "idempotencyKey":
			got = msg.IdempotencyKey
		case "aggregateId":
			got = msg.AggregateID
		case "eventType":
			got = msg.EventType
		case "correlationId":
			got = msg.CorrelationID
		case "attempt":
			got = msg.Attempt
		case "headers":
			var w map[string]string
			if err := json.Unmarshal(raw, &w); err != nil {
				return fmt.Errorf("message mismatch: headers spec: %w", err)
			}
			if msg.Headers == nil || !reflect.DeepEqual(msg.Headers, w) {
				return fmt.Errorf("message mismatch: headers are %v, want %v", msg.Headers, w)
			}
			continue
		case "payload":
			var g, w any
			if err := json.Unmarshal(msg.Payload, &g); err != nil {
				return fmt.Errorf("message mismatch: payload: %w", err)
			}
			_ = json.Unmarshal(raw, &w)
			if !reflect.DeepEqual(g, w) {
				return fmt.Errorf("message mismatch: payload is %s, want %s", msg.Payload, raw)
			}
			continue
		default:
			return fmt.Errorf("message mismatch: unknown field %q", field)
		}
		var w any
		_ = json.Unmarshal(raw, &w)
		if w == nil {
			w = ""
		}
		if f, ok := w.(float64); ok {
			w = int(f)
		}
		if got != w {
			return fmt.Errorf("message mismatch: %s is %v, want %v", field, got, w)
		}
	}
	return nil
}

// logCollector keeps every log line of the scenario's workers as text.
type logCollector struct{ h *harness }

func (l logCollector) line(level, msg string, fields map[string]any) {
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(level + " " + msg)
	for _, k := range keys {
		fmt.Fprintf(&b, " %s=%v", k, fields[k])
	}
	l.h.mu.Lock()
	l.h.logs = append(l.h.logs, b.String())
	l.h.mu.Unlock()
}

func (l logCollector) Info(msg string, fields map[string]any)  { l.line("INFO", msg, fields) }
func (l logCollector) Warn(msg string, fields map[string]any)  { l.line("WARN", msg, fields) }
func (l logCollector) Error(msg string, fields map[string]any) { l.line("ERROR", msg, fields) }

// evaluate returns nil when every part of c holds, or an error that says what does not.
func (h *harness) evaluate(c *check) error {
	if c == nil {
		return errors.New("the step has no check")
	}
	ctx := context.Background()
	for _, rc := range c.Rows {
		q := `SELECT ` + h.c("state") + `, ` + h.c("attempt") + `, ` + h.c("last_error") + ` FROM ` + h.table + ` WHERE ` + h.c("idempotency_key") + ` = $1`
		args := []any{rc.Key}
		if rc.Source != nil {
			q += ` AND ` + h.c("source") + ` = $2`
			args = append(args, *rc.Source)
		}
		rows, err := h.db.QueryContext(ctx, q, args...)
		if err != nil {
			return err
		}
		var state string
		var attempt int
		var lastError sql.NullString
		n := 0
		for rows.Next() {
			n++
			if err := rows.Scan(&state, &attempt, &lastError); err != nil {
				rows.Close()
				return err
			}
		}
		rows.Close()
		if n != 1 {
			return fmt.Errorf("row %s: found %d rows, want 1", rc.Key, n)
		}
		if rc.State != nil && state != *rc.State {
			return fmt.Errorf("row %s: state is %s, want %s", rc.Key, state, *rc.State)
		}
		if rc.Attempt != nil && attempt != *rc.Attempt {
			return fmt.Errorf("row %s: attempt is %d, want %d", rc.Key, attempt, *rc.Attempt)
		}
		if rc.LastError != nil {
			var want *string
			if err := json.Unmarshal(rc.LastError, &want); err != nil {
				return err
			}
			switch {
			case want == nil && lastError.Valid:
				return fmt.Errorf("row %s: last_error is %q, want NULL", rc.Key, lastError.String)
			case want != nil && (!lastError.Valid || lastError.String != *want):
				return fmt.Errorf("row %s: last_error is %q (set: %v), want %q", rc.Key, lastError.String, lastError.Valid, *want)
			}
		}
		if rc.LastErrorContains != nil && !strings.Contains(lastError.String, *rc.LastErrorContains) {
			return fmt.Errorf("row %s: last_error %q does not contain %q", rc.Key, lastError.String, *rc.LastErrorContains)
		}
		if rc.HasLastError != nil && (lastError.Valid && lastError.String != "") != *rc.HasLastError {
			return fmt.Errorf("row %s: last_error is %q (set: %v), want set: %v", rc.Key, lastError.String, lastError.Valid, *rc.HasLastError)
		}
	}
	if c.Orders != nil {
		rows, err := h.db.QueryContext(ctx, `SELECT id, total FROM orders ORDER BY id`)
		if err != nil {
			return err
		}
		got := []orderRow{}
		for rows.Next() {
			var o orderRow
			if err := rows.Scan(&o.ID, &o.Total); err != nil {
				rows.Close()
				return err
			}
			got = append(got, o)
		}
		rows.Close()
		want := append([]orderRow{}, (*c.Orders)...)
		sort.Slice(want, func(i, j int) bool { return want[i].ID < want[j].ID })
		if !reflect.DeepEqual(got, want) {
			return fmt.Errorf("orders are %v, want %v", got, want)
		}
	}
	if c.Writes != nil {
		rows, err := h.db.QueryContext(ctx, `SELECT worker, idempotency_key FROM handler_writes`)
		if err != nil {
			return err
		}
		var got []*run
		for rows.Next() {
			r := &run{}
			if err := rows.Scan(&r.worker, &r.key); err != nil {
				rows.Close()
				return err
			}
			got = append(got, r)
		}
		rows.Close()
		if !matchRuns(*c.Writes, got) {
			return fmt.Errorf("handler_writes are %s, want %s", describeRuns(got), describePatterns(*c.Writes))
		}
	}

	h.mu.Lock()
	runs := make([]run, len(h.runs))
	for i, r := range h.runs {
		runs[i] = *r
	}
	maxPerAgg := h.maxPerAgg
	logs := append([]string{}, h.logs...)
	h.mu.Unlock()
	all := make([]*run, len(runs))
	var running []*run
	for i := range runs {
		all[i] = &runs[i]
		if runs[i].outcome == "running" {
			running = append(running, &runs[i])
		}
	}
	if c.Runs != nil && !matchRuns(*c.Runs, all) {
		return fmt.Errorf("runs are %s, want %s", describeRuns(all), describePatterns(*c.Runs))
	}
	if c.Running != nil && !matchRuns(*c.Running, running) {
		return fmt.Errorf("running handlers are %s, want %s", describeRuns(running), describePatterns(*c.Running))
	}
	for _, keys := range c.RunsInOrder {
		in := map[string]bool{}
		for _, k := range keys {
			in[k] = true
		}
		var sel []*run
		for _, r := range all {
			if in[r.key] {
				sel = append(sel, r)
			}
		}
		sort.Slice(sel, func(i, j int) bool { return sel[i].start.Before(sel[j].start) })
		var order []string
		for i, r := range sel {
			order = append(order, r.key)
			if r.outcome == "running" {
				return fmt.Errorf("runsInOrder %v: %s is still running", keys, r.key)
			}
			if i > 0 && sel[i-1].end.After(r.start) {
				return fmt.Errorf("runsInOrder %v: %s started before %s ended", keys, r.key, sel[i-1].key)
			}
		}
		if !reflect.DeepEqual(order, keys) {
			return fmt.Errorf("runsInOrder: runs started in the order %v, want %v", order, keys)
		}
	}
	if c.MaxConcurrentPerAggregate != nil && maxPerAgg > *c.MaxConcurrentPerAggregate {
		return fmt.Errorf("up to %d runs of one aggregate ran at once, want at most %d", maxPerAgg, *c.MaxConcurrentPerAggregate)
	}
	if g := c.RetryGaps; g != nil {
		var sel []*run
		for _, r := range all {
			if r.key == g.Key {
				sel = append(sel, r)
			}
		}
		sort.Slice(sel, func(i, j int) bool { return sel[i].start.Before(sel[j].start) })
		if len(sel) < len(g.AtLeastMs)+1 {
			return fmt.Errorf("retryGaps: %s ran %d times, want at least %d", g.Key, len(sel), len(g.AtLeastMs)+1)
		}
		for i, least := range g.AtLeastMs {
			gap := sel[i+1].start.Sub(sel[i].end)
			if gap < time.Duration(least)*time.Millisecond-10*time.Millisecond {
				return fmt.Errorf("retryGaps: run %d of %s started %s after run %d ended, want at least %d ms", i+2, g.Key, gap, i+1, least)
			}
		}
	}
	if d := c.DistinctClaimTokens; d != nil {
		tokens := map[string]bool{}
		for _, r := range all {
			if r.key == d.Key {
				tokens[r.token] = true
			}
		}
		if len(tokens) != d.Count {
			return fmt.Errorf("%s ran under %d distinct claim tokens, want %d", d.Key, len(tokens), d.Count)
		}
	}
	for _, s := range c.LogsContain {
		found := false
		for _, l := range logs {
			found = found || strings.Contains(l, s)
		}
		if !found {
			return fmt.Errorf("no log line contains %q; lines: %q", s, logs)
		}
	}
	for _, s := range c.LogsExclude {
		for _, l := range logs {
			if strings.Contains(l, s) {
				return fmt.Errorf("a log line contains %q: %q", s, l)
			}
		}
	}
	return nil
}

// matchRuns reports whether every pattern matches a distinct run and no run is left over.
func matchRuns(patterns []runPattern, runs []*run) bool {
	if len(patterns) != len(runs) {
		return false
	}
	used := make([]bool, len(runs))
	var try func(i int) bool
	try = func(i int) bool {
		if i == len(patterns) {
			return true
		}
		p := patterns[i]
		for j, r := range runs {
			if used[j] ||
				(p.Worker != nil && *p.Worker != r.worker) ||
				(p.Key != nil && *p.Key != r.key) ||
				(p.Outcome != nil && *p.Outcome != r.outcome) ||
				(p.Attempt != nil && *p.Attempt != r.attempt) {
				continue
			}
			used[j] = true
			if try(i + 1) {
				return true
			}
			used[j] = false
		}
		return false
	}
	return try(0)
}

func describeRuns(runs []*run) string {
	parts := make([]string, len(runs))
	for i, r := range runs {
		parts[i] = fmt.Sprintf("{%s %s attempt=%d %s}", r.worker, r.key, r.attempt, r.outcome)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func describePatterns(ps []runPattern) string {
	b, _ := json.Marshal(ps)
	return string(b)
}
