package console

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLoginLimiterWindows drives the limiter with a clock of its own: the per-client and the
// overall limits refuse without checking the secret, say how long until they let a login
// through, and let it through once the oldest failure has left the window; a success is not
// a failure; forgotten clients leave the memory.
func TestLoginLimiterWindows(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l := newLoginLimiter(func() time.Time { return now })
	checked := 0
	wrong := func() bool { checked++; return false }
	right := func() bool { checked++; return true }

	for i := range LoginClientFailures {
		d := l.attempt("a", wrong)
		require.Equal(t, LoginRefused, d.Outcome, "failure %d", i+1)
		if i == LoginClientFailures-1 {
			assert.Equal(t, []string{"client"}, d.Reached)
		} else {
			assert.Empty(t, d.Reached)
		}
		now = now.Add(time.Second)
	}
	checked = 0
	d := l.attempt("a", right)
	assert.Equal(t, LoginLimitedClient, d.Outcome)
	assert.Equal(t, LoginWindow-LoginClientFailures*time.Second, d.RetryAfter, "until the first failure leaves the window")
	assert.Zero(t, checked, "a limited login checks no secret")
	assert.Equal(t, LoginAccepted, l.attempt("b", right).Outcome, "another client")

	now = now.Add(d.RetryAfter)
	assert.Equal(t, LoginAccepted, l.attempt("a", right).Outcome, "once the first failure left the window")
	assert.Equal(t, LoginRefused, l.attempt("a", wrong).Outcome)
	assert.Equal(t, LoginLimitedClient, l.attempt("a", right).Outcome, "ten failures in the window again")

	// The overall limit: failures from many clients, none of them over its own limit.
	l.mu.Lock()
	counted := len(l.overall)
	l.mu.Unlock()
	for i := counted + 1; i < LoginOverallFailures; i++ {
		require.Equal(t, LoginRefused, l.attempt(fmt.Sprintf("c%d", i), wrong).Outcome, "failure %d", i)
	}
	d = l.attempt("last", wrong)
	require.Equal(t, LoginRefused, d.Outcome)
	assert.Equal(t, []string{"overall"}, d.Reached)
	d = l.attempt("new", right)
	assert.Equal(t, LoginLimitedOverall, d.Outcome)
	assert.Greater(t, d.RetryAfter, time.Duration(0))
	now = now.Add(d.RetryAfter)
	assert.Equal(t, LoginAccepted, l.attempt("new", right).Outcome, "once the oldest failure of the window left it")

	// A window later every client is forgotten at the next failure that prunes.
	now = now.Add(LoginWindow)
	for i := range 2*LoginOverallFailures + 1 {
		l.attempt(fmt.Sprintf("d%d", i), func() bool { return i%2 == 0 })
		now = now.Add(LoginWindow / (4 * LoginOverallFailures))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	assert.LessOrEqual(t, len(l.clients), 2*LoginOverallFailures, "the clients kept in memory")
	assert.LessOrEqual(t, len(l.overall), LoginOverallFailures)
}

func TestClientKey(t *testing.T) {
	for in, want := range map[string]string{
		"192.0.2.7:51234":            "192.0.2.7",
		"192.0.2.7":                  "192.0.2.7", // API Gateway's source address
		"[::ffff:192.0.2.7]:443":     "192.0.2.7",
		"[2001:db8:1:2:3:4:5:6]:443": "2001:db8:1:2::/64",
		"[2001:db8:1:2:ffff::1]:443": "2001:db8:1:2::/64",
		"[fe80::1%eth0]:80":          "fe80::/64",
		"not an address":             "not an address",
		"[2001:db8:1:3:3:4:5:6]:443": "2001:db8:1:3::/64",
	} {
		assert.Equal(t, want, clientKey(in), "clientKey(%q)", in)
	}
}

func TestRetryAfterSeconds(t *testing.T) {
	assert.Equal(t, "1", retryAfterSeconds(0))
	assert.Equal(t, "1", retryAfterSeconds(300*time.Millisecond))
	assert.Equal(t, "2", retryAfterSeconds(1001*time.Millisecond))
	assert.Equal(t, "600", retryAfterSeconds(LoginWindow))
}

// TestSecretLogin accepts the admin secret and nothing else, not a prefix nor an extension.
func TestSecretLogin(t *testing.T) {
	t.Parallel()
	login := SecretLogin("admin-secret-0123")
	assert.True(t, login("admin-secret-0123"))
	for _, typed := range []string{"", "admin-secret-012", "admin-secret-01234", "ADMIN-SECRET-0123"} {
		assert.False(t, login(typed), "typed %q", typed)
	}
}
