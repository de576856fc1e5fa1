package storetest

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/alternayte/queuebox/shared/store"
)

// destinationTests are the behaviours of store.DestinationStateStore and OutboxDefer (the
// delivery controls of docs/delivery-controls.md, V1 of the QueueBox track). The state table is not
// part of the custom-table DDL, so only the deferral also runs on SchemaCustom.
func destinationTests() []testCase {
	return []testCase{
		{name: "OutboxDeferKeepsAttemptAndLastError", custom: true, run: testOutboxDeferKeepsAttemptAndLastError},
		{name: "DestinationPauseResumeRoundTrip", run: testDestinationPauseResumeRoundTrip},
		{name: "DestinationBreakerOpensAtThreshold", run: testDestinationBreakerOpensAtThreshold},
		{name: "DestinationBreakerWindowStartsAnew", run: testDestinationBreakerWindowStartsAnew},
		{name: "DestinationBreakerHalfOpenAfterCoolDown", run: testDestinationBreakerHalfOpenAfterCoolDown},
		{name: "DestinationReserveSpacing", run: testDestinationReserveSpacing},
		{name: "DestinationReserveUnderConcurrency", run: testDestinationReserveUnderConcurrency},
		{name: "DestinationMissingTable", run: testDestinationMissingTable},
	}
}

func testOutboxDeferKeepsAttemptAndLastError(t *testing.T, e *env) {
	id := e.insert(t, store.OutboxInsertParams{Topic: "t", Payload: payloadN(1)})[0]
	m := claimOne(t, e, id)
	if got, err := e.s.OutboxRetry(e.ctx, []store.OutboxRetryParams{{Claim: m.Claim(), LastError: "HTTP 503"}}); err != nil || len(got) != 1 {
		t.Fatalf("retrying: got %v, %v", got, err)
	}
	m = claimOne(t, e, id)
	const delay = 10 * time.Minute
	t0 := e.now(t)
	got, err := e.s.OutboxDefer(e.ctx, []store.OutboxDeferParams{{Claim: m.Claim(), Delay: delay}})
	if err != nil || !slices.Equal(got, []string{id}) {
		t.Fatalf("deferring: got %v, %v; want [%s]", got, err, id)
	}
	t1 := e.now(t)
	r := e.outboxRow(t, id)
	if r.State != store.OutboxPending || r.Attempt != 1 || strOrNil(r.LastError) != "HTTP 503" || r.Token != "" || r.LeaseExpiresAt != nil {
		t.Fatalf("deferred row: %+v (last error %s); want pending, attempt still 1, the last error kept, no token, no lease", r, strOrNil(r.LastError))
	}
	if !within(r.ScheduledAt, t0.Add(delay), t1.Add(delay), time.Millisecond) {
		t.Fatalf("deferred row: scheduled_at %s, want database clock + %s in [%s, %s]", r.ScheduledAt, delay, t0.Add(delay), t1.Add(delay))
	}
	// The claim is spent: a second deferral with it changes nothing.
	if got, err := e.s.OutboxDefer(e.ctx, []store.OutboxDeferParams{{Claim: m.Claim(), Delay: time.Second}}); err != nil || len(got) != 0 {
		t.Fatalf("deferring with a spent claim: got %v, %v; want nothing changed", got, err)
	}
	if after := e.outboxRow(t, id); !sameOutboxRow(r, after) {
		t.Fatalf("a spent claim changed the row: %+v, was %+v", after, r)
	}
}

func (e *env) states(t *testing.T) map[string]store.DestinationState {
	t.Helper()
	rows, err := e.s.DestinationStates(e.ctx)
	if err != nil {
		t.Fatalf("reading the destination states: %v", err)
	}
	out := map[string]store.DestinationState{}
	for i, r := range rows {
		if i > 0 && rows[i-1].Destination >= r.Destination {
			t.Fatalf("DestinationStates is not in name order: %q before %q", rows[i-1].Destination, r.Destination)
		}
		out[r.Destination] = r
	}
	return out
}

func (e *env) setPaused(t *testing.T, name string, paused bool) store.DestinationState {
	t.Helper()
	s, err := e.s.DestinationSetPaused(e.ctx, name, paused)
	if err != nil {
		t.Fatalf("setting the pause of %s to %v: %v", name, paused, err)
	}
	if s.Destination != name || s.Paused != paused {
		t.Fatalf("setting the pause of %s to %v answered %+v", name, paused, s)
	}
	return s
}

