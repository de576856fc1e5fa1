package lambdafn_test

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"
)

func TestPollDrainDeliversEverythingAndReturns(t *testing.T) {
	t.Parallel()
	f := newFunction(t, newReceiver(t, false), map[string]string{"LAMBDA_MARGIN_MS": "500"})
	ids := f.insert(t, 30, "order")

	// Deadlines of seconds, not of what a fast machine needs: the drain returns when the
	// table is empty, long before them.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	deadline, _ := ctx.Deadline()
	sum, returned := f.invoke(t, ctx)

	if !returned.Before(deadline) {
		t.Errorf("the handler returned %s after the deadline", returned.Sub(deadline))
	}
	if want := summary(30, 30); !maps.Equal(sum, want) {
		t.Errorf("summary = %v, want %v", sum, want)
	}
	if n := f.countState(t, "sent"); n != 30 {
		t.Errorf("%d rows are sent, want 30", n)
	}
	if got := f.rc.received(); !sameSet(got, ids) {
		t.Errorf("the receiver got %d messages %v, want the 30 inserted rows once each", len(got), got)
	}
	logged := f.logs.lines(t, "poll invocation finished")
	if len(logged) != 1 || logged[0]["sent"] != 30.0 || logged[0]["mode"] != "drain" {
		t.Errorf("the invocation logged %v, want one summary line with sent 30 in drain mode", logged)
	}

	// A warm container: the next invocation reuses the poller and the pools.
	more := f.insert(t, 5, "later")
	ctx2, cancel2 := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel2()
	deadline2, _ := ctx2.Deadline()
	sum, returned = f.invoke(t, ctx2)
	if !returned.Before(deadline2) {
		t.Errorf("the warm invocation returned %s after the deadline", returned.Sub(deadline2))
	}
	if want := summary(5, 5); !maps.Equal(sum, want) {
		t.Errorf("warm summary = %v, want %v", sum, want)
	}
	if got := f.rc.received(); !sameSet(got, append(ids, more...)) {
		t.Errorf("the receiver got %d messages, want the 35 inserted rows once each", len(got))
	}
}

func TestPollDrainReturnsAtOnceWhenIdle(t *testing.T) {
	t.Parallel()
	f := newFunction(t, newReceiver(t, false), map[string]string{"LAMBDA_MARGIN_MS": "4000"})

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	deadline, _ := ctx.Deadline()
	claimUntil := deadline.Add(-4 * time.Second)
	sum, returned := f.invoke(t, ctx)

	// Continuous mode would keep polling until claimUntil; drain returns on the empty claim.
	if !returned.Before(claimUntil) {
		t.Errorf("the idle drain returned %s after it stopped claiming; it should return on the first empty claim",
			returned.Sub(claimUntil))
	}
	if want := summary(0, 0); !maps.Equal(sum, want) {
		t.Errorf("summary = %v, want %v", sum, want)
	}
	if got := f.rc.received(); len(got) != 0 {
		t.Errorf("the receiver got %v, want nothing", got)
	}
}

