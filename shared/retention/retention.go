// Package retention is the cleanup cycle of QueueBox (spec/23-configuration.md, "retention";
// spec/03-delivery-semantics.md, "Retention"): it deletes finished outbox and inbox rows in
// batches, and never a row that waits or runs.
//
// Each table has its own policy:
//
//   - outbox AGE deletes sent and dead rows whose updated_at is older than maxAge;
//   - outbox COUNT keeps the maxCount newest sent rows and, apart from them, the maxCount
//     newest dead rows, and deletes the rest of those two states;
//   - inbox AGE deletes processed and dead rows whose created_at is older than maxAge;
//   - DISABLED deletes nothing.
//
// Nothing runs unless retention.enabled is true. A pending or processing row never goes,
// whatever its age: the store's statements guarantee it, and this package's tests check it.
//
// One run of a table repeats its delete statement, batchSize rows at most each, until a
// statement deletes fewer rows than batchSize (river's job cleaner does the same), so a large
// backlog never holds one long transaction. A run stops early, without an error, when its
// context ends; the rows it has not reached wait for the next run.
//
// Two ways drive the cycle. The local process calls Run, which runs each table at start and
// then again cleanupInterval after the end of its previous run, each table on its own
// interval. The retention Lambda function calls RunOnce on every invocation: there the
// EventBridge schedule is the interval, and cleanupInterval is not read (see
// shared/lambdafn.RetentionHandler).
package retention

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/alternayte/queuebox/shared/health"
	"github.com/alternayte/queuebox/shared/store"
)

// The table labels of the metrics and the log lines.
const (
	TableOutbox = "outbox"
	TableInbox  = "inbox"
)

// Defaults of the Options and of a table block whose field is zero.
const (
	// DefaultBatchSize is the batchSize of a table block that leaves it 0.
	DefaultBatchSize = 1000
	// DefaultCleanupInterval is the cleanupInterval of a table block that leaves it unset.
	DefaultCleanupInterval = time.Hour
	// DefaultBatchPause is the pause between two full batches of one run.
	DefaultBatchPause = 50 * time.Millisecond
	// DefaultStatementTimeout bounds one delete statement.
	DefaultStatementTimeout = 30 * time.Second
	// DefaultRetryDelay is how soon Run tries a table again after a failed run, when its
	// cleanupInterval is longer.
	DefaultRetryDelay = time.Minute
)

// Policy is the policy of a table: AGE, COUNT (outbox only) or DISABLED, in upper case.
type Policy string

// The values of Policy.
const (
	PolicyAge      Policy = "AGE"
	PolicyCount    Policy = "COUNT"
	PolicyDisabled Policy = "DISABLED"
)

// Config is the retention section (retention.*).
type Config struct {
	// Enabled runs the cleanup. Default: false.
	Enabled bool
	// Outbox is the outbox policy: AGE, COUNT or DISABLED.
	Outbox TableConfig
	// Inbox is the inbox policy: AGE or DISABLED.
	Inbox TableConfig
}

// TableConfig is retention.outbox or retention.inbox.
type TableConfig struct {
	// Policy is AGE, COUNT (outbox only) or DISABLED. Default: DISABLED.
	Policy Policy
	// MaxAge is the age past which rows go. Required by AGE, and above 0.
	MaxAge time.Duration
	// MaxCount is how many sent rows, and apart from them how many dead rows, the outbox count
	// policy keeps. Required by COUNT, and above 0.
	MaxCount int
	// CleanupInterval is the wait between two runs of Run. Default: 1h (DefaultCleanupInterval).
	CleanupInterval time.Duration
	// BatchSize is the largest number of rows that one delete statement removes. Default: 1000
	// (DefaultBatchSize).
	BatchSize int
}

// WithDefaults fills the zero fields of both tables with their defaults.
func (c Config) WithDefaults() Config {
	c.Outbox, c.Inbox = c.Outbox.WithDefaults(), c.Inbox.WithDefaults()
	return c
}

// validate checks both table blocks, as config.Load does; its errors name the key.
func (c Config) validate() error {
	return errors.Join(c.Outbox.validate(TableOutbox), c.Inbox.validate(TableInbox))
}

