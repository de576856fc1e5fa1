package queuebox

import (
	"context"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// Options configures an InboxWorker. A zero field takes the default that its comment states.
type Options struct {
	// Source is the source whose rows the worker takes: a key of the sources map in
	// queuebox.yml whose consumption is pull. Required.
	Source string
	// BatchSize is the largest number of rows in one claim. Default 10.
	BatchSize int
	// LeaseMS is the lease duration in milliseconds, from 3 to 2^31-1. The worker renews the
	// lease of every row it holds every LeaseMS/3 milliseconds. Default 30000.
	LeaseMS int
	// MaxConcurrency is the largest number of handlers that run at one time. Default 1.
	MaxConcurrency int
	// PollInterval is the wait after a claim that returned nothing. Default 1 second.
	PollInterval time.Duration
	// ShutdownGrace is how long a stop waits for running handlers before it cancels them.
	// Default 30 seconds.
	ShutdownGrace time.Duration
	// Dialect is the database dialect. Default DialectPostgreSQL.
	Dialect Dialect
	// Schema holds the table and column names for a mapped inbox table. Default: the names of
	// DefaultSchema.
	Schema *Schema
	// RetryPolicy decides what happens to a row whose handler failed. Default:
	// NewDefaultRetryPolicy(5, time.Second, 5*time.Minute, 0.2).
	RetryPolicy RetryPolicy
	// Logger receives the worker's log lines, sanitized. Default: none, the worker prints
	// nothing.
	Logger Logger
	// TracerProvider makes the span of each handler run, a child of the W3C trace context
	// (traceparent, tracestate) in the row's headers. Default: the global provider of the
	// OpenTelemetry API (otel.GetTracerProvider), which records nothing until the application
	// installs an SDK.
	TracerProvider trace.TracerProvider
}

// Defaults of Options.
const (
	defaultBatchSize      = 10
	defaultLeaseMS        = 30_000
	defaultMaxConcurrency = 1
	defaultPollInterval   = time.Second
	defaultShutdownGrace  = 30 * time.Second
)

const (
	// claimTimeout bounds one claim call. On SQL Server it must stay at 30 seconds or more, so
	// that the server gives up on the per-source lock (after 10 seconds, Msg 51000) before the
	// driver abandons the call and leaves the lock held until the connection resets.
	claimTimeout = 35 * time.Second
	// statementTimeout bounds the retry and dead statements.
	statementTimeout = 30 * time.Second
	// maxBackoff is the longest wait after claims that keep failing.
	maxBackoff = 30 * time.Second
	// maxDelayMS is the largest delay_ms and lease_ms that the statements accept (an INT on
	// SQL Server).
	maxDelayMS = math.MaxInt32
	// claimLockBusy is the error number that the SQL Server claim raises when it did not get
	// the per-source application lock within 10 seconds.
	claimLockBusy = 51000
)

var (
	// errLeaseLost is the cause of a handler's cancellation when a renewal found that another
	// worker owns the row, or that the lease ran out.
	errLeaseLost = errors.New("queuebox: the lease was lost")
	// errGraceOver is the cause of a handler's cancellation when a shutdown ran out of grace.
	errGraceOver = errors.New("queuebox: the shutdown grace ran out")
)

// withDefaults returns the options with every zero field set to its default.
func (o Options) withDefaults() Options {
	if o.BatchSize == 0 {
		o.BatchSize = defaultBatchSize
	}
	if o.LeaseMS == 0 {
		o.LeaseMS = defaultLeaseMS
	}
	if o.MaxConcurrency == 0 {
		o.MaxConcurrency = defaultMaxConcurrency
	}
	if o.PollInterval == 0 {
		o.PollInterval = defaultPollInterval
	}
	if o.ShutdownGrace == 0 {
		o.ShutdownGrace = defaultShutdownGrace
	}
	if o.Dialect == "" {
		o.Dialect = DialectPostgreSQL
	}
	if o.RetryPolicy == nil {
		o.RetryPolicy = NewDefaultRetryPolicy(defaultMaxAttempts, defaultBaseDelay, defaultMaxDelay, defaultJitter)
	}
	return o
}

// validate names every field of o that cannot work.
func (o Options) validate() error {
	var bad []string
	if strings.TrimSpace(o.Source) == "" {
		bad = append(bad, "Source is required")
	}
	if o.BatchSize < 1 {
		bad = append(bad, fmt.Sprintf("BatchSize %d must be 1 or more", o.BatchSize))
	}
	if o.LeaseMS < 3 || o.LeaseMS > maxDelayMS {
		bad = append(bad, fmt.Sprintf("LeaseMS %d must be from 3 to %d", o.LeaseMS, maxDelayMS))
	}
	if o.MaxConcurrency < 1 {
		bad = append(bad, fmt.Sprintf("MaxConcurrency %d must be 1 or more", o.MaxConcurrency))
	}
	if o.PollInterval < 0 {
		bad = append(bad, fmt.Sprintf("PollInterval %s must not be negative", o.PollInterval))
	}
	if o.ShutdownGrace < 0 {
		bad = append(bad, fmt.Sprintf("ShutdownGrace %s must not be negative", o.ShutdownGrace))
	}
	if o.Dialect != DialectPostgreSQL && o.Dialect != DialectSQLServer {
		bad = append(bad, fmt.Sprintf("Dialect %q must be %q or %q", o.Dialect, DialectPostgreSQL, DialectSQLServer))
	}
	if len(bad) > 0 {
		return fmt.Errorf("queuebox: invalid options: %s", strings.Join(bad, "; "))
	}
	return nil
}

// InboxWorker claims the pull rows of one source and runs a Handler for each, in a transaction
// that also completes the row. Build it with NewInboxWorker and start it with Run. Several
// workers, in one process or many, can share a source: the claim never gives two of them rows
// of one aggregate at the same time.
type InboxWorker struct {
	db      *sql.DB
	opts    Options
	stmts   statements
	claims  claimTexts // the claim with its limits in the text, per batch size
	log     safeLogger
	tracer  trace.Tracer
	running atomic.Bool
}

// NewInboxWorker builds a worker on db, whose driver the application has registered (pgx for
// PostgreSQL, go-mssqldb for SQL Server). It fills the defaults of options and returns an
// error for a setting that cannot work: no Source, a negative size or duration, an unknown
// Dialect, or a Schema name that is not a SQL identifier. It does not touch the database.
func NewInboxWorker(db *sql.DB, options Options) (*InboxWorker, error) {
	if db == nil {
		return nil, errors.New("queuebox: NewInboxWorker needs a *sql.DB")
	}
	opts := options.withDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	schema := DefaultSchema()
	if opts.Schema != nil {
		schema = *opts.Schema
	}
	schema, err := schema.resolve()
	if err != nil {
		return nil, fmt.Errorf("queuebox: invalid options: %w", err)
	}
	opts.Schema = &schema
	stmts, err := loadStatements(opts.Dialect, schema)
	if err != nil {
		return nil, fmt.Errorf("queuebox: %w", err)
	}
	return &InboxWorker{db: db, opts: opts, stmts: stmts, log: safeLogger{opts.Logger}, tracer: newTracer(opts.TracerProvider)}, nil
}

// candidateLimit is cand_limit of the claim: LEAST(GREATEST(3 * batch, 50), 500).
func candidateLimit(batch int) int {
	return min(max(3*batch, 50), 500)
}

// claimed is one row that the worker holds: the message, its claim token, and the context and
// renewal that belong to it.
type claimed struct {
	msg     Message
	token   string
	readErr error // the row could not be read into a Message; it fails without a handler

	ctx    context.Context // the handler's context; cancelled on a lost lease or after the grace
	cancel context.CancelCauseFunc

	ren      *renewals  // the renewals of the Run that holds the row; nil until it is registered
	renewing sync.Mutex // held while a renewal of the row runs
	next     time.Time  // when the row is due for renewal; guarded by ren.mu
	stopped  bool       // the row is no longer renewed; guarded by ren.mu
}

// Run claims rows of the source and handles them until ctx is cancelled, then stops: it
// claims nothing more and does not start the rows it holds but has not started (their leases
// expire), waits up to ShutdownGrace for the running handlers, then cancels the handlers that
// are still running. For a cancelled handler the worker completes nothing and spends no
// attempt: the lease expires and another worker takes the row. Run returns nil after such a
// stop, once every handler has returned.
//
// Database errors while claiming are logged and retried with a growing wait, so Run keeps
// going while the database is away. Run returns an error only for a nil handler, or when the
// worker is already running. One worker runs one Run at a time.
func (w *InboxWorker) Run(ctx context.Context, handler Handler) error {
	if handler == nil {
		return errors.New("queuebox: Run needs a handler")
	}
	if !w.running.CompareAndSwap(false, true) {
		return errors.New("queuebox: the worker is already running")
	}
	defer w.running.Store(false)

	// Handlers and renewals outlive ctx by the shutdown grace; hard ends them.
	hard, endHard := context.WithCancelCause(context.WithoutCancel(ctx))
	defer endHard(nil)
	// The grace runs from the stop, even when a SQL Server claim in flight delays the claimer.
	var stoppedAt atomic.Int64
	defer context.AfterFunc(ctx, func() { stoppedAt.Store(time.Now().UnixNano()) })()

	w.log.info("inbox pull worker started", map[string]any{
		"source": w.opts.Source, "batch_size": w.opts.BatchSize, "lease_ms": w.opts.LeaseMS,
		"max_concurrency": w.opts.MaxConcurrency,
	})

	// The claimer (this goroutine) puts claimed rows on queue; MaxConcurrency runner goroutines
	// take them one at a time and run a handler for each. A worker holds at most
	// BatchSize + MaxConcurrency - 1 rows, running or waiting, as many as it would hold if it
	// claimed BatchSize rows whenever a handler came free. Within that bound it claims again as
	// soon as no more than MaxConcurrency rows wait, so that the next rows are there when the
	// running handlers finish, and a claim in flight leaves no runner idle. It claims no earlier:
	// on a busy database every claim costs a commit, a plan and a walk over the index entries of
	// the rows claimed since the last vacuum, so fewer, larger claims go further. One goroutine
	// renews the leases of all the rows that the worker holds.
	t := &tracker{
		queue: make(chan *claimed, w.opts.BatchSize+w.opts.MaxConcurrency),
		wake:  make(chan struct{}, 1),
		renew: newRenewals(w.renewInterval()),
	}
	renewQuit, renewDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(renewDone)
		w.renewLoop(hard, t.renew, renewQuit)
	}()
	// The renewals end after every handler has returned, before Run returns.
	defer func() {
		close(renewQuit)
		<-renewDone
	}()
	done := make(chan struct{})
	var runners sync.WaitGroup
	for range w.opts.MaxConcurrency {
		runners.Add(1)
		go func() {
			defer runners.Done()
			w.runHandlers(ctx, t, handler)
		}()
	}
	go func() {
		runners.Wait()
		close(done)
	}()
	w.claimLoop(ctx, hard, t)
	close(t.queue)
	// The rows that wait have not started and never will: leave them to their leases.
	var dropped []*claimed
	for c := range t.queue {
		dropped = append(dropped, c)
	}
	w.drop(dropped)

	select {
	case <-done:
	default:
		w.log.info("stopping: waiting for the running handlers", map[string]any{
			"source": w.opts.Source, "shutdown_grace_ms": w.opts.ShutdownGrace.Milliseconds(),
		})
		remaining := w.opts.ShutdownGrace
		if at := stoppedAt.Load(); at != 0 {
			remaining -= time.Since(time.Unix(0, at))
		}
		grace := time.NewTimer(max(remaining, 0))
		select {
		case <-done:
			grace.Stop()
		case <-grace.C:
			w.log.warn("the shutdown grace ran out: cancelling the running handlers; their rows are not completed, spend no attempt, and their leases expire", map[string]any{"source": w.opts.Source})
			endHard(errGraceOver)
			<-done
		}
	}
	w.log.info("inbox pull worker stopped", map[string]any{"source": w.opts.Source})
	return nil
}

