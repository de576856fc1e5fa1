package localserver

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/console"
	"github.com/alternayte/queuebox/shared/store/postgres/dbtest"
)

// browser starts a real headless Chromium for one test and returns its context, bounded by
// timeout; the browser closes when the test ends.
func browser(t *testing.T, timeout time.Duration) context.Context {
	t.Helper()
	chromium := chromiumPath(t)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.WindowSize(1280, 900))...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	ctx, cancelTimeout := context.WithTimeout(ctx, timeout)
	t.Cleanup(func() { cancelTimeout(); cancel(); cancelAlloc() })
	return ctx
}

// clickAndWait clicks an element that loads a page (a link or a submit button), then waits
// for sel on the new page: a query that runs while the old page unloads fails with a lost
// execution context, so the wait is retried until the deadline of ctx.
func clickAndWait(t *testing.T, ctx context.Context, click, sel string) {
	t.Helper()
	require.NoError(t, chromedp.Run(ctx, chromedp.Click(click, chromedp.ByQuery)), "clicking %s", click)
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

// deadGroup is a group of dead rows that the test inserts: its table, its destination or
// source, a word of its error that tells it apart, and its rows' ids.
type deadGroup struct {
	table, target, marker string
	ids                   []string
}

// TestTheConsoleReplaysExactlyTheRowsOfEachLink runs the local process with the console over
// three dead-letter groups in the outbox and three in the inbox (errors with characters that a
// query string must escape: & = + # %), plus a sent outbox row and a processed inbox row. Real
// headless Chromium opens "Replay this row…" of an outbox row and of an inbox row, then the
// "Replay…" link of every group: each preview counts exactly the row or the rows left in the
// group, and each Replay moves exactly those rows, checked in the database after every click.
func TestTheConsoleReplaysExactlyTheRowsOfEachLink(t *testing.T) {
	t.Parallel()
	_, base, pool := startConsoleProcess(t)
	ctx := context.Background()

	groups := []*deadGroup{
		{table: "outbox", target: "orders-api", marker: "Service Unavailable"},
		{table: "outbox", target: "orders-api", marker: "upstream said"},
		{table: "outbox", target: "audit", marker: "Internal Server Error"},
		{table: "inbox", target: "stripe", marker: "Invalid JSON"},
		{table: "inbox", target: "stripe", marker: "Transform failed"},
		{table: "inbox", target: "github", marker: "signature"},
	}
	var all []string // every dead row inserted
	insert := func(g *deadGroup, n int, topic, lastError string) {
		for i := range n {
			var id string
			if g.table == "outbox" {
				require.NoError(t, pool.QueryRow(ctx, `INSERT INTO outbox (topic, key, payload, state, attempt, last_error)
					VALUES ($1, $2, '{"n":1}', 'dead', 5, $3) RETURNING id::text`, topic, fmt.Sprintf("%s-%d", g.marker, i), lastError).Scan(&id))
			} else {
				require.NoError(t, pool.QueryRow(ctx, `INSERT INTO inbox (source, idempotency_key, payload, state, consumption, last_error, processed_at)
					VALUES ($1, $2, '{"n":1}', 'dead', 'pull', $3, now()) RETURNING id::text`, g.target, fmt.Sprintf("%s-%d", g.marker, i), lastError).Scan(&id))
			}
			g.ids = append(g.ids, id)
			all = append(all, id)
		}
	}
	insert(groups[0], 5, "order.created", "HTTP 503 Service Unavailable: the orders service is down")
	insert(groups[1], 3, "order.created", "upstream said: a=b&c+d #frag 100% done")
	insert(groups[2], 2, "audit.logged", "HTTP 500 Internal Server Error")
	insert(groups[3], 4, "", "Invalid JSON")
	insert(groups[4], 2, "", "Transform failed: x=1&y=2 %zz")
	insert(groups[5], 3, "", "signature does not match")
	dbtest.Exec(t, pool, `INSERT INTO outbox (topic, payload, state) VALUES ('order.created', '{}', 'sent')`)
	dbtest.Exec(t, pool, `INSERT INTO inbox (source, idempotency_key, payload, state, consumption, processed_at)
		VALUES ('stripe', 'done-1', '{}', 'processed', 'pull', now())`)

	// moved are the dead rows that the replays have moved so far; the database must show every
	// other inserted row still dead, and the sent and processed rows untouched.
	var moved []string
	checkDatabase := func(what string) {
		t.Helper()
		notDead := idsWhere(t, pool, `SELECT id::text FROM outbox WHERE state <> 'dead' AND id::text = ANY($1)
			UNION ALL SELECT id::text FROM inbox WHERE state <> 'dead' AND id::text = ANY($1)`, all)
		if !assert.ElementsMatch(t, moved, notDead, "after %s, the rows that left the dead state", what) {
			for _, id := range moved {
				var state, lastError string
				_ = pool.QueryRow(ctx, `SELECT state, coalesce(last_error, '') FROM outbox WHERE id::text = $1
					UNION ALL SELECT state, coalesce(last_error, '') FROM inbox WHERE id::text = $1`, id).Scan(&state, &lastError)
				t.Logf("moved row %s: %s %s", id, state, lastError)
			}
			t.FailNow()
		}
		var sent, processed int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE state = 'sent' AND key IS NULL`).Scan(&sent))
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM inbox WHERE state = 'processed'`).Scan(&processed))
		require.Equal(t, 1, sent, "after %s, the sent outbox row", what)
		require.Equal(t, 1, processed, "after %s, the processed inbox row", what)
	}

	bctx := browser(t, 4*time.Minute)
	require.NoError(t, chromedp.Run(bctx,
		chromedp.Navigate(base+"/console/"),
		chromedp.WaitVisible(`#token`, chromedp.ByID),
		chromedp.SendKeys(`#token`, consoleToken, chromedp.ByID),
	))
	clickAndWait(t, bctx, `#login`, `#outbox-counts`)

	// previewAndReplay reads the preview that a link opened, checks its count and sample
	// against want, presses Replay and checks the answer and the database.
	previewAndReplay := func(what string, want []string) {
		t.Helper()
		var count string
		var sample []string
		require.NoError(t, chromedp.Run(bctx, chromedp.Text(`#preview-count`, &count, chromedp.ByID)))
		require.Equal(t, fmt.Sprint(len(want)), strings.TrimSpace(count), "the preview of %s counts its rows", what)
		require.NoError(t, chromedp.Run(bctx, chromedp.Evaluate(`[...document.querySelectorAll('#preview-sample code')].map(e => e.textContent)`, &sample)))
		require.NotEmpty(t, sample, "the preview of %s shows a sample", what)
		for _, id := range sample {
			require.Contains(t, want, id, "the preview of %s samples a row outside it", what)
		}
		checkDatabase("the preview of " + what)
		clickAndWait(t, bctx, `#replay`, `#message`)
		var message string
		require.NoError(t, chromedp.Run(bctx, chromedp.Text(`#message`, &message, chromedp.ByID)))
		require.Contains(t, message, fmt.Sprintf("%d dead rows moved back to pending", len(want)), "the replay of %s", what)
		moved = append(moved, want...)
		checkDatabase("the replay of " + what)
	}

	// "Replay this row…" on the page of an outbox row and of an inbox row.
	for _, g := range []*deadGroup{groups[0], groups[5]} {
		id := g.ids[0]
		require.NoError(t, chromedp.Run(bctx,
			chromedp.Navigate(base+"/console/rows/"+g.table+"/"+id),
			chromedp.WaitVisible(`#replay-row`, chromedp.ByID),
		))
		clickAndWait(t, bctx, `#replay-row`, `#preview-count`)
		previewAndReplay(g.table+" row "+id, []string{id})
		g.ids = g.ids[1:] // the group keeps its other rows; the moved one stays in moved
	}

	// The "Replay…" link of every group, from the dead-letter page.
	for _, g := range groups {
		what := fmt.Sprintf("the %s group %s %q", g.table, g.target, g.marker)
		require.NoError(t, chromedp.Run(bctx,
			chromedp.Navigate(base+"/console/dead"),
			chromedp.WaitVisible(`#dead-groups`, chromedp.ByID),
		))
		var rows []string
		require.NoError(t, chromedp.Run(bctx, chromedp.Evaluate(`[...document.querySelectorAll('#dead-groups tr.dead-group')].map(r => [...r.cells].map(c => c.textContent).join('\t'))`, &rows)))
		index := -1
		for i, r := range rows {
			cells := strings.Split(r, "\t")
			if len(cells) > 3 && cells[0] == g.table && cells[1] == g.target && strings.Contains(cells[2], g.marker) {
				require.Equal(t, -1, index, "%s shows twice on the dead-letter page: %q", what, rows)
				require.Equal(t, fmt.Sprint(len(g.ids)), cells[3], "the dead-letter page's count of %s", what)
				index = i
			}
		}
		require.NotEqual(t, -1, index, "%s is not on the dead-letter page: %q", what, rows)
		clickAndWait(t, bctx, fmt.Sprintf(`#dead-groups tr.dead-group:nth-child(%d) a.replay-group`, index+2), `#preview-count`)
		previewAndReplay(what, g.ids)
	}
	require.NoError(t, chromedp.Run(bctx,
		chromedp.Navigate(base+"/console/dead"),
		chromedp.WaitVisible(`#no-dead`, chromedp.ByID),
	))
}

