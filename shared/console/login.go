package console

import (
	"crypto/sha256"
	"crypto/subtle"
	"math"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"time"
)

// The limits of failed logins (docs/console.md). A failed login is a wrong secret; a login
// refused by a limit is not counted as a failure. Each process keeps its own counts, in memory.
const (
	// LoginClientFailures failed logins from one client address within LoginWindow; more are
	// refused with 429 until the oldest of them is LoginWindow old.
	LoginClientFailures = 10
	// LoginOverallFailures failed logins from all addresses together within LoginWindow; more
	// are refused with 429 for every address.
	LoginOverallFailures = 100
	// LoginWindow is the sliding window of both limits.
	LoginWindow = 10 * time.Minute
	// LoginFailureDelay is how long the answer to a wrong secret waits.
	LoginFailureDelay = time.Second
)

// The outcomes of a login, the values of the outcome label of queuebox_console_logins_total.
const (
	LoginAccepted       = "accepted"
	LoginRefused        = "refused"
	LoginLimitedClient  = "limited_client"
	LoginLimitedOverall = "limited_overall"
)

// SecretLogin returns the Login of Options that accepts exactly secret (the admin.auth bearer
// token or api-key key). It compares digests in constant time, so the answer's timing tells
// nothing of the secret, not even its length.
func SecretLogin(secret string) func(typed string) bool {
	want := sha256.Sum256([]byte(secret))
	return func(typed string) bool {
		got := sha256.Sum256([]byte(typed))
		return subtle.ConstantTimeCompare(got[:], want[:]) == 1
	}
}

// Metrics receives the console's measurements; *metrics.Registry and *emf.Recorder implement
// it.
type Metrics interface {
	// ConsoleLogin counts queuebox_console_logins_total{outcome}.
	ConsoleLogin(outcome string)
}

// loginLimiter counts the failed logins of the last LoginWindow, per client address and
// overall, in sliding windows. Its memory is bounded: a client is forgotten once its failures
// have left the window, and at most LoginOverallFailures failures are in the window at once.
type loginLimiter struct {
	now func() time.Time

	mu      sync.Mutex
	overall []time.Time            // the failures of the window, oldest first
	clients map[string][]time.Time // per client key, oldest first
}

func newLoginLimiter(now func() time.Time) *loginLimiter {
	return &loginLimiter{now: now, clients: map[string][]time.Time{}}
}

// loginDecision is the limiter's answer to one login.
type loginDecision struct {
	// Outcome is LoginAccepted, LoginRefused, LoginLimitedClient or LoginLimitedOverall.
	Outcome string
	// RetryAfter is, for a limited login, how long until the limit lets a login through.
	RetryAfter time.Duration
	// Reached names the limits that this failure reached ("client", "overall"), for the log.
	Reached []string
}

// attempt decides one login of client: when a limit is reached, it answers with that limit's
// outcome and how long until it lets a login through, without calling check; otherwise it
// calls check (under the limiter's lock, so that concurrent attempts cannot overrun a limit)
// and counts a failure when check returns false.
func (l *loginLimiter) attempt(client string, check func() bool) loginDecision {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	from := now.Add(-LoginWindow)
	l.overall = inWindow(l.overall, from)
	mine := inWindow(l.clients[client], from)
	if len(mine) == 0 {
		delete(l.clients, client)
	} else {
		l.clients[client] = mine
	}
	switch {
	case len(mine) >= LoginClientFailures:
		return loginDecision{Outcome: LoginLimitedClient, RetryAfter: mine[len(mine)-LoginClientFailures].Add(LoginWindow).Sub(now)}
	case len(l.overall) >= LoginOverallFailures:
		return loginDecision{Outcome: LoginLimitedOverall, RetryAfter: l.overall[len(l.overall)-LoginOverallFailures].Add(LoginWindow).Sub(now)}
	}
	if check() {
		return loginDecision{Outcome: LoginAccepted}
	}
	d := loginDecision{Outcome: LoginRefused}
	l.overall = append(l.overall, now)
	l.clients[client] = append(mine, now)
	if len(mine)+1 == LoginClientFailures {
		d.Reached = append(d.Reached, "client")
	}
	if len(l.overall) == LoginOverallFailures {
		d.Reached = append(d.Reached, "overall")
	}
	if len(l.clients) > 2*LoginOverallFailures {
		for k, times := range l.clients {
			if len(inWindow(times, from)) == 0 {
				delete(l.clients, k)
			}
		}
	}
	return d
}

// inWindow drops the times at or before from (times are in order): a failure leaves the
// window when it is exactly LoginWindow old, the moment that Retry-After names.
func inWindow(times []time.Time, from time.Time) []time.Time {
	i, _ := slices.BinarySearchFunc(times, from, func(t, from time.Time) int {
		if !t.After(from) {
			return -1
		}
		return 1
	})
	return times[i:]
}

// retryAfterSeconds is the Retry-After value of a wait: whole seconds, rounded up, at least 1.
func retryAfterSeconds(d time.Duration) string {
	return strconv.Itoa(max(1, int(math.Ceil(d.Seconds()))))
}

// clientKey is the address that the per-client limit counts: the IP address of the TCP peer
// (r.RemoteAddr; an X-Forwarded-For header is not trusted, since any client can write it),
// with an IPv6 address reduced to its /64 network, which one client usually holds whole. On
// AWS Lambda the address is the one that API Gateway reports.
func clientKey(remoteAddr string) string {
	host := remoteAddr
	if h, _, err := net.SplitHostPort(remoteAddr); err == nil {
		host = h
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	a = a.Unmap().WithZone("")
	if a.Is6() {
		if p, err := a.Prefix(64); err == nil {
			return p.String()
		}
	}
	return a.String()
}