// WithDefaults fills the zero fields with their defaults: policy DISABLED, cleanupInterval 1h
// and batchSize 1000.
func (t TableConfig) WithDefaults() TableConfig {
	if t.Policy == "" {
		t.Policy = PolicyDisabled
	}
	if t.CleanupInterval == 0 {
		t.CleanupInterval = DefaultCleanupInterval
	}
	if t.BatchSize == 0 {
		t.BatchSize = DefaultBatchSize
	}
	return t
}

// validate checks the block of the table name (outbox or inbox), defaults filled.
func (t TableConfig) validate(name string) error {
	key := "retention." + name
	switch {
	case t.Policy == PolicyDisabled:
		return nil
	case t.Policy == PolicyAge:
		if t.MaxAge <= 0 {
			return fmt.Errorf("%s.maxAge is required by policy AGE and must be above 0", key)
		}
	case t.Policy == PolicyCount && name == TableOutbox:
		if t.MaxCount <= 0 {
			return fmt.Errorf("%s.maxCount is required by policy COUNT and must be above 0", key)
		}
	default:
		return fmt.Errorf("%s.policy %q is not supported for the %s", key, t.Policy, name)
	}
	if t.CleanupInterval < 0 {
		return fmt.Errorf("%s.cleanupInterval must be above 0", key)
	}
	if t.BatchSize < 0 {
		return fmt.Errorf("%s.batchSize must be above 0", key)
	}
	return nil
}

// ErrRunning is returned by Run when another Run of the same Cleaner is active.
var ErrRunning = errors.New("retention: the cleaner is already running")

// Store holds the delete statements of retention; store.Store implements it. Every method
// deletes at most Limit rows in one statement and returns the count, never touches a pending
// or processing row, and is safe for concurrent use: two deletes that race only split the
// rows between them.
type Store interface {
	// OutboxDeleteFinished deletes sent and dead rows whose updated_at is older than MaxAge.
	OutboxDeleteFinished(ctx context.Context, params store.DeleteFinishedParams) (int64, error)
	// OutboxDeleteExcess deletes rows of State (sent or dead) beyond the Keep newest of it.
	OutboxDeleteExcess(ctx context.Context, params store.DeleteExcessParams) (int64, error)
	// InboxDeleteFinished deletes processed and dead rows whose created_at is older than MaxAge.
	InboxDeleteFinished(ctx context.Context, params store.DeleteFinishedParams) (int64, error)
}

var _ Store = store.Store(nil)

// Metrics records the cleanup runs (spec/28-metrics.md): *metrics.Registry implements it
// as queuebox_cleanup_messages_deleted_total{table}, queuebox_cleanup_duration_seconds{table}
// and queuebox_cleanup_last_run_timestamp{table}. It must be safe for concurrent use.
type Metrics interface {
	// Cleanup records one finished run of table: the rows it deleted, its duration, and the
	// time it finished.
	Cleanup(table string, deleted int64, d time.Duration, at time.Time)
}

// Options are the inputs of New.
type Options struct {
	// Store runs the delete statements. Required.
	Store Store
	// Config is the retention section. A zero policy is DISABLED, a zero batchSize is 1000
	// and a zero cleanupInterval is 1h (Config.WithDefaults), as the configuration defaults
	// them.
	Config Config
	// Metrics records each run that finishes. Nil discards the measurements.
	Metrics Metrics
	// Logger receives one line per run of a table. Nil means slog.Default().
	Logger *slog.Logger
	// Now is the clock of the recorded run times (metrics and Status); Run's schedule always
	// follows the real clock. Nil means time.Now.
	Now func() time.Time
	// BatchPause is the pause between two full batches of one run, which leaves the database
	// to other work while a large backlog goes. Default 50 ms (DefaultBatchPause); below 0
	// means no pause.
	BatchPause time.Duration
	// StatementTimeout bounds one delete statement, so that a statement stuck on a lock fails
	// the run instead of stalling it. Default 30 s (DefaultStatementTimeout).
	StatementTimeout time.Duration
	// RetryDelay is how soon Run tries a table again after a failed run, when the table's
	// cleanupInterval is longer. Default 1 min (DefaultRetryDelay).
	RetryDelay time.Duration
}

// Cleaner runs the retention policies. Its methods are safe for concurrent use; a RunOnce
// that overlaps a Run only splits the rows between them.
type Cleaner struct {
	store            Store
	metrics          Metrics
	log              *slog.Logger
	now              func() time.Time
	enabled          bool
	tables           []table
	batchPause       time.Duration
	statementTimeout time.Duration
	retryDelay       time.Duration

	mu      sync.Mutex
	running bool
	status  map[string]*TableStatus
}

