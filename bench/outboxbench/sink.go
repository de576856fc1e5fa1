package outboxbench

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/alternayte/queuebox/shared/store/postgres/pgtool"
)

// SinkFlag is the flag that turns the bench binary into its helper process.
const SinkFlag = "sink"

// The helper process plays the world around QueueBox, so that the measured process runs
// QueueBox only: the loopback HTTP receiver (it answers 200 at once and records the first
// arrival time of each X-Message-Id) and, for the latency run, the application that inserts
// outbox rows at a steady rate and records when each insert committed. Both clocks are the
// machine's wall clock.
//
// Endpoints: POST /events (the destination), GET /stats, GET /arrivals (each id's first
// arrival, in arrival order), POST /reset, POST /produce (blocks until the production ends)
// and GET /latency.
type sink struct {
	mu         sync.Mutex
	requests   int
	signed     int              // requests that carried a webhook-signature (outboxbench -signing)
	arrivals   map[string]int64 // message id -> first arrival, Unix nanoseconds
	duplicates int
	commits    map[string]int64 // produced message id -> insert acknowledged, Unix nanoseconds
}

// ServeSink runs the helper process: it listens on a loopback port, writes
// "listening <base URL>" as its first line on out, and serves until in reaches its end (the
// parent closed the pipe or died) or ctx is done.
func ServeSink(ctx context.Context, in io.Reader, out io.Writer) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("listening on loopback: %w", err)
	}
	s := &sink{arrivals: map[string]int64{}, commits: map[string]int64{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /events", s.event)
	mux.HandleFunc("GET /stats", s.stats)
	mux.HandleFunc("GET /arrivals", s.arrivalList)
	mux.HandleFunc("POST /reset", s.reset)
	mux.HandleFunc("POST /produce", s.produce)
	mux.HandleFunc("GET /latency", s.latency)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		_, _ = io.Copy(io.Discard, in)
		cancel()
	}()
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if _, err := fmt.Fprintf(out, "listening http://%s\n", ln.Addr()); err != nil {
		return fmt.Errorf("announcing the address: %w", err)
	}
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serving: %w", err)
	}
	return nil
}

