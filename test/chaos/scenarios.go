package main

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

// result is the outcome of one scenario.
type result struct {
	name     string
	title    string
	v        verdict
	judged   bool
	figures  [][2]string
	failures []string // loss, order, crashes and setup errors: the run exits 1
	notes    []string
	drain    time.Duration
	total    time.Duration
}

func (r *result) fig(label, format string, args ...any) {
	r.figures = append(r.figures, [2]string{label, fmt.Sprintf(format, args...)})
}

func (r *result) fail(format string, args ...any) {
	r.failures = append(r.failures, fmt.Sprintf(format, args...))
}

// destinationTimeout is the HTTP destination's timeoutMs; a stall lasts longer.
const destinationTimeout = time.Second

// configYAML is the queuebox.yml of every scenario: short leases (a killed replica's rows
// come back after 3 s), a small retry backoff, the HTTP destination of the receiver, an HTTP
// push source for the relay and an HTTP pull source for the pull workers.
const configYAML = `# The chaos suite's configuration (test/chaos); ports come from QUEUEBOX_SERVER_*.
server:
  httpPort: 8080
  managementPort: 9090
database:
  type: postgresql
  url: %s
  username: postgres
  password: chaos-trust-auth
  poolSize: 10
  connectionTimeoutMs: 5000
  startupTimeoutMs: 60000
  migrate: true
outbox:
  pollIntervalMs: 50
  batchSize: 50
  concurrency: 8
  retryBaseDelayMs: 10
  maxAttempts: 5
  claimTimeoutMs: 3000
  shutdownTimeoutMs: 5000
  claimMode: %s
inbox:
  relay:
    enabled: true
    pollIntervalMs: 50
    claimTimeoutMs: 3000
    maxAttempts: 5
destinations:
  receiver:
    type: http
    baseUrl: %s
    path: /deliver
    timeoutMs: %d
routes:
  - topicPattern: "chaos.*"
    destination: receiver
sources:
  hooks:
    type: http
    path: /hooks
    idempotencyKeyPath: $.id
    aggregateIdPath: $.k
    topic: chaos.relayed
  pulls:
    type: http
    path: /pulls
    idempotencyKeyPath: $.id
    aggregateIdPath: $.k
    consumption: pull
`

// finish judges the scenario from the rows and the receiver's record.
func (e *env) finish(ctx context.Context, res *result, rows []row, terminal map[string]bool, expected int) {
	arr, bad := e.rcv.snapshot()
	res.v = judge(rows, arr, terminal)
	res.judged = true
	if bad > 0 {
		res.fail("%d requests at the receiver carried no chaos payload", bad)
	}
	if len(rows) != expected {
		res.fail("the database holds %d rows, the producer committed %d", len(rows), expected)
	}
	if res.v.lost > 0 {
		res.fail("%d rows lost: %s", res.v.lost, strings.Join(res.v.lostSamples, "; "))
	}
	if res.v.premature+res.v.late > 0 {
		res.fail("%d order violations: %s", res.v.premature+res.v.late, strings.Join(res.v.orderSamples, "; "))
	}
	if res.v.unknown > 0 {
		res.fail("%d deliveries name no row of the database", res.v.unknown)
	}
	if res.v.sequenceOrder > 0 {
		res.fail("%d rows whose sequence order differs from their insert order", res.v.sequenceOrder)
	}
}

func (s *suite) runScenario(ctx context.Context, name string) *result {
	res := &result{name: name}
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Minute)
	defer cancel()
	var err error
	switch name {
	case "migrate":
		err = s.migrateScenario(ctx, res)
	case "kill":
		err = s.killScenario(ctx, res)
	case "pgrestart":
		err = s.pgRestartScenario(ctx, res)
	case "faults":
		err = s.faultsScenario(ctx, res)
	case "relay":
		err = s.relayScenario(ctx, res)
	case "pull":
		err = s.pullScenario(ctx, res)
	case "partition":
		err = s.partitionScenario(ctx, res)
	}
	if err != nil {
		res.fail("%v", err)
	}
	res.total = time.Since(start)
	return res
}