// tracker holds the state that the claimer and the runners of a Run share.
type tracker struct {
	queue chan *claimed // claimed rows that wait for a runner
	wake  chan struct{} // signalled when a row leaves the queue or a handler ends
	held  atomic.Int64  // rows claimed and not finished: waiting or running
	renew *renewals     // the leases that the worker renews
}

// signal wakes the claimer, without waiting.
func (t *tracker) signal() {
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

// claimLoop claims rows and queues them until ctx ends. It returns at once when ctx ends,
// dropping the rows of a claim that returns after that.
func (w *InboxWorker) claimLoop(ctx, hard context.Context, t *tracker) {
	limit := w.opts.BatchSize + w.opts.MaxConcurrency - 1
	failures := 0
	for ctx.Err() == nil {
		room := limit - int(t.held.Load())
		if room < 1 || len(t.queue) > w.opts.MaxConcurrency {
			select {
			case <-t.wake:
			case <-ctx.Done():
			}
			continue
		}
		batch, err := w.claim(ctx, hard, min(room, w.opts.BatchSize))
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			failures++
			wait := backoff(w.opts.PollInterval, failures)
			fields := map[string]any{"source": w.opts.Source, "error": err, "retry_in_ms": wait.Milliseconds()}
			if isClaimLockBusy(err) {
				w.log.warn("the per-source claim lock is busy; waiting before the next claim", fields)
			} else {
				w.log.error("claiming inbox rows; waiting before the next claim", fields)
			}
			sleep(ctx, wait)
			continue
		}
		failures = 0
		if ctx.Err() != nil {
			w.drop(batch)
			return
		}
		if len(batch) == 0 {
			sleep(ctx, w.opts.PollInterval)
			continue
		}
		t.held.Add(int64(len(batch)))
		t.renew.add(batch)
		for _, c := range batch {
			t.queue <- c // never blocks: held rows never exceed the capacity
		}
	}
}

