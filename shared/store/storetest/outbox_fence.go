package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/alternayte/queuebox/shared/store"
)

// fencedWrites are the four writes that finish or extend a claim, each reporting whether it
// changed the row.
var fencedWrites = []struct {
	name  string
	write func(e *env, c store.Claim) (bool, error)
}{
	{"Renew", func(e *env, c store.Claim) (bool, error) {
		got, err := e.s.OutboxRenew(e.ctx, store.OutboxRenewParams{Claims: []store.Claim{c}, Lease: time.Hour})
		return len(got) == 1, err
	}},
	{"MarkSent", func(e *env, c store.Claim) (bool, error) {
		got, err := e.s.OutboxMarkSent(e.ctx, []store.Claim{c})
		return len(got) == 1, err
	}},
	{"Retry", func(e *env, c store.Claim) (bool, error) {
		got, err := e.s.OutboxRetry(e.ctx, []store.OutboxRetryParams{{Claim: c, Delay: time.Minute, LastError: "stale"}})
		return len(got) == 1, err
	}},
	{"MarkDead", func(e *env, c store.Claim) (bool, error) {
		got, err := e.s.OutboxMarkDead(e.ctx, []store.OutboxDeadParams{{Claim: c, LastError: "stale"}})
		return len(got) == 1, err
	}},
}

// testOutboxStaleTokenChangesNothing: worker A claims, its lease expires, the reclaim returns
// the row and worker B claims it again. Every fenced write of A then changes nothing; the same
// write of B succeeds.
func testOutboxStaleTokenChangesNothing(t *testing.T, e *env) {
	for _, w := range fencedWrites {
		t.Run(w.name, func(t *testing.T) {
			id := e.insert(t, store.OutboxInsertParams{Topic: "fence." + w.name, Key: "fence-" + w.name, Payload: payloadN(1)})[0]
			a := claimOne(t, e, id)
			e.changeOutbox(t, id, Change{ExpireLease: true})
			if n, err := e.s.OutboxReclaim(e.ctx); err != nil || n != 1 {
				t.Fatalf("reclaiming: got %d, %v; want 1", n, err)
			}
			// The row is pending with a null token: A's write changes nothing.
			pending := e.outboxRow(t, id)
			if ok, err := w.write(e, a.Claim()); err != nil || ok {
				t.Fatalf("%s with A's token on the reclaimed row: changed %v, %v; want no change", w.name, ok, err)
			}
			if got := e.outboxRow(t, id); !sameOutboxRow(got, pending) {
				t.Fatalf("%s with A's token changed the pending row:\n got %+v\nwant %+v", w.name, got, pending)
			}
			b := claimOne(t, e, id)
			if b.ClaimToken == a.ClaimToken {
				t.Fatalf("B's claim reused A's token %s", a.ClaimToken)
			}
			owned := e.outboxRow(t, id)
			if ok, err := w.write(e, a.Claim()); err != nil || ok {
				t.Fatalf("%s with A's stale token: changed %v, %v; want no change", w.name, ok, err)
			}
			if got := e.outboxRow(t, id); !sameOutboxRow(got, owned) {
				t.Fatalf("%s with A's stale token changed B's row:\n got %+v\nwant %+v", w.name, got, owned)
			}
			if ok, err := w.write(e, b.Claim()); err != nil || !ok {
				t.Fatalf("%s with B's token: changed %v, %v; want a change", w.name, ok, err)
			}
		})
	}
}

// claimOne claims and expects exactly the row id.
func claimOne(t *testing.T, e *env, id string) store.OutboxMessage {
	t.Helper()
	msgs := e.claim(t, 10)
	if !slices.Equal(msgIDs(msgs), []string{id}) {
		t.Fatalf("claim: got %v, want [%s]", msgIDs(msgs), id)
	}
	return msgs[0]
}

