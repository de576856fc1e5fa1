package consumetest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/alternayte/queuebox/shared/store"
)

// Running is a source that Start runs in the background.
type Running struct {
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	err    error
}

// errStillRunning is what Stop returns when Run did not return in time.
var errStillRunning = fmt.Errorf("consumetest: Run did not return within %s of its context ending", WaitLimit)

// Start runs s with sink in the background until Stop or the end of the test. When the test
// ends it stops s, and fails the test when Run did not return within WaitLimit or returned
// anything but nil or context.Canceled.
func Start(t testing.TB, s Source, sink Sink) *Running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &Running{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- s.Run(ctx, sink) }()
	t.Cleanup(func() {
		err := r.Stop()
		switch {
		case errors.Is(err, errStillRunning):
			t.Errorf("%v", err)
		case err != nil && !errors.Is(err, context.Canceled):
			t.Errorf("Run returned %v after its context was cancelled, want context.Canceled or nil", err)
		}
	})
	return r
}

// Stop ends the source's context, as a crash or a shutdown would, and waits WaitLimit at
// most for Run to return. It returns what Run returned (nil or context.Canceled when the
// source stopped as asked), or an error when Run did not return in time; later calls return
// the same.
func (r *Running) Stop() error {
	r.once.Do(func() {
		r.cancel()
		select {
		case r.err = <-r.done:
		case <-time.After(WaitLimit):
			r.err = errStillRunning
		}
	})
	return r.err
}

// FailingSink is a Sink over Next that fails inserts on demand, to stand for a database
// that is down: every insert while SetDown(true) holds, and the inserts that hold a key
// given to FailKey as many times as asked. It counts the inserts it failed while down and
// every attempt to store each key. It is safe for concurrent use.
type FailingSink struct {
	next Sink

	mu           sync.Mutex
	down         bool
	downFailures int
	failKey      map[string]int // key -> failures left
	attempts     map[string]int
	maxBatch     int
}

// NewFailingSink returns a FailingSink over next that fails nothing yet.
func NewFailingSink(next Sink) *FailingSink {
	return &FailingSink{next: next, failKey: map[string]int{}, attempts: map[string]int{}}
}

// SetDown makes every insert fail (down) or none but those of FailKey (up).
func (f *FailingSink) SetDown(down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down = down
}

// FailKey makes the next n inserts that hold key fail; a batch that holds several such keys
// uses up the failure of its first.
func (f *FailingSink) FailKey(key string, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failKey[key] = n
}

// DownFailures is the number of inserts (single or batch) that failed because the sink was
// down.
func (f *FailingSink) DownFailures() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.downFailures
}

// WaitDownFailures waits until at least n inserts failed because the sink was down, and
// fails the test when they did not within limit, which bounds the wait and is no speed
// assertion.
func (f *FailingSink) WaitDownFailures(t testing.TB, n int, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		hits := f.DownFailures()
		if hits >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the source tried the store %d times, want %d", hits, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Attempts is the number of inserts, failed or not, that held key.
func (f *FailingSink) Attempts(key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.attempts[key]
}

// MaxBatch is the largest number of rows that one insert held.
func (f *FailingSink) MaxBatch() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.maxBatch
}

// check counts the attempts of ps and returns the error that fails them, if any.
func (f *FailingSink) check(ps []store.InboxInsertParams) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range ps {
		f.attempts[p.IdempotencyKey]++
	}
	f.maxBatch = max(f.maxBatch, len(ps))
	if f.down {
		f.downFailures++
		return errors.New("consumetest: the database is down")
	}
	for _, p := range ps {
		if f.failKey[p.IdempotencyKey] > 0 {
			f.failKey[p.IdempotencyKey]--
			return fmt.Errorf("consumetest: the store fails for %s", p.IdempotencyKey)
		}
	}
	return nil
}

// InboxInsert stores p through the next sink unless it fails.
func (f *FailingSink) InboxInsert(ctx context.Context, p store.InboxInsertParams) (store.InboxInsertResult, error) {
	if err := f.check([]store.InboxInsertParams{p}); err != nil {
		return store.InboxInsertResult{}, err
	}
	return f.next.InboxInsert(ctx, p)
}

// InboxInsertBatch stores ps through the next sink unless the batch fails.
func (f *FailingSink) InboxInsertBatch(ctx context.Context, ps []store.InboxInsertParams) ([]store.InboxInsertResult, error) {
	if err := f.check(ps); err != nil {
		return nil, err
	}
	return f.next.InboxInsertBatch(ctx, ps)
}

// killChildEnv marks a test process that RunKilledChild started; its value is the test's
// settings, which the child reads with ChildSetting.
const killChildEnv = "QUEUEBOX_CONSUMETEST_KILL_CHILD"

// IsKilledChild reports whether this process is the child of RunKilledChild: the test then
// runs its consumer with KillAfterCommit and never returns.
func IsKilledChild() bool { return os.Getenv(killChildEnv) != "" }

// ChildSetting returns the setting name that RunKilledChild passed to the child.
func ChildSetting(name string) string { return os.Getenv(killChildEnv + "_" + name) }

// RunKilledChild runs the test named test again in a child process (the test binary with
// -test.run), with settings for ChildSetting, and waits for it to die. It fails the test
// unless the child was killed by SIGKILL, as KillAfterCommit kills it, within limit.
func RunKilledChild(t testing.TB, test string, settings map[string]string, limit time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^"+test+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), killChildEnv+"=1")
	for k, v := range settings {
		cmd.Env = append(cmd.Env, killChildEnv+"_"+k+"="+v)
	}
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("the child consumer ended with %v, want killed by SIGKILL; output:\n%s", err, out)
	}
	ws, ok := exit.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL || ctx.Err() != nil {
		t.Fatalf("the child consumer ended with %v, want killed by SIGKILL after its commit; output:\n%s", err, out)
	}
}

// KillAfterCommit returns a Sink over next that kills its own process with SIGKILL as soon as
// a row of key has committed, before the source can acknowledge it: the crash between the
// commit and the acknowledgement of spec/07.
func KillAfterCommit(next Sink, key string) Sink { return &killSink{next: next, key: key} }

type killSink struct {
	next Sink
	key  string
}

func (k *killSink) after(ps []store.InboxInsertParams) {
	for _, p := range ps {
		if p.IdempotencyKey == k.key {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal is on its way
		}
	}
}

func (k *killSink) InboxInsert(ctx context.Context, p store.InboxInsertParams) (store.InboxInsertResult, error) {
	res, err := k.next.InboxInsert(ctx, p)
	if err == nil {
		k.after([]store.InboxInsertParams{p})
	}
	return res, err
}

func (k *killSink) InboxInsertBatch(ctx context.Context, ps []store.InboxInsertParams) ([]store.InboxInsertResult, error) {
	res, err := k.next.InboxInsertBatch(ctx, ps)
	if err == nil {
		k.after(ps)
	}
	return res, err
}