// runHandlers takes queued rows one at a time and runs a handler for each, until the queue
// closes or ctx ends. It starts nothing after ctx ends: Run drops the rows that still wait.
func (w *InboxWorker) runHandlers(ctx context.Context, t *tracker, handler Handler) {
	for {
		var c *claimed
		select {
		case <-ctx.Done():
			return
		case next, ok := <-t.queue:
			if !ok {
				return
			}
			c = next
		}
		if ctx.Err() != nil {
			// The stop came while the row was taken: it does not start.
			t.held.Add(-1)
			w.drop([]*claimed{c})
			return
		}
		if c.ctx.Err() != nil {
			// The lease was lost while the row waited for a runner.
			c.stopRenewal()
			c.cancel(nil)
			t.held.Add(-1)
			t.signal()
			w.log.warn("lost the lease of a row before its handler started", c.fields(nil))
			continue
		}
		t.signal()
		w.handle(c, handler)
		t.held.Add(-1)
		t.signal()
	}
}

// sleep waits for d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// backoff returns the wait after the n-th claim in a row that failed: the poll interval,
// doubled for each further failure, at most 30 seconds, and never below 100 ms.
func backoff(poll time.Duration, n int) time.Duration {
	d := max(poll, 100*time.Millisecond)
	for i := 1; i < n && d < maxBackoff; i++ {
		d *= 2
	}
	return min(d, maxBackoff)
}

