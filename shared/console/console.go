// Package console is the operator's web console of QueueBox (an extension, docs/console.md):
// server-rendered pages under /console on the management port, when admin.enabled, for the
// counts of the outbox and the inbox, the dead letters grouped by destination or source and
// error, one row, a replay with its preview, and the destinations' pause and circuit state.
//
// A person logs in with the admin secret (the bearer token or the api-key key of admin.auth);
// the console then holds a session cookie (HttpOnly, Secure, SameSite=Strict) and every change
// is a POST that carries the session's CSRF token and, when the browser sends one, an Origin of
// the console's own host. The pages come from Go templates embedded in the binary; no script
// runs in them.
package console

import (
	"embed"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"
)

//go:embed templates/*.html
var templateFiles embed.FS

// Options build a Console.
type Options struct {
	// Login checks the secret that a person types on the login page; it is the admin.auth check
	// of a bearer token or an api-key key. Nil with Insecure false refuses every login.
	Login func(secret string) bool
	// SessionSecret derives the key of the session cookies and CSRF tokens: the admin secret,
	// so that every replica and Lambda invocation accepts the same sessions. Empty makes a
	// random key per process.
	SessionSecret string
	// Insecure skips the login (admin.insecure); the CSRF checks stay.
	Insecure bool
	// Backend reads and changes the rows. Required.
	Backend Backend
	// Counters, when set, returns counters of the process's metrics by a label to show ("outbox
	// sent", ...); the overview shows their rates between two of its views. Nil shows none (the
	// Lambda functions have no long-lived registry).
	Counters func() map[string]float64
	// Metrics, when set, counts the logins by outcome (queuebox_console_logins_total).
	Metrics Metrics
	// SessionTTL is how long a login lasts; zero means DefaultSessionTTL.
	SessionTTL time.Duration
	Logger     *slog.Logger
	// Now is the clock of the sessions; nil means time.Now.
	Now func() time.Time
}

// Console serves the pages.
type Console struct {
	opts     Options
	log      *slog.Logger
	sessions *sessions
	logins   *loginLimiter
	pages    map[string]*template.Template

	mu       sync.Mutex
	previous sample
}

type sample struct {
	at     time.Time
	values map[string]float64
}

// New returns the console.
func New(opts Options) (*Console, error) {
	if opts.Backend == nil {
		return nil, errors.New("console: a backend is required")
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.SessionTTL <= 0 {
		opts.SessionTTL = DefaultSessionTTL
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s, err := newSessions(opts.SessionSecret, opts.SessionTTL, opts.Now)
	if err != nil {
		return nil, err
	}
	s.attach(opts.Backend, opts.Logger)
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	return &Console{opts: opts, log: opts.Logger.With("component", "console"), sessions: s,
		logins: newLoginLimiter(opts.Now), pages: pages}, nil
}

var funcs = template.FuncMap{
	"age": func(d time.Duration) string {
		if d <= 0 {
			return "none"
		}
		return d.Round(time.Millisecond).String()
	},
	"when": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format("2006-01-02 15:04:05.000Z")
	},
	"replayURL": replayURL,
}

// replayURL is the address of a replay preview for the pairs of names and values kv (an empty
// value is left out). The templates use it as a whole href: html/template then only normalizes
// the address, whereas a query string written after a literal "?" in the template would be
// escaped a second time, and the server would see no filter at all.
func replayURL(kv ...string) string {
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			v.Set(kv[i], kv[i+1])
		}
	}
	return "/console/replay?" + v.Encode()
}

func parsePages() (map[string]*template.Template, error) {
	names := []string{"login", "overview", "dead", "row", "replay", "destinations", "message"}
	pages := make(map[string]*template.Template, len(names))
	for _, n := range names {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFiles, "templates/layout.html", "templates/"+n+".html")
		if err != nil {
			return nil, fmt.Errorf("console: parsing the %s page: %w", n, err)
		}
		pages[n] = t
	}
	return pages, nil
}

// Register mounts the console's routes on mux.
func (c *Console) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /console", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/console/", http.StatusSeeOther)
	})
	mux.HandleFunc("GET /console/login", c.serveLoginPage)
	mux.HandleFunc("POST /console/login", c.serveLogin)
	mux.HandleFunc("POST /console/logout", c.change(c.serveLogout))
	mux.HandleFunc("GET /console/{$}", c.page(c.serveOverview))
	mux.HandleFunc("GET /console/dead", c.page(c.serveDead))
	mux.HandleFunc("GET /console/rows/{table}/{id}", c.page(c.serveRow))
	mux.HandleFunc("GET /console/replay", c.page(c.serveReplayPreview))
	mux.HandleFunc("POST /console/replay", c.change(c.serveReplay))
	mux.HandleFunc("GET /console/destinations", c.page(c.serveDestinations))
	mux.HandleFunc("POST /console/destinations/{name}/{action}", c.change(c.serveSetPaused))
}