func testDestinationPauseResumeRoundTrip(t *testing.T, e *env) {
	if got := e.states(t); len(got) != 0 {
		t.Fatalf("a new database has destination states: %+v", got)
	}
	t0 := e.now(t)
	first := e.setPaused(t, "billing", true)
	t1 := e.now(t)
	if !within(first.PausedAt, t0, t1, time.Millisecond) || !within(first.UpdatedAt, t0, t1, time.Millisecond) {
		t.Fatalf("pause: paused_at %s, updated_at %s; want the database clock in [%s, %s]", first.PausedAt, first.UpdatedAt, t0, t1)
	}
	if first.Open() || first.HalfOpen || first.Failures != 0 || !first.OpenUntil.IsZero() {
		t.Fatalf("a pause touched the breaker: %+v", first)
	}
	again := e.setPaused(t, "billing", true)
	if !again.PausedAt.Equal(first.PausedAt) {
		t.Fatalf("a second pause moved paused_at from %s to %s", first.PausedAt, again.PausedAt)
	}
	e.setPaused(t, "archive", false)
	got := e.states(t)
	if len(got) != 2 || !got["billing"].Paused || !got["billing"].PausedAt.Equal(first.PausedAt) || got["archive"].Paused {
		t.Fatalf("states after pausing billing and resuming archive: %+v", got)
	}
	for range 2 {
		if r := e.setPaused(t, "billing", false); !r.PausedAt.IsZero() {
			t.Fatalf("a resumed destination keeps paused_at %s", r.PausedAt)
		}
	}
	if got := e.states(t); got["billing"].Paused || !got["billing"].PausedAt.IsZero() {
		t.Fatalf("billing after the resume: %+v", got["billing"])
	}
	// A pause after a resume starts anew.
	t2 := e.now(t)
	if r := e.setPaused(t, "billing", true); r.PausedAt.Before(t2.Add(-time.Millisecond)) {
		t.Fatalf("a new pause kept the old paused_at %s (now %s)", r.PausedAt, t2)
	}
}

func (e *env) fail(t *testing.T, p store.BreakerFailureParams) store.DestinationState {
	t.Helper()
	s, err := e.s.DestinationRecordFailure(e.ctx, p)
	if err != nil {
		t.Fatalf("counting a failure of %s: %v", p.Destination, err)
	}
	return s
}

func (e *env) succeed(t *testing.T, name string) store.DestinationState {
	t.Helper()
	s, err := e.s.DestinationRecordSuccess(e.ctx, name)
	if err != nil {
		t.Fatalf("counting a success of %s: %v", name, err)
	}
	return s
}

func testDestinationBreakerOpensAtThreshold(t *testing.T, e *env) {
	p := store.BreakerFailureParams{Destination: "billing", Threshold: 3, Window: time.Hour, CoolDown: time.Hour}
	for i := 1; i < p.Threshold; i++ {
		if s := e.fail(t, p); s.Failures != i || s.Open() || !s.OpenUntil.IsZero() {
			t.Fatalf("failure %d of %d: %+v; want closed with %d failures", i, p.Threshold, s, i)
		}
	}
	t0 := e.now(t)
	opened := e.fail(t, p)
	t1 := e.now(t)
	if !opened.Open() || opened.HalfOpen || opened.Failures != 0 {
		t.Fatalf("failure %d of %d: %+v; want open with the count cleared", p.Threshold, p.Threshold, opened)
	}
	if !within(opened.OpenUntil, t0.Add(p.CoolDown), t1.Add(p.CoolDown), time.Millisecond) {
		t.Fatalf("open_until %s, want the database clock + %s in [%s, %s]", opened.OpenUntil, p.CoolDown, t0.Add(p.CoolDown), t1.Add(p.CoolDown))
	}
	if opened.OpenRemaining <= p.CoolDown-time.Minute || opened.OpenRemaining > p.CoolDown {
		t.Fatalf("open remaining %s, want about %s", opened.OpenRemaining, p.CoolDown)
	}
	// While open, failures (publishes begun before the breaker opened) are not counted and
	// a success does not close it.
	if s := e.fail(t, p); !s.OpenUntil.Equal(opened.OpenUntil) || s.Failures != 0 {
		t.Fatalf("a failure while open: %+v; want open_until %s unchanged", s, opened.OpenUntil)
	}
	if s := e.succeed(t, "billing"); !s.Open() || !s.OpenUntil.Equal(opened.OpenUntil) {
		t.Fatalf("a success in the cool-down: %+v; want still open", s)
	}
	if got := e.states(t)["billing"]; !got.Open() || got.HalfOpen {
		t.Fatalf("DestinationStates of the open breaker: %+v", got)
	}
	// A threshold of one opens at the first failure; a success of a closed breaker keeps it
	// closed and clears its count.
	if s := e.fail(t, store.BreakerFailureParams{Destination: "one", Threshold: 1, Window: time.Hour, CoolDown: time.Hour}); !s.Open() {
		t.Fatalf("threshold 1: %+v; want open", s)
	}
	e.fail(t, store.BreakerFailureParams{Destination: "counted", Threshold: 5, Window: time.Hour, CoolDown: time.Hour})
	if s := e.succeed(t, "counted"); s.Failures != 0 || s.Open() || s.HalfOpen {
		t.Fatalf("a success of a closed breaker: %+v; want closed with no failures", s)
	}
	if s := e.succeed(t, "fresh"); s.Destination != "fresh" || s.Open() || s.Failures != 0 {
		t.Fatalf("a success without a row: %+v", s)
	}
}

