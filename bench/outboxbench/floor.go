package outboxbench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alternayte/queuebox/bench/machine"
	"github.com/alternayte/queuebox/shared/connect/webhook"
	"github.com/alternayte/queuebox/shared/metrics"
	"github.com/alternayte/queuebox/shared/outbox"
	"github.com/alternayte/queuebox/shared/service"
)

// FloorRun is one measurement of the floor phase (issue 15, target 2): the CPU per row of one
// part of a delivery done alone, with nothing else of QueueBox around it, so that the CPU per
// delivered row of a backlog run can be set beside what its parts cost at the least.
type FloorRun struct {
	// Name says what ran: "http client", "webhook publisher", "claim+sent updates" or
	// "sent update only".
	Name string `json:"name"`
	Rows int    `json:"rows"`
	// Concurrency is the number of goroutines that sent requests (HTTP runs); Batch the rows
	// per statement (database runs).
	Concurrency int     `json:"concurrency,omitempty"`
	Batch       int     `json:"batch,omitempty"`
	Seconds     float64 `json:"seconds"`
	RowsPerSec  float64 `json:"rowsPerSecond"`
	// ProcessUsPerRow is the bench process's CPU per row (the HTTP client), PostgresUsPerRow
	// the CPU of the database backend that ran the statements, ReceiverUsPerRow the receiver's.
	ProcessUsPerRow  float64  `json:"processUsPerRow"`
	PostgresUsPerRow float64  `json:"postgresUsPerRow,omitempty"`
	ReceiverUsPerRow float64  `json:"receiverUsPerRow,omitempty"`
	Load1            float64  `json:"loadAvg1"`
	CPU              CPUUse   `json:"cpu"`
	Problems         []string `json:"problems,omitempty"`
}

// floorPhase measures the floors: an HTTP POST per row with a bare net/http client and with
// QueueBox's webhook publisher (no poller, no database) at the default concurrency; then the
// two updates per row that the lease model of spec/02 and the table of spec/29 need (claim to
// processing, then to sent), by primary key in batches of the default batchSize, with no claim
// scan, no SKIP LOCKED and no client work; and one update per row (pending to sent) beside
// them.
func (b *bench) floorPhase(ctx context.Context, rep *Report) error {
	def := DefaultSettings()
	rows := b.opts.Rows
	floors := []struct {
		name    string
		measure func(ctx context.Context, name string, rows, n int) (FloorRun, error)
		n       int // the concurrency of an HTTP floor, the batch of an update floor
	}{
		{"http client", b.httpFloor, def.Concurrency},
		{"webhook publisher", b.httpFloor, def.Concurrency},
		{"claim+sent updates", b.updateFloor, def.BatchSize},
		{"sent update only", b.updateFloor, def.BatchSize},
	}
	for _, f := range floors {
		r, err := f.measure(ctx, f.name, rows, f.n)
		if err != nil {
			return fmt.Errorf("measuring the %s floor: %w", f.name, err)
		}
		rep.Floors = append(rep.Floors, r)
		rep.Problems = append(rep.Problems, prefixed("floor "+f.name, r.Problems)...)
	}
	return nil
}

// floorBody is the payload of message i as the backlog stores it (jsonb's text form).
func floorBody(i int) []byte {
	return []byte(`{"amount": 1999, "orderId": ` + strconv.Itoa(i) + `, "currency": "EUR"}`)
}

