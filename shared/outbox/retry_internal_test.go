package outbox

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

type retryAfterErr struct{ d time.Duration }

func (e retryAfterErr) Error() string             { return "HTTP 429" }
func (e retryAfterErr) RetryAfter() time.Duration { return e.d }

type terminalErr struct{}

func (terminalErr) Error() string  { return "HTTP 410 Gone" }
func (terminalErr) Terminal() bool { return true }

func TestTheDefaultRetryPolicyIsTheDocumentedBackoff(t *testing.T) {
	cfg := Config{}.WithDefaults()
	pl := resolveRetry(cfg, nil)
	for attempt, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 32 * time.Second, time.Minute, time.Minute} {
		d := pl.delay(attempt, errors.New("HTTP 500"))
		if d < want || d > min(want+want/4, time.Minute) {
			t.Errorf("attempt %d: delay %s, want %s to %s", attempt, d, want, min(want+want/4, time.Minute))
		}
	}
	if pl.exhausted(4, 5) || !pl.exhausted(5, 5) {
		t.Error("the default policy must end a row at its max_attempts")
	}
	// A Retry-After is ignored unless the policy honours it.
	if d := pl.delay(0, retryAfterErr{30 * time.Second}); d > 1250*time.Millisecond {
		t.Errorf("a Retry-After set the delay (%s) although the policy does not honour it", d)
	}
}

func TestAScheduleSetsEachDelayAndBoundsTheAttempts(t *testing.T) {
	cfg := Config{}.WithDefaults()
	sched := []time.Duration{5 * time.Second, 30 * time.Second, 2 * time.Minute, 10 * time.Minute, time.Hour, 6 * time.Hour}
	pl := resolveRetry(cfg, &RetryPolicy{Schedule: sched, NoJitter: true})
	if pl.max != 6*time.Hour {
		t.Fatalf("the cap of a schedule without maxDelay is %s, want its largest entry 6h", pl.max)
	}
	for i, want := range sched {
		if d := pl.delay(i, errors.New("down")); d != want {
			t.Errorf("attempt %d: delay %s, want %s", i, d, want)
		}
		if pl.exhausted(i, 5) {
			t.Errorf("attempt %d is exhausted although the schedule has %d entries (max_attempts 5 must not end it)", i, len(sched))
		}
	}
	if !pl.exhausted(len(sched), 100) {
		t.Error("a failure after the last entry must be the last one, whatever max_attempts")
	}
	capped := resolveRetry(cfg, &RetryPolicy{Schedule: sched, MaxDelay: time.Hour})
	if d := capped.delay(5, errors.New("down")); d != time.Hour {
		t.Errorf("maxDelay 1h: the 6h entry waits %s, want the cap", d)
	}
	jittered := resolveRetry(cfg, &RetryPolicy{Schedule: []time.Duration{time.Second}, MaxDelay: time.Hour})
	for range 50 {
		if d := jittered.delay(0, errors.New("down")); d < time.Second || d > 1250*time.Millisecond {
			t.Fatalf("a jittered 1 s entry waits %s, want 1 s to 1.25 s", d)
		}
	}
}

func TestARetryAfterSetsTheDelayUpToTheCap(t *testing.T) {
	cfg := Config{}.WithDefaults()
	pl := resolveRetry(cfg, &RetryPolicy{HonorRetryAfter: true, MaxDelay: 10 * time.Second})
	err := fmt.Errorf("publishing: %w", retryAfterErr{2 * time.Second})
	if d := pl.delay(3, err); d != 2*time.Second {
		t.Errorf("Retry-After 2 s: delay %s", d)
	}
	if d := pl.delay(0, retryAfterErr{time.Hour}); d != 10*time.Second {
		t.Errorf("Retry-After 1 h with a 10 s cap: delay %s", d)
	}
	if d := pl.delay(0, retryAfterErr{0}); d < time.Second || d > 1250*time.Millisecond {
		t.Errorf("no Retry-After value: delay %s, want the backoff", d)
	}
}

func TestTheOutboxRetryPolicyIsTheFallbackOfADestination(t *testing.T) {
	cfg := Config{Retry: RetryPolicy{MaxDelay: 5 * time.Second, NoJitter: true}}.WithDefaults()
	if d := resolveRetry(cfg, nil).delay(10, errors.New("x")); d != 5*time.Second {
		t.Errorf("outbox.retry.maxDelayMs 5000: delay %s", d)
	}
	if d := resolveRetry(cfg, &RetryPolicy{MaxDelay: 2 * time.Second}).delay(10, errors.New("x")); d != 2*time.Second {
		t.Errorf("the destination's maxDelay must win: delay %s", d)
	}
}

func TestATerminalErrorIsFoundThroughWrapping(t *testing.T) {
	if !isTerminal(fmt.Errorf("publishing: %w", terminalErr{})) {
		t.Error("a wrapped terminal error was not seen")
	}
	if isTerminal(errors.New("HTTP 500")) {
		t.Error("a plain error was terminal")
	}
}

func TestNewRefusesControlsOutsideTheirBounds(t *testing.T) {
	cfg := Config{}.WithDefaults()
	for _, d := range []Destination{
		{Name: "a", Retry: &RetryPolicy{Schedule: []time.Duration{time.Second, 0}}},
		{Name: "b", Breaker: &BreakerPolicy{Threshold: 0, Window: time.Second, CoolDown: time.Second}},
		{Name: "c", RateLimit: &RateLimit{RequestsPerSecond: 0, Burst: 1}},
	} {
		if _, err := newPlan(cfg, d); err == nil {
			t.Errorf("destination %s: no error", d.Name)
		}
	}
}