// startConsoleProcess runs the local process with the console (admin token consoleToken) on
// a new database, with an HTTP receiver that accepts every delivery behind the destinations
// orders-api (topics order.*) and audit (every other topic). It returns the process, its base
// URL and a pool on its database.
func startConsoleProcess(t *testing.T) (*Local, string, *pgxpool.Pool) {
	t.Helper()
	return startConsoleProcessWith(t, http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
}

// startConsoleProcessWith is startConsoleProcess with the receiver's handler.
func startConsoleProcessWith(t *testing.T, receive http.Handler) (*Local, string, *pgxpool.Pool) {
	t.Helper()
	receiver := httptest.NewServer(receive)
	t.Cleanup(receiver.Close)
	dbURL := dbtest.NewDatabase(t)
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	cfg := loadYAML(t, fmt.Sprintf(`
database:
  url: jdbc:postgresql://%s%s
  username: postgres
  password: trust-auth
  migrate: true
outbox:
  pollIntervalMs: 20
admin:
  enabled: true
  auth:
    type: bearer
    token: %s
destinations:
  orders-api:
    type: http
    baseUrl: %s
    path: /orders
  audit:
    type: http
    baseUrl: %[4]s
    path: /audit
routes:
  - topicPattern: "order.*"
    destination: orders-api
  - topicPattern: "**"
    destination: audit
`, u.Host, u.Path, consoleToken, receiver.URL))
	cfg.Server.HTTPPort = 0
	l, err := New(context.Background(), cfg, quietLog())
	require.NoError(t, err)
	return l, runLocal(t, l), dbtest.NewPool(t, dbURL)
}

// idsWhere returns the first column of query's rows.
func idsWhere(t *testing.T, pool *pgxpool.Pool, query string, args ...any) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), query, args...)
	require.NoError(t, err)
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		require.NoError(t, rows.Scan(&id))
		out = append(out, id)
	}
	require.NoError(t, rows.Err())
	return out
}

