package storetest

import (
	"strings"
	"testing"
	"time"
)

// sessionTests are the behaviours of store.SessionRevocationStore (the console's logout, V2 of
// the QueueBox track). The table is not part of the custom-table DDL.
func sessionTests() []testCase {
	return []testCase{
		{name: "RevokedSessionRoundTrip", run: testRevokedSessionRoundTrip},
		{name: "RevokedSessionSweepsExpiredRows", run: testRevokedSessionSweepsExpiredRows},
	}
}

func (e *env) revoked(t *testing.T, key string) bool {
	t.Helper()
	got, err := e.s.SessionRevoked(e.ctx, key)
	if err != nil {
		t.Fatalf("reading whether session %s is revoked: %v", key, err)
	}
	return got
}

// testRevokedSessionRoundTrip: a session is not revoked until RevokeSession records it; a
// second revocation of it changes nothing; another session stays live; a key the column
// cannot hold is refused.
func testRevokedSessionRoundTrip(t *testing.T, e *env) {
	a, b := strings.Repeat("a", 64), strings.Repeat("b", 64)
	if e.revoked(t, a) {
		t.Fatal("a session that nobody revoked reads as revoked")
	}
	expires := e.now(t).Add(8 * time.Hour)
	for range 2 {
		if err := e.s.RevokeSession(e.ctx, a, expires); err != nil {
			t.Fatalf("revoking a session: %v", err)
		}
		if !e.revoked(t, a) {
			t.Fatal("a revoked session reads as live")
		}
	}
	if e.revoked(t, b) {
		t.Fatal("revoking one session revoked another")
	}
	for _, bad := range []string{"", strings.Repeat("c", 65)} {
		if err := e.s.RevokeSession(e.ctx, bad, expires); err == nil {
			t.Fatalf("revoking the key %q: got no error", bad)
		}
	}
}

// testRevokedSessionSweepsExpiredRows: a revocation deletes the rows whose expiry has passed
// (their cookies are refused by their own expiry) and keeps the others.
func testRevokedSessionSweepsExpiredRows(t *testing.T, e *env) {
	old, live, next := strings.Repeat("1", 64), strings.Repeat("2", 64), strings.Repeat("3", 64)
	now := e.now(t)
	if err := e.s.RevokeSession(e.ctx, old, now.Add(-time.Minute)); err != nil {
		t.Fatalf("revoking an expired session: %v", err)
	}
	if err := e.s.RevokeSession(e.ctx, live, now.Add(time.Hour)); err != nil {
		t.Fatalf("revoking a session: %v", err)
	}
	if err := e.s.RevokeSession(e.ctx, next, now.Add(time.Hour)); err != nil {
		t.Fatalf("revoking a session: %v", err)
	}
	if e.revoked(t, old) {
		t.Fatal("the row of an expired session is still there after the next revocation")
	}
	if !e.revoked(t, live) || !e.revoked(t, next) {
		t.Fatal("a sweep deleted the row of a session that has not expired")
	}
}
