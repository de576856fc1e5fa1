package localserver

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/console"
	"github.com/alternayte/queuebox/shared/store/postgres/dbtest"
)

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// consoleGetCSRF reads a console page with the cookie, without following a redirect, and returns
// the status and the page's CSRF token (empty when the page has none).
func consoleGetCSRF(t *testing.T, base, path, cookie string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("GET", base+path, nil)
	require.NoError(t, err)
	req.AddCookie(&http.Cookie{Name: console.CookieName, Value: cookie})
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var csrf string
	if m := csrfField.FindSubmatch(body); m != nil {
		csrf = string(m[1])
	}
	return resp.StatusCode, csrf
}

func destinationPaused(t *testing.T, pool *pgxpool.Pool, name string) bool {
	t.Helper()
	var paused bool
	err := pool.QueryRow(context.Background(),
		`SELECT COALESCE((SELECT paused FROM queuebox_destination_state WHERE destination = $1), false)`, name).Scan(&paused)
	require.NoError(t, err)
	return paused
}

// TestTheConsoleLogoutEndsTheSessionOnEveryReplica runs two replicas of the local process with
// the console on one database. A session cookie from a login on replica A works on replica B
// (it pauses and resumes a destination there); after the logout on A, the same cookie, replayed
// by the test, is refused on B and on A: no page, no pause. A new login works again.
func TestTheConsoleLogoutEndsTheSessionOnEveryReplica(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewDatabase(t)
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	yaml := fmt.Sprintf(`
database:
  url: jdbc:postgresql://%s%s
  username: postgres
  password: trust-auth
  migrate: true
admin:
  enabled: true
  auth:
    type: bearer
    token: %s
destinations:
  orders-api:
    type: http
    baseUrl: http://127.0.0.1:9
routes:
  - topicPattern: "**"
    destination: orders-api
`, u.Host, u.Path, consoleToken)
	var bases []string
	for range 2 {
		cfg := loadYAML(t, yaml)
		cfg.Server.HTTPPort = 0
		l, err := New(context.Background(), cfg, quietLog())
		require.NoError(t, err)
		bases = append(bases, runLocal(t, l))
	}
	a, b := bases[0], bases[1]
	pool := dbtest.NewPool(t, dbURL)

	cookie, _ := consoleLogin(t, a)
	status, csrf := consoleGetCSRF(t, b, "/console/destinations", cookie)
	require.Equal(t, http.StatusOK, status, "replica B accepts the session of replica A")
	require.NotEmpty(t, csrf)
	form := url.Values{"csrf": {csrf}}
	require.Equal(t, http.StatusSeeOther, consolePost(t, b, "/console/destinations/orders-api/pause", cookie, form, ""))
	require.True(t, destinationPaused(t, pool, "orders-api"), "the session paused the destination through replica B")
	require.Equal(t, http.StatusSeeOther, consolePost(t, b, "/console/destinations/orders-api/resume", cookie, form, ""))
	require.False(t, destinationPaused(t, pool, "orders-api"))

	require.Equal(t, http.StatusSeeOther, consolePost(t, a, "/console/logout", cookie, form, ""), "the logout on replica A")

	for name, base := range map[string]string{"replica B": b, "replica A": a} {
		assert.Equal(t, http.StatusUnauthorized, consolePost(t, base, "/console/destinations/orders-api/pause", cookie, form, ""),
			"%s: a pause with the logged-out cookie", name)
		status, _ := consoleGetCSRF(t, base, "/console/", cookie)
		assert.Equal(t, http.StatusSeeOther, status, "%s: a page with the logged-out cookie redirects to the login", name)
	}
	assert.False(t, destinationPaused(t, pool, "orders-api"), "the logged-out cookie paused the destination")

	again, _ := consoleLogin(t, b)
	status, csrf = consoleGetCSRF(t, a, "/console/destinations", again)
	require.Equal(t, http.StatusOK, status, "a new login works")
	assert.Equal(t, http.StatusSeeOther, consolePost(t, a, "/console/destinations/orders-api/pause", again, url.Values{"csrf": {csrf}}, ""))
	assert.True(t, destinationPaused(t, pool, "orders-api"))
}