func sameOutboxRow(a, b OutboxRow) bool {
	eqT := func(x, y *time.Time) bool { return (x == nil) == (y == nil) && (x == nil || x.Equal(*y)) }
	eqS := func(x, y *string) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) }
	return a.ID == b.ID && a.State == b.State && a.Attempt == b.Attempt && a.Token == b.Token &&
		eqS(a.LastError, b.LastError) && eqS(a.Key, b.Key) && eqT(a.LeaseExpiresAt, b.LeaseExpiresAt) &&
		eqT(a.ClaimedAt, b.ClaimedAt) && a.ScheduledAt.Equal(b.ScheduledAt) && a.UpdatedAt.Equal(b.UpdatedAt) &&
		a.Sequence == b.Sequence
}

func testOutboxExpiredLeaseFailsTheFence(t *testing.T, e *env) {
	for _, w := range fencedWrites {
		id := e.insert(t, store.OutboxInsertParams{Topic: "t", Key: "expired-" + w.name, Payload: payloadN(1)})[0]
		m := claimOne(t, e, id)
		e.changeOutbox(t, id, Change{ExpireLease: true})
		before := e.outboxRow(t, id)
		if ok, err := w.write(e, m.Claim()); err != nil || ok {
			t.Fatalf("%s after the lease passed (not yet reclaimed): changed %v, %v; want no change", w.name, ok, err)
		}
		if got := e.outboxRow(t, id); !sameOutboxRow(got, before) {
			t.Fatalf("%s after the lease passed changed the row:\n got %+v\nwant %+v", w.name, got, before)
		}
		// Finish it through the reclaim so that the next iteration claims only its own row.
		if _, err := e.s.OutboxReclaim(e.ctx); err != nil {
			t.Fatalf("reclaiming: %v", err)
		}
		m = claimOne(t, e, id)
		e.markSent(t, m.Claim())
	}
}

func testOutboxReclaimKeepsAttemptAndIssuesNewToken(t *testing.T, e *env) {
	ids := e.insert(t,
		store.OutboxInsertParams{Topic: "t", Payload: payloadN(1)},
		store.OutboxInsertParams{Topic: "t", Payload: payloadN(2)},
	)
	msgs := e.claim(t, 10)
	if len(msgs) != 2 {
		t.Fatalf("claim: got %d rows, want 2", len(msgs))
	}
	// Give the first row attempt 1.
	if got, err := e.s.OutboxRetry(e.ctx, []store.OutboxRetryParams{{Claim: msgs[0].Claim(), LastError: "x"}}); err != nil || len(got) != 1 {
		t.Fatalf("retrying: %v, %v", got, err)
	}
	first := claimOne(t, e, ids[0])
	e.changeOutbox(t, ids[0], Change{ExpireLease: true})
	if got := e.claim(t, 10); len(got) != 0 {
		t.Fatalf("claim with an expired processing row: got %v, want nothing (the claim never takes processing rows)", msgIDs(got))
	}
	if n, err := e.s.OutboxReclaim(e.ctx); err != nil || n != 1 {
		t.Fatalf("reclaiming: got %d, %v; want 1", n, err)
	}
	r := e.outboxRow(t, ids[0])
	if r.State != store.OutboxPending || r.Attempt != 1 || r.Token != "" || r.LeaseExpiresAt != nil {
		t.Fatalf("reclaimed row: state %s attempt %d token %q lease %v; want pending, 1, null, null", r.State, r.Attempt, r.Token, r.LeaseExpiresAt)
	}
	if other := e.outboxRow(t, ids[1]); other.State != store.OutboxProcessing || other.Token != msgs[1].ClaimToken {
		t.Fatalf("live row: state %s token %s; the reclaim must not touch a live lease", other.State, other.Token)
	}
	again := claimOne(t, e, ids[0])
	if again.ClaimToken == first.ClaimToken || again.Attempt != 1 {
		t.Fatalf("claim after reclaim: token %s (was %s) attempt %d; want a new token and attempt 1", again.ClaimToken, first.ClaimToken, again.Attempt)
	}
	if n, err := e.s.OutboxReclaim(e.ctx); err != nil || n != 0 {
		t.Fatalf("second reclaim: got %d, %v; want 0", n, err)
	}
}

