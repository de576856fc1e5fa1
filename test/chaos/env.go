package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/alternayte/queuebox/shared/store/postgres/pgtool"
)

// env is what one scenario runs: its database, receiver and processes.
type env struct {
	s        *suite
	name     string
	db       string
	pool     *pgtool.Pool
	rcv      *receiver
	cfg      string
	replicas []*proc
	dataURLs []string
	workers  []*proc
	group    *group
	// killedRuns are the replica runs that killLoop killed, with what each had sent.
	killedRuns []killedRun
	// replicaEnv, when set, gives replica i (from 0) variables of its own.
	replicaEnv func(i int) []string
}

// killedRun is one run of a replica that ended with kill -9.
type killedRun struct {
	age  time.Duration
	sent int // its sent counter just before the kill; -1 when the scrape failed
}

// killedRunsText summarises what the killed runs had delivered.
func (e *env) killedRunsText() string {
	if len(e.killedRuns) == 0 {
		return "none"
	}
	var sents []int
	zero, failed := 0, 0
	var zeroMaxAge time.Duration
	for _, k := range e.killedRuns {
		switch {
		case k.sent < 0:
			failed++
		case k.sent == 0:
			zero++
			zeroMaxAge = max(zeroMaxAge, k.age)
		}
		sents = append(sents, k.sent)
	}
	sort.Ints(sents)
	text := fmt.Sprintf("%d runs: median %d, max %d rows; %d runs sent nothing", len(sents), sents[len(sents)/2], sents[len(sents)-1], zero)
	if zero > 0 {
		text += fmt.Sprintf(" (the oldest of them ran %.1f s)", zeroMaxAge.Seconds())
	}
	if failed > 0 {
		text += fmt.Sprintf("; %d not yet answering /metrics when killed", failed)
	}
	return text
}

func (s *suite) newEnv(ctx context.Context, name string, f faults) (*env, error) {
	e := &env{s: s, name: name, db: "chaos_" + name, group: &group{}}
	s.groups = append(s.groups, e.group)
	if err := s.cl.createDatabase(ctx, e.db); err != nil {
		return e, err
	}
	var err error
	if e.rcv, err = startReceiver(f); err != nil {
		return e, err
	}
	e.cfg = filepath.Join(s.dir, name+".yml")
	if err := os.WriteFile(e.cfg, fmt.Appendf(nil, configYAML, s.cl.jdbc(e.db), s.o.claimMode, e.rcv.url, destinationTimeout.Milliseconds()), 0o644); err != nil {
		return e, fmt.Errorf("writing %s: %w", e.cfg, err)
	}
	if e.pool, err = pgtool.OpenPool(ctx, s.cl.url(e.db)+"&pool_max_conns=4", pgtool.PoolOptions{}); err != nil {
		return e, fmt.Errorf("connecting to %s: %w", e.db, err)
	}
	return e, nil
}

func (e *env) close() {
	if err := e.group.stopAll(); err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
	}
	if e.pool != nil {
		e.pool.Close()
	}
	if e.rcv != nil {
		e.rcv.close()
	}
}

// childEnv is the environment of a child: the suite's, without any QUEUEBOX_ variable of the
// caller, plus extra.
func childEnv(extra ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "QUEUEBOX_") {
			out = append(out, kv)
		}
	}
	return append(out, extra...)
}

// startReplicas starts n replicas of queuebox serve at the same moment and waits until all
// answer 200 on /health/ready.
func (e *env) startReplicas(ctx context.Context, n int) (time.Duration, error) {
	ports, err := freePorts(2 * n)
	if err != nil {
		return 0, err
	}
	for i := range n {
		vars := []string{"QUEUEBOX_CONFIG_FILE=" + e.cfg, fmt.Sprintf("QUEUEBOX_SERVER_HTTPPORT=%d", ports[2*i]), fmt.Sprintf("QUEUEBOX_SERVER_MANAGEMENTPORT=%d", ports[2*i+1])}
		if e.replicaEnv != nil {
			vars = append(vars, e.replicaEnv(i)...)
		}
		p := &proc{
			name:  fmt.Sprintf("%s-replica%d", e.name, i+1),
			bin:   e.s.queuebox,
			args:  []string{"serve"},
			env:   childEnv(vars...),
			log:   filepath.Join(e.s.dir, fmt.Sprintf("%s-replica%d.log", e.name, i+1)),
			ready: fmt.Sprintf("http://127.0.0.1:%d/health/ready", ports[2*i+1]),
		}
		e.replicas = append(e.replicas, p)
		e.dataURLs = append(e.dataURLs, fmt.Sprintf("http://127.0.0.1:%d", ports[2*i]))
		e.group.procs = append(e.group.procs, p)
	}
	start := time.Now()
	for _, p := range e.replicas {
		if err := p.start(); err != nil {
			return 0, err
		}
	}
	err = e.waitAllReady(ctx, e.replicas, 90*time.Second)
	return time.Since(start), err
}