func (s *sink) event(w http.ResponseWriter, r *http.Request) {
	now := time.Now().UnixNano()
	_, _ = io.Copy(io.Discard, r.Body)
	id := r.Header.Get("X-Message-Id")
	_, signed := r.Header["Webhook-Signature"]
	s.mu.Lock()
	s.requests++
	if signed {
		s.signed++
	}
	if _, seen := s.arrivals[id]; seen {
		s.duplicates++
	} else {
		s.arrivals[id] = now
	}
	s.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

// SinkStats are the receiver's counters since the last reset: every request to /events, the
// distinct message ids among them, the requests whose id had arrived before, and the requests
// that carried a webhook-signature header (a run with -signing; the receiver does not verify it,
// so that its own cost stays that of an unsigned run).
type SinkStats struct {
	Requests   int `json:"requests"`
	Signed     int `json:"signed,omitempty"`
	Distinct   int `json:"distinct"`
	Duplicates int `json:"duplicates"`
}

func (s *sink) stats(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	st := SinkStats{Requests: s.requests, Signed: s.signed, Distinct: len(s.arrivals), Duplicates: s.duplicates}
	s.mu.Unlock()
	writeJSON(w, st)
}

// Arrival is the first arrival of one message id at the receiver.
type Arrival struct {
	// ID is the X-Message-Id of the request.
	ID string `json:"id"`
	// At is the arrival time, Unix nanoseconds of the machine's wall clock.
	At int64 `json:"at"`
}

// arrivalList answers every id's first arrival, earliest first (ties by id).
func (s *sink) arrivalList(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	list := make([]Arrival, 0, len(s.arrivals))
	for id, at := range s.arrivals {
		list = append(list, Arrival{ID: id, At: at})
	}
	s.mu.Unlock()
	slices.SortFunc(list, func(a, b Arrival) int {
		if a.At != b.At {
			return cmp.Compare(a.At, b.At)
		}
		return strings.Compare(a.ID, b.ID)
	})
	writeJSON(w, list)
}

func (s *sink) reset(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	s.requests, s.signed, s.duplicates = 0, 0, 0
	s.arrivals = map[string]int64{}
	s.commits = map[string]int64{}
	s.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// produceRequest asks the helper to insert rows at a steady rate.
type produceRequest struct {
	DatabaseURL string  `json:"databaseUrl"`
	Rate        float64 `json:"rate"`
	Seconds     float64 `json:"seconds"`
	Keys        int     `json:"keys"`
	// Workers is the number of connections that insert, so that a slow commit does not
	// delay the next insert past its slot.
	Workers int `json:"workers"`
}

// produceResult is what the production did.
type produceResult struct {
	Rows         int     `json:"rows"`
	Errors       int     `json:"errors"`
	Seconds      float64 `json:"seconds"`
	Rate         float64 `json:"rate"`
	Late         int     `json:"late"` // inserts started more than 5 ms after their slot
	InsertMeanMs float64 `json:"insertMeanMs"`
	InsertP99Ms  float64 `json:"insertP99Ms"`
	FirstError   string  `json:"firstError,omitempty"`
}

func (s *sink) produce(w http.ResponseWriter, r *http.Request) {
	var req produceRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Rate <= 0 || req.Seconds <= 0 {
		http.Error(w, "bad produce request", http.StatusBadRequest)
		return
	}
	res, err := s.runProducer(r.Context(), req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	writeJSON(w, res)
}

// runProducer inserts one row per transaction (autocommit) at slot i = start + i/rate and
// records, per row, the time the insert returned: the commit as the application sees it.
func (s *sink) runProducer(ctx context.Context, req produceRequest) (produceResult, error) {
	workers := max(req.Workers, 1)
	pool, err := pgtool.OpenPool(ctx, req.DatabaseURL, pgtool.PoolOptions{MaxConns: int32(workers), MinConns: int32(workers)})
	if err != nil {
		return produceResult{}, fmt.Errorf("opening the producer pool: %w", err)
	}
	defer pool.Close()
	if err := pool.Ping(ctx); err != nil {
		return produceResult{}, fmt.Errorf("pinging the database: %w", err)
	}
	const insert = `
INSERT INTO outbox (topic, key, payload)
VALUES ('orders.created', $1, jsonb_build_object('orderId', $2::int, 'amount', 1999, 'currency', 'EUR'))
RETURNING id::text`

	type slot struct {
		n   int
		due time.Time
	}
	slots := make(chan slot, 1024)
	var mu sync.Mutex
	var res produceResult
	var insertDurations []time.Duration
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for sl := range slots {
				if time.Since(sl.due) > 5*time.Millisecond {
					mu.Lock()
					res.Late++
					mu.Unlock()
				}
				var key any
				if req.Keys > 0 {
					key = fmt.Sprintf("k%d", sl.n%req.Keys)
				}
				start := time.Now()
				var id string
				err := pool.QueryRow(ctx, insert, key, sl.n).Scan(&id)
				done := time.Now()
				mu.Lock()
				if err != nil {
					res.Errors++
					if res.FirstError == "" {
						res.FirstError = err.Error()
					}
				} else {
					res.Rows++
					insertDurations = append(insertDurations, done.Sub(start))
				}
				mu.Unlock()
				if err == nil {
					s.mu.Lock()
					s.commits[id] = done.UnixNano()
					s.mu.Unlock()
				}
			}
		})
	}
	interval := time.Duration(float64(time.Second) / req.Rate)
	total := int(req.Rate * req.Seconds)
	start := time.Now()
	timer := time.NewTimer(0)
	<-timer.C
	for n := 0; n < total && ctx.Err() == nil; n++ {
		due := start.Add(time.Duration(n) * interval)
		if wait := time.Until(due); wait > 0 {
			timer.Reset(wait)
			select {
			case <-ctx.Done():
			case <-timer.C:
			}
		}
		slots <- slot{n: n, due: due}
	}
	close(slots)
	wg.Wait()
	res.Seconds = time.Since(start).Seconds()
	res.Rate = float64(res.Rows) / res.Seconds
	if len(insertDurations) > 0 {
		var sum time.Duration
		for _, d := range insertDurations {
			sum += d
		}
		res.InsertMeanMs = ms(sum / time.Duration(len(insertDurations)))
		slices.Sort(insertDurations)
		res.InsertP99Ms = ms(percentile(insertDurations, 0.99))
	}
	return res, nil
}