func TestPollContinuousClaimsUntilTheMargin(t *testing.T) {
	t.Parallel()
	// A margin of seconds: the run's work is cut a quarter of it before the deadline, and a
	// loaded machine needs that second to return.
	f := newFunction(t, newReceiver(t, false), map[string]string{"LAMBDA_MODE": "continuous", "LAMBDA_MARGIN_MS": "4000"})
	first := f.insert(t, 1, "first")

	// Twenty seconds: the test inserts and waits for its rows while the handler claims (until
	// four seconds before the deadline), and a loaded machine may take seconds for them.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	deadline, _ := ctx.Deadline()
	claimUntil := deadline.Add(-4 * time.Second)
	type outcome struct {
		sum      map[string]int
		returned time.Time
	}
	done := make(chan outcome, 1)
	go func() {
		sum, returned := f.invoke(t, ctx)
		done <- outcome{sum, returned}
	}()

	// Once the first row is sent the table is empty: a drain would return now.
	waitFor(t, claimUntil, "the first row to be sent", func() bool { return f.row(t, first[0]).State == "sent" })
	second := f.insert(t, 1, "second")

	var out outcome
	select {
	case out = <-done:
	case <-time.After(time.Until(deadline) + 5*time.Second):
		t.Fatal("the handler did not return")
	}
	if !out.returned.Before(deadline) {
		t.Errorf("the handler returned %s after the deadline", out.returned.Sub(deadline))
	}
	if out.returned.Before(claimUntil) {
		t.Errorf("the continuous handler returned %s before it should stop claiming", claimUntil.Sub(out.returned))
	}
	if st := f.row(t, second[0]); st.State != "sent" {
		t.Errorf("the row inserted during the invocation is %+v, want sent in the same invocation", st)
	}
	if want := summary(2, 2); !maps.Equal(out.sum, want) {
		t.Errorf("summary = %v, want %v", out.sum, want)
	}
	if got := f.rc.received(); !slices.Equal(got, []string{first[0], second[0]}) {
		t.Errorf("the receiver got %v, want %v", got, []string{first[0], second[0]})
	}
}

func TestPollAbandonsAHangingPublishBeforeTheDeadline(t *testing.T) {
	t.Parallel()
	// The hanging publish is cut a quarter of the margin (3 s) before the deadline, which
	// leaves a loaded machine seconds to abandon it and return.
	f := newFunction(t, newReceiver(t, true), map[string]string{"LAMBDA_MARGIN_MS": "12000"})
	ids := f.insert(t, 1, "stuck")

	ctx, cancel := context.WithTimeout(context.Background(), 16*time.Second)
	defer cancel()
	deadline, _ := ctx.Deadline()
	sum, returned := f.invoke(t, ctx)

	if !returned.Before(deadline) {
		t.Errorf("the handler returned %s after the deadline", returned.Sub(deadline))
	}
	if want := summary(1, 0); !maps.Equal(sum, want) {
		t.Errorf("summary = %v, want %v", sum, want)
	}
	if got := f.rc.received(); !slices.Equal(got, ids) {
		t.Errorf("the receiver got %v, want the one row", got)
	}
	// Abandoned to lease expiry: still claimed, no attempt counted, no finishing write.
	if st := f.row(t, ids[0]); st != (rowState{State: "processing", Attempt: 0, Leased: true}) {
		t.Errorf("the abandoned row is %+v, want processing with attempt 0 and its lease running", st)
	}
}

func TestPollClaimsNothingWhenTheDeadlineIsInsideTheMargin(t *testing.T) {
	t.Parallel()
	f := newFunction(t, newReceiver(t, false), map[string]string{"LAMBDA_MARGIN_MS": "60000"})
	ids := f.insert(t, 1, "late")

	// The deadline is inside the margin by far, and far enough for a loaded machine to
	// return before it.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	deadline, _ := ctx.Deadline()
	sum, returned := f.invoke(t, ctx)

	if !returned.Before(deadline) {
		t.Errorf("the handler returned %s after the deadline", returned.Sub(deadline))
	}
	if want := summary(0, 0); !maps.Equal(sum, want) {
		t.Errorf("summary = %v, want %v", sum, want)
	}
	if st := f.row(t, ids[0]); st.State != "pending" || st.Attempt != 0 {
		t.Errorf("the row is %+v, want pending and unclaimed", st)
	}
	if len(f.logs.lines(t, "the invocation deadline is closer than the margin; claiming nothing")) != 1 {
		t.Error("the handler did not warn that the deadline is inside the margin")
	}
}

func TestPollWithoutADeadline(t *testing.T) {
	t.Parallel()
	f := newFunction(t, newReceiver(t, false), nil)
	ids := f.insert(t, 3, "local")

	sum, _ := f.invoke(t, context.Background())

	if want := summary(3, 3); !maps.Equal(sum, want) {
		t.Errorf("summary = %v, want %v", sum, want)
	}
	if got := f.rc.received(); !sameSet(got, ids) {
		t.Errorf("the receiver got %v, want %v", got, ids)
	}
}
