package sourcebench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/alternayte/queuebox/bench/benchdb"
	"github.com/alternayte/queuebox/bench/machine"
	"github.com/alternayte/queuebox/shared/inbox"
	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/store/postgres"
)

// runner is a broker source: NewSource's result.
type runner interface {
	Run(ctx context.Context, sink inbox.Inserter) error
}

// database is a fresh migrated database with the PostgreSQL store on a pool of the
// source's size, opened as QueueBox opens it (postgres.Open).
type database struct {
	db *benchdb.Database
	dr *store.Driver
	st store.Store
}

func openDatabase(ctx context.Context, o Options) (*database, error) {
	db, err := benchdb.Create(ctx, o.ServerURL, 1, logf)
	if err != nil {
		return nil, err
	}
	dr, err := postgres.Open(ctx, store.OpenConfig{ConnString: db.URL, PoolSize: o.PoolSize, Names: store.DefaultNames()})
	if err != nil {
		db.Drop()
		return nil, fmt.Errorf("opening the store: %w", err)
	}
	return &database{db: db, dr: dr, st: dr.Store}, nil
}

func (d *database) close() {
	d.dr.Close()
	d.db.Drop()
}

// inboxRows counts the rows of source.
func (d *database) inboxRows(ctx context.Context, source string) (int, error) {
	var n int
	err := d.db.Admin.QueryRow(ctx, `SELECT count(*) FROM inbox WHERE source = $1`, source).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("counting inbox rows: %w", err)
	}
	return n, nil
}

// insertCeiling inserts o.Messages rows with InboxInsertBatch in batches of batch, one
// statement after the other, as one source writes them; the rows are the intake's rows of the
// bench's bodies (no headers, a new correlation id), prepared before the clock starts.
func insertCeiling(ctx context.Context, o Options, batch int) (Measure, error) {
	d, err := openDatabase(ctx, o)
	if err != nil {
		return Measure{}, err
	}
	defer d.close()
	const source = "ceiling"
	params := make([]store.InboxInsertParams, o.Messages)
	for i, body := range bodies(o.Messages, o.BodyBytes) {
		var doc struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(body, &doc)
		params[i] = store.InboxInsertParams{Source: source, IdempotencyKey: doc.ID, Payload: body,
			Headers: json.RawMessage(`{}`), CorrelationID: uuid.NewString(), Consumption: store.ConsumptionPush}
	}
	rctx, cancel := context.WithTimeout(ctx, o.RunTimeout)
	defer cancel()
	inserts, dups := 0, 0
	var busy time.Duration
	m, err := timed(o.Messages, func() error {
		defer func(t0 time.Time) { busy = time.Since(t0) }(time.Now())
		for start := 0; start < len(params); start += batch {
			res, err := d.st.InboxInsertBatch(rctx, params[start:min(start+batch, len(params))])
			if err != nil {
				return fmt.Errorf("InboxInsertBatch: %w", err)
			}
			inserts++
			for _, r := range res {
				if r.Duplicate {
					dups++
				}
			}
		}
		return nil
	})
	if err != nil {
		return m, err
	}
	m.Inserts, m.Duplicates = inserts, dups
	m.InsertSeconds = round(busy.Seconds(), 3)
	m.RowsPerInsert = round(float64(o.Messages)/float64(inserts), 1)
	if m.RowsInInbox, err = d.inboxRows(ctx, source); err != nil {
		return m, err
	}
	if m.RowsInInbox != o.Messages {
		return m, fmt.Errorf("the inbox holds %d rows, want %d", m.RowsInInbox, o.Messages)
	}
	return m, nil
}