// view is what every page's template receives.
type view struct {
	Title string
	CSRF  string
	// Insecure hides the logout button.
	Insecure bool
	Data     any
}

// session returns the nonce of the request's live session. In insecure mode a request without
// one gets a new session cookie (its CSRF token still guards the changes).
func (c *Console) session(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	if nonce, ok := c.sessions.checkCookie(r); ok {
		return nonce, true
	}
	if !c.opts.Insecure {
		return nil, false
	}
	value, err := c.sessions.issue()
	if err != nil {
		c.log.Error("console: issuing a session", "error", err)
		return nil, false
	}
	http.SetCookie(w, c.sessions.cookie(value, int(c.opts.SessionTTL/time.Second)))
	nonce, _ := c.sessions.check(value)
	return nonce, true
}

type pageFunc func(w http.ResponseWriter, r *http.Request, nonce []byte)

// page wraps a GET page: without a session it redirects to the login page.
func (c *Console) page(f pageFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		secure(w)
		nonce, ok := c.session(w, r)
		if !ok {
			http.Redirect(w, r, "/console/login", http.StatusSeeOther)
			return
		}
		f(w, r, nonce)
	}
}

// change wraps a POST: it needs a live session, the session's CSRF token and, when the browser
// sends an Origin, the console's own. A refused change gets 403 (401 without a session) and
// changes nothing.
func (c *Console) change(f pageFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		secure(w)
		r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
		nonce, ok := c.sessions.checkCookie(r)
		if !ok {
			http.Error(w, "Not logged in to the console", http.StatusUnauthorized)
			return
		}
		if !sameOrigin(r) {
			http.Error(w, "Cross-origin request refused", http.StatusForbidden)
			return
		}
		if err := r.ParseForm(); err != nil {
			http.Error(w, "Invalid form", http.StatusBadRequest)
			return
		}
		if !c.sessions.checkCSRF(nonce, r.PostFormValue(CSRFField)) {
			http.Error(w, "Missing or invalid CSRF token", http.StatusForbidden)
			return
		}
		f(w, r, nonce)
	}
}

// sameOrigin accepts a request without an Origin header (the CSRF token guards it) or whose
// Origin names the request's own host.
func sameOrigin(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	return err == nil && strings.EqualFold(u.Host, r.Host)
}

// secure sets the headers of every console answer: no framing, no sniffing, no caching, and a
// content security policy that allows no script.
func secure(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self' 'unsafe-inline'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
}

