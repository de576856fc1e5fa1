package inboxbench

import (
	"bufio"
	"bytes"
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
	"strconv"
	"sync"
	"time"
)

// LoadGenFlag is the flag that makes the bench binary the load generator process.
const LoadGenFlag = "loadgen"

// The phases.
const (
	PhaseNew        = "new"        // every request carries a new idempotency key: 202
	PhaseDuplicates = "duplicates" // every request repeats a key of the new phase: 200
)

// loadCommand asks the load generator to run one phase.
type loadCommand struct {
	Phase   string  `json:"phase"`
	URL     string  `json:"url"`
	Clients int     `json:"clients"`
	Seconds float64 `json:"seconds"`
}

// PhaseResult is what the load generator measured in one phase. Latency is from the start
// of a request to the end of its response body, for every request that got a response.
type PhaseResult struct {
	Phase          string         `json:"phase"`
	Clients        int            `json:"clients"`
	Seconds        float64        `json:"seconds"`
	Requests       int            `json:"requests"`
	Accepted       int            `json:"accepted202"`
	Duplicates     int            `json:"duplicate200"`
	OtherStatus    map[string]int `json:"otherStatus,omitempty"`
	TransportError int            `json:"transportErrors"`
	FirstError     string         `json:"firstError,omitempty"`
	RequestsPerSec float64        `json:"requestsPerSec"`
	// ExpectedPerSec is the rate of the answers the phase is about: 202 in the new phase,
	// 200 in the duplicates phase.
	ExpectedPerSec float64 `json:"expectedPerSec"`
	P50Ms          float64 `json:"p50Ms"`
	P90Ms          float64 `json:"p90Ms"`
	P99Ms          float64 `json:"p99Ms"`
	MaxMs          float64 `json:"maxMs"`
	MeanMs         float64 `json:"meanMs"`
}

// loadGen is the state of the load generator process across phases: the keys that were
// accepted in the new phase, per client, for the duplicates phase.
type loadGen struct {
	client   *http.Client
	accepted [][]int
}

// ServeLoadGen runs the load generator: it prints "ready", then runs one phase per JSON
// command line read from in and writes its PhaseResult as one JSON line to out. It returns
// when in ends.
func ServeLoadGen(ctx context.Context, in io.Reader, out io.Writer) error {
	lg := &loadGen{}
	if _, err := fmt.Fprintln(out, "ready"); err != nil {
		return fmt.Errorf("writing the ready line: %w", err)
	}
	sc := bufio.NewScanner(in)
	enc := json.NewEncoder(out)
	for sc.Scan() {
		var cmd loadCommand
		if err := json.Unmarshal(sc.Bytes(), &cmd); err != nil {
			return fmt.Errorf("reading a command: %w", err)
		}
		res, err := lg.run(ctx, cmd)
		if err != nil {
			return err
		}
		if err := enc.Encode(res); err != nil {
			return fmt.Errorf("writing a result: %w", err)
		}
	}
	return sc.Err()
}