// sourceRun runs the broker's source on bl into a fresh database until o.Messages rows are
// inserted; the time runs from Run to the return of the insert of the last row.
func sourceRun(ctx context.Context, o Options, bl backlog, broker string, batch int) (Measure, error) {
	d, err := openDatabase(ctx, o)
	if err != nil {
		return Measure{}, err
	}
	defer d.close()
	name := broker + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	src, err := bl.source(name, batch)
	if err != nil {
		return Measure{}, fmt.Errorf("NewSource: %w", err)
	}
	sink := &countingSink{inner: d.st, want: int64(o.Messages), done: make(chan struct{})}
	rctx, cancel := context.WithTimeout(ctx, o.RunTimeout)
	defer cancel()
	settle()
	m := Measure{Messages: o.Messages, Load1: machine.LoadAverage()[0]}
	if o.CPUProfile != "" {
		stop, err := machine.StartCPUProfile(fmt.Sprintf("%s-%s-%d.pprof", o.CPUProfile, broker, batch))
		if err != nil {
			return m, err
		}
		defer stop()
	}
	before := readCPU()
	ran := make(chan error, 1)
	t0 := time.Now()
	go func() { ran <- src.Run(rctx, sink) }()
	var runErr error
	select {
	case <-sink.done:
	case runErr = <-ran:
		ran <- runErr
	case <-rctx.Done():
	}
	after := readCPU()
	cancel()
	if err := <-ran; runErr == nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		runErr = err
	}
	select {
	case <-sink.done:
	default:
		return m, fmt.Errorf("the source stored %d of %d messages before it stopped (Run: %v)", sink.rows.Load(), o.Messages, runErr)
	}
	m.Seconds = sink.doneAt.Sub(t0).Seconds()
	m.PerSec = round(float64(o.Messages)/m.Seconds, 0)
	m.Seconds = round(m.Seconds, 3)
	m.BusyPct, m.SelfCPU = after.busyPct(before), after.selfCPU(before)
	m.ServerCPU = after.serverCPU(before)
	m.Inserts, m.Duplicates = int(sink.inserts.Load()), int(sink.dups.Load())
	m.InsertSeconds = round(time.Duration(sink.busy.Load()).Seconds(), 3)
	m.RowsPerInsert = round(float64(sink.rows.Load()+sink.dups.Load())/float64(m.Inserts), 1)
	if m.RowsInInbox, err = d.inboxRows(ctx, name); err != nil {
		return m, err
	}
	if m.RowsInInbox != o.Messages {
		return m, fmt.Errorf("the inbox holds %d rows, want %d", m.RowsInInbox, o.Messages)
	}
	return m, nil
}

// countingSink passes inserts to the store and closes done when want new rows are in.
type countingSink struct {
	inner               inbox.Inserter
	want                int64
	rows, dups, inserts atomic.Int64
	busy                atomic.Int64 // nanoseconds inside the store
	once                sync.Once
	done                chan struct{}
	doneAt              time.Time // written before done closes
}

// InboxInsert implements inbox.Inserter.
func (s *countingSink) InboxInsert(ctx context.Context, p store.InboxInsertParams) (store.InboxInsertResult, error) {
	t0 := time.Now()
	r, err := s.inner.InboxInsert(ctx, p)
	s.busy.Add(int64(time.Since(t0)))
	if err == nil {
		s.count([]store.InboxInsertResult{r})
	}
	return r, err
}

// InboxInsertBatch implements inbox.Inserter.
func (s *countingSink) InboxInsertBatch(ctx context.Context, ps []store.InboxInsertParams) ([]store.InboxInsertResult, error) {
	t0 := time.Now()
	rs, err := s.inner.InboxInsertBatch(ctx, ps)
	s.busy.Add(int64(time.Since(t0)))
	if err == nil {
		s.count(rs)
	}
	return rs, err
}

func (s *countingSink) count(rs []store.InboxInsertResult) {
	s.inserts.Add(1)
	var rows, dups int64
	for _, r := range rs {
		if r.Duplicate {
			dups++
		} else {
			rows++
		}
	}
	s.dups.Add(dups)
	if s.rows.Add(rows) >= s.want {
		s.once.Do(func() {
			s.doneAt = time.Now()
			close(s.done)
		})
	}
}