func (c *Console) render(w http.ResponseWriter, status int, name string, v view) {
	v.Insecure = c.opts.Insecure
	var b strings.Builder
	if err := c.pages[name].Execute(&b, v); err != nil {
		c.log.Error("console: rendering a page", "page", name, "error", err)
		http.Error(w, "The page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(b.String()))
}

// fail renders an error page for a backend failure; the detail goes to the log only.
func (c *Console) fail(w http.ResponseWriter, nonce []byte, what string, err error) {
	c.log.Error("console: "+what, "error", err)
	c.render(w, http.StatusInternalServerError, "message", view{Title: "Error", CSRF: c.sessions.csrf(nonce),
		Data: messageData{Heading: "Something failed", Text: what + " failed; the log of QueueBox says why."}})
}

type messageData struct {
	Heading string
	Text    string
	Link    string
	LinkTo  string
}

func (c *Console) serveLoginPage(w http.ResponseWriter, r *http.Request) {
	secure(w)
	if c.opts.Insecure {
		http.Redirect(w, r, "/console/", http.StatusSeeOther)
		return
	}
	c.render(w, http.StatusOK, "login", view{Title: "Log in"})
}

func (c *Console) serveLogin(w http.ResponseWriter, r *http.Request) {
	secure(w)
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if !sameOrigin(r) {
		http.Error(w, "Cross-origin request refused", http.StatusForbidden)
		return
	}
	if err := r.ParseForm(); err != nil {
		http.Error(w, "Invalid form", http.StatusBadRequest)
		return
	}
	client := clientKey(r.RemoteAddr)
	token := r.PostFormValue("token")
	d := c.logins.attempt(client, func() bool { return c.opts.Login != nil && c.opts.Login(token) })
	if c.opts.Metrics != nil {
		c.opts.Metrics.ConsoleLogin(d.Outcome)
	}
	switch d.Outcome {
	case LoginLimitedClient, LoginLimitedOverall:
		retry := retryAfterSeconds(d.RetryAfter)
		text := "Too many failed logins from your address. Try again in " + retry + " seconds."
		if d.Outcome == LoginLimitedOverall {
			text = "Too many failed logins to the console. Try again in " + retry + " seconds."
		}
		w.Header().Set("Retry-After", retry)
		c.render(w, http.StatusTooManyRequests, "login", view{Title: "Log in", Data: text})
		return
	case LoginRefused:
		c.log.Info("console: a login with a wrong token", "client", client)
		for _, limit := range d.Reached {
			c.log.Warn("console: failed logins reached a limit; further logins answer 429", "limit", limit,
				"client", client, "client_failures", LoginClientFailures, "overall_failures", LoginOverallFailures, "window", LoginWindow)
		}
		t := time.NewTimer(LoginFailureDelay)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
		}
		c.render(w, http.StatusUnauthorized, "login", view{Title: "Log in", Data: "The token is not the admin token."})
		return
	}
	value, err := c.sessions.issue()
	if err != nil {
		c.log.Error("console: issuing a session", "error", err)
		http.Error(w, "The session could not be created", http.StatusInternalServerError)
		return
	}
	http.SetCookie(w, c.sessions.cookie(value, int(c.opts.SessionTTL/time.Second)))
	http.Redirect(w, r, "/console/", http.StatusSeeOther)
}

func (c *Console) serveLogout(w http.ResponseWriter, r *http.Request, _ []byte) {
	if err := c.sessions.revoke(r); err != nil {
		c.log.Error("console: the logout could not end the session", "error", err)
		http.Error(w, "The logout could not be recorded, so the session is still open: log out again, "+
			"or change the admin secret to end every session.", http.StatusServiceUnavailable)
		return
	}
	http.SetCookie(w, c.sessions.cookie("", -1))
	http.Redirect(w, r, "/console/login", http.StatusSeeOther)
}

// rate is one counter's rate on the overview.
type rate struct {
	Name    string
	Total   float64
	PerSec  float64
	HasRate bool
}

type overviewData struct {
	Overview
	OutboxStates []string
	InboxStates  []string
	Rates        []rate
	RateWindow   time.Duration
}

func (c *Console) serveOverview(w http.ResponseWriter, r *http.Request, nonce []byte) {
	o, err := c.opts.Backend.Overview(r.Context())
	if err != nil {
		c.fail(w, nonce, "reading the counts", err)
		return
	}
	d := overviewData{Overview: o,
		OutboxStates: []string{"pending", "processing", "sent", "dead"},
		InboxStates:  []string{"pending", "processing", "processed", "dead"}}
	d.Rates, d.RateWindow = c.rates()
	c.render(w, http.StatusOK, "overview", view{Title: "Overview", CSRF: c.sessions.csrf(nonce), Data: d})
}

// rates reads the counters and compares them with the previous view's reading, at least one
// second old; the first view shows the totals only.
func (c *Console) rates() ([]rate, time.Duration) {
	if c.opts.Counters == nil {
		return nil, 0
	}
	now, values := c.opts.Now(), c.opts.Counters()
	c.mu.Lock()
	prev := c.previous
	window := now.Sub(prev.at)
	if prev.values == nil || window >= time.Second {
		c.previous = sample{at: now, values: values}
	}
	c.mu.Unlock()
	names := make([]string, 0, len(values))
	for n := range values {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]rate, 0, len(names))
	for _, n := range names {
		rt := rate{Name: n, Total: values[n]}
		if old, ok := prev.values[n]; ok && window >= time.Second && values[n] >= old {
			rt.PerSec, rt.HasRate = (values[n]-old)/window.Seconds(), true
		}
		out = append(out, rt)
	}
	if prev.values == nil || window < time.Second {
		window = 0
	}
	return out, window.Round(time.Second)
}

func (c *Console) serveDead(w http.ResponseWriter, r *http.Request, nonce []byte) {
	groups, err := c.opts.Backend.DeadGroups(r.Context())
	if err != nil {
		c.fail(w, nonce, "reading the dead letters", err)
		return
	}
	c.render(w, http.StatusOK, "dead", view{Title: "Dead letters", CSRF: c.sessions.csrf(nonce), Data: groups})
}

func validTable(t string) bool { return t == TableOutbox || t == TableInbox }