func (e *env) waitAllReady(ctx context.Context, ps []*proc, limit time.Duration) error {
	var wg sync.WaitGroup
	errs := make([]error, len(ps))
	for i, p := range ps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = p.waitReady(ctx, limit)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// liveDataURLs are the data ports of the replicas that run.
func (e *env) liveDataURLs() []string {
	var out []string
	for i, p := range e.replicas {
		if p.running() {
			out = append(out, e.dataURLs[i]+"/inbox")
		}
	}
	return out
}

// killLoop kills a random process of ps with SIGKILL every 1-2 s, kills times, and starts it
// again at once.
func (e *env) killLoop(ctx context.Context, ps []*proc, kills int, res *result) int {
	done := 0
	for range kills {
		if err := sleep(ctx, time.Second+time.Duration(e.s.rng.Int64N(int64(time.Second)))); err != nil {
			break
		}
		p := ps[e.s.rng.IntN(len(ps))]
		if p.ready != "" {
			// What the run delivered before its death, from its own metrics.
			client := &http.Client{Timeout: time.Second}
			e.killedRuns = append(e.killedRuns, killedRun{age: p.age(), sent: scrapeCounter(ctx, client, strings.Replace(p.ready, "/health/ready", "/metrics", 1), `queuebox_outbox_messages_total{status="sent"}`)})
		}
		if err := p.kill9(); err != nil {
			res.fail("kill -9 of %s: %v", p.name, err)
			continue
		}
		done++
		if err := p.start(); err != nil {
			res.fail("restart of %s: %v", p.name, err)
		}
	}
	return done
}

// waitDrained polls query (a count of unfinished rows) until it is 0, bounded by the drain
// timeout; errors (a restarting database) are retried within the bound.
func (e *env) waitDrained(ctx context.Context, query string) (time.Duration, error) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, e.s.o.drain)
	defer cancel()
	var n int
	var lastErr error
	for {
		err := e.pool.QueryRow(ctx, query).Scan(&n)
		if err == nil && n == 0 {
			return time.Since(start), nil
		}
		lastErr = err
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return time.Since(start), fmt.Errorf("not drained after %s: %d rows unfinished (last error %v)", e.s.o.drain, n, lastErr)
		}
	}
}

func (e *env) stopAndCollectExits(res *result) {
	if err := e.group.stopAll(); err != nil {
		res.notes = append(res.notes, err.Error())
	}
	for _, p := range e.group.procs {
		for _, x := range p.unexpectedExits() {
			res.fail("%s (log %s)", x, p.log)
		}
	}
	res.fig("claims lost to another owner (replica logs)", "%s", countLostClaims(e.replicas))
}

const outboxUnfinished = `SELECT count(*) FROM outbox WHERE state NOT IN ('sent', 'dead')`

func (e *env) outboxRows(ctx context.Context) ([]row, error) {
	rs, err := e.pool.Query(ctx, `SELECT id::text, COALESCE(key, ''), COALESCE((payload->>'seq')::int, -1), sequence, state, attempt, COALESCE(last_error, '') FROM outbox`)
	if err != nil {
		return nil, fmt.Errorf("reading the outbox: %w", err)
	}
	defer rs.Close()
	var out []row
	for rs.Next() {
		var r row
		if err := rs.Scan(&r.msgID, &r.key, &r.seq, &r.sequence, &r.state, &r.attempt, &r.lastError); err != nil {
			return nil, fmt.Errorf("reading the outbox: %w", err)
		}
		out = append(out, r)
	}
	return out, rs.Err()
}

var outboxTerminal = map[string]bool{"sent": true, "dead": true}
