package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestReadErrorBody(t *testing.T) {
	t.Parallel()

	const secret = "S3CRET-0123456789"
	tests := []struct {
		name    string
		body    string
		limit   int
		secrets []string
		want    string
	}{
		{name: "short body", body: "boom", limit: 2048, want: "boom"},
		{name: "cut at the limit", body: "abcdefgh", limit: 5, want: "abcde"},
		{name: "limit zero keeps nothing", body: "abc", limit: 0, want: ""},
		{name: "space trimmed", body: "  boom \n", limit: 100, want: "boom"},
		{name: "secret replaced", body: "auth=" + secret + " bad", limit: 100, secrets: []string{secret}, want: "auth=[REDACTED] bad"},
		{name: "every occurrence", body: secret + "," + secret, limit: 100, secrets: []string{secret}, want: "[REDACTED],[REDACTED]"},
		{name: "secret cut by the limit leaves no prefix", body: "abcd" + secret + "tail", limit: 6, secrets: []string{secret}, want: "abcd[R"},
		{name: "secret starting right after the limit", body: "abcd" + secret, limit: 4, secrets: []string{secret}, want: "abcd"},
		{
			// Replacing the first occurrence shortens the text; the partly read second one must
			// not slide into the kept part.
			name:    "shortening does not pull in a partial secret",
			body:    secret + "xx" + secret,
			limit:   len(secret) + 4,
			secrets: []string{secret},
			want:    "[REDACTED]xx[REDACTED", // the marker counts against the limit
		},
		{name: "overlapping secrets", body: "..abcdef..", limit: 100, secrets: []string{"abcd", "cdef"}, want: "..[REDACTED].."},
		{name: "NUL and invalid bytes", body: "a\x00b\xff\xfec", limit: 100, want: "a\ufffdb\ufffd\ufffdc"},
		{name: "rune cut by the limit is dropped", body: "ab\u00e9", limit: 3, want: "ab"},
		{name: "multibyte text kept", body: "caf\u00e9 \u2713", limit: 100, want: "caf\u00e9 \u2713"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := readErrorBody(strings.NewReader(tt.body), tt.limit, tt.secrets)
			assert.Equal(t, tt.want, got)
			for _, s := range tt.secrets {
				for n := 3; n <= len(s); n++ {
					assert.NotContains(t, got, s[:n], "no prefix of a secret survives")
				}
			}
		})
	}
}

func TestTokenLifetime(t *testing.T) {
	t.Parallel()

	tests := []struct {
		raw  string
		want time.Duration
	}{
		{raw: `3600`, want: 3570 * time.Second},
		{raw: `300`, want: 270 * time.Second},
		{raw: `60`, want: 54 * time.Second},
		{raw: `1`, want: 900 * time.Millisecond},
		{raw: `"120"`, want: 108 * time.Second},
		{raw: `3600.0`, want: 3570 * time.Second},
		{raw: ``, want: defaultTokenLifetime},
		{raw: `null`, want: defaultTokenLifetime},
		{raw: `0`, want: defaultTokenLifetime},
		{raw: `-5`, want: defaultTokenLifetime},
		{raw: `"soon"`, want: defaultTokenLifetime},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, tokenLifetime(json.RawMessage(tt.raw)), "expires_in %s", tt.raw)
	}
}

func TestCheckDialedAddress(t *testing.T) {
	t.Parallel()

	tests := []struct {
		host, address, want string // want empty: allowed
	}{
		{"api.test", "127.0.0.1:443", "host api.test resolves to loopback address 127.0.0.1"},
		{"api.test", "10.0.0.8:443", "site-local address 10.0.0.8"},
		{"api.test", "172.20.1.1:80", "site-local"},
		{"api.test", "192.168.0.1:80", "site-local"},
		{"metadata.test", "169.254.169.254:80", "host metadata.test resolves to link-local address 169.254.169.254"},
		{"api.test", "[fe80::1%eth0]:80", "link-local address fe80::1"},
		{"api.test", "[fd00::2]:443", "unique-local address fd00::2"},
		{"api.test", "[::1]:443", "loopback address ::1"},
		{"api.test", "[::ffff:10.1.1.1]:443", "site-local"},
		{"api.test", "[64:ff9b::7f00:1]:443", "loopback"},
		{"api.test", "0.0.0.0:80", "unspecified"},
		{"api.test", "[::]:80", "unspecified"},
		{"127.0.0.1", "127.0.0.1:80", "host 127.0.0.1 is a loopback address"},
		{"api.test", "not-an-address", "cannot be checked"},
		{"api.test", "93.184.216.34:443", ""},
		{"api.test", "[2606:2800:220:1:248:1893:25c8:1946]:443", ""},
	}
	for _, tt := range tests {
		err := checkDialedAddress(tt.host, tt.address)
		if tt.want == "" {
			assert.NoError(t, err, tt.address)
			continue
		}
		if assert.ErrorIs(t, err, ErrPrivateAddress, tt.address) {
			assert.Contains(t, err.Error(), tt.want, tt.address)
		}
	}
}

// A connection to the proxy that the environment names is not checked: the proxy resolves
// the destination's host, and the operator chose its address.
func TestGuardedDialerLetsTheProxyThrough(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	g := newGuardedDialer(&net.Dialer{Timeout: 5 * time.Second})
	ctx := context.Background()
	if _, err := g.DialContext(ctx, "tcp", ln.Addr().String()); !errors.Is(err, ErrPrivateAddress) {
		t.Fatalf("a loopback dial = %v, want a refusal", err)
	}
	g.proxies[ln.Addr().String()] = true
	c, err := g.DialContext(ctx, "tcp", ln.Addr().String())
	if err != nil {
		t.Fatalf("the proxy dial = %v", err)
	}
	_ = c.Close()
}

func TestParseRetryAfterReadsSecondsAndDates(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want time.Duration
	}{
		{"2", 2 * time.Second},
		{" 120 ", 2 * time.Minute},
		{"", 0},
		{"soon", 0},
		{"-5", 0},
		{"Wed, 02 Dec 2026 10:00:30 GMT", 30 * time.Second},
		{"Wed, 02 Dec 2026 09:00:00 GMT", 0},
		{"99999999999999999999", maxRetryAfter},
	} {
		if got := parseRetryAfter(tc.in, now); got != tc.want {
			t.Errorf("parseRetryAfter(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

// The wire pool closes the connections that stay idle for its idle time, and keeps none.
func TestWirePoolClosesIdleConnections(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	closed := make(chan struct{})
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		// The client's close ends this read.
		_, _ = c.Read(make([]byte, 1))
		_ = c.Close()
		close(closed)
	}()
	u, _ := url.Parse("http://" + ln.Addr().String())
	d := &net.Dialer{Timeout: 5 * time.Second}
	p := newWirePool(u, d.DialContext, 4, 50*time.Millisecond)
	c, err := p.get(context.Background(), time.Now().Add(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	p.put(c)
	select {
	case <-closed:
	case <-time.After(30 * time.Second):
		t.Fatal("the idle connection was not closed")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.idle) != 0 || p.sweep != nil {
		t.Fatalf("the pool keeps %d idle connections (sweep armed: %v)", len(p.idle), p.sweep != nil)
	}
}