// latencyResult is the insert-to-delivery latency of the produced rows.
type latencyResult struct {
	Rows    int     `json:"rows"`
	Missing int     `json:"missing"`
	P50Ms   float64 `json:"p50Ms"`
	P90Ms   float64 `json:"p90Ms"`
	P99Ms   float64 `json:"p99Ms"`
	MaxMs   float64 `json:"maxMs"`
	MeanMs  float64 `json:"meanMs"`
	MinMs   float64 `json:"minMs"`
}

func (s *sink) latency(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	lat := make([]time.Duration, 0, len(s.commits))
	missing := 0
	for id, committed := range s.commits {
		arrived, ok := s.arrivals[id]
		if !ok {
			missing++
			continue
		}
		lat = append(lat, time.Duration(arrived-committed))
	}
	s.mu.Unlock()
	res := latencyResult{Rows: len(lat), Missing: missing}
	if len(lat) > 0 {
		slices.Sort(lat)
		var sum time.Duration
		for _, d := range lat {
			sum += d
		}
		res.P50Ms = ms(percentile(lat, 0.50))
		res.P90Ms = ms(percentile(lat, 0.90))
		res.P99Ms = ms(percentile(lat, 0.99))
		res.MaxMs = ms(lat[len(lat)-1])
		res.MinMs = ms(lat[0])
		res.MeanMs = ms(sum / time.Duration(len(lat)))
	}
	writeJSON(w, res)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// sinkProcess is the parent's handle on the helper process.
type sinkProcess struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	base  string
	http  *http.Client
}

// startSink starts the bench binary again as the helper process and waits for its address.
func startSink(ctx context.Context) (*sinkProcess, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding the bench binary: %w", err)
	}
	cmd := exec.Command(exe, "-"+SinkFlag)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("starting the receiver: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("starting the receiver: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the receiver: %w", err)
	}
	sp := &sinkProcess{cmd: cmd, stdin: stdin, http: &http.Client{}}
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			line <- sc.Text()
		}
		close(line)
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case l, ok := <-line:
		if !ok || !strings.HasPrefix(l, "listening ") {
			sp.stop()
			return nil, fmt.Errorf("starting the receiver: unexpected first line %q", l)
		}
		sp.base = strings.TrimPrefix(l, "listening ")
	case <-time.After(10 * time.Second):
		sp.stop()
		return nil, errors.New("starting the receiver: no address within 10 s")
	case <-ctx.Done():
		sp.stop()
		return nil, ctx.Err()
	}
	return sp, nil
}

// pid is the helper's process id.
func (sp *sinkProcess) pid() int { return sp.cmd.Process.Pid }

// stop closes the helper's stdin, which ends it, and kills it (by its pid) if it lingers.
func (sp *sinkProcess) stop() {
	_ = sp.stdin.Close()
	done := make(chan struct{})
	go func() {
		_ = sp.cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = sp.cmd.Process.Kill()
		<-done
	}
}

func (sp *sinkProcess) call(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("encoding %s: %w", path, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, sp.base+path, rd)
	if err != nil {
		return fmt.Errorf("calling the receiver %s: %w", path, err)
	}
	resp, err := sp.http.Do(req)
	if err != nil {
		return fmt.Errorf("calling the receiver %s: %w", path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode/100 != 2 {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return fmt.Errorf("calling the receiver %s: HTTP %d: %s", path, resp.StatusCode, bytes.TrimSpace(msg))
	}
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("reading the receiver %s: %w", path, err)
	}
	return nil
}

func (sp *sinkProcess) reset(ctx context.Context) error {
	return sp.call(ctx, http.MethodPost, "/reset", nil, nil)
}

func (sp *sinkProcess) stats(ctx context.Context) (SinkStats, error) {
	var st SinkStats
	err := sp.call(ctx, http.MethodGet, "/stats", nil, &st)
	return st, err
}

// waitDistinct waits until the receiver has seen n distinct messages or the deadline passes.
func (sp *sinkProcess) waitDistinct(ctx context.Context, n int, within time.Duration) (SinkStats, error) {
	deadline := time.Now().Add(within)
	for {
		st, err := sp.stats(ctx)
		if err != nil || st.Distinct >= n || time.Now().After(deadline) {
			return st, err
		}
		select {
		case <-ctx.Done():
			return st, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// percentile returns the nearest-rank percentile of sorted values.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p*float64(len(sorted))+0.999999) - 1
	i = max(0, min(i, len(sorted)-1))
	return sorted[i]
}