// drop gives up rows that were claimed but not started: their renewal stops and their leases
// expire, so another worker takes them without an attempt spent.
func (w *InboxWorker) drop(batch []*claimed) {
	for _, c := range batch {
		c.stopRenewal()
		c.cancel(nil)
	}
	if len(batch) > 0 {
		w.log.info("stopping: leaving claimed rows that did not start to their leases", map[string]any{
			"source": w.opts.Source, "rows": len(batch),
		})
	}
}

// claim claims up to batch rows. It runs the claim statement alone, as one autocommit
// statement (PostgreSQL) or as the batch that opens and commits its own transaction (SQL
// Server), and reads every row and the end of the response. Each row gets its handler's
// context; the caller registers the rows for renewal.
func (w *InboxWorker) claim(ctx, hard context.Context, batch int) ([]*claimed, error) {
	parent := ctx
	if w.opts.Dialect == DialectSQLServer {
		// Never abandon a SQL Server claim halfway: the per-source lock would stay held until
		// the connection resets. The server itself gives up after 10 seconds (Msg 51000).
		parent = context.WithoutCancel(ctx)
	}
	cctx, cancel := context.WithTimeout(parent, claimTimeout)
	defer cancel()
	claim := w.claims.statement(w.stmts.claim, batch)
	args, err := claim.args(map[string]any{
		"source":     w.opts.Source,
		"batch":      int64(batch),
		"lease_ms":   int64(w.opts.LeaseMS),
		"cand_limit": int64(candidateLimit(batch)),
	})
	if err != nil {
		return nil, err
	}
	rows, err := w.db.QueryContext(cctx, claim.text, args...)
	if err != nil {
		return nil, fmt.Errorf("claiming inbox rows: %w", err)
	}
	defer rows.Close()
	var out []*claimed
	for rows.Next() {
		c, err := w.scanClaim(rows)
		if err != nil {
			return nil, fmt.Errorf("claiming inbox rows: %w", err)
		}
		out = append(out, c)
	}
	// An error after the rows means that the claim did not commit: drop the rows.
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("claiming inbox rows: %w", err)
	}
	if err := rows.Close(); err != nil {
		return nil, fmt.Errorf("claiming inbox rows: %w", err)
	}
	for _, c := range out {
		c.ctx, c.cancel = context.WithCancelCause(hard)
	}
	return out, nil
}