// table is one table whose policy is not DISABLED.
type table struct {
	name     string
	policy   Policy
	maxAge   time.Duration
	maxCount int64
	interval time.Duration
	batch    int
}

// New returns a Cleaner for the policies of opts.Config. When retention is enabled it checks
// each table block as config.Load does, so that a hand-built block fails here and not at the
// first run; its errors name the key.
func New(opts Options) (*Cleaner, error) {
	if opts.Store == nil {
		return nil, errors.New("retention: a store is required")
	}
	c := &Cleaner{
		store:            opts.Store,
		metrics:          opts.Metrics,
		log:              opts.Logger,
		now:              opts.Now,
		enabled:          opts.Config.Enabled,
		batchPause:       opts.BatchPause,
		statementTimeout: opts.StatementTimeout,
		retryDelay:       opts.RetryDelay,
		status:           map[string]*TableStatus{},
	}
	if c.metrics == nil {
		c.metrics = nopMetrics{}
	}
	if c.log == nil {
		c.log = slog.Default()
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.batchPause == 0 {
		c.batchPause = DefaultBatchPause
	}
	if c.statementTimeout <= 0 {
		c.statementTimeout = DefaultStatementTimeout
	}
	if c.retryDelay <= 0 {
		c.retryDelay = DefaultRetryDelay
	}
	if !c.enabled {
		return c, nil
	}
	cfg := opts.Config.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("retention: %w", err)
	}
	for _, t := range []table{newTable(TableOutbox, cfg.Outbox), newTable(TableInbox, cfg.Inbox)} {
		if t.policy != PolicyDisabled {
			c.tables = append(c.tables, t)
			c.status[t.name] = &TableStatus{Table: t.name, Policy: t.policy}
		}
	}
	return c, nil
}

// newTable returns the table of a checked block, defaults filled.
func newTable(name string, cfg TableConfig) table {
	return table{
		name:     name,
		policy:   cfg.Policy,
		maxAge:   cfg.MaxAge,
		maxCount: int64(cfg.MaxCount),
		interval: cfg.CleanupInterval,
		batch:    cfg.BatchSize,
	}
}

// Enabled reports whether retention.enabled is true.
func (c *Cleaner) Enabled() bool { return c.enabled }

// Summary is the result of RunOnce.
type Summary struct {
	// Tables holds one entry per table that ran, outbox first; a DISABLED table, and every
	// table when retention.enabled is false, has none.
	Tables []TableSummary `json:"tables"`
}

// Deleted returns the rows deleted from every table.
func (s Summary) Deleted() int64 {
	var n int64
	for _, t := range s.Tables {
		n += t.Deleted
	}
	return n
}

// Err returns the errors of the tables whose run failed, joined; nil when none failed.
func (s Summary) Err() error {
	var errs []error
	for _, t := range s.Tables {
		if t.Err != nil {
			errs = append(errs, t.Err)
		}
	}
	return errors.Join(errs...)
}

// Complete reports whether every table that ran finished (its last batch came back short).
func (s Summary) Complete() bool {
	for _, t := range s.Tables {
		if !t.Complete {
			return false
		}
	}
	return true
}

// TableSummary is the result of one run of one table.
type TableSummary struct {
	// Table is outbox or inbox.
	Table string
	// Policy is AGE or COUNT.
	Policy Policy
	// Deleted is the number of rows the run deleted, failed or not.
	Deleted int64
	// Statements is the number of delete statements that succeeded.
	Statements int
	// Complete is true when the last statement deleted fewer rows than batchSize: nothing was
	// left to delete. A run whose context ended first, or that failed, is not complete.
	Complete bool
	// Duration is the time the run took.
	Duration time.Duration
	// Err is the error that ended the run; nil when it completed or its context ended.
	Err error
}

// MarshalJSON writes the summary with the duration in milliseconds and the error as text,
// as the retention function returns it.
func (t TableSummary) MarshalJSON() ([]byte, error) {
	v := struct {
		Table      string `json:"table"`
		Policy     string `json:"policy"`
		Deleted    int64  `json:"deleted"`
		Statements int    `json:"statements"`
		Complete   bool   `json:"complete"`
		DurationMs int64  `json:"durationMs"`
		Error      string `json:"error,omitempty"`
	}{t.Table, string(t.Policy), t.Deleted, t.Statements, t.Complete, t.Duration.Milliseconds(), ""}
	if t.Err != nil {
		v.Error = t.Err.Error()
	}
	return json.Marshal(v)
}

