package lease_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/alternayte/queuebox/shared/lease"
)

func TestMargin(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		lease time.Duration
		want  time.Duration
	}{
		{"a fifth of a 3 s lease", 3 * time.Second, 600 * time.Millisecond},
		{"the floor under 1.25 s", time.Second, 250 * time.Millisecond},
		{"never more than a third of a short lease", 600 * time.Millisecond, 200 * time.Millisecond},
		{"the ceiling of the default 300 s lease", 300 * time.Second, 10 * time.Second},
		{"the ceiling from 50 s on", 50 * time.Second, 10 * time.Second},
		{"a 1 ms lease", time.Millisecond, time.Millisecond / 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := lease.Margin(tt.lease); got != tt.want {
				t.Errorf("Margin(%s) = %s, want %s", tt.lease, got, tt.want)
			}
		})
	}
}

// waitDone waits for ctx to end, up to a generous bound.
func waitDone(t *testing.T, ctx context.Context) {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the context did not end")
	}
}

func TestAClaimSentALeaseAgoIsExpiredAtOnce(t *testing.T) {
	t.Parallel()
	ctx, l := lease.Start(context.Background(), time.Now().Add(-3*time.Second), 3*time.Second)
	defer l.Stop()
	if !l.Expired() {
		t.Error("Expired() = false for a claim sent a whole lease ago")
	}
	waitDone(t, ctx)
	if !errors.Is(context.Cause(ctx), lease.ErrDeadline) {
		t.Errorf("cause = %v, want ErrDeadline", context.Cause(ctx))
	}
	if _, ok := ctx.Deadline(); ok {
		t.Error("the context reports a deadline; it must not, since the deadline moves")
	}
	if l.Extend(time.Now()) {
		t.Error("Extend resumed an expired claim")
	}
}

func TestExtendMovesTheDeadlineFromTheRenewalsSendTime(t *testing.T) {
	t.Parallel()
	const leaseFor = time.Hour
	sent := time.Now()
	ctx, l := lease.Start(context.Background(), sent, leaseFor)
	defer l.Stop()
	want := sent.Add(leaseFor - lease.Margin(leaseFor))
	if got := l.Deadline(); !got.Equal(want) {
		t.Errorf("deadline = %s after the claim, want the send time + lease - margin", got.Sub(sent))
	}
	renewed := sent.Add(time.Minute)
	if !l.Extend(renewed) {
		t.Fatal("Extend refused a live claim")
	}
	if got, want := l.Deadline(), renewed.Add(leaseFor-lease.Margin(leaseFor)); !got.Equal(want) {
		t.Errorf("deadline after a renewal = %s after the claim, want %s", got.Sub(sent), want.Sub(sent))
	}
	// An older renewal's answer never moves the deadline back.
	l.Extend(sent)
	if got, want := l.Deadline(), renewed.Add(leaseFor-lease.Margin(leaseFor)); !got.Equal(want) {
		t.Errorf("an older renewal moved the deadline to %s", got.Sub(sent))
	}
	if l.Expired() || ctx.Err() != nil {
		t.Error("a live claim is expired")
	}
}

// A renewal that moves the deadline while the timer waits keeps the context alive past the
// first deadline; the context ends at the moved one.
func TestTheContextEndsAtTheMovedDeadline(t *testing.T) {
	t.Parallel()
	const leaseFor = 3 * time.Second
	sent := time.Now()
	ctx, l := lease.Start(context.Background(), sent, leaseFor)
	defer l.Stop()
	first := l.Deadline()
	if !l.Extend(sent.Add(500 * time.Millisecond)) {
		t.Fatal("Extend refused a live claim")
	}
	waitDone(t, ctx)
	if !errors.Is(context.Cause(ctx), lease.ErrDeadline) {
		t.Fatalf("cause = %v, want ErrDeadline", context.Cause(ctx))
	}
	if now := time.Now(); now.Before(l.Deadline()) || !now.After(first) {
		t.Errorf("the context ended %s after the first deadline, before the moved one", now.Sub(first))
	}
}

func TestStopCancelsWithoutTheDeadlineCause(t *testing.T) {
	t.Parallel()
	ctx, l := lease.Start(context.Background(), time.Now(), time.Hour)
	l.Stop()
	l.Stop()
	waitDone(t, ctx)
	if errors.Is(context.Cause(ctx), lease.ErrDeadline) {
		t.Error("a stopped claim reports ErrDeadline")
	}
	if l.Expired() {
		t.Error("a stopped claim reports Expired")
	}
}

// A lost claim (a renewal that failed, or that found the claim gone) ends its work at once,
// long before its deadline, with a cause that names the loss and its reason; a renewal's
// answer that comes later does not resume it, and the deadline does not fire as well.
func TestLoseEndsTheWorkBeforeTheDeadline(t *testing.T) {
	t.Parallel()
	ctx, l := lease.Start(context.Background(), time.Now(), time.Hour)
	defer l.Stop()
	reason := errors.New("renewing the lease failed: connection reset")
	if !l.Lose(reason) {
		t.Fatal("Lose refused a live claim")
	}
	waitDone(t, ctx)
	cause := context.Cause(ctx)
	if !errors.Is(cause, lease.ErrLost) || !errors.Is(cause, reason) {
		t.Errorf("cause = %v, want ErrLost wrapping the reason", cause)
	}
	if errors.Is(cause, lease.ErrDeadline) {
		t.Error("a lost claim reports ErrDeadline")
	}
	if !l.Ended() || l.Expired() {
		t.Errorf("Ended() = %v, Expired() = %v; want a lost claim ended, not expired", l.Ended(), l.Expired())
	}
	if !errors.Is(l.Lost(), reason) {
		t.Errorf("Lost() = %v, want the reason", l.Lost())
	}
	if l.Extend(time.Now()) {
		t.Error("Extend resumed a lost claim")
	}
	if l.Lose(errors.New("again")) {
		t.Error("a second Lose took effect")
	}
}

// Lose does nothing to a claim that already expired or was stopped: its work ended for that
// reason, and keeps it.
func TestLoseAfterTheDeadlineOrStopDoesNothing(t *testing.T) {
	t.Parallel()
	ctx, l := lease.Start(context.Background(), time.Now().Add(-time.Hour), time.Second)
	defer l.Stop()
	waitDone(t, ctx)
	if l.Lose(errors.New("late")) || l.Lost() != nil {
		t.Error("Lose took effect on an expired claim")
	}
	if !errors.Is(context.Cause(ctx), lease.ErrDeadline) || !l.Ended() {
		t.Errorf("cause = %v, Ended() = %v; want the deadline kept", context.Cause(ctx), l.Ended())
	}

	ctx2, l2 := lease.Start(context.Background(), time.Now(), time.Hour)
	l2.Stop()
	if l2.Lose(errors.New("late")) || l2.Lost() != nil || l2.Ended() {
		t.Error("Lose took effect on a stopped claim")
	}
	if errors.Is(context.Cause(ctx2), lease.ErrLost) {
		t.Error("a stopped claim reports ErrLost")
	}
}