// scanClaim reads one row of the claim. The columns come in the order of the contract:
// id, source, idempotency_key, aggregate_id, event_type, payload, headers, attempt,
// correlation_id, claim_token.
func (w *InboxWorker) scanClaim(rows *sql.Rows) (*claimed, error) {
	var (
		id, token                         any
		source, key                       string
		aggregate, eventType, correlation sql.NullString
		payload, headers                  []byte
		attempt                           int64
	)
	if err := rows.Scan(&id, &source, &key, &aggregate, &eventType, &payload, &headers, &attempt, &correlation, &token); err != nil {
		return nil, fmt.Errorf("reading a claimed row: %w", err)
	}
	idText, err := uuidText(id, w.opts.Dialect)
	if err != nil {
		return nil, fmt.Errorf("reading the id of a claimed row: %w", err)
	}
	tokenText, err := uuidText(token, w.opts.Dialect)
	if err != nil {
		return nil, fmt.Errorf("reading the claim token of row %s: %w", idText, err)
	}
	c := &claimed{
		token: tokenText,
		msg: Message{
			ID:             idText,
			Source:         source,
			IdempotencyKey: key,
			AggregateID:    aggregate.String,
			EventType:      eventType.String,
			Payload:        payload,
			Attempt:        int(attempt),
			CorrelationID:  correlation.String,
		},
	}
	if c.msg.Headers, err = parseHeaders(headers); err != nil {
		c.msg.Headers = map[string]string{}
		c.readErr = fmt.Errorf("reading the claimed row: %w", err)
	}
	return c, nil
}

// uuidText returns a UUID that the driver returned in its canonical lower-case text form.
// go-mssqldb returns a UNIQUEIDENTIFIER as 16 bytes in SQL Server's order, whose first three
// groups are little-endian.
func uuidText(v any, dialect Dialect) (string, error) {
	switch x := v.(type) {
	case string:
		return strings.ToLower(x), nil
	case []byte:
		if len(x) != 16 {
			return strings.ToLower(string(x)), nil
		}
		b := make([]byte, 16)
		copy(b, x)
		if dialect == DialectSQLServer {
			b[0], b[1], b[2], b[3] = b[3], b[2], b[1], b[0]
			b[4], b[5] = b[5], b[4]
			b[6], b[7] = b[7], b[6]
		}
		h := hex.EncodeToString(b)
		return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:], nil
	case [16]byte:
		return uuidText(x[:], DialectPostgreSQL)
	case nil:
		return "", errors.New("the value is NULL")
	default:
		return "", fmt.Errorf("unexpected type %T", v)
	}
}