// RunOnce runs every table whose policy is not DISABLED once, outbox first, and returns what
// each run deleted. It does nothing when retention.enabled is false. Each run records its
// metrics when it completes, updates Status, and logs one line.
func (c *Cleaner) RunOnce(ctx context.Context) Summary {
	sum := Summary{Tables: []TableSummary{}}
	for _, t := range c.tables {
		if ctx.Err() != nil {
			break
		}
		sum.Tables = append(sum.Tables, c.runTable(ctx, t))
	}
	return sum
}

// runTable runs the policy of one table until a batch comes back short, ctx ends or a
// statement fails, then records the run.
func (c *Cleaner) runTable(ctx context.Context, t table) TableSummary {
	start := c.now()
	ts := TableSummary{Table: t.name, Policy: t.policy}
	var err error
	switch {
	case t.policy == PolicyCount:
		for _, state := range []string{store.OutboxSent, store.OutboxDead} {
			ts.Complete, err = c.drain(ctx, &ts, t.batch, func(ctx context.Context) (int64, error) {
				return c.store.OutboxDeleteExcess(ctx, store.DeleteExcessParams{State: state, Keep: t.maxCount, Limit: t.batch})
			})
			if !ts.Complete {
				break
			}
		}
	case t.name == TableOutbox:
		ts.Complete, err = c.drain(ctx, &ts, t.batch, func(ctx context.Context) (int64, error) {
			return c.store.OutboxDeleteFinished(ctx, store.DeleteFinishedParams{MaxAge: t.maxAge, Limit: t.batch})
		})
	default:
		ts.Complete, err = c.drain(ctx, &ts, t.batch, func(ctx context.Context) (int64, error) {
			return c.store.InboxDeleteFinished(ctx, store.DeleteFinishedParams{MaxAge: t.maxAge, Limit: t.batch})
		})
	}
	end := c.now()
	ts.Duration = end.Sub(start)
	if err != nil {
		ts.Err = fmt.Errorf("cleaning the %s: %w", t.name, err)
	}
	c.record(t, ts, end)
	return ts
}

// drain repeats del until it deletes fewer than batch rows (complete), ctx ends (not complete,
// no error) or it fails.
func (c *Cleaner) drain(ctx context.Context, ts *TableSummary, batch int, del func(context.Context) (int64, error)) (bool, error) {
	for {
		if ctx.Err() != nil {
			return false, nil
		}
		n, err := c.statement(ctx, del)
		if err != nil {
			if ctx.Err() != nil {
				return false, nil // the caller's context ended the statement
			}
			return false, err
		}
		ts.Statements++
		ts.Deleted += n
		if n < int64(batch) {
			return true, nil
		}
		if c.batchPause > 0 && !sleep(ctx, c.batchPause) {
			return false, nil
		}
	}
}

// statement runs one delete under the statement timeout.
func (c *Cleaner) statement(ctx context.Context, del func(context.Context) (int64, error)) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, c.statementTimeout)
	defer cancel()
	return del(ctx)
}

// record updates the status, records the metrics of a completed run and logs the run.
func (c *Cleaner) record(t table, ts TableSummary, end time.Time) {
	c.mu.Lock()
	st := c.status[t.name]
	st.LastRun = end
	st.LastDeleted = ts.Deleted
	st.LastError = ""
	if ts.Err != nil {
		st.LastError = ts.Err.Error()
	}
	c.mu.Unlock()

	attrs := []any{
		"table", t.name, "policy", string(t.policy), "deleted", ts.Deleted,
		"statements", ts.Statements, "duration_ms", ts.Duration.Milliseconds(),
	}
	switch {
	case ts.Err != nil:
		c.log.Error("retention cleanup failed", append(attrs, "error", ts.Err.Error())...)
	case !ts.Complete:
		c.log.Info("retention cleanup stopped before the end; the next run continues", attrs...)
	default:
		// Only a completed run advances queuebox_cleanup_last_run_timestamp, so that the
		// documented staleness alert fires when runs keep failing.
		c.metrics.Cleanup(t.name, ts.Deleted, ts.Duration, end)
		c.log.Info("retention cleanup finished", attrs...)
	}
}

// sleep waits d or until ctx ends, and reports whether it waited the whole d.
func sleep(ctx context.Context, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}

