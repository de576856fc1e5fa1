package lambdafn_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/console"
	"github.com/alternayte/queuebox/shared/lambdafn"
)

// consoleInvoke sends a console request through the admin function as API Gateway (payload
// 2.0) would: cookies in the event's cookies list, a form body; it returns the status, the
// body and the cookies that the answer sets.
func (f *adminFunction) consoleInvoke(t *testing.T, method, path, form string, cookies []string) (int, string, []string, string) {
	t.Helper()
	raw, err := os.ReadFile("testdata/admin-iam-event.json")
	require.NoError(t, err)
	var ev lambdafn.HTTPRequest
	require.NoError(t, json.Unmarshal(raw, &ev))
	ev.RawPath, ev.RequestContext.HTTP.Path, ev.RequestContext.HTTP.Method = path, path, method
	if i := strings.IndexByte(path, '?'); i >= 0 {
		ev.RawPath, ev.RequestContext.HTTP.Path, ev.RawQueryString = path[:i], path[:i], path[i+1:]
	}
	if form != "" {
		ev.Body = form
		ev.Headers["content-type"] = "application/x-www-form-urlencoded"
	}
	ev.Cookies = cookies
	event, err := json.Marshal(ev)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := f.handler.Invoke(ctx, event)
	require.NoError(t, err)
	var resp lambdafn.HTTPResponse
	require.NoError(t, json.Unmarshal(out, &resp))
	location := resp.Headers["Location"]
	if location == "" {
		location = resp.Headers["location"]
	}
	return resp.StatusCode, resp.Body, resp.Cookies, location
}

// TestTheConsoleWorksThroughTheAdminFunction logs in to the console through the admin function
// (the session cookie comes back in the answer's cookies and goes in the next event's), reads
// the dead-letter page, and replays the group with the page's CSRF token: each invocation
// accepts the session that another issued, since nothing is kept in memory.
func TestTheConsoleWorksThroughTheAdminFunction(t *testing.T) {
	t.Parallel()
	f := newAdminFunction(t, nil)
	_, err := f.pool.Exec(context.Background(), `INSERT INTO outbox (topic, payload, state, attempt, last_error)
		VALUES ('order.created', '{}', 'dead', 5, 'HTTP 500 from destination receiver'), ('order.created', '{}', 'dead', 5, 'HTTP 500 from destination receiver')`)
	require.NoError(t, err)

	status, _, _, location := f.consoleInvoke(t, "GET", "/console/dead", "", nil)
	assert.Equal(t, http.StatusSeeOther, status)
	assert.Equal(t, "/console/login", location, "without a session the console asks for the login")
	status, _, cookies, _ := f.consoleInvoke(t, "POST", "/console/login", "token=wrong", nil)
	assert.Equal(t, http.StatusUnauthorized, status)
	assert.Empty(t, cookies)

	status, _, cookies, location = f.consoleInvoke(t, "POST", "/console/login", "token="+url.QueryEscape(adminKey), nil)
	require.Equal(t, http.StatusSeeOther, status)
	assert.Equal(t, "/console/", location)
	var session string
	for _, c := range cookies {
		if strings.HasPrefix(c, console.CookieName+"=") {
			session = strings.SplitN(c, ";", 2)[0]
			assert.Contains(t, c, "HttpOnly")
			assert.Contains(t, c, "Secure")
		}
	}
	require.NotEmpty(t, session, "the login's answer sets the session cookie in the cookies of the answer: %v", cookies)

	status, body, _, _ := f.consoleInvoke(t, "GET", "/console/dead", "", []string{session})
	require.Equal(t, http.StatusOK, status, body)
	assert.Contains(t, body, "receiver")
	assert.Regexp(t, `<td class="num">2</td>`, body)

	status, body, _, _ = f.consoleInvoke(t, "GET", "/console/replay?table=outbox&target=receiver", "", []string{session})
	require.Equal(t, http.StatusOK, status, body)
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(body)
	require.NotNil(t, m, "the preview page carries the CSRF token")
	form := url.Values{"csrf": {m[1]}, "table": {"outbox"}, "target": {"receiver"}}
	status, body, _, _ = f.consoleInvoke(t, "POST", "/console/replay", form.Encode(), nil)
	assert.Equal(t, http.StatusUnauthorized, status, "a change without the cookie: %s", body)
	status, body, _, _ = f.consoleInvoke(t, "POST", "/console/replay", form.Encode(), []string{session})
	require.Equal(t, http.StatusOK, status, body)
	assert.Contains(t, body, "2 dead rows moved back to pending")
	var pending int
	require.NoError(t, f.pool.QueryRow(context.Background(), `SELECT count(*) FROM outbox WHERE state = 'pending'`).Scan(&pending))
	assert.Equal(t, 2, pending)
}
