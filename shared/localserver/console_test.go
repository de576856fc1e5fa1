package localserver

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/console"
	"github.com/alternayte/queuebox/shared/store/postgres/dbtest"
)

const consoleToken = "console-token-5d1e"

// chromiumPath finds Debian's Chromium (QUEUEBOX_CHROMIUM overrides it); the test fails,
// saying how to install it, when there is none (scripts/ensure-services.sh installs it).
func chromiumPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("QUEUEBOX_CHROMIUM"); p != "" {
		return p
	}
	p, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("the console's browser test needs Chromium: run `apt-get install -y chromium` (make test does it through scripts/ensure-services.sh), or set QUEUEBOX_CHROMIUM")
	}
	return p
}

// screenshotDir is where the page screenshots go: docs/console when
// QUEUEBOX_CONSOLE_SCREENSHOTS=1 (to refresh the committed ones), a temporary folder otherwise.
func screenshotDir(t *testing.T) string {
	if os.Getenv("QUEUEBOX_CONSOLE_SCREENSHOTS") == "1" {
		dir, err := filepath.Abs("../../docs/console")
		require.NoError(t, err)
		require.NoError(t, os.MkdirAll(dir, 0o755))
		return dir
	}
	return t.TempDir()
}

func countRows(t *testing.T, pool *pgxpool.Pool, state string) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT COUNT(*) FROM outbox WHERE state = $1`, state).Scan(&n))
	return n
}

// consolePost sends a form to the console with the given cookie value (none when empty) and
// returns the status.
func consolePost(t *testing.T, base, path, cookie string, form url.Values, origin string) int {
	t.Helper()
	req, err := http.NewRequest("POST", base+path, strings.NewReader(form.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if cookie != "" {
		req.AddCookie(&http.Cookie{Name: console.CookieName, Value: cookie})
	}
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestTheConsoleFindsAndReplaysADeadLetterGroupInABrowser runs the local process with the
// console against a destination that fails: three rows go dead; real headless Chromium logs in
// with the admin token, sees them as one dead-letter group of that destination, previews the
// replay (nothing moves), replays it once the destination is up, and the rows become sent. Before
// that, requests without the cookie, with a wrong token, without the CSRF token and from another
// origin are refused and move nothing.
func TestTheConsoleFindsAndReplaysADeadLetterGroupInABrowser(t *testing.T) {
	t.Parallel()
	chromium := chromiumPath(t)
	var up atomic.Bool
	_, base, pool := startConsoleProcessWith(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !up.Load() {
			http.Error(w, "the orders service is down", http.StatusServiceUnavailable)
		}
	}))

	const rows = 3
	for i := range rows {
		dbtest.Exec(t, pool, fmt.Sprintf(`INSERT INTO outbox (topic, key, payload, headers, max_attempts)
			VALUES ('order.created', 'order-%d', '{"orderId":%d}', '{"Authorization":"Bearer app-secret-9f3"}', 1)`, i, i))
	}
	waitUntil(t, 60*time.Second, "the rows to go dead", func() bool { return countRows(t, pool, "dead") == rows })

	// Refusals, with plain HTTP: nothing moves.
	resp, err := http.Get(base + "/console/dead")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Contains(t, resp.Request.URL.Path, "/console/login", "a page without a session redirects to the login")
	assert.Equal(t, http.StatusUnauthorized, consolePost(t, base, "/console/login", "", url.Values{"token": {"wrong"}}, ""), "a wrong token")
	replayForm := url.Values{"table": {"outbox"}, "target": {"orders-api"}}
	assert.Equal(t, http.StatusUnauthorized, consolePost(t, base, "/console/replay", "", replayForm, ""), "a replay without the cookie")
	assert.Equal(t, http.StatusUnauthorized, consolePost(t, base, "/console/replay", "forged-session", replayForm, ""), "a replay with a forged cookie")

	// A real session, from the login.
	loginReq, err := http.NewRequest("POST", base+"/console/login", strings.NewReader(url.Values{"token": {consoleToken}}.Encode()))
	require.NoError(t, err)
	loginReq.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	loginResp, err := noRedirect.Do(loginReq)
	require.NoError(t, err)
	loginResp.Body.Close()
	require.Equal(t, http.StatusSeeOther, loginResp.StatusCode)
	var session *http.Cookie
	for _, c := range loginResp.Cookies() {
		if c.Name == console.CookieName {
			session = c
		}
	}
	require.NotNil(t, session, "the login sets the session cookie")
	assert.True(t, session.HttpOnly && session.Secure && session.SameSite == http.SameSiteStrictMode, "the cookie is HttpOnly, Secure and SameSite=Strict: %+v", session)
	assert.NotContains(t, session.Value, consoleToken)
	assert.Equal(t, http.StatusForbidden, consolePost(t, base, "/console/replay", session.Value, replayForm, ""), "a replay without the CSRF token")
	withBadCSRF := url.Values{"table": {"outbox"}, "target": {"orders-api"}, "csrf": {"not-the-token"}}
	assert.Equal(t, http.StatusForbidden, consolePost(t, base, "/console/replay", session.Value, withBadCSRF, ""), "a replay with a wrong CSRF token")
	assert.Equal(t, http.StatusForbidden, consolePost(t, base, "/console/replay", session.Value, replayForm, "https://evil.example"), "a cross-origin replay")
	assert.Equal(t, rows, countRows(t, pool, "dead"), "a refused request moved rows")

	// The browser.
	shots := screenshotDir(t)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.DisableGPU, // chromedp makes a new user data folder and removes it when the browser is closed

		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.WindowSize(1280, 900))...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(allocCtx)
	defer cancel()
	ctx, cancelTimeout := context.WithTimeout(ctx, 3*time.Minute)
	defer cancelTimeout()
	shot := func(name string) chromedp.Action {
		return chromedp.ActionFunc(func(ctx context.Context) error {
			var png []byte
			if err := chromedp.FullScreenshot(&png, 100).Do(ctx); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(shots, name+".png"), png, 0o644)
		})
	}
	// submit clicks an element that submits a form, then waits for sel on the page that the
	// submission loads: a query that runs while the old page unloads fails with a lost
	// execution context, so the wait is retried until the deadline of ctx.
	submit := func(click, sel string) {
		t.Helper()
		require.NoError(t, chromedp.Run(ctx, chromedp.Click(click, chromedp.ByQuery)))
		for {
			err := chromedp.Run(ctx, chromedp.WaitVisible(sel, chromedp.ByQuery))
			if err == nil {
				return
			}
			require.NoError(t, ctx.Err(), "waiting for %s after clicking %s: %v", sel, click, err)
			if !strings.Contains(err.Error(), "context") {
				require.NoError(t, err, "waiting for %s after clicking %s", sel, click)
			}
		}
	}
	var deadCount, groupText, previewCount, message string
	require.NoError(t, chromedp.Run(ctx,
		chromedp.Navigate(base+"/console/"),
		chromedp.WaitVisible(`#token`, chromedp.ByID),
		shot("login"),
		chromedp.SendKeys(`#token`, consoleToken, chromedp.ByID),
	))
	submit(`#login`, `#outbox-counts`)
	require.NoError(t, chromedp.Run(ctx,
		chromedp.Text(`#outbox-counts td[data-state="dead"]`, &deadCount, chromedp.ByQuery),
		shot("overview"),
		chromedp.Navigate(base+"/console/dead"),
		chromedp.WaitVisible(`#dead-groups`, chromedp.ByID),
		chromedp.Text(`#dead-groups tr.dead-group`, &groupText, chromedp.ByQuery),
		shot("dead-letters"),
	))
	assert.Equal(t, fmt.Sprint(rows), strings.TrimSpace(deadCount), "the overview's dead count")
	assert.Contains(t, groupText, "orders-api", "the group names the destination")
	assert.Contains(t, groupText, fmt.Sprint(rows), "the group counts the rows")
	assert.Contains(t, groupText, "HTTP <n>", "the group shows the error fingerprint")

	// The row page shows the headers with the secret redacted.
	var sampleID, headers string
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT id::text FROM outbox ORDER BY id LIMIT 1`).Scan(&sampleID))
	require.NoError(t, chromedp.Run(ctx,
		chromedp.Navigate(base+"/console/rows/outbox/"+sampleID),
		chromedp.WaitVisible(`#headers`, chromedp.ByID),
		chromedp.Text(`#headers`, &headers, chromedp.ByID),
		shot("row"),
	))
	assert.NotContains(t, headers, "app-secret-9f3", "a secret in the headers reached the page")
	assert.Contains(t, headers, "Authorization")

	// The preview changes nothing; the replay moves the group and the rows are delivered.
	require.NoError(t, chromedp.Run(ctx,
		chromedp.Navigate(base+"/console/dead"),
		chromedp.WaitVisible(`a.replay-group`, chromedp.ByQuery),
	))
	submit(`a.replay-group`, `#preview-count`)
	require.NoError(t, chromedp.Run(ctx,
		chromedp.Text(`#preview-count`, &previewCount, chromedp.ByID),
		shot("replay-preview"),
	))
	assert.Equal(t, fmt.Sprint(rows), previewCount, "the preview's count")
	assert.Equal(t, rows, countRows(t, pool, "dead"), "the preview moved rows")
	up.Store(true)
	submit(`#replay`, `#message`)
	require.NoError(t, chromedp.Run(ctx,
		chromedp.Text(`#message`, &message, chromedp.ByID),
	))
	assert.Contains(t, message, fmt.Sprintf("%d dead rows moved back to pending", rows))
	waitUntil(t, 60*time.Second, "the replayed rows to be sent", func() bool { return countRows(t, pool, "sent") == rows })

	// Destinations: pause from the page.
	var paused string
	require.NoError(t, chromedp.Run(ctx,
		chromedp.Navigate(base+"/console/destinations"),
		chromedp.WaitVisible(`tr[data-destination="orders-api"] button`, chromedp.ByQuery),
	))
	submit(`tr[data-destination="orders-api"] button`, `tr[data-destination="orders-api"] td[data-paused="true"]`)
	require.NoError(t, chromedp.Run(ctx,
		chromedp.Text(`tr[data-destination="orders-api"] td.paused`, &paused, chromedp.ByQuery),
		shot("destinations"),
		chromedp.Navigate(base+"/console/"),
		chromedp.WaitVisible(`#outbox-counts`, chromedp.ByID),
		chromedp.Text(`#outbox-counts td[data-state="sent"]`, &deadCount, chromedp.ByQuery),
	))
	assert.Equal(t, "paused", paused)
	assert.Equal(t, fmt.Sprint(rows), strings.TrimSpace(deadCount), "the overview's sent count after the replay")
	var dbPaused bool
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT paused FROM queuebox_destination_state WHERE destination = 'orders-api'`).Scan(&dbPaused))
	assert.True(t, dbPaused, "the pause reached the database")
}