func (lg *loadGen) run(ctx context.Context, cmd loadCommand) (PhaseResult, error) {
	if cmd.Clients <= 0 || cmd.Seconds <= 0 {
		return PhaseResult{}, fmt.Errorf("running phase %q: clients and seconds must be above 0", cmd.Phase)
	}
	if cmd.Phase != PhaseNew && cmd.Phase != PhaseDuplicates {
		return PhaseResult{}, fmt.Errorf("running phase %q: unknown phase", cmd.Phase)
	}
	if lg.client == nil || len(lg.accepted) != cmd.Clients {
		// One keep-alive connection per client, never more.
		tr := &http.Transport{
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
			MaxIdleConns:        cmd.Clients,
			MaxIdleConnsPerHost: cmd.Clients,
			MaxConnsPerHost:     cmd.Clients,
			DisableCompression:  true,
			IdleConnTimeout:     time.Minute,
		}
		lg.client = &http.Client{Transport: tr, Timeout: 30 * time.Second}
		if cmd.Phase == PhaseNew {
			lg.accepted = make([][]int, cmd.Clients)
		}
	}
	if cmd.Phase == PhaseDuplicates && len(lg.accepted) != cmd.Clients {
		return PhaseResult{}, errors.New("running the duplicates phase: no new phase ran with the same clients")
	}

	type clientResult struct {
		lat         []time.Duration
		accepted    int
		duplicates  int
		other       map[int]int
		transport   int
		firstError  string
		acceptedIDs []int
	}
	results := make([]clientResult, cmd.Clients)
	deadline := time.Now().Add(time.Duration(cmd.Seconds * float64(time.Second)))
	start := time.Now()
	var wg sync.WaitGroup
	for c := range cmd.Clients {
		wg.Go(func() {
			r := &results[c]
			r.other = map[int]int{}
			r.lat = make([]time.Duration, 0, 1<<14)
			var keys []int // the duplicates phase repeats this client's accepted keys
			if cmd.Phase == PhaseDuplicates {
				keys = lg.accepted[c]
				if len(keys) == 0 {
					r.firstError = "no accepted key to repeat"
					return
				}
			}
			body := make([]byte, 0, 64)
			for i := 0; time.Now().Before(deadline) && ctx.Err() == nil; i++ {
				n := i
				if keys != nil {
					n = keys[i%len(keys)]
				}
				body = append(body[:0], `{"id":"c`...)
				body = strconv.AppendInt(body, int64(c), 10)
				body = append(body, '-')
				body = strconv.AppendInt(body, int64(n), 10)
				body = append(body, `","n":`...)
				body = strconv.AppendInt(body, int64(n), 10)
				body = append(body, '}')
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, cmd.URL, bytes.NewReader(body))
				if err != nil {
					r.transport++
					r.firstError = err.Error()
					return
				}
				req.Header.Set("Content-Type", "application/json")
				t0 := time.Now()
				resp, err := lg.client.Do(req)
				if err != nil {
					r.transport++
					if r.firstError == "" {
						r.firstError = err.Error()
					}
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				r.lat = append(r.lat, time.Since(t0))
				switch resp.StatusCode {
				case http.StatusAccepted:
					r.accepted++
					if cmd.Phase == PhaseNew {
						r.acceptedIDs = append(r.acceptedIDs, n)
					}
				case http.StatusOK:
					r.duplicates++
				default:
					r.other[resp.StatusCode]++
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)

	res := PhaseResult{Phase: cmd.Phase, Clients: cmd.Clients, Seconds: round(elapsed.Seconds(), 3), OtherStatus: map[string]int{}}
	var all []time.Duration
	for c, r := range results {
		all = append(all, r.lat...)
		res.Accepted += r.accepted
		res.Duplicates += r.duplicates
		res.TransportError += r.transport
		for code, n := range r.other {
			res.OtherStatus[strconv.Itoa(code)] += n
		}
		if res.FirstError == "" {
			res.FirstError = r.firstError
		}
		if cmd.Phase == PhaseNew {
			lg.accepted[c] = append(lg.accepted[c], r.acceptedIDs...)
		}
	}
	res.Requests = res.Accepted + res.Duplicates + res.TransportError
	for _, n := range res.OtherStatus {
		res.Requests += n
	}
	res.RequestsPerSec = round(float64(res.Requests)/elapsed.Seconds(), 1)
	expected := res.Accepted
	if cmd.Phase == PhaseDuplicates {
		expected = res.Duplicates
	}
	res.ExpectedPerSec = round(float64(expected)/elapsed.Seconds(), 1)
	if len(all) > 0 {
		slices.Sort(all)
		var sum time.Duration
		for _, d := range all {
			sum += d
		}
		res.P50Ms = ms(percentile(all, 0.50))
		res.P90Ms = ms(percentile(all, 0.90))
		res.P99Ms = ms(percentile(all, 0.99))
		res.MaxMs = ms(all[len(all)-1])
		res.MeanMs = ms(sum / time.Duration(len(all)))
	}
	return res, nil
}

// loadGenProcess is the parent's handle on the load generator process.
type loadGenProcess struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
}

// startLoadGen starts the bench binary again as the load generator and waits for its ready
// line.
func startLoadGen(ctx context.Context) (*loadGenProcess, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding the bench binary: %w", err)
	}
	cmd := exec.Command(exe, "-"+LoadGenFlag)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("starting the load generator: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("starting the load generator: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the load generator: %w", err)
	}
	lp := &loadGenProcess{cmd: cmd, stdin: stdin, lines: make(chan string, 4)}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		for sc.Scan() {
			lp.lines <- sc.Text()
		}
		close(lp.lines)
	}()
	line, err := lp.next(ctx, 10*time.Second)
	if err != nil || line != "ready" {
		lp.stop()
		if err == nil {
			err = fmt.Errorf("unexpected first line %q", line)
		}
		return nil, fmt.Errorf("starting the load generator: %w", err)
	}
	return lp, nil
}

func (lp *loadGenProcess) next(ctx context.Context, within time.Duration) (string, error) {
	select {
	case l, ok := <-lp.lines:
		if !ok {
			return "", errors.New("the load generator ended")
		}
		return l, nil
	case <-time.After(within):
		return "", fmt.Errorf("no answer from the load generator within %s", within)
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// pid is the load generator's process id.
func (lp *loadGenProcess) pid() int { return lp.cmd.Process.Pid }

// phase runs one phase in the load generator and returns its result.
func (lp *loadGenProcess) phase(ctx context.Context, cmd loadCommand) (PhaseResult, error) {
	b, err := json.Marshal(cmd)
	if err != nil {
		return PhaseResult{}, fmt.Errorf("encoding the %s command: %w", cmd.Phase, err)
	}
	if _, err := lp.stdin.Write(append(b, '\n')); err != nil {
		return PhaseResult{}, fmt.Errorf("sending the %s command: %w", cmd.Phase, err)
	}
	line, err := lp.next(ctx, time.Duration(cmd.Seconds*float64(time.Second))+60*time.Second)
	if err != nil {
		return PhaseResult{}, fmt.Errorf("running the %s phase: %w", cmd.Phase, err)
	}
	var res PhaseResult
	if err := json.Unmarshal([]byte(line), &res); err != nil {
		return PhaseResult{}, fmt.Errorf("reading the %s result: %w", cmd.Phase, err)
	}
	return res, nil
}

// stop closes the load generator's stdin, which ends it, and kills it (by its pid) if it
// lingers.
func (lp *loadGenProcess) stop() {
	_ = lp.stdin.Close()
	done := make(chan struct{})
	go func() {
		_ = lp.cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = lp.cmd.Process.Kill()
		<-done
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