// outboxPass starts the replicas on the empty database at once, produces rows while chaos
// runs, waits for the drain and judges.
func (s *suite) outboxPass(ctx context.Context, res *result, e *env, rows, replicas int, spread time.Duration, poison bool, maxAtt func(string) int, chaos func(context.Context) error) error {
	took, err := e.startReplicas(ctx, replicas)
	if err != nil {
		return fmt.Errorf("starting %d replicas: %w", replicas, err)
	}
	res.fig("replicas started together on an empty database", "%d, all ready %s after the first start", replicas, took.Round(time.Millisecond))
	begin := time.Now()
	var wg sync.WaitGroup
	var produced int
	var prodErr, chaosErr error
	wg.Add(2)
	go func() {
		defer wg.Done()
		produced, prodErr = produceOutbox(ctx, e.pool, rows, s.o.keys, spread, poison, maxAtt)
	}()
	go func() {
		defer wg.Done()
		if chaos != nil {
			chaosErr = chaos(ctx)
		}
	}()
	wg.Wait()
	if prodErr != nil {
		return fmt.Errorf("producing rows: %w", prodErr)
	}
	if chaosErr != nil {
		res.fail("%v", chaosErr)
	}
	if err := e.waitAllReady(ctx, e.replicas, 60*time.Second); err != nil {
		res.fail("replicas not ready after the chaos: %v", err)
	}
	res.drain, err = e.waitDrained(ctx, outboxUnfinished)
	if err != nil {
		res.fail("%v", err)
	}
	res.fig("production + chaos", "%s", time.Since(begin).Round(time.Millisecond)-res.drain.Round(time.Millisecond))
	counts, text := e.deliveriesPerReplica(ctx)
	res.fig("sent per replica (metrics of the last run of each)", "%s", text)
	for i, n := range counts {
		switch {
		case n <= 0 && e.name == "migrate":
			res.fail("%s delivered nothing after the migration race (sent counter %d)", e.replicas[i].name, n)
		case n <= 0:
			res.notes = append(res.notes, fmt.Sprintf("the last run of %s delivered nothing (sent counter %d)", e.replicas[i].name, n))
		}
	}
	e.stopAndCollectExits(res)
	all, err := e.outboxRows(ctx)
	if err != nil {
		return err
	}
	e.finish(ctx, res, all, outboxTerminal, produced)
	return nil
}

func noMax(string) int { return 0 }

