package outboxbench

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/alternayte/queuebox/shared/capture"
	"github.com/alternayte/queuebox/shared/store/postgres/logical"
	"github.com/alternayte/queuebox/shared/store/postgres/logical/logicaltest"
	"github.com/alternayte/queuebox/shared/waker"
)

// Targets of issue 15 for the latency with capture.
const (
	TargetCaptureP50Ms = 10.0
	TargetCaptureP99Ms = 30.0
)

// CapturePollInterval is the poller's interval (and the capture's reconciliation interval) of
// the capture runs: long, so that only the capture's wakes bring a row out quickly.
const CapturePollInterval = 10 * time.Second

// captureSpec is the capture connector of a run: the database it reads and where it keeps its
// state.
type captureSpec struct {
	url      string
	stateDir string
}

// connector builds the capture connector, woken into the poller.
func (c *captureSpec) connector(w waker.Waker, log *slog.Logger) (*capture.Connector, error) {
	conn, err := capture.New(capture.Config{
		Source:                 logical.Source{},
		ConnString:             c.url,
		StateDirectory:         c.stateDir,
		ReconciliationInterval: CapturePollInterval,
		Waker:                  w,
		Logger:                 log,
	})
	if err != nil {
		return nil, fmt.Errorf("creating the capture connector: %w", err)
	}
	return conn, nil
}

// waitStreaming waits until the connector streams, for at most 60 s.
func (c *captureSpec) waitStreaming(ctx context.Context, conn *capture.Connector) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		err := conn.Check(ctx)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the capture connector does not stream after 60 s: %w", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-conn.Faulted():
			return fmt.Errorf("the capture connector stopped: %w", conn.Fault())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// capturePhase measures insert-to-delivery latency at each of the capture rates on a private
// PostgreSQL cluster with wal_level = logical that it starts (durable settings, as the shared
// server's): first with postgres-logical capture waking a poller whose interval is
// CapturePollInterval, then, on the same database, polling at the latency run's interval
// without capture.
func (b *bench) capturePhase(ctx context.Context, rep *Report) error {
	logf("capture: starting a private PostgreSQL cluster with wal_level = logical")
	srv, err := logicaltest.StartDurable(ctx)
	if err != nil {
		return fmt.Errorf("starting a PostgreSQL cluster with wal_level = logical: %w", err)
	}
	defer func() { _ = srv.Stop() }()
	db, err := createDatabase(ctx, srv.URL)
	if err != nil {
		return err
	}
	defer db.Drop()
	if _, err := db.Admin.Exec(ctx, `CREATE PUBLICATION queuebox_outbox FOR TABLE outbox`); err != nil {
		return fmt.Errorf("creating the publication: %w", err)
	}
	stateDir, err := os.MkdirTemp("", "outboxbench-capture-")
	if err != nil {
		return fmt.Errorf("creating the capture state directory: %w", err)
	}
	defer func() { _ = os.RemoveAll(stateDir) }()

	cb := &bench{opts: b.opts, db: db, sink: b.sink, log: b.log}
	spec := &captureSpec{url: db.URL, stateDir: filepath.Join(stateDir, "state")}
	for _, withCapture := range []bool{true, false} {
		for _, rate := range b.opts.CaptureRates {
			s := DefaultSettings()
			run := steadySpec{Settings: s, Rate: rate, Seconds: b.opts.CaptureSeconds}
			if withCapture {
				run.Settings.PollInterval = CapturePollInterval
				run.Capture = spec
			} else {
				run.Settings.PollInterval = b.opts.LatencyPollInterval
			}
			r, err := cb.steadyRun(ctx, run)
			if err != nil {
				return fmt.Errorf("running the latency run at %.0f rows/s (capture %v): %w", rate, withCapture, err)
			}
			rep.Capture = append(rep.Capture, r)
			label := "capture"
			if !withCapture {
				label = "polling"
			}
			rep.Problems = append(rep.Problems, prefixed(fmt.Sprintf("%s latency at %.0f rows/s", label, rate), r.Problems)...)
		}
	}
	info := &PostgresInfo{}
	if info.Version, info.Settings, err = db.ServerFacts(ctx); err != nil {
		return err
	}
	rep.CaptureServer = info
	return nil
}
