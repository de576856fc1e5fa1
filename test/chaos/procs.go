package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is one child process (a queuebox replica or a pull worker) that the suite can kill
// with SIGKILL and start again with the same arguments, ports and log file.
type proc struct {
	name string
	bin  string
	args []string
	env  []string
	log  string
	// ready, when set, is the URL that answers 200 once the process is up.
	ready string

	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{}
	starts int
	began  time.Time // when the current run started
	exits  []string  // how each run ended, when it was not killed by the suite
	killed bool
}

// start starts the process; it must not be running.
func (p *proc) start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("opening %s: %w", p.log, err)
	}
	fmt.Fprintf(f, "---- chaos: start %d of %s at %s\n", p.starts+1, p.name, time.Now().UTC().Format(time.RFC3339Nano))
	cmd := exec.Command(p.bin, p.args...)
	cmd.Env = p.env
	cmd.Stdout = f
	cmd.Stderr = f
	// The child dies with the suite even when the suite itself is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("starting %s: %w", p.name, err)
	}
	p.starts++
	p.began = time.Now()
	p.cmd = cmd
	p.killed = false
	done := make(chan struct{})
	p.done = done
	go func() {
		err := cmd.Wait()
		f.Close()
		p.mu.Lock()
		if !p.killed {
			p.exits = append(p.exits, fmt.Sprintf("%s run %d exited by itself: %v", p.name, p.starts, err))
		}
		p.mu.Unlock()
		close(done)
	}()
	return nil
}

// age is how long the current run has been running.
func (p *proc) age() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return time.Since(p.began)
}

// running reports whether the process is alive.
func (p *proc) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// signal sends sig and waits up to limit for the exit, then SIGKILL.
func (p *proc) signal(sig syscall.Signal, limit time.Duration) error {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.killed = true
	p.mu.Unlock()
	if cmd == nil {
		return nil
	}
	select {
	case <-done:
		return nil
	default:
	}
	_ = cmd.Process.Signal(sig)
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case <-done:
		return nil
	case <-t.C:
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	t2 := time.NewTimer(10 * time.Second)
	defer t2.Stop()
	select {
	case <-done:
		return fmt.Errorf("%s did not stop on %v within %s and was killed", p.name, sig, limit)
	case <-t2.C:
		return fmt.Errorf("%s did not exit after SIGKILL", p.name)
	}
}

// kill9 kills the process with SIGKILL and waits for its exit.
func (p *proc) kill9() error { return p.signal(syscall.SIGKILL, 10*time.Second) }

// stop asks the process to shut down (SIGTERM), then kills it after 15 s.
func (p *proc) stop() error { return p.signal(syscall.SIGTERM, 15*time.Second) }

// waitReady polls the ready URL until it answers 200, the process exits, or limit passes.
func (p *proc) waitReady(ctx context.Context, limit time.Duration) error {
	if p.ready == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		if code, _ := get(ctx, client, p.ready); code == http.StatusOK {
			return nil
		}
		if !p.running() {
			return fmt.Errorf("%s exited before it was ready (log %s): %s", p.name, p.log, tail(p.log, 1500))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready within %s (log %s): %s", p.name, limit, p.log, tail(p.log, 1500))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// unexpectedExits lists the runs that ended without the suite killing them.
func (p *proc) unexpectedExits() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.exits...)
}

// get returns the status code of a GET, or 0 when the request failed.
func get(ctx context.Context, client *http.Client, url string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// freePorts returns n distinct free TCP ports of 127.0.0.1.
func freePorts(n int) ([]int, error) {
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	var out []int
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		lns = append(lns, ln)
		out = append(out, ln.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

// group is the set of child processes of one scenario, stopped together.
type group struct{ procs []*proc }

func (g *group) stopAll() error {
	var errs []error
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, p := range g.procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := p.stop(); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// scrapeCounter reads one sample of the Prometheus text of url, or -1.
func scrapeCounter(ctx context.Context, client *http.Client, url, sample string) int {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return -1
	}
	resp, err := client.Do(req)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(body), "\n") {
		if rest, ok := strings.CutPrefix(line, sample+" "); ok {
			if f, err := strconv.ParseFloat(strings.TrimSpace(rest), 64); err == nil {
				return int(f)
			}
		}
	}
	return 0
}

// lostClaimLines are the log messages of QueueBox that name a claim lost to another owner
// (shared/outbox, shared/relay; spec/02-claims-and-leases.md).
var lostClaimLines = []string{
	"outbox lease renewal lost the claim",
	"outbox message was delivered after its claim was lost",
	"outbox retry lost its claim",
	"outbox dead letter lost its claim",
	"inbox relay claim was lost",
}

// countLostClaims counts those messages in the logs of ps, by message.
func countLostClaims(ps []*proc) string {
	counts := make([]int, len(lostClaimLines))
	for _, p := range ps {
		b, err := os.ReadFile(p.log)
		if err != nil {
			continue
		}
		for i, m := range lostClaimLines {
			counts[i] += strings.Count(string(b), m)
		}
	}
	var parts []string
	for i, n := range counts {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%d x %q", n, lostClaimLines[i]))
		}
	}
	if len(parts) == 0 {
		return "0"
	}
	return strings.Join(parts, ", ")
}