func (c *Console) serveRow(w http.ResponseWriter, r *http.Request, nonce []byte) {
	table, id := r.PathValue("table"), r.PathValue("id")
	if !validTable(table) {
		http.NotFound(w, r)
		return
	}
	row, err := c.opts.Backend.Row(r.Context(), table, id)
	if errors.Is(err, ErrNotFound) {
		c.render(w, http.StatusNotFound, "message", view{Title: "Not found", CSRF: c.sessions.csrf(nonce),
			Data: messageData{Heading: "No such row", Text: fmt.Sprintf("The %s has no row %s.", table, id)}})
		return
	}
	if err != nil {
		c.fail(w, nonce, "reading the row", err)
		return
	}
	c.render(w, http.StatusOK, "row", view{Title: "Row " + id, CSRF: c.sessions.csrf(nonce), Data: row})
}

// selection reads a replay selection from a query or a form; only dead rows are ever selected.
func selection(v url.Values) (Selection, error) {
	sel := Selection{Table: v.Get("table"), Target: v.Get("target"), Fingerprint: v.Get("fingerprint")}
	if sel.Table == "" {
		sel.Table = TableOutbox
	}
	if !validTable(sel.Table) {
		return sel, fmt.Errorf("table must be %s or %s", TableOutbox, TableInbox)
	}
	if id := v.Get("id"); id != "" {
		sel.IDs = []string{id}
	}
	return sel, nil
}

// NoFilterText is the answer to a replay without a filter: a replay from the console needs
// a row, a destination or source, or an error fingerprint, never all the dead rows of a
// table (the words of the admin route's answer).
const NoFilterText = "A replay needs at least one filter."

// hasFilter reports whether sel narrows the dead rows of its table: the table alone is not a
// filter.
func (sel Selection) hasFilter() bool {
	return len(sel.IDs) > 0 || sel.Target != "" || sel.Fingerprint != ""
}

type replayData struct {
	Selection
	Preview Preview
}

func (c *Console) serveReplayPreview(w http.ResponseWriter, r *http.Request, nonce []byte) {
	sel, err := selection(r.URL.Query())
	refusal := NoFilterText
	if err != nil {
		refusal = err.Error()
	}
	if err != nil || !sel.hasFilter() {
		c.render(w, http.StatusBadRequest, "message", view{Title: "Invalid replay", CSRF: c.sessions.csrf(nonce),
			Data: messageData{Heading: "Invalid replay", Text: refusal, Link: "Dead letters", LinkTo: "/console/dead"}})
		return
	}
	p, err := c.opts.Backend.Preview(r.Context(), sel)
	if err != nil {
		c.fail(w, nonce, "previewing the replay", err)
		return
	}
	c.render(w, http.StatusOK, "replay", view{Title: "Replay", CSRF: c.sessions.csrf(nonce), Data: replayData{Selection: sel, Preview: p}})
}

func (c *Console) serveReplay(w http.ResponseWriter, r *http.Request, nonce []byte) {
	sel, err := selection(r.PostForm)
	if err != nil {
		http.Error(w, "Invalid replay: "+err.Error(), http.StatusBadRequest)
		return
	}
	if !sel.hasFilter() {
		http.Error(w, NoFilterText, http.StatusBadRequest)
		return
	}
	moved, err := c.opts.Backend.Replay(r.Context(), sel)
	if err != nil {
		c.fail(w, nonce, "replaying", err)
		return
	}
	c.log.Info("console: replay", "table", sel.Table, "target", sel.Target, "fingerprint", sel.Fingerprint, "ids", len(sel.IDs), "moved", moved)
	c.render(w, http.StatusOK, "message", view{Title: "Replayed", CSRF: c.sessions.csrf(nonce),
		Data: messageData{Heading: "Replayed", Text: fmt.Sprintf("%d dead rows moved back to pending.", moved), Link: "Dead letters", LinkTo: "/console/dead"}})
}

func (c *Console) serveDestinations(w http.ResponseWriter, r *http.Request, nonce []byte) {
	ds, err := c.opts.Backend.Destinations(r.Context())
	if err != nil {
		c.fail(w, nonce, "reading the destinations", err)
		return
	}
	c.render(w, http.StatusOK, "destinations", view{Title: "Destinations", CSRF: c.sessions.csrf(nonce), Data: ds})
}

func (c *Console) serveSetPaused(w http.ResponseWriter, r *http.Request, nonce []byte) {
	name, action := r.PathValue("name"), r.PathValue("action")
	if action != "pause" && action != "resume" {
		http.NotFound(w, r)
		return
	}
	if err := c.opts.Backend.SetPaused(r.Context(), name, action == "pause"); err != nil {
		if errors.Is(err, ErrNotFound) {
			http.Error(w, fmt.Sprintf("No destination named %q", name), http.StatusNotFound)
			return
		}
		c.fail(w, nonce, action+" of a destination", err)
		return
	}
	c.log.Info("console: destination "+action, "destination", name)
	http.Redirect(w, r, "/console/destinations", http.StatusSeeOther)
}