func testDestinationBreakerWindowStartsAnew(t *testing.T, e *env) {
	// A window of zero has passed at once (whatever the resolution of the database clock):
	// every failure starts a new window, so the count never reaches two.
	p := store.BreakerFailureParams{Destination: "billing", Threshold: 2, Window: 0, CoolDown: time.Hour}
	for i := range 5 {
		if s := e.fail(t, p); s.Failures != 1 || s.Open() {
			t.Fatalf("failure %d in its own window: %+v; want closed with 1 failure", i+1, s)
		}
	}
}

func testDestinationBreakerHalfOpenAfterCoolDown(t *testing.T, e *env) {
	const coolDown = 1500 * time.Millisecond
	p := store.BreakerFailureParams{Destination: "billing", Threshold: 1, Window: time.Hour, CoolDown: coolDown}
	opened := e.fail(t, p)
	if !opened.Open() || opened.HalfOpen || opened.OpenRemaining > coolDown {
		t.Fatalf("opening: %+v; want open for at most %s", opened, coolDown)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		s := e.states(t)["billing"]
		if s.HalfOpen {
			if s.Open() || s.OpenRemaining != 0 || !s.OpenUntil.Equal(opened.OpenUntil) {
				t.Fatalf("half-open: %+v; want no cool-down left and open_until %s kept", s, opened.OpenUntil)
			}
			break
		}
		if !s.Open() {
			t.Fatalf("after the cool-down: %+v; want half-open", s)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the breaker was not half-open a minute after a cool-down of %s: %+v", coolDown, s)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// A failure of a half-open breaker opens it again at once, for another cool-down.
	p.CoolDown = time.Hour
	if s := e.fail(t, p); !s.Open() || s.OpenRemaining <= 59*time.Minute || s.Failures != 0 {
		t.Fatalf("a failure when half-open: %+v; want open for about an hour", s)
	}

	// A cool-down of zero is half-open at once; a success closes it.
	q := store.BreakerFailureParams{Destination: "archive", Threshold: 1, Window: time.Hour, CoolDown: 0}
	if s := e.fail(t, q); !s.HalfOpen || s.Open() {
		t.Fatalf("a cool-down of zero: %+v; want half-open", s)
	}
	closed := e.succeed(t, "archive")
	if closed.Open() || closed.HalfOpen || !closed.OpenUntil.IsZero() || closed.Failures != 0 {
		t.Fatalf("a success when half-open: %+v; want closed", closed)
	}
	if s := e.states(t)["archive"]; s.HalfOpen || !s.OpenUntil.IsZero() {
		t.Fatalf("DestinationStates after the close: %+v", s)
	}
}

func (e *env) reserve(t *testing.T, p store.RateReserveParams) store.RateReservation {
	t.Helper()
	r, err := e.s.DestinationReserve(e.ctx, p)
	if err != nil {
		t.Fatalf("taking a slot of %s: %v", p.Destination, err)
	}
	return r
}

func testDestinationReserveSpacing(t *testing.T, e *env) {
	// An interval of a minute: the test's own duration, far below it, is the only slack.
	const interval = time.Minute
	const slack = 2 * time.Millisecond
	p := store.RateReserveParams{Destination: "billing", Interval: interval, Burst: 3, MaxWait: 150 * time.Second}
	start := time.Now()
	// wantWait checks a reservation whose slot is slots intervals after the first request.
	wantWait := func(k int, r store.RateReservation, reserved bool, slots time.Duration) {
		t.Helper()
		elapsed := time.Since(start)
		if r.Reserved != reserved || r.Wait > slots+slack || r.Wait < slots-elapsed-slack {
			t.Fatalf("request %d: %+v; want reserved %v with a wait in [%s, %s]", k, r, reserved, slots-elapsed, slots)
		}
	}
	for k := 1; k <= 3; k++ {
		wantWait(k, e.reserve(t, p), true, 0) // the burst goes at once
	}
	wantWait(4, e.reserve(t, p), true, interval)
	wantWait(5, e.reserve(t, p), true, 2*interval)
	// The sixth slot is three intervals away, beyond MaxWait: not taken, and the answer is
	// the time until it is within MaxWait.
	for k := 6; k <= 7; k++ {
		wantWait(k, e.reserve(t, p), false, 3*interval-p.MaxWait)
	}
	// The refused requests took nothing: a longer MaxWait gets the third interval's slot.
	p.MaxWait = time.Hour
	wantWait(8, e.reserve(t, p), true, 3*interval)

	// A burst of one spaces every request.
	one := store.RateReserveParams{Destination: "archive", Interval: interval, Burst: 1, MaxWait: time.Hour}
	start = time.Now()
	wantWait(1, e.reserve(t, one), true, 0)
	wantWait(2, e.reserve(t, one), true, interval)
	if got := e.states(t); len(got) != 2 || got["archive"].Paused || got["archive"].Open() {
		t.Fatalf("the rate limit's rows: %+v", got)
	}
}

func testDestinationReserveUnderConcurrency(t *testing.T, e *env) {
	// 20 requests at once of a limit with a burst of 5 and an interval of a minute: each takes
	// its own slot, so the waits are 0 five times, then about 1, 2, ... 15 minutes.
	const interval = time.Minute
	p := store.RateReserveParams{Destination: "billing", Interval: interval, Burst: 5, MaxWait: time.Hour}
	const n = 20
	waits := make([]time.Duration, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := e.s.DestinationReserve(e.ctx, p)
			if err == nil && !r.Reserved {
				err = errors.New("not reserved")
			}
			waits[i], errs[i] = r.Wait, err
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("concurrent reservations: %v", err)
	}
	slices.Sort(waits)
	for i, w := range waits {
		slot := time.Duration(max(i-4, 0)) * interval
		if w > slot+2*time.Millisecond || w < slot-elapsed-2*time.Millisecond {
			t.Fatalf("sorted waits %v: wait %d is %s, want about %s: two requests took one slot", waits, i, w, slot)
		}
	}
}

func testDestinationMissingTable(t *testing.T, e *env) {
	e.setPaused(t, "billing", true)
	if err := e.h.DropDestinationState(e.ctx); err != nil {
		t.Fatalf("dropping the destination state table: %v", err)
	}
	_, e1 := e.s.DestinationStates(e.ctx)
	_, e2 := e.s.DestinationSetPaused(e.ctx, "billing", false)
	_, e3 := e.s.DestinationRecordFailure(e.ctx, store.BreakerFailureParams{Destination: "billing", Threshold: 1, Window: time.Second, CoolDown: time.Second})
	_, e4 := e.s.DestinationRecordSuccess(e.ctx, "billing")
	_, e5 := e.s.DestinationReserve(e.ctx, store.RateReserveParams{Destination: "billing", Interval: time.Second, Burst: 1, MaxWait: time.Second})
	for i, err := range []error{e1, e2, e3, e4, e5} {
		if !errors.Is(err, store.ErrNoDestinationState) {
			t.Errorf("method %d without the table: %v; want store.ErrNoDestinationState", i+1, err)
		}
	}
	// The outbox works without the table.
	id := e.insert(t, store.OutboxInsertParams{Topic: "t", Payload: payloadN(1)})[0]
	m := claimOne(t, e, id)
	if got, err := e.s.OutboxDefer(e.ctx, []store.OutboxDeferParams{{Claim: m.Claim(), Delay: time.Second}}); err != nil || len(got) != 1 {
		t.Fatalf("deferring without the state table: %v, %v", got, err)
	}
}