func (s *suite) migrateScenario(ctx context.Context, res *result) error {
	res.title = "Migration race: replicas started at the same moment on an empty database"
	e, err := s.newEnv(ctx, "migrate", faults{})
	defer e.close()
	if err != nil {
		return err
	}
	rows := max(100, s.o.rows/10)
	err = s.outboxPass(ctx, res, e, rows, s.o.replicas, 2*time.Second, false, noMax, func(ctx context.Context) error {
		// Both tracks: the original's schema and QueueBox's own tables.
		for _, table := range []string{"flyway_schema_history", "queuebox_schema_history"} {
			var applied, distinct, failed int
			if err := e.pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT version), count(*) FILTER (WHERE NOT success) FROM `+table+` WHERE version IS NOT NULL`).Scan(&applied, &distinct, &failed); err != nil {
				return fmt.Errorf("reading %s: %w", table, err)
			}
			res.fig(table, "%d versions applied, %d distinct, %d failed", applied, distinct, failed)
			if applied != distinct || failed > 0 {
				return fmt.Errorf("a migration of %s was applied twice or failed: %d rows, %d versions, %d failed", table, applied, distinct, failed)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return nil
}

// deliveriesPerReplica reads queuebox_outbox_messages_total{status="sent"} of each running
// replica (the counter of its current run) before the stop.
func (e *env) deliveriesPerReplica(ctx context.Context) ([]int, string) {
	client := &http.Client{Timeout: 3 * time.Second}
	var counts []int
	var parts []string
	for _, p := range e.replicas {
		n := -1
		if p.running() {
			n = scrapeCounter(ctx, client, strings.Replace(p.ready, "/health/ready", "/metrics", 1), `queuebox_outbox_messages_total{status="sent"}`)
		}
		counts = append(counts, n)
		parts = append(parts, fmt.Sprintf("%s %d", p.name, n))
	}
	return counts, strings.Join(parts, ", ")
}

func (s *suite) killScenario(ctx context.Context, res *result) error {
	res.title = fmt.Sprintf("kill -9 of a random replica every 1-2 s (%d kills), replicas restarted at once", s.o.kills)
	e, err := s.newEnv(ctx, "kill", faults{})
	defer e.close()
	if err != nil {
		return err
	}
	// The rows keep coming for 5 s after the last kill on average, so that the last run of
	// every replica (restarted after a kill) has rows to deliver.
	spread := time.Duration(s.o.kills)*1500*time.Millisecond + 5*time.Second
	kills := 0
	err = s.outboxPass(ctx, res, e, s.o.rows, s.o.replicas, max(spread, 2*time.Second), false, noMax, func(ctx context.Context) error {
		kills = e.killLoop(ctx, e.replicas, s.o.kills, res)
		return nil
	})
	res.fig("kills", "%d kill -9, %d restarts", kills, kills)
	res.fig("rows sent by each killed run (its metrics, read just before the kill)", "%s", e.killedRunsText())
	return err
}

// sample is one poll of /health/ready.
type sample struct {
	at   time.Time
	code int
}

func (s *suite) pgRestartScenario(ctx context.Context, res *result) error {
	res.title = fmt.Sprintf("%d x pg_ctl restart -m fast during delivery", s.o.restarts)
	e, err := s.newEnv(ctx, "pgrestart", faults{})
	defer e.close()
	if err != nil {
		return err
	}
	spread := 20 * time.Second
	if s.o.short {
		spread = 12 * time.Second
	}
	type restart struct{ start, end time.Time }
	var restarts []restart
	samples := make([][]sample, s.o.replicas)
	pollCtx, stopPoll := context.WithCancel(ctx)
	var polls sync.WaitGroup
	err = s.outboxPass(ctx, res, e, s.o.rows, s.o.replicas, spread, false, noMax, func(ctx context.Context) error {
		for i, p := range e.replicas {
			polls.Add(1)
			go func() {
				defer polls.Done()
				client := &http.Client{Timeout: 2 * time.Second}
				for n := 0; n < 100000; n++ {
					code, _ := get(pollCtx, client, p.ready)
					if pollCtx.Err() != nil {
						return
					}
					samples[i] = append(samples[i], sample{time.Now(), code})
					if sleep(pollCtx, 100*time.Millisecond) != nil {
						return
					}
				}
			}()
		}
		begin := time.Now()
		for i := range s.o.restarts {
			if err := sleepUntil(ctx, begin.Add(time.Duration(i+1)*spread/time.Duration(s.o.restarts+1))); err != nil {
				return err
			}
			r := restart{start: time.Now()}
			if err := s.cl.restart(ctx); err != nil {
				return err
			}
			r.end = time.Now()
			restarts = append(restarts, r)
		}
		// Let the pollers see the replicas come back, bounded: every replica ready again.
		deadline := time.Now().Add(60 * time.Second)
		for time.Now().Before(deadline) {
			ok := true
			for i := range e.replicas {
				if n := len(samples[i]); n == 0 || samples[i][n-1].code != http.StatusOK {
					ok = false
				}
			}
			if ok {
				break
			}
			if err := sleep(ctx, 100*time.Millisecond); err != nil {
				return err
			}
		}
		stopPoll()
		polls.Wait()
		return nil
	})
	stopPoll()
	polls.Wait()
	for i, r := range restarts {
		until := time.Now()
		if i+1 < len(restarts) {
			until = restarts[i+1].start
		}
		var parts []string
		for j, p := range e.replicas {
			first503, back := time.Time{}, time.Time{}
			for _, sm := range samples[j] {
				if sm.at.Before(r.start) || !sm.at.Before(until) {
					continue
				}
				if sm.code != http.StatusOK && first503.IsZero() {
					first503 = sm.at
				}
				if sm.code == http.StatusOK && !first503.IsZero() && back.IsZero() {
					back = sm.at
				}
			}
			switch {
			case first503.IsZero():
				parts = append(parts, fmt.Sprintf("%s: no 503 seen", p.name))
				res.notes = append(res.notes, fmt.Sprintf("restart %d: %s never answered other than 200 (polled every 100 ms)", i+1, p.name))
			case back.IsZero():
				parts = append(parts, fmt.Sprintf("%s: 503 from +%.1fs, not back to 200", p.name, first503.Sub(r.start).Seconds()))
				res.fail("restart %d: %s did not return to 200 on /health/ready", i+1, p.name)
			default:
				parts = append(parts, fmt.Sprintf("%s: 503 +%.1fs, 200 +%.1fs", p.name, first503.Sub(r.start).Seconds(), back.Sub(r.start).Seconds()))
			}
		}
		res.fig(fmt.Sprintf("restart %d (pg_ctl took %.1f s)", i+1, r.end.Sub(r.start).Seconds()), "%s", strings.Join(parts, "; "))
	}
	if len(restarts) != s.o.restarts {
		res.fail("%d of %d restarts ran", len(restarts), s.o.restarts)
	}
	return err
}

func (s *suite) faultsScenario(ctx context.Context, res *result) error {
	res.title = "A receiver that answers 500 to 30 % and stalls past the timeout on 3 %; one key always fails"
	f := faults{fail500: 0.30, stall: 0.03, stallFor: destinationTimeout + 500*time.Millisecond, poisonKey: poisonKey}
	e, err := s.newEnv(ctx, "faults", f)
	defer e.close()
	if err != nil {
		return err
	}
	// The rows of the poison key keep the column default max_attempts (5); the others may
	// fail 24 times in a row before they go dead, which 500/stall at 33 % never reach.
	maxAtt := func(k string) int {
		if k == poisonKey {
			return 0
		}
		return 25
	}
	spread := 10 * time.Second
	if s.o.short {
		spread = 5 * time.Second
	}
	if err := s.outboxPass(ctx, res, e, s.o.rows, 2, spread, true, maxAtt, nil); err != nil {
		return err
	}
	poisonRows := 0
	for i := 0; i < s.o.rows; i += s.o.keys {
		poisonRows++
	}
	res.fig("poison key", "%d rows, %d dead; rows dead on other keys: %d", poisonRows, res.v.deadKeys[poisonKey], res.v.dead-res.v.deadKeys[poisonKey])
	if res.v.deadKeys[poisonKey] != poisonRows {
		res.fail("the poison key has %d rows and %d dead", poisonRows, res.v.deadKeys[poisonKey])
	}
	if other := res.v.dead - res.v.deadKeys[poisonKey]; other > 0 {
		res.fail("%d rows of other keys went dead", other)
	}
	var badAttempts int
	if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE key = $1 AND (state <> 'dead' OR attempt <> max_attempts)`, poisonKey).Scan(&badAttempts); err != nil {
		return fmt.Errorf("reading the poison rows: %w", err)
	}
	if badAttempts > 0 {
		res.fail("%d poison rows are not dead after exactly max_attempts attempts", badAttempts)
	}
	return nil
}

func (s *suite) relayScenario(ctx context.Context, res *result) error {
	res.title = fmt.Sprintf("Push relay: webhooks into an HTTP source while replicas die (%d kills)", s.o.kills)
	e, err := s.newEnv(ctx, "relay", faults{})
	defer e.close()
	if err != nil {
		return err
	}
	took, err := e.startReplicas(ctx, s.o.replicas)
	if err != nil {
		return fmt.Errorf("starting %d replicas: %w", s.o.replicas, err)
	}
	res.fig("replicas started together on an empty database", "%d, all ready %s after the first start", s.o.replicas, took.Round(time.Millisecond))
	spread := max(time.Duration(s.o.kills)*1500*time.Millisecond, 2*time.Second)
	begin := time.Now()
	var wg sync.WaitGroup
	var accepted, kills int
	var sendErr error
	wg.Add(2)
	go func() {
		defer wg.Done()
		accepted, sendErr = sendWebhooks(ctx, e.liveDataURLs, "/hooks", s.o.rows, s.o.keys, spread, 8)
	}()
	go func() {
		defer wg.Done()
		kills = e.killLoop(ctx, e.replicas, s.o.kills, res)
	}()
	wg.Wait()
	res.fig("kills", "%d kill -9, %d restarts", kills, kills)
	res.fig("rows sent by each killed run (its metrics, read just before the kill)", "%s", e.killedRunsText())
	if sendErr != nil {
		return fmt.Errorf("sending webhooks: %w", sendErr)
	}
	if err := e.waitAllReady(ctx, e.replicas, 60*time.Second); err != nil {
		res.fail("replicas not ready after the chaos: %v", err)
	}
	res.drain, err = e.waitDrained(ctx, `SELECT (SELECT count(*) FROM inbox WHERE state NOT IN ('processed', 'dead')) + (`+outboxUnfinished+`)`)
	if err != nil {
		res.fail("%v", err)
	}
	res.fig("webhooks accepted (202/200)", "%d", accepted)
	res.fig("production + chaos", "%s", time.Since(begin).Round(time.Millisecond)-res.drain.Round(time.Millisecond))
	e.stopAndCollectExits(res)
	var inboxRows, processed, forwarded, twice, missing int
	if err := e.pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE state = 'processed') FROM inbox WHERE source = 'hooks'`).Scan(&inboxRows, &processed); err != nil {
		return fmt.Errorf("reading the inbox: %w", err)
	}
	if err := e.pool.QueryRow(ctx, `WITH f AS (SELECT i.idempotency_key, count(o.id) AS n FROM inbox i LEFT JOIN outbox o ON o.headers->>'x-idempotency-key' = i.idempotency_key WHERE i.source = 'hooks' GROUP BY i.idempotency_key)
SELECT count(*) FILTER (WHERE n = 1), count(*) FILTER (WHERE n > 1), count(*) FILTER (WHERE n = 0) FROM f`).Scan(&forwarded, &twice, &missing); err != nil {
		return fmt.Errorf("matching the inbox with the outbox: %w", err)
	}
	res.fig("inbox rows", "%d, %d processed; forwarded once %d, more than once %d, never %d", inboxRows, processed, forwarded, twice, missing)
	if inboxRows != accepted {
		res.fail("%d webhooks accepted but %d inbox rows", accepted, inboxRows)
	}
	if processed != inboxRows {
		res.fail("%d inbox rows not processed", inboxRows-processed)
	}
	if twice > 0 {
		res.fail("%d inbox rows reached the outbox more than once", twice)
	}
	if missing > 0 {
		res.fail("%d inbox rows never reached the outbox (lost)", missing)
	}
	all, err := e.outboxRows(ctx)
	if err != nil {
		return err
	}
	e.finish(ctx, res, all, outboxTerminal, accepted)
	return nil
}

func (s *suite) pullScenario(ctx context.Context, res *result) error {
	res.title = fmt.Sprintf("Go pull client: workers killed with kill -9 (%d kills) while they handle a pull source", s.o.kills)
	e, err := s.newEnv(ctx, "pull", faults{})
	defer e.close()
	if err != nil {
		return err
	}
	if _, err := e.startReplicas(ctx, 1); err != nil {
		return fmt.Errorf("starting the replica: %w", err)
	}
	if _, err := e.pool.Exec(ctx, `CREATE TABLE chaos_done (n BIGSERIAL PRIMARY KEY, inbox_id UUID NOT NULL, idempotency_key TEXT NOT NULL, aggregate_id TEXT, worker TEXT NOT NULL, done_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp())`); err != nil {
		return fmt.Errorf("creating chaos_done: %w", err)
	}
	for i := range s.o.workers {
		name := fmt.Sprintf("pull-worker%d", i+1)
		p := &proc{
			name: name,
			bin:  s.worker,
			args: []string{"-dsn", s.cl.url(e.db), "-source", "pulls", "-receiver", e.rcv.url + "/deliver", "-name", name, "-lease-ms", "3000", "-concurrency", "4", "-batch", "10"},
			env:  childEnv(),
			log:  filepath.Join(s.dir, name+".log"),
		}
		e.workers = append(e.workers, p)
		e.group.procs = append(e.group.procs, p)
		if err := p.start(); err != nil {
			return err
		}
	}
	spread := max(time.Duration(s.o.kills)*1500*time.Millisecond, 2*time.Second)
	begin := time.Now()
	var wg sync.WaitGroup
	var accepted, kills int
	var sendErr error
	wg.Add(2)
	go func() {
		defer wg.Done()
		accepted, sendErr = sendWebhooks(ctx, e.liveDataURLs, "/pulls", s.o.rows, s.o.keys, spread, 8)
	}()
	go func() {
		defer wg.Done()
		kills = e.killLoop(ctx, e.workers, s.o.kills, res)
	}()
	wg.Wait()
	res.fig("kills", "%d kill -9 of workers (%d workers), %d restarts", kills, s.o.workers, kills)
	if sendErr != nil {
		return fmt.Errorf("sending webhooks: %w", sendErr)
	}
	res.drain, err = e.waitDrained(ctx, `SELECT count(*) FROM inbox WHERE state NOT IN ('processed', 'dead')`)
	if err != nil {
		res.fail("%v", err)
	}
	res.fig("webhooks accepted (202/200)", "%d", accepted)
	res.fig("production + chaos", "%s", time.Since(begin).Round(time.Millisecond)-res.drain.Round(time.Millisecond))
	e.stopAndCollectExits(res)
	var doneRows, twice, notDone int
	if err := e.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM chaos_done),
  (SELECT count(*) FROM (SELECT inbox_id FROM chaos_done GROUP BY inbox_id HAVING count(*) > 1) d),
  (SELECT count(*) FROM inbox i WHERE i.state = 'processed' AND NOT EXISTS (SELECT 1 FROM chaos_done c WHERE c.inbox_id = i.id))`).Scan(&doneRows, &twice, &notDone); err != nil {
		return fmt.Errorf("reading chaos_done: %w", err)
	}
	res.fig("completions (chaos_done, the handler's transaction)", "%d rows; rows completed twice %d; processed without a completion %d", doneRows, twice, notDone)
	if twice > 0 {
		res.fail("%d inbox rows were completed by two handler transactions", twice)
	}
	if notDone > 0 {
		res.fail("%d inbox rows are processed but their handler's transaction left nothing", notDone)
	}
	rs, err := e.pool.Query(ctx, `SELECT id::text, COALESCE(aggregate_id, ''), COALESCE((payload->>'seq')::int, -1), state, COALESCE(attempt, 0), COALESCE(last_error, '') FROM inbox WHERE source = 'pulls'`)
	if err != nil {
		return fmt.Errorf("reading the inbox: %w", err)
	}
	var all []row
	for rs.Next() {
		var r row
		if err := rs.Scan(&r.msgID, &r.key, &r.seq, &r.state, &r.attempt, &r.lastError); err != nil {
			rs.Close()
			return fmt.Errorf("reading the inbox: %w", err)
		}
		all = append(all, r)
	}
	rs.Close()
	if err := rs.Err(); err != nil {
		return fmt.Errorf("reading the inbox: %w", err)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].msgID < all[j].msgID })
	e.finish(ctx, res, all, map[string]bool{"processed": true, "dead": true}, accepted)
	return nil
}
