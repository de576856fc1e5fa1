package deadletter

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestFingerprintGroupsTheSameFailure(t *testing.T) {
	a := Fingerprint("HTTP 503 from http://127.0.0.1:41234/events after 1.5s: request 6f1c2d3e-0a1b-4c5d-8e9f-001122334455 at 2026-12-05T03:01:02.123Z")
	b := Fingerprint("HTTP 503 from http://127.0.0.1:39001/events after 20ms: request 00000000-1111-4222-8333-444455556666 at 2026-12-06 11:22:33+01:00")
	if a != b {
		t.Fatalf("the same failure has two fingerprints:\n%s\n%s", a, b)
	}
	if want := "HTTP <n> from http://<n>.<n>.<n>.<n>:<n>/events after <duration>: request <uuid> at <time>"; a != want {
		t.Fatalf("fingerprint = %q, want %q", a, want)
	}
}

func TestFingerprintSeparatesOtherFailures(t *testing.T) {
	if Fingerprint("HTTP 503 from /a") == Fingerprint("connection refused") {
		t.Fatal("two different failures share a fingerprint")
	}
	if Fingerprint("   ") != "(no error text)" {
		t.Fatalf("empty error: %q", Fingerprint("   "))
	}
}

func TestFingerprintIsBoundedOnACharacterBoundary(t *testing.T) {
	long := strings.Repeat("é", 300)
	f := Fingerprint(long)
	if !utf8.ValidString(f) || len(f) > MaxFingerprintLen+len("…") {
		t.Fatalf("fingerprint of %d bytes, valid UTF-8 %v", len(f), utf8.ValidString(f))
	}
}