// renewals holds the rows that a Run renews. One goroutine, renewLoop, extends the lease of
// each row every third of the lease duration, so a row whose handler finishes sooner costs no
// goroutine, timer or statement for its renewal.
type renewals struct {
	mu       sync.Mutex
	rows     map[*claimed]struct{}
	interval time.Duration // a third of the lease
}

// newRenewals returns an empty set of renewals, each row renewed every interval.
func newRenewals(interval time.Duration) *renewals {
	return &renewals{rows: map[*claimed]struct{}{}, interval: interval}
}

// renewInterval is the time between two renewals of a row: a third of the lease.
func (w *InboxWorker) renewInterval() time.Duration {
	return time.Duration(w.opts.LeaseMS) * time.Millisecond / 3
}

// add starts renewing the rows of a claim: the first renewal of each is due a third of the
// lease from now. It need not wake renewLoop, which never sleeps past the interval.
func (r *renewals) add(batch []*claimed) {
	if len(batch) == 0 {
		return
	}
	next := time.Now().Add(r.interval)
	r.mu.Lock()
	for _, c := range batch {
		c.ren = r
		c.next = next
		r.rows[c] = struct{}{}
	}
	r.mu.Unlock()
}

// renewLoop renews every row that is due, each on its own connection and all at once, and
// then sleeps until the next row is due. It returns when quit closes or hard ends. A renewal
// in flight is never cancelled by a stop; it is bounded by its own timeout.
func (w *InboxWorker) renewLoop(hard context.Context, r *renewals, quit <-chan struct{}) {
	interval := r.interval
	timer := time.NewTimer(interval)
	defer timer.Stop()
	var due []*claimed
	var renewing sync.WaitGroup
	for {
		now := time.Now()
		next := now.Add(interval)
		due = due[:0]
		r.mu.Lock()
		for c := range r.rows {
			if c.ctx.Err() != nil {
				delete(r.rows, c)
				continue
			}
			if !c.next.After(now) {
				due = append(due, c)
				c.next = now.Add(interval)
			}
			if c.next.Before(next) {
				next = c.next
			}
		}
		r.mu.Unlock()
		for _, c := range due {
			renewing.Add(1)
			go func() {
				defer renewing.Done()
				w.renew(hard, c, interval)
			}()
		}
		renewing.Wait()
		if len(due) > 0 {
			continue // the renewals took time: look again
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(time.Until(next))
		select {
		case <-quit:
			return
		case <-hard.Done():
			return
		case <-timer.C:
		}
	}
}

// renew extends the lease of c once. A renewal that changes no row means that the lease is
// lost: it cancels the handler's context, so that the handler stops and its transaction rolls
// back, and renews the row no more.
func (w *InboxWorker) renew(hard context.Context, c *claimed, interval time.Duration) {
	c.renewing.Lock()
	defer c.renewing.Unlock()
	c.ren.mu.Lock()
	stopped := c.stopped
	c.ren.mu.Unlock()
	if stopped || c.ctx.Err() != nil || hard.Err() != nil {
		return
	}
	args, err := w.stmts.renew.args(map[string]any{"id": c.msg.ID, "token": c.token, "lease_ms": int64(w.opts.LeaseMS)})
	if err != nil {
		w.log.error("renewing a lease", c.fields(err))
		return
	}
	rctx, cancel := context.WithTimeout(hard, max(interval, time.Second))
	res, err := w.db.ExecContext(rctx, w.stmts.renew.text, args...)
	cancel()
	if err != nil {
		if hard.Err() == nil {
			// The next renewal tries again; once the lease has run out it finds no row.
			w.log.warn("renewing a lease", c.fields(err))
		}
		return
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		c.ren.mu.Lock()
		c.stopped = true
		delete(c.ren.rows, c)
		c.ren.mu.Unlock()
		c.cancel(errLeaseLost)
		w.log.warn("lost the lease: another worker owns the row, or the lease ran out; cancelling its handler", c.fields(nil))
	}
}

// stopRenewal stops the renewal of c and waits for a renewal of c in flight to return, so that
// no renewal runs beside the completion, retry or dead letter of the row.
func (c *claimed) stopRenewal() {
	if c.ren == nil {
		return
	}
	c.ren.mu.Lock()
	c.stopped = true
	delete(c.ren.rows, c)
	c.ren.mu.Unlock()
	c.renewing.Lock() // waits for the renewal in flight, if any
	c.renewing.Unlock()
}

// fields returns the log fields of c, with err when it is not nil.
func (c *claimed) fields(err error) map[string]any {
	f := map[string]any{
		"source": c.msg.Source, "id": c.msg.ID, "idempotency_key": c.msg.IdempotencyKey,
		"attempt": c.msg.Attempt,
	}
	if c.msg.CorrelationID != "" {
		f["correlation_id"] = c.msg.CorrelationID
	}
	if err != nil {
		f["error"] = err
	}
	return f
}

// handle runs the handler for c in a new transaction and completes the row in it, or fails the
// row through the retry policy.
func (w *InboxWorker) handle(c *claimed, handler Handler) {
	defer c.cancel(nil)
	if c.readErr != nil {
		c.stopRenewal()
		w.fail(c, c.readErr)
		return
	}
	// The handler's context carries its span; it ends when c.ctx ends.
	hctx, span := w.startHandlerSpan(c.ctx, c.msg)
	// The transaction is bound to the handler's context: database/sql rolls it back when the
	// lease is lost or the grace runs out.
	tx, err := w.db.BeginTx(hctx, nil)
	if err != nil {
		c.stopRenewal()
		if c.ctx.Err() != nil {
			span.end(resultCancelled, context.Cause(c.ctx))
			w.log.warn("handler cancelled before it started; the row is not completed and its lease expires", c.fields(context.Cause(c.ctx)))
			return
		}
		span.end(resultError, err)
		w.log.error("beginning the handler transaction; the row is not completed and its lease expires", c.fields(err))
		return
	}
	herr := callHandler(hctx, handler, c.msg, tx)
	if c.ctx.Err() != nil {
		_ = tx.Rollback()
		c.stopRenewal()
		span.end(resultCancelled, context.Cause(c.ctx))
		w.log.warn("handler cancelled; its writes are rolled back, the row is not completed and its lease expires", c.fields(context.Cause(c.ctx)))
		return
	}
	if herr != nil {
		_ = tx.Rollback()
		c.stopRenewal()
		span.end(resultFailed, herr)
		w.fail(c, herr)
		return
	}
	c.stopRenewal()
	args, err := w.stmts.complete.args(map[string]any{"id": c.msg.ID, "token": c.token})
	if err != nil {
		_ = tx.Rollback()
		span.end(resultError, err)
		w.log.error("completing a row", c.fields(err))
		return
	}
	res, err := tx.ExecContext(hctx, w.stmts.complete.text, args...)
	if err != nil {
		_ = tx.Rollback()
		if c.ctx.Err() != nil {
			span.end(resultCancelled, context.Cause(c.ctx))
			w.log.warn("handler cancelled during the completion; its writes are rolled back, the row is not completed and its lease expires", c.fields(context.Cause(c.ctx)))
			return
		}
		span.end(resultError, err)
		w.log.error("completing a row; its writes are rolled back and its lease expires", c.fields(err))
		return
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		_ = tx.Rollback()
		span.end(resultLost, errLeaseLost)
		w.log.warn("lost the lease before the completion: another worker owns the row; the handler's writes are rolled back", c.fields(err))
		return
	}
	if err := tx.Commit(); err != nil {
		span.end(resultError, err)
		w.log.error("committing a completed row; if the commit did not reach the database, the row runs again after its lease", c.fields(err))
		return
	}
	span.end(resultCompleted, nil)
}

// callHandler runs the handler and turns a panic into an error.
func callHandler(ctx context.Context, handler Handler, msg Message, tx *sql.Tx) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("handler panicked: %v", r)
		}
	}()
	return handler(ctx, msg, tx)
}