// httpFloor posts rows messages to the receiver from conc goroutines: "http client" with a bare
// http.Client whose transport keeps conc idle connections, "webhook publisher" through
// webhook.Publisher.Publish as the poller calls it.
func (b *bench) httpFloor(ctx context.Context, name string, rows, conc int) (FloorRun, error) {
	r := FloorRun{Name: name, Rows: rows, Concurrency: conc}
	logf("floor %s: %d POSTs from %d goroutines", name, rows, conc)
	if err := b.sink.reset(ctx); err != nil {
		return r, err
	}
	target := b.sink.base + "/events"
	var post func(ctx context.Context, i int) error
	switch name {
	case "http client":
		client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conc, MaxIdleConns: 2 * conc}}
		defer client.CloseIdleConnections()
		post = func(ctx context.Context, i int) error {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, nil)
			if err != nil {
				return err
			}
			body := floorBody(i)
			req.Body, req.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
			req.Header["Content-Type"] = []string{"application/json"}
			req.Header["X-Message-Id"] = []string{"floor-" + strconv.Itoa(i)}
			req.Header["X-Topic"] = []string{BacklogTopic}
			req.Header["X-Attempt"] = []string{"0"}
			resp, err := client.Do(req)
			if err != nil {
				return err
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("the receiver answered %d", resp.StatusCode)
			}
			return nil
		}
	case "webhook publisher":
		pub, err := webhook.New(webhook.Config{Name: "receiver", BaseURL: b.sink.base, Path: "/events"}, metrics.New(service.Version))
		if err != nil {
			return r, err
		}
		defer func() { _ = pub.Close() }()
		created := time.Now()
		post = func(ctx context.Context, i int) error {
			return pub.Publish(ctx, outbox.Message{ID: "floor-" + strconv.Itoa(i), Topic: BacklogTopic,
				Payload: floorBody(i), CreatedAt: created})
		}
	default:
		return r, fmt.Errorf("unknown HTTP floor %q", name)
	}

	r.Load1 = machine.LoadAverage()[0]
	before := readCPU(b.sink.pid())
	start := time.Now()
	var next atomic.Int64
	var failed atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	for range conc {
		wg.Go(func() {
			for {
				i := int(next.Add(1))
				if i > rows || ctx.Err() != nil {
					return
				}
				if err := post(ctx, i); err != nil {
					failed.Add(1)
					once.Do(func() { firstErr = err })
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	after := readCPU(b.sink.pid())
	if ctx.Err() != nil {
		return r, ctx.Err()
	}
	r.CPU = cpuBetween(before, after, 0)
	r.Seconds = round(elapsed.Seconds(), 2)
	r.RowsPerSec = round(float64(rows)/elapsed.Seconds(), 0)
	r.ProcessUsPerRow = round(r.CPU.PollerProcess*1e6/float64(rows), 1)
	r.ReceiverUsPerRow = round(r.CPU.Receiver*1e6/float64(rows), 1)
	if n := failed.Load(); n > 0 {
		r.Problems = append(r.Problems, fmt.Sprintf("%d of %d POSTs failed, the first: %v", n, rows, firstErr))
	}
	rcv, err := b.sink.stats(ctx)
	if err != nil {
		return r, err
	}
	if rcv.Distinct != rows || rcv.Duplicates != 0 {
		r.Problems = append(r.Problems, fmt.Sprintf("the receiver saw %d distinct messages of %d and %d duplicates", rcv.Distinct, rows, rcv.Duplicates))
	}
	logf("floor %s: %d POSTs in %.2f s = %.0f/s, %.1f us CPU per POST (receiver %.1f)%s",
		name, rows, r.Seconds, r.RowsPerSec, r.ProcessUsPerRow, r.ReceiverUsPerRow, problemSuffix(r.Problems))
	return r, nil
}

// The statements of the update floors. The claim floor sets what the claim of spec/02 sets (a
// new token, claimed_at, the lease, updated_at) on rows found by primary key; the sent floor
// what the finishing write sets. Each runs alone in its transaction, as the poller's do.
const (
	floorClaimSQL = `
UPDATE outbox SET state = 'processing', claim_token = gen_random_uuid(), claimed_at = clock_timestamp(),
    lease_expires_at = clock_timestamp() + interval '30 seconds', updated_at = clock_timestamp()
WHERE id = ANY ($1::uuid[]) AND state = 'pending'`
	floorSentSQL = `
UPDATE outbox SET state = 'sent', claim_token = NULL, lease_expires_at = NULL, updated_at = clock_timestamp()
WHERE id = ANY ($1::uuid[]) AND state = $2`
)

// updateFloor writes a backlog of rows pending rows (no keys), reads their ids in insert order
// before the clock starts, and then moves them in batches of batch ids from one connection:
// "claim+sent updates" claims each batch and marks it sent, "sent update only" marks it sent
// from pending. The CPU is that connection's server process.
func (b *bench) updateFloor(ctx context.Context, name string, rows, batch int) (FloorRun, error) {
	r := FloorRun{Name: name, Rows: rows, Batch: batch}
	logf("floor %s: %d rows in batches of %d", name, rows, batch)
	if err := b.db.resetOutbox(ctx); err != nil {
		return r, err
	}
	if err := b.db.insertBacklog(ctx, rows, 0, true); err != nil {
		return r, err
	}
	conn, err := b.db.Admin.Acquire(ctx)
	if err != nil {
		return r, fmt.Errorf("acquiring a connection: %w", err)
	}
	defer conn.Release()
	var ids []string
	qrows, err := conn.Query(ctx, `SELECT id::text FROM outbox ORDER BY sequence`)
	if err != nil {
		return r, fmt.Errorf("reading the backlog's ids: %w", err)
	}
	for qrows.Next() {
		var id string
		if err := qrows.Scan(&id); err != nil {
			qrows.Close()
			return r, fmt.Errorf("reading the backlog's ids: %w", err)
		}
		ids = append(ids, id)
	}
	if err := qrows.Err(); err != nil {
		return r, fmt.Errorf("reading the backlog's ids: %w", err)
	}
	var pid int
	if err := conn.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		return r, fmt.Errorf("reading the backend's pid: %w", err)
	}
	claim := name == "claim+sent updates"
	from := "pending"
	if claim {
		from = "processing"
	}

	r.Load1 = machine.LoadAverage()[0]
	before := readCPU(b.sink.pid())
	pgBefore := machine.ProcessCPU(pid)
	start := time.Now()
	changed := 0
	for lo := 0; lo < len(ids); lo += batch {
		part := ids[lo:min(lo+batch, len(ids))]
		if claim {
			if _, err := conn.Exec(ctx, floorClaimSQL, part); err != nil {
				return r, fmt.Errorf("claiming a batch: %w", err)
			}
		}
		tag, err := conn.Exec(ctx, floorSentSQL, part, from)
		if err != nil {
			return r, fmt.Errorf("marking a batch sent: %w", err)
		}
		changed += int(tag.RowsAffected())
	}
	elapsed := time.Since(start)
	pgCPU := machine.ProcessCPU(pid) - pgBefore
	after := readCPU(b.sink.pid())
	r.CPU = cpuBetween(before, after, pgCPU)
	r.Seconds = round(elapsed.Seconds(), 2)
	r.RowsPerSec = round(float64(rows)/elapsed.Seconds(), 0)
	r.ProcessUsPerRow = round(r.CPU.PollerProcess*1e6/float64(rows), 1)
	r.PostgresUsPerRow = round(pgCPU*1e6/float64(rows), 1)
	if changed != rows {
		r.Problems = append(r.Problems, fmt.Sprintf("%d of %d rows were marked sent", changed, rows))
	}
	logf("floor %s: %d rows in %.2f s = %.0f rows/s, PostgreSQL %.1f us CPU per row%s",
		name, rows, r.Seconds, r.RowsPerSec, r.PostgresUsPerRow, problemSuffix(r.Problems))
	return r, nil
}