// consoleLogin logs in to the console over HTTP with the admin token and returns the session
// cookie's value and the session's CSRF token, read from the overview page.
func consoleLogin(t *testing.T, base string) (cookie, csrf string) {
	t.Helper()
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.PostForm(base+"/console/login", url.Values{"token": {consoleToken}})
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusSeeOther, resp.StatusCode, "the login")
	for _, c := range resp.Cookies() {
		if c.Name == console.CookieName {
			cookie = c.Value
		}
	}
	require.NotEmpty(t, cookie, "the login sets the session cookie")
	status, body := consoleGet(t, base, "/console/", cookie)
	require.Equal(t, http.StatusOK, status)
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(body)
	require.NotNil(t, m, "the overview carries the CSRF token: %s", body)
	return cookie, m[1]
}

// consoleGet reads a console page with the session cookie and returns the status and body.
func consoleGet(t *testing.T, base, path, cookie string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, base+path, nil)
	require.NoError(t, err)
	req.AddCookie(&http.Cookie{Name: console.CookieName, Value: cookie})
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// TestTheConsoleRefusesAReplayWithoutAFilter sends previews and replays that name a table but
// no row, destination, source or fingerprint, as the escaped links did: each answers 400 with
// "A replay needs at least one filter." and no dead row moves. A filtered preview still
// answers 200.
func TestTheConsoleRefusesAReplayWithoutAFilter(t *testing.T) {
	t.Parallel()
	_, base, pool := startConsoleProcess(t)
	dbtest.Exec(t, pool, `INSERT INTO outbox (topic, payload, state, attempt, last_error)
		SELECT 'order.created', '{}', 'dead', 5, 'HTTP 503' FROM generate_series(1, 3)`)
	dbtest.Exec(t, pool, `INSERT INTO inbox (source, idempotency_key, payload, state, consumption, last_error, processed_at)
		SELECT 'stripe', 'k' || g, '{}', 'dead', 'pull', 'Invalid JSON', now() FROM generate_series(1, 2) g`)
	deadRows := func() (outbox, inbox int) {
		t.Helper()
		require.NoError(t, pool.QueryRow(context.Background(),
			`SELECT (SELECT count(*) FROM outbox WHERE state = 'dead'), (SELECT count(*) FROM inbox WHERE state = 'dead')`).Scan(&outbox, &inbox))
		return outbox, inbox
	}
	cookie, csrf := consoleLogin(t, base)

	for _, query := range []string{"", "?table=outbox", "?table=inbox", "?table=outbox&target=&fingerprint=&id=", "?id%3dx%26table%3doutbox"} {
		status, body := consoleGet(t, base, "/console/replay"+query, cookie)
		assert.Equal(t, http.StatusBadRequest, status, "GET /console/replay%s", query)
		assert.True(t, strings.Contains(body, console.NoFilterText), "GET /console/replay%s does not say %q", query, console.NoFilterText)
	}
	for _, form := range []url.Values{
		{"csrf": {csrf}},
		{"csrf": {csrf}, "table": {"outbox"}, "target": {""}, "fingerprint": {""}},
		{"csrf": {csrf}, "table": {"inbox"}, "target": {""}, "fingerprint": {""}},
	} {
		req, err := http.NewRequest(http.MethodPost, base+"/console/replay", strings.NewReader(form.Encode()))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.AddCookie(&http.Cookie{Name: console.CookieName, Value: cookie})
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "POST /console/replay %v", form)
		assert.Equal(t, console.NoFilterText, strings.TrimSpace(string(b)), "POST /console/replay %v", form)
	}
	outbox, inbox := deadRows()
	assert.Equal(t, 3, outbox, "dead outbox rows after the refused replays")
	assert.Equal(t, 2, inbox, "dead inbox rows after the refused replays")

	status, body := consoleGet(t, base, "/console/replay?table=outbox&target=orders-api", cookie)
	assert.Equal(t, http.StatusOK, status, "a filtered preview: %s", body)
	assert.Contains(t, body, `<strong id="preview-count">3</strong>`)
}