func testOutboxLeaseUsesDatabaseClock(t *testing.T, e *env) {
	id := e.insert(t, store.OutboxInsertParams{Topic: "t", Payload: payloadN(1)})[0]
	const claimLease = 42 * time.Second
	t0 := e.now(t)
	msgs, err := e.s.OutboxClaim(e.ctx, store.OutboxClaimParams{Limit: 1, Lease: claimLease})
	if err != nil || len(msgs) != 1 {
		t.Fatalf("claiming: %v, %v", msgIDs(msgs), err)
	}
	t1 := e.now(t)
	r := e.outboxRow(t, id)
	if r.ClaimedAt == nil || r.LeaseExpiresAt == nil {
		t.Fatalf("claimed row: claimed_at %v lease %v, want both set", r.ClaimedAt, r.LeaseExpiresAt)
	}
	if d := r.LeaseExpiresAt.Sub(*r.ClaimedAt) - claimLease; d < -5*time.Millisecond || d > 5*time.Millisecond {
		t.Fatalf("lease_expires_at - claimed_at = %s, want %s", r.LeaseExpiresAt.Sub(*r.ClaimedAt), claimLease)
	}
	if !within(*r.ClaimedAt, t0, t1, time.Millisecond) {
		t.Fatalf("claimed_at %s is outside the database clock window [%s, %s]", r.ClaimedAt, t0, t1)
	}
	if !msgs[0].LeaseExpiresAt.Equal(*r.LeaseExpiresAt) {
		t.Fatalf("message lease %s, row lease %s", msgs[0].LeaseExpiresAt, r.LeaseExpiresAt)
	}

	const renewLease = 90 * time.Second
	t2 := e.now(t)
	renewed, err := e.s.OutboxRenew(e.ctx, store.OutboxRenewParams{Claims: []store.Claim{msgs[0].Claim()}, Lease: renewLease})
	if err != nil || len(renewed) != 1 || renewed[0] != msgs[0].Claim() {
		t.Fatalf("renewing: got %v, %v; want the claim back", renewed, err)
	}
	t3 := e.now(t)
	r = e.outboxRow(t, id)
	if !within(*r.LeaseExpiresAt, t2.Add(renewLease), t3.Add(renewLease), time.Millisecond) {
		t.Fatalf("renewed lease %s, want database clock + %s in [%s, %s]", r.LeaseExpiresAt, renewLease, t2.Add(renewLease), t3.Add(renewLease))
	}
}

func testOutboxRetryAndDeadArithmetic(t *testing.T, e *env) {
	id := e.insert(t, store.OutboxInsertParams{Topic: "t", Payload: payloadN(1), MaxAttempts: 3})[0]
	m := claimOne(t, e, id)
	const delay = 10 * time.Minute
	t0 := e.now(t)
	if got, err := e.s.OutboxRetry(e.ctx, []store.OutboxRetryParams{{Claim: m.Claim(), Delay: delay, LastError: "HTTP 503"}}); err != nil || !slices.Equal(got, []string{id}) {
		t.Fatalf("retrying: got %v, %v", got, err)
	}
	t1 := e.now(t)
	r := e.outboxRow(t, id)
	if r.State != store.OutboxPending || r.Attempt != 1 || strOrNil(r.LastError) != "HTTP 503" || r.Token != "" || r.LeaseExpiresAt != nil {
		t.Fatalf("retried row: %+v (last error %s); want pending, attempt 1, the error, no token, no lease", r, strOrNil(r.LastError))
	}
	if !within(r.ScheduledAt, t0.Add(delay), t1.Add(delay), time.Millisecond) {
		t.Fatalf("retried row: scheduled_at %s, want database clock + %s in [%s, %s]", r.ScheduledAt, delay, t0.Add(delay), t1.Add(delay))
	}
	if got := e.claim(t, 10); len(got) != 0 {
		t.Fatalf("claim before the retry is due: got %v", msgIDs(got))
	}

	id2 := e.insert(t, store.OutboxInsertParams{Topic: "t", Payload: payloadN(2)})[0]
	m = claimOne(t, e, id2)
	if got, err := e.s.OutboxRetry(e.ctx, []store.OutboxRetryParams{{Claim: m.Claim(), LastError: "first"}}); err != nil || len(got) != 1 {
		t.Fatalf("retrying: got %v, %v", got, err)
	}
	m = claimOne(t, e, id2)
	if m.Attempt != 1 {
		t.Fatalf("claim after a retry: attempt %d, want 1", m.Attempt)
	}
	if got, err := e.s.OutboxMarkDead(e.ctx, []store.OutboxDeadParams{{Claim: m.Claim(), LastError: "no route\x00 for topic"}}); err != nil || !slices.Equal(got, []string{id2}) {
		t.Fatalf("marking dead: got %v, %v", got, err)
	}
	r = e.outboxRow(t, id2)
	if r.State != store.OutboxDead || r.Attempt != 1 || r.Token != "" || r.LeaseExpiresAt != nil || r.LastError == nil {
		t.Fatalf("dead row: %+v; want dead, attempt unchanged at 1, no token, no lease, an error", r)
	}
}

