package localserver

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/console"
	"github.com/alternayte/queuebox/shared/metrics/metricstest"
)

// fromAddress is an HTTP client whose connections leave from the loopback address ip
// (127.0.0.2, 127.0.0.3, ...: Linux routes all of 127.0.0.0/8 to the loopback interface), so
// that the server sees a client of that address. It follows no redirect.
func fromAddress(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 10 * time.Second}
	return &http.Client{
		Transport:     &http.Transport{DialContext: d.DialContext},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Timeout:       time.Minute,
	}
}

// loginAnswer is the answer to one POST /console/login.
type loginAnswer struct {
	status     int
	retryAfter string
	body       string
	cookie     string // the session cookie that a login sets
}

func loginFrom(t *testing.T, base, ip, token string) loginAnswer {
	t.Helper()
	resp, err := fromAddress(ip).PostForm(base+"/console/login", url.Values{"token": {token}})
	require.NoError(t, err, "a login from %s", ip)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	a := loginAnswer{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"), body: string(b)}
	for _, c := range resp.Cookies() {
		if c.Name == console.CookieName {
			a.cookie = c.Value
		}
	}
	return a
}

// wrongTokens sends n logins with a wrong token from each address at once and requires
// every answer to be 401.
func wrongTokens(t *testing.T, base string, ips []string, n int) {
	t.Helper()
	var wg sync.WaitGroup
	answers := make(chan loginAnswer, len(ips)*n)
	for _, ip := range ips {
		for i := range n {
			wg.Go(func() {
				resp, err := fromAddress(ip).PostForm(base+"/console/login", url.Values{"token": {fmt.Sprintf("wrong-%d", i)}})
				if err != nil {
					answers <- loginAnswer{body: err.Error()}
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				answers <- loginAnswer{status: resp.StatusCode}
			})
		}
	}
	wg.Wait()
	close(answers)
	for a := range answers {
		require.Equal(t, http.StatusUnauthorized, a.status, "a wrong token within the limits: %s", a.body)
	}
}

// requireLimited checks a 429 answer: its Retry-After is a whole number of seconds within
// the window of the limits, and the page says which limit refused the login.
func requireLimited(t *testing.T, a loginAnswer, text, what string) {
	t.Helper()
	require.Equal(t, http.StatusTooManyRequests, a.status, "%s: %s", what, a.body)
	secs, err := strconv.Atoi(a.retryAfter)
	require.NoError(t, err, "%s: Retry-After %q", what, a.retryAfter)
	assert.True(t, secs >= 1 && secs <= 600, "%s: Retry-After %d is within the ten-minute window", what, secs)
	assert.True(t, strings.Contains(a.body, text), "%s: the page does not say %q: %s", what, text, a.body)
}

// TestTheConsoleLimitsFailedLogins runs the local process with the console and logs in from
// several loopback addresses: ten wrong tokens from one address are answered 401, the next
// login from it, even with the right token, 429 with a Retry-After; the right token from
// another address still logs in; once a hundred wrong tokens have come from all the
// addresses together, a login from a new address is answered 429 too, while a session that
// exists keeps working and the admin routes keep answering 401 to a wrong token. The counts
// reach queuebox_console_logins_total in a scrape.
func TestTheConsoleLimitsFailedLogins(t *testing.T) {
	t.Parallel()
	l, base, _ := startConsoleProcess(t)

	// The per-address limit.
	wrongTokens(t, base, []string{"127.0.0.2"}, 10)
	requireLimited(t, loginFrom(t, base, "127.0.0.2", "wrong-again"), "Too many failed logins from your address", "the 11th wrong token")
	requireLimited(t, loginFrom(t, base, "127.0.0.2", consoleToken), "Too many failed logins from your address", "the right token from the limited address")
	ok := loginFrom(t, base, "127.0.0.3", consoleToken)
	require.Equal(t, http.StatusSeeOther, ok.status, "the right token from another address: %s", ok.body)

	// The overall limit: 90 more wrong tokens, ten from each of nine addresses.
	var others []string
	for i := 4; i <= 12; i++ {
		others = append(others, fmt.Sprintf("127.0.0.%d", i))
	}
	wrongTokens(t, base, others, 10)
	requireLimited(t, loginFrom(t, base, "127.0.0.13", consoleToken), "Too many failed logins to the console", "the right token from a new address after 100 failures")

	// A session keeps working; the admin routes keep their documented answer.
	status, _ := consoleGet(t, base, "/console/", ok.cookie)
	assert.Equal(t, http.StatusOK, status, "the overview with the session of the login that succeeded")
	req, err := http.NewRequest(http.MethodPost, base+"/admin/replay", strings.NewReader(`{"ids":[]}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer wrong")
	resp, err := fromAddress("127.0.0.2").Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "a wrong bearer token on the admin routes")

	scrape := metricstest.Get(t, l.metrics.Handler())
	for outcome, want := range map[string]float64{"accepted": 1, "refused": 100, "limited_client": 2, "limited_overall": 1} {
		got, found := scrape.Value("queuebox_console_logins_total", map[string]string{"outcome": outcome})
		assert.True(t, found, "the scrape has queuebox_console_logins_total{outcome=%q}", outcome)
		assert.Equal(t, want, got, "queuebox_console_logins_total{outcome=%q}", outcome)
	}
}
