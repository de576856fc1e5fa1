package queuebox

import (
	"errors"
	"math"
	"testing"
	"time"
)

func TestDefaultRetryPolicy(t *testing.T) {
	t.Parallel()
	p := NewDefaultRetryPolicy(5, time.Second, 5*time.Minute, 0.2).(defaultPolicy)
	tests := []struct {
		attempt  int
		u        float64
		want     time.Duration
		wantDead bool
	}{
		{attempt: 0, u: 0.5, want: time.Second},
		{attempt: 1, u: 0.5, want: 2 * time.Second},
		{attempt: 4, u: 0.5, want: 16 * time.Second},
		{attempt: 0, u: 0, want: 800 * time.Millisecond},
		{attempt: 3, u: 0.75, want: 8800 * time.Millisecond},
		{attempt: 5, wantDead: true},
		{attempt: 9, wantDead: true},
	}
	for _, tt := range tests {
		if tt.wantDead {
			if a := p.Decide(Message{Attempt: tt.attempt}, errors.New("x")); !a.IsDeadLetter() {
				t.Errorf("attempt %d: %+v, want a dead letter", tt.attempt, a)
			}
			continue
		}
		if a := p.Decide(Message{Attempt: tt.attempt}, errors.New("x")); a.IsDeadLetter() {
			t.Errorf("attempt %d: dead letter, want a retry", tt.attempt)
		}
		if got := p.delay(tt.attempt, tt.u); got != tt.want {
			t.Errorf("delay(attempt %d, u %v) = %s, want %s", tt.attempt, tt.u, got, tt.want)
		}
	}
	// The ceiling holds before the jitter, which shifts it by at most 20 %.
	ceiling := NewDefaultRetryPolicy(100, time.Second, 5*time.Minute, 0.2).(defaultPolicy)
	for _, attempt := range []int{9, 20, 63, 1000} {
		for _, u := range []float64{0, 0.5, 0.999} {
			got := ceiling.delay(attempt, u)
			if got < 240*time.Second || got > 360*time.Second {
				t.Errorf("delay(attempt %d, u %v) = %s, want within 5 min ± 20 %%", attempt, u, got)
			}
		}
	}
	// Random draws stay within ±jitter.
	for range 1000 {
		a := p.Decide(Message{Attempt: 2}, nil)
		if d := a.Delay(); d < 3200*time.Millisecond || d > 4800*time.Millisecond {
			t.Fatalf("Decide(attempt 2).Delay() = %s, want within 4 s ± 20 %%", d)
		}
	}
	// Jitter 0 gives the exact delay.
	exact := NewDefaultRetryPolicy(3, 100*time.Millisecond, time.Second, 0)
	if d := exact.Decide(Message{Attempt: 2}, nil).Delay(); d != 400*time.Millisecond {
		t.Errorf("jitter 0: delay %s, want 400ms", d)
	}
}

func TestFailureActions(t *testing.T) {
	t.Parallel()
	if a := DeadLetter(); !a.IsDeadLetter() || a.Delay() != 0 {
		t.Errorf("DeadLetter() = %+v", a)
	}
	if a := RetryAfter(3 * time.Second); a.IsDeadLetter() || a.Delay() != 3*time.Second {
		t.Errorf("RetryAfter(3s) = %+v", a)
	}
	var policy RetryPolicy = RetryPolicyFunc(func(m Message, _ error) FailureAction {
		return RetryAfter(time.Duration(m.Attempt) * time.Second)
	})
	if d := policy.Decide(Message{Attempt: 4}, nil).Delay(); d != 4*time.Second {
		t.Errorf("RetryPolicyFunc delay %s", d)
	}
}

func TestDelayMS(t *testing.T) {
	t.Parallel()
	tests := map[time.Duration]int64{
		-time.Second:                 0,
		0:                            0,
		time.Microsecond:             1,
		1500 * time.Microsecond:      2,
		time.Second:                  1000,
		time.Duration(math.MaxInt64): math.MaxInt32,
	}
	for d, want := range tests {
		if got := delayMS(d); got != want {
			t.Errorf("delayMS(%s) = %d, want %d", d, got, want)
		}
	}
}