// fail asks the retry policy about a failed row and runs the retry or dead statement in a
// transaction of its own, fenced on the claim token.
func (w *InboxWorker) fail(c *claimed, failure error) {
	action := w.decide(c, failure)
	text := SanitizeError(failure)
	stmt := w.stmts.retry
	values := map[string]any{"id": c.msg.ID, "token": c.token, "error": text}
	verb := "retrying"
	if action.IsDeadLetter() {
		stmt, verb = w.stmts.dead, "dead-lettering"
	} else {
		values["delay_ms"] = delayMS(action.Delay())
	}
	fields := c.fields(failure)
	if !action.IsDeadLetter() {
		fields["retry_in_ms"] = values["delay_ms"]
	}
	ctx, cancel := context.WithTimeout(c.ctx, statementTimeout)
	defer cancel()
	err := w.fenced(ctx, stmt, values)
	switch {
	case errors.Is(err, errLeaseLost), err != nil && errors.Is(context.Cause(c.ctx), errLeaseLost):
		w.log.warn("handler failed, and the lease was lost before "+verb+" the row; another worker owns it", fields)
	case err != nil && c.ctx.Err() != nil:
		w.log.warn("handler failed, and the shutdown grace ran out before "+verb+" the row; its lease expires", fields)
	case err != nil:
		fields["statement_error"] = err
		w.log.error("handler failed; "+verb+" the row did not reach the database, and its lease expires", fields)
	case action.IsDeadLetter():
		w.log.error("handler failed; the row is dead", fields)
	default:
		w.log.warn("handler failed; the row will be retried", fields)
	}
}