func testOutboxInvalidClaimDoesNotFailBatch(t *testing.T, e *env) {
	ids := e.insert(t,
		store.OutboxInsertParams{Topic: "t", Payload: payloadN(1)},
		store.OutboxInsertParams{Topic: "t", Payload: payloadN(2)},
	)
	msgs := e.claim(t, 10)
	if len(msgs) != 2 {
		t.Fatalf("claim: got %d rows, want 2", len(msgs))
	}
	bad := []store.Claim{
		{ID: msgs[0].ID, Token: "not-a-uuid"},
		{ID: "not-a-uuid", Token: msgs[0].ClaimToken},
		{ID: msgs[0].ID, Token: ""},
		{},
	}
	renewed, err := e.s.OutboxRenew(e.ctx, store.OutboxRenewParams{Claims: append(slices.Clone(bad), msgs[1].Claim()), Lease: time.Hour})
	if err != nil || len(renewed) != 1 || renewed[0].ID != ids[1] {
		t.Fatalf("renewing with invalid claims in the batch: got %v, %v; want only %s", renewed, err, ids[1])
	}
	got, err := e.s.OutboxMarkSent(e.ctx, append(slices.Clone(bad), msgs[1].Claim()))
	if err != nil || !slices.Equal(got, []string{ids[1]}) {
		t.Fatalf("marking sent with invalid claims in the batch: got %v, %v; want only %s", got, err, ids[1])
	}
	if r := e.outboxRow(t, ids[0]); r.State != store.OutboxProcessing {
		t.Fatalf("row %s: state %s, want processing", ids[0], r.State)
	}
	var retries []store.OutboxRetryParams
	var deads []store.OutboxDeadParams
	for _, c := range bad {
		retries = append(retries, store.OutboxRetryParams{Claim: c})
		deads = append(deads, store.OutboxDeadParams{Claim: c})
	}
	if got, err := e.s.OutboxRetry(e.ctx, retries); err != nil || len(got) != 0 {
		t.Fatalf("retrying invalid claims: got %v, %v; want nothing", got, err)
	}
	if got, err := e.s.OutboxMarkDead(e.ctx, append(deads, store.OutboxDeadParams{Claim: msgs[0].Claim()})); err != nil || !slices.Equal(got, []string{ids[0]}) {
		t.Fatalf("marking dead with invalid claims in the batch: got %v, %v; want only %s", got, err, ids[0])
	}
	for _, empty := range [][]store.Claim{nil, {}} {
		if got, err := e.s.OutboxMarkSent(e.ctx, empty); err != nil || len(got) != 0 {
			t.Fatalf("marking sent no claims: got %v, %v", got, err)
		}
	}
}