// Run is the local loop: it runs each table whose policy is not DISABLED at once, and then
// again cleanupInterval after the end of its previous run, each table on its own interval,
// until ctx ends. After a failed run it tries the table again after RetryDelay (1 min by
// default) when that is sooner. One goroutine runs the tables one after the other, so the
// cleanup holds at most one connection of the pool. Run returns nil when ctx ends (the
// statement in flight is cancelled and rolls back), at once when retention.enabled is false,
// and ErrRunning when another Run is active.
func (c *Cleaner) Run(ctx context.Context) error {
	if !c.enabled {
		return nil
	}
	c.mu.Lock()
	if c.running {
		c.mu.Unlock()
		return ErrRunning
	}
	c.running = true
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.running = false
		for _, st := range c.status {
			st.NextRun = time.Time{}
		}
		c.mu.Unlock()
	}()

	c.log.Info("retention cleanup started", "tables", c.tableNames())
	next := make([]time.Time, len(c.tables)) // the zero time: due at start
	// The schedule follows the real clock, whatever Options.Now says: a timer waits real time.
	for {
		now := time.Now()
		for i, t := range c.tables {
			if next[i].After(now) {
				continue // not due yet
			}
			ts := c.runTable(ctx, t)
			if ctx.Err() != nil {
				return nil
			}
			wait := t.interval
			if ts.Err != nil {
				wait = min(wait, c.retryDelay)
			}
			next[i] = time.Now().Add(wait)
			c.mu.Lock()
			c.status[t.name].NextRun = next[i]
			c.mu.Unlock()
		}
		if len(next) == 0 {
			<-ctx.Done()
			return nil
		}
		if !sleep(ctx, time.Until(slices.MinFunc(next, time.Time.Compare))) {
			return nil
		}
	}
}

func (c *Cleaner) tableNames() []string {
	names := make([]string, 0, len(c.tables))
	for _, t := range c.tables {
		names = append(names, t.name)
	}
	return names
}

// Status is the state of the cleaner, for the retention-service health component.
type Status struct {
	// Enabled is retention.enabled.
	Enabled bool `json:"enabled"`
	// Running is true while Run is active.
	Running bool `json:"running"`
	// Tables holds the tables whose policy is not DISABLED, outbox first.
	Tables []TableStatus `json:"tables"`
}

// TableStatus is the state of one table.
type TableStatus struct {
	// Table is outbox or inbox.
	Table string `json:"table"`
	// Policy is AGE or COUNT.
	Policy Policy `json:"policy"`
	// LastRun is when the latest run ended, whatever its outcome; zero before the first.
	LastRun time.Time `json:"lastRun,omitzero"`
	// LastDeleted is the number of rows the latest run deleted.
	LastDeleted int64 `json:"lastDeleted"`
	// LastError is the error of the latest run; empty when it did not fail.
	LastError string `json:"lastError,omitempty"`
	// NextRun is when Run starts the next run of the table; zero when Run is not active.
	NextRun time.Time `json:"nextRun,omitzero"`
}

// Status returns the state of the cleaner.
func (c *Cleaner) Status() Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := Status{Enabled: c.enabled, Running: c.running, Tables: make([]TableStatus, 0, len(c.tables))}
	for _, t := range c.tables {
		s.Tables = append(s.Tables, *c.status[t.name])
	}
	return s
}

// Check is the probe of the retention-service health component, which the local process
// registers when retention.enabled is true. It returns nil when retention is disabled, and
// otherwise an error when Run is not active or when the latest run of a table failed. A
// failed table is tried again within RetryDelay, so a passing database fault turns the
// component down for about a minute, and a lasting one (a missing DELETE grant) keeps it
// down. The error text is the store's error, which holds no credential.
func (c *Cleaner) Check(context.Context) error {
	s := c.Status()
	if !s.Enabled {
		return nil
	}
	if !s.Running {
		return health.Reason("not running", nil)
	}
	var errs []error
	for _, t := range s.Tables {
		if t.LastError != "" {
			errs = append(errs, errors.New(t.LastError))
		}
	}
	if len(errs) == 0 {
		return nil
	}
	// The store's error can name the database; the health answer shows only the summary.
	return health.Reason("the last cleanup failed", errors.Join(errs...))
}

type nopMetrics struct{}

func (nopMetrics) Cleanup(string, int64, time.Duration, time.Time) {}