// decide asks the retry policy, and falls back to the default policy when it panics.
func (w *InboxWorker) decide(c *claimed, failure error) (action FailureAction) {
	defer func() {
		if r := recover(); r != nil {
			w.log.error("the retry policy panicked; using the default policy", c.fields(fmt.Errorf("retry policy panicked: %v", r)))
			action = NewDefaultRetryPolicy(defaultMaxAttempts, defaultBaseDelay, defaultMaxDelay, defaultJitter).Decide(c.msg, failure)
		}
	}()
	return w.opts.RetryPolicy.Decide(c.msg, failure)
}

// delayMS returns a retry delay in whole milliseconds, within [0, 2^31-1].
func delayMS(d time.Duration) int64 {
	ms := d.Milliseconds()
	if d > 0 && d%time.Millisecond != 0 {
		ms++ // round up, so that a retry never comes early
	}
	return min(max(ms, 0), maxDelayMS)
}

// fenced runs a retry or dead statement in a transaction of its own and commits it only when
// it changed exactly one row. Zero rows returns errLeaseLost.
func (w *InboxWorker) fenced(ctx context.Context, stmt statement, values map[string]any) error {
	args, err := stmt.args(values)
	if err != nil {
		return err
	}
	tx, err := w.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("beginning the %s transaction: %w", stmt.name, err)
	}
	res, err := tx.ExecContext(ctx, stmt.text, args...)
	if err != nil {
		_ = tx.Rollback()
		return fmt.Errorf("running the %s statement: %w", stmt.name, err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		_ = tx.Rollback()
		return errLeaseLost
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("committing the %s statement: %w", stmt.name, err)
	}
	return nil
}

// isClaimLockBusy reports whether err is Msg 51000 of the SQL Server claim: the per-source
// application lock was not acquired within 10 seconds. The driver's error is recognised by its
// error number (go-mssqldb's mssql.Error has SQLErrorNumber), never by its text.
func isClaimLockBusy(err error) bool {
	var numbered interface{ SQLErrorNumber() int32 }
	return errors.As(err, &numbered) && numbered.SQLErrorNumber() == claimLockBusy
}
