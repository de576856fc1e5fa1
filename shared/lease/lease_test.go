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
