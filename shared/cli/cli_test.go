package cli

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/alternayte/queuebox/migrations"
	"github.com/alternayte/queuebox/shared/service"
	"github.com/alternayte/queuebox/shared/specdocs"
	"github.com/alternayte/queuebox/shared/store/postgres/dbtest"
)

func TestParseArgs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args     []string
		want     command
		wantErr  string
		baseline int
	}{
		{args: nil, want: command{name: "serve"}},
		{args: []string{"serve"}, want: command{name: "serve"}},
		{args: []string{"config", "check"}, want: command{name: "config-check"}},
		{args: []string{"migrate"}, want: command{name: "migrate"}},
		{args: []string{"migrate", "--baseline", "11"}, want: command{name: "migrate", baseline: 11}},
		{args: []string{"migrate", "--baseline=7"}, want: command{name: "migrate", baseline: 7}},
		{args: []string{"help"}, want: command{name: "help"}},
		{args: []string{"bogus"}, wantErr: "Unknown arguments: bogus"},
		{args: []string{"serve", "--now"}, wantErr: "Unknown arguments: --now"},
		{args: []string{"config"}, wantErr: "Unknown arguments: config"},
		{args: []string{"config", "show"}, wantErr: "Unknown arguments: show"},
		{args: []string{"migrate", "--baseline"}, wantErr: "Unknown arguments: --baseline"},
		{args: []string{"migrate", "--baseline", "x"}, wantErr: "Unknown arguments: --baseline x"},
		{args: []string{"migrate", "--baseline", "0"}, wantErr: "Unknown arguments: --baseline 0"},
		{args: []string{"migrate", "now"}, wantErr: "Unknown arguments: now"},
		{args: []string{"version"}, want: command{name: "version"}},
		{args: []string{"--version"}, want: command{name: "version"}},
		{args: []string{"version", "now"}, wantErr: "Unknown arguments: now"},
		{args: []string{"serve", "--help"}, want: command{name: "help"}},
		{args: []string{"config", "check", "--help"}, want: command{name: "help"}},
		{args: []string{"migrate", "-h"}, want: command{name: "help"}},
		{args: []string{"destinations", "pause", "--help"}, want: command{name: "help"}},
		{args: []string{"bogus", "--help"}, wantErr: "Unknown arguments: bogus --help"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, "_"), func(t *testing.T) {
			got, err := parseArgs(tt.args)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("parseArgs = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

type result struct {
	code           int
	stdout, stderr string
}

func run(t *testing.T, ctx context.Context, env map[string]string, args ...string) result {
	t.Helper()
	var out, errOut syncBuffer
	var environ []string
	for k, v := range env {
		environ = append(environ, k+"="+v)
	}
	code := Main(ctx, args, Env{Stdout: &out, Stderr: &errOut, Environ: environ})
	return result{code: code, stdout: out.String(), stderr: errOut.String()}
}

// syncBuffer is a bytes.Buffer that the serve goroutine and the test can share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// version and --version print the version that the build stamped into service.Version
// (make build: git describe), and every command answers --help with the usage, exit 0, before
// it reads any configuration or database.
func TestVersionAndHelpOfEveryCommand(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"version"}, {"--version"}} {
		r := run(t, context.Background(), nil, args...)
		if r.code != ExitOK || r.stdout != "queuebox "+service.Version+"\n" || r.stderr != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, r.code, r.stdout, r.stderr)
		}
	}
	for _, args := range [][]string{{"serve", "--help"}, {"config", "check", "-h"}, {"migrate", "--help"}, {"destinations", "--help"}, {"destinations", "resume", "--help"}} {
		r := run(t, context.Background(), map[string]string{"QUEUEBOX_CONFIG_FILE": "/nonexistent/queuebox.yml"}, args...)
		if r.code != ExitOK || r.stdout != Usage || r.stderr != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, r.code, r.stdout, r.stderr)
		}
	}
}

func TestUnknownArgumentsExitTwo(t *testing.T) {
	t.Parallel()
	r := run(t, context.Background(), nil, "bogus", "--flag")
	if r.code != ExitUsage {
		t.Errorf("exit = %d, want 2", r.code)
	}
	if !strings.HasPrefix(r.stderr, "Unknown arguments: bogus --flag\n") || !strings.Contains(r.stderr, "Usage:") {
		t.Errorf("stderr = %q", r.stderr)
	}
	if r.stdout != "" {
		t.Errorf("stdout = %q", r.stdout)
	}
}

// completeExample is spec/examples/queuebox.yml, found with specdocs.
const completeExample = "examples/queuebox.yml"

func TestConfigCheckOnTheCompleteExample(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"QUEUEBOX_CONFIG_FILE":  specdocs.Path(t, completeExample),
		"DB_PASSWORD":           "db-pass-6f1c",
		"ADMIN_TOKEN":           "admin-token-77a2",
		"ORDERS_CLIENT_SECRET":  "client-secret-91bb",
		"STRIPE_WEBHOOK_SECRET": "whsec_stripe-3c0d",
	}
	r := run(t, context.Background(), env, "config", "check")
	if r.code != ExitOK {
		t.Fatalf("exit = %d, stderr:\n%s", r.code, r.stderr)
	}
	for _, secret := range []string{"db-pass-6f1c", "admin-token-77a2", "client-secret-91bb", "whsec_stripe-3c0d"} {
		if strings.Contains(r.stdout, secret) || strings.Contains(r.stderr, secret) {
			t.Errorf("the output shows the secret %q", secret)
		}
	}
	for _, want := range []string{"Secret(***)", "orders-api", "events-exchange", "topicPattern: order.*", "stripe"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("the resolved configuration lacks %q", want)
		}
	}
	if !strings.Contains(r.stderr, "The configuration is valid") {
		t.Errorf("stderr = %q", r.stderr)
	}
}

func TestConfigCheckReportsEveryProblemAndUnknownKeys(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"QUEUEBOX_DATABASE_URL":            "jdbc:postgresql://db:5432/queuebox",
		"QUEUEBOX_DATABASE_USERNAME":       "queuebox",
		"QUEUEBOX_DATABASE_PASSWORD":       "x",
		"QUEUEBOX_OUTBOX_POLLINTERVALMS":   "0",
		"QUEUEBOX_OUTBOX_BATCHSIZE":        "-1",
		"QUEUEBOX_OUTBOX_POLL_INTERVAL_MS": "5",
	}
	r := run(t, context.Background(), env, "config", "check")
	if r.code != ExitFailure {
		t.Fatalf("exit = %d, want 1; stderr:\n%s", r.code, r.stderr)
	}
	for _, want := range []string{
		"outbox.pollIntervalMs (QUEUEBOX_OUTBOX_POLLINTERVALMS) must be above 0",
		"outbox.batchSize (QUEUEBOX_OUTBOX_BATCHSIZE)",
		"QUEUEBOX_OUTBOX_POLL_INTERVAL_MS",
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
}

func TestConfigCheckMissingFile(t *testing.T) {
	t.Parallel()
	r := run(t, context.Background(), map[string]string{"QUEUEBOX_CONFIG_FILE": "/nonexistent/queuebox.yml"}, "config", "check")
	if r.code != ExitFailure || !strings.Contains(r.stderr, "/nonexistent/queuebox.yml") {
		t.Errorf("exit = %d, stderr = %q", r.code, r.stderr)
	}
}

// dbEnv returns the QUEUEBOX_ variables of a fresh empty database.
func dbEnv(t *testing.T) map[string]string {
	t.Helper()
	u, err := url.Parse(dbtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	user := "postgres"
	if u.User != nil && u.User.Username() != "" {
		user = u.User.Username()
	}
	pass, _ := u.User.Password()
	if pass == "" {
		pass = "trust-auth"
	}
	return map[string]string{
		"QUEUEBOX_DATABASE_URL":      "jdbc:postgresql://" + u.Host + u.Path,
		"QUEUEBOX_DATABASE_USERNAME": user,
		"QUEUEBOX_DATABASE_PASSWORD": pass,
	}
}

func TestMigrateAndBaseline(t *testing.T) {
	t.Parallel()
	env := dbEnv(t)
	ctx := context.Background()
	list, err := migrations.ListTrack(migrations.QueueBox, migrations.PostgreSQL)
	if err != nil {
		t.Fatal(err)
	}
	n := len(list)
	r := run(t, ctx, env, "migrate")
	want := "applied V1..V11; applied QueueBox's own migrations V1"
	if n > 1 {
		want += fmt.Sprintf("..V%d", n)
	}
	if r.code != ExitOK || strings.TrimSpace(r.stdout) != want {
		t.Fatalf("first migrate: exit %d, stdout %q, want %q, stderr %s", r.code, r.stdout, want, r.stderr)
	}
	r = run(t, ctx, env, "migrate")
	want = fmt.Sprintf("schema is up to date at V11; QueueBox's own migrations are up to date at V%d", n)
	if r.code != ExitOK || strings.TrimSpace(r.stdout) != want {
		t.Fatalf("second migrate: exit %d, stdout %q, want %q", r.code, r.stdout, want)
	}
	r = run(t, ctx, env, "migrate", "--baseline", "11")
	if r.code != ExitFailure || !strings.Contains(r.stderr, "QueueBox could not record the baseline") {
		t.Errorf("baseline on a migrated database: exit %d, stderr %q", r.code, r.stderr)
	}
}

func TestStartGivesUpAfterStartupTimeout(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	env := map[string]string{
		"QUEUEBOX_DATABASE_URL":              "jdbc:postgresql://" + addr + "/queuebox",
		"QUEUEBOX_DATABASE_USERNAME":         "queuebox",
		"QUEUEBOX_DATABASE_PASSWORD":         "s3cret-pass-do-not-print",
		"QUEUEBOX_DATABASE_STARTUPTIMEOUTMS": "500",
	}
	r := run(t, context.Background(), env, "serve")
	if r.code != ExitFailure {
		t.Fatalf("exit = %d", r.code)
	}
	if !strings.Contains(r.stderr, "QueueBox could not connect to the database. Reason:") ||
		!strings.Contains(r.stderr, "database.startupTimeoutMs") {
		t.Errorf("stderr = %s", r.stderr)
	}
	if strings.Contains(r.stderr, "s3cret-pass-do-not-print") {
		t.Error("the password reached the output")
	}
}

// TestStartStopsAtOnceOnARefusedLoginOrAMissingDatabase: a role that does not exist (SQLSTATE
// 28000; 28P01, a wrong password, is the same class) and a database that does not exist
// (3D000) are not transient. migrate and serve stop with the reason at the first refusal,
// instead of retrying for database.startupTimeoutMs, here ten minutes. The context of the
// commands ends after two minutes: a command that waited would end with that instead.
func TestStartStopsAtOnceOnARefusedLoginOrAMissingDatabase(t *testing.T) {
	t.Parallel()
	u, err := url.Parse(dbtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	suffix := strconv.FormatInt(time.Now().UnixNano(), 36)
	cases := []struct {
		name, user, database, sqlstate, fix string
	}{
		{name: "unknown role", user: "qb_no_such_role_" + suffix, database: u.Path, sqlstate: "28000",
			fix: "database.username and database.password"},
		{name: "unknown database", user: "postgres", database: "/qb_no_such_db_" + suffix, sqlstate: "3D000",
			fix: "database.url"},
	}
	for _, tc := range cases {
		for _, cmd := range []string{"migrate", "serve"} {
			t.Run(tc.name+" "+cmd, func(t *testing.T) {
				t.Parallel()
				env := map[string]string{
					"QUEUEBOX_DATABASE_URL":              "jdbc:postgresql://" + u.Host + tc.database,
					"QUEUEBOX_DATABASE_USERNAME":         tc.user,
					"QUEUEBOX_DATABASE_PASSWORD":         "s3cret-pass-do-not-print",
					"QUEUEBOX_DATABASE_STARTUPTIMEOUTMS": "600000",
					"QUEUEBOX_SERVER_HTTPPORT":           strconv.Itoa(freePort(t)),
				}
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				defer cancel()
				r := run(t, ctx, env, cmd)
				if ctx.Err() != nil {
					t.Fatalf("%s waited for the database until the test's deadline; stderr:\n%s", cmd, r.stderr)
				}
				if r.code != ExitFailure {
					t.Fatalf("exit = %d, stderr:\n%s", r.code, r.stderr)
				}
				for _, want := range []string{"QueueBox could not connect to the database. Reason:", "SQLSTATE " + tc.sqlstate, tc.fix, "does not pass by waiting"} {
					if !strings.Contains(r.stderr, want) {
						t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
					}
				}
				if strings.Contains(r.stderr, "startupTimeoutMs") || strings.Contains(r.stderr, "waiting for the database") {
					t.Errorf("the refusal was retried:\n%s", r.stderr)
				}
				if strings.Contains(r.stderr, "s3cret-pass-do-not-print") {
					t.Error("the password reached the output")
				}
			})
		}
	}
}

// TestStartRefusesAnUnsupportedSourceTopicPlaceholder: serve and config check both refuse a
// source topic that reads {{ payload.type }}, naming the key and the placeholders that a source
// topic reads; the relay would otherwise write topics that no route matches.
func TestStartRefusesAnUnsupportedSourceTopicPlaceholder(t *testing.T) {
	t.Parallel()
	file := t.TempDir() + "/queuebox.yml"
	yaml := `database:
  url: jdbc:postgresql://127.0.0.1:1/queuebox
  username: queuebox
  password: p
sources:
  orders:
    path: /orders
    idempotencyKeyPath: $.id
    eventTypePath: $.type
    topic: "orders.{{ payload.type }}"
`
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"QUEUEBOX_CONFIG_FILE": file, "QUEUEBOX_SERVER_HTTPPORT": strconv.Itoa(freePort(t))}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, args := range [][]string{{"serve"}, {"config", "check"}} {
		r := run(t, ctx, env, args...)
		if r.code != ExitFailure {
			t.Fatalf("%v: exit %d, stderr:\n%s", args, r.code, r.stderr)
		}
		for _, want := range []string{"sources.orders.topic (QUEUEBOX_SOURCES_ORDERS_TOPIC)", "{{ payload.type }}", "reads only {{ source }} and {{ eventType }}"} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("%v: stderr lacks %q:\n%s", args, want, r.stderr)
			}
		}
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestServeDeliversAndShutsDown runs `queuebox serve` on a fresh database: the migrations
// apply at start, an inserted row reaches the receiver and is sent with attempt 0, the data
// port answers GET / and hides /metrics behind the management port, and a cancelled context
// (SIGTERM) stops the process with exit code 0.
func TestServeDeliversAndShutsDown(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var bodies []string
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, r.URL.Path+" "+string(b))
		mu.Unlock()
	}))
	defer receiver.Close()

	env := dbEnv(t)
	dataPort, mgmtPort := freePort(t), freePort(t)
	env["QUEUEBOX_SERVER_HTTPPORT"] = strconv.Itoa(dataPort)
	env["QUEUEBOX_SERVER_MANAGEMENTPORT"] = strconv.Itoa(mgmtPort)
	env["QUEUEBOX_DESTINATIONS_WEBHOOK_BASEURL"] = receiver.URL
	env["QUEUEBOX_DESTINATIONS_WEBHOOK_PATH"] = "/webhook"
	env["QUEUEBOX_ROUTES_0_TOPICPATTERN"] = "order.*"
	env["QUEUEBOX_ROUTES_0_DESTINATION"] = "webhook"
	env["QUEUEBOX_ADMIN_ENABLED"] = "true"
	env["QUEUEBOX_ADMIN_AUTH_TOKEN"] = "admin-secret"

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan result, 1)
	go func() { done <- run(t, ctx, env, "serve") }()

	base := fmt.Sprintf("http://127.0.0.1:%d", dataPort)
	mgmt := fmt.Sprintf("http://127.0.0.1:%d", mgmtPort)
	waitFor(t, 30*time.Second, "the data port", func() bool {
		resp, err := http.Get(base + "/")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode == 200 && string(b) == "QueueBox is running!"
	})

	conn, err := pgx.Connect(context.Background(), pgURL(env))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(),
		`INSERT INTO outbox (topic, key, payload) VALUES ('order.created', 'order-1001', '{"orderId":"1001","amount":42}')`); err != nil {
		t.Fatal(err)
	}
	var state string
	var attempt int
	waitFor(t, 30*time.Second, "the row to be sent", func() bool {
		_ = conn.QueryRow(context.Background(), `SELECT state, attempt FROM outbox`).Scan(&state, &attempt)
		return state == "sent"
	})
	if attempt != 0 {
		t.Errorf("attempt = %d", attempt)
	}
	mu.Lock()
	got := append([]string(nil), bodies...)
	mu.Unlock()
	if len(got) != 1 || !strings.HasPrefix(got[0], "/webhook ") || !strings.Contains(got[0], `"orderId": "1001"`) && !strings.Contains(got[0], `"orderId":"1001"`) {
		t.Errorf("receiver got %q", got)
	}

	if code := status(t, base+"/metrics"); code != http.StatusNotFound {
		t.Errorf("data port /metrics = %d, want 404 with a management port", code)
	}
	resp, err := http.Get(mgmt + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metricsText, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(metricsText), `queuebox_outbox_messages_total{status="sent"} 1`) {
		t.Errorf("metrics lack the sent count:\n%s", metricsText)
	}

	resp, err = http.Get(mgmt + "/health")
	if err != nil {
		t.Fatal(err)
	}
	healthBody, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(healthBody), `"database":{"status":"up"}`) ||
		!strings.Contains(string(healthBody), `"outbox-poller":{"status":"up"}`) || !strings.Contains(string(healthBody), `"inbox-relay":{"status":"up"}`) {
		t.Errorf("/health = %d %s", resp.StatusCode, healthBody)
	}
	if code := status(t, base+"/health"); code != http.StatusNotFound {
		t.Errorf("data port /health = %d, want 404 with a management port", code)
	}
	adminPost := func(u string) (int, string) {
		req, _ := http.NewRequest("POST", u+"/admin/replay", strings.NewReader(`{}`))
		req.Header.Set("Authorization", "Bearer admin-secret")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := adminPost(base); code != http.StatusNotFound {
		t.Errorf("data port /admin/replay = %d, want 404 with a management port", code)
	}
	if code, body := adminPost(mgmt); code != http.StatusBadRequest || body != `{"error":"A replay needs at least one filter."}` {
		t.Errorf("management port /admin/replay = %d %s", code, body)
	}

	cancel()
	select {
	case r := <-done:
		if r.code != ExitOK {
			t.Errorf("serve exit = %d, stderr:\n%s", r.code, r.stderr)
		}
		if !strings.Contains(r.stderr, "QueueBox stopped") {
			t.Errorf("no stop line in the log:\n%s", r.stderr)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("serve did not stop after its context was cancelled")
	}
}

func pgURL(env map[string]string) string {
	return "postgres://" + url.UserPassword(env["QUEUEBOX_DATABASE_USERNAME"], env["QUEUEBOX_DATABASE_PASSWORD"]).String() + "@" +
		strings.TrimPrefix(env["QUEUEBOX_DATABASE_URL"], "jdbc:postgresql://") + "?sslmode=disable"
}

func status(t *testing.T, u string) int {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(d)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestServeRefusesAPrivateDestinationWhenBlocked(t *testing.T) {
	t.Parallel()
	env := dbEnv(t)
	env["QUEUEBOX_SERVER_HTTPPORT"] = strconv.Itoa(freePort(t))
	env["QUEUEBOX_HTTP_BLOCKPRIVATEADDRESSES"] = "true"
	env["QUEUEBOX_DESTINATIONS_INTERNAL_BASEURL"] = "http://127.0.0.1:9/hook"
	env["QUEUEBOX_ROUTES_0_TOPICPATTERN"] = "**"
	env["QUEUEBOX_ROUTES_0_DESTINATION"] = "internal"
	r := run(t, context.Background(), env, "serve")
	if r.code != ExitFailure {
		t.Fatalf("exit = %d, stderr:\n%s", r.code, r.stderr)
	}
	if !strings.Contains(r.stderr, "QueueBox could not build the destinations") || !strings.Contains(r.stderr, "destinations.internal") ||
		!strings.Contains(r.stderr, "loopback") {
		t.Errorf("stderr = %s", r.stderr)
	}
}

// TestServeReceivesWebhooks runs the inbox part of spec/33 and the push relay against
// `queuebox serve`: a pull source stores a posted order once (202, then 200 duplicate) and
// leaves it pending; a push source with an HMAC check relays its message through the outbox
// to an HTTP receiver with the relay headers.
func TestServeReceivesWebhooks(t *testing.T) {
	t.Parallel()
	type delivery struct {
		header http.Header
		body   string
	}
	var mu sync.Mutex
	var got []delivery
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, delivery{r.Header.Clone(), string(b)})
		mu.Unlock()
	}))
	defer receiver.Close()

	env := dbEnv(t)
	port := freePort(t)
	env["QUEUEBOX_SERVER_HTTPPORT"] = strconv.Itoa(port)
	env["QUEUEBOX_SOURCES_ORDERS_TYPE"] = "http"
	env["QUEUEBOX_SOURCES_ORDERS_PATH"] = "/orders"
	env["QUEUEBOX_SOURCES_ORDERS_IDEMPOTENCYKEYPATH"] = "$.id"
	env["QUEUEBOX_SOURCES_ORDERS_CONSUMPTION"] = "pull"
	env["QUEUEBOX_SOURCES_GITHUB_PATH"] = "/github"
	env["QUEUEBOX_SOURCES_GITHUB_IDEMPOTENCYKEYPATH"] = "$.delivery"
	env["QUEUEBOX_SOURCES_GITHUB_EVENTTYPEPATH"] = "$.action"
	env["QUEUEBOX_SOURCES_GITHUB_AGGREGATEIDPATH"] = "$.repo"
	env["QUEUEBOX_SOURCES_GITHUB_TOPIC"] = "github.{{ eventType }}"
	env["QUEUEBOX_SOURCES_GITHUB_AUTH_SECRET"] = "It's a Secret to Everybody"
	env["QUEUEBOX_SOURCES_GITHUB_AUTH_HEADERNAME"] = "X-Hub-Signature-256"
	env["QUEUEBOX_DESTINATIONS_HOOKS_BASEURL"] = receiver.URL
	env["QUEUEBOX_ROUTES_0_TOPICPATTERN"] = "github.*"
	env["QUEUEBOX_ROUTES_0_DESTINATION"] = "hooks"

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan result, 1)
	go func() { done <- run(t, ctx, env, "serve") }()
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	waitFor(t, 30*time.Second, "the data port", func() bool {
		resp, err := http.Get(base + "/")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})

	post := func(path, body string, header map[string]string) (int, string, http.Header) {
		req, _ := http.NewRequest("POST", base+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Header
	}
	code, body, _ := post("/inbox/orders", `{"id":"order-1","total":42}`, nil)
	if code != 202 || !strings.HasPrefix(body, `{"messageId":"`) {
		t.Fatalf("first post: %d %s", code, body)
	}
	code, body, _ = post("/inbox/orders", `{"id":"order-1","total":42}`, nil)
	if code != 200 || body != `{"status":"duplicate"}` {
		t.Fatalf("second post: %d %s", code, body)
	}

	conn, err := pgx.Connect(context.Background(), pgURL(env))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var n int
	var consumption, state string
	if err := conn.QueryRow(context.Background(),
		`SELECT count(*), min(consumption), min(state) FROM inbox WHERE source = 'orders'`).Scan(&n, &consumption, &state); err != nil {
		t.Fatal(err)
	}
	if n != 1 || consumption != "pull" || state != "pending" {
		t.Errorf("orders rows = %d %s %s, want 1 pull pending", n, consumption, state)
	}

	// GitHub's documented example: this signature of "Hello, World!" passes the check, and
	// the request then gets 400 Invalid JSON, because the body is not JSON: the order of the
	// checks shows. A one-byte change of the signature gets 401.
	const githubSig = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
	code, body, _ = post("/inbox/github", "Hello, World!", map[string]string{"X-Hub-Signature-256": githubSig})
	if code != 400 || body != `{"error":"Invalid JSON"}` {
		t.Errorf("GitHub example: %d %s, want 400 Invalid JSON", code, body)
	}
	code, _, _ = post("/inbox/github", "Hello, World!", map[string]string{"X-Hub-Signature-256": githubSig[:len(githubSig)-1] + "f"})
	if code != 401 {
		t.Errorf("GitHub example with a changed byte: %d, want 401", code)
	}

	payload := `{"delivery":"d-1","action":"opened","repo":"queuebox"}`
	code, body, _ = post("/inbox/github", payload, map[string]string{"X-Hub-Signature-256": "sha256=0000", "X-Correlation-Id": "corr-1"})
	if code != 401 || !strings.Contains(body, `"error":"`) {
		t.Fatalf("bad signature: %d %s", code, body)
	}
	code, body, hdr := post("/inbox/github", payload, map[string]string{
		"X-Hub-Signature-256": "sha256=" + hmacHex("It's a Secret to Everybody", payload),
		"X-Correlation-Id":    "corr-1",
		"X-Source":            "spoofed",
	})
	if code != 202 || hdr.Get("X-Correlation-Id") != "corr-1" {
		t.Fatalf("signed post: %d %s %v", code, body, hdr)
	}
	waitFor(t, 30*time.Second, "the relayed delivery", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) == 1
	})
	mu.Lock()
	d := got[0]
	mu.Unlock()
	if d.header.Get("X-Topic") != "github.opened" || d.header.Get("X-Source") != "github" ||
		d.header.Get("X-Idempotency-Key") != "d-1" || d.header.Get("X-Correlation-Id") != "corr-1" ||
		d.header.Get("X-Message-Key") != "queuebox" || d.header.Get("X-Inbox-Id") == "" {
		t.Errorf("relayed headers = %v", d.header)
	}
	if _, ok := d.header["X-Hub-Signature-256"]; ok {
		t.Error("the credential header travelled to the destination")
	}
	cancel()
	if r := <-done; r.code != ExitOK {
		t.Errorf("serve exit = %d\n%s", r.code, r.stderr)
	}
}

func hmacHex(secret, body string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(body))
	return hex.EncodeToString(m.Sum(nil))
}

// TestHealthWithTheDatabaseGone: readiness answers 503 when the database is gone, and
// liveness still answers 200.
func TestHealthWithTheDatabaseGone(t *testing.T) {
	t.Parallel()
	env := dbEnv(t)
	port := freePort(t)
	env["QUEUEBOX_SERVER_HTTPPORT"] = strconv.Itoa(port)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan result, 1)
	go func() { done <- run(t, ctx, env, "serve") }()
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	waitFor(t, 30*time.Second, "a ready process", func() bool {
		resp, err := http.Get(base + "/health/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
	dbName := strings.TrimPrefix(env["QUEUEBOX_DATABASE_URL"][strings.LastIndex(env["QUEUEBOX_DATABASE_URL"], "/"):], "/")
	admin, err := pgx.Connect(context.Background(), dbtest.ServerURL())
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	if _, err := admin.Exec(context.Background(), "DROP DATABASE "+pgx.Identifier{dbName}.Sanitize()+" WITH (FORCE)"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "readiness to fail", func() bool {
		resp, err := http.Get(base + "/health")
		if err != nil {
			return false
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode == 503 && strings.Contains(string(b), `"status":"unhealthy"`) &&
			strings.Contains(string(b), `"database":{"status":"down"`)
	})
	if code := status(t, base+"/health/live"); code != 200 {
		t.Errorf("/health/live = %d, want 200", code)
	}
	cancel()
	<-done
}

func TestConfigCheckCompilesEveryTransform(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"QUEUEBOX_DATABASE_URL":                  "jdbc:postgresql://db:5432/queuebox",
		"QUEUEBOX_DATABASE_USERNAME":             "queuebox",
		"QUEUEBOX_DATABASE_PASSWORD":             "x",
		"QUEUEBOX_DESTINATIONS_HOOK_BASEURL":     "https://hooks.example.com",
		"QUEUEBOX_ROUTES_0_TOPICPATTERN":         "**",
		"QUEUEBOX_ROUTES_0_DESTINATION":          "hook",
		"QUEUEBOX_ROUTES_0_TRANSFORM_EXPRESSION": `{ "total": $sum(items.price }`,
	}
	r := run(t, context.Background(), env, "config", "check")
	if r.code != ExitFailure || !strings.Contains(r.stderr, "routes[0].transform.expression (QUEUEBOX_ROUTES_0_TRANSFORM_EXPRESSION) does not compile") {
		t.Errorf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
	env["QUEUEBOX_ROUTES_0_TRANSFORM_EXPRESSION"] = `{ "total": $sum(items.price) }`
	if r := run(t, context.Background(), env, "config", "check"); r.code != ExitOK {
		t.Errorf("a valid expression: exit %d, stderr:\n%s", r.code, r.stderr)
	}
}

// TestConfigCheckRefusesWhatServeRefuses runs `config check` and `serve` on configurations
// that pass the rules of the configuration but that the start refuses, from the configuration
// alone: the check refuses each one as well, with the line that serve prints.
func TestConfigCheckRefusesWhatServeRefuses(t *testing.T) {
	t.Parallel()
	db := dbEnv(t)
	route := "routes:\n  - topicPattern: \"**\"\n    destination: web\n"
	tests := []struct {
		name string
		env  map[string]string
		yaml string
		want string
	}{
		{name: "private address with blockPrivateAddresses",
			yaml: "http:\n  blockPrivateAddresses: true\ndestinations:\n  web:\n    baseUrl: http://127.0.0.1:9\n    path: /hook\n" + route,
			want: "QueueBox could not build the destinations. Reason: destinations.web | caused by webhook: private address refused: host 127.0.0.1 is a loopback address"},
		{name: "baseUrl with a query",
			yaml: "destinations:\n  web:\n    baseUrl: https://example.com/?a=1\n" + route,
			want: "QueueBox could not build the destinations. Reason: destinations.web | caused by destinations.web.baseUrl | caused by must not hold a query (put it in path)"},
		{name: "basic user name with a colon",
			yaml: "destinations:\n  web:\n    baseUrl: https://example.com\n    auth:\n      username: a:b\n      password: p\n" + route,
			want: "QueueBox could not build the destinations. Reason: destinations.web | caused by destinations.web.auth.username: must not hold a colon"},
		{name: "baseUrl with a fragment",
			yaml: "destinations:\n  web:\n    baseUrl: https://example.com/#f\n" + route,
			want: "QueueBox could not build the destinations. Reason: destinations.web | caused by destinations.web.baseUrl | caused by must not hold a fragment"},
		{name: "kafka destination without a broker",
			yaml: "destinations:\n  web:\n    bootstrapServers: \",\"\n    topic: t\n" + route,
			want: "QueueBox could not build the destinations. Reason: destinations.web.bootstrapServers: no broker is given"},
		{name: "nats destination without a server",
			yaml: "destinations:\n  web:\n    servers: \",\"\n    subject: s\n" + route,
			want: "QueueBox could not build the destinations. Reason: destination web: servers is empty"},
		{name: "filter glob with ***",
			yaml: "sources:\n  hook:\n    path: /hook\n    idempotencyKeyPath: $.id\n    eventTypePath: $.type\n    filter:\n      require:\n        - header: h\n          matches: \"a***\"\n",
			want: "QueueBox could not build the inbox sources. Reason: creating inbox handler | caused by source hook | caused by compiling filter.require[0]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"QUEUEBOX_SERVER_HTTPPORT": strconv.Itoa(freePort(t))}
			for k, v := range db {
				env[k] = v
			}
			for k, v := range tt.env {
				env[k] = v
			}
			if tt.yaml != "" {
				file := t.TempDir() + "/queuebox.yml"
				if err := os.WriteFile(file, []byte(tt.yaml), 0o600); err != nil {
					t.Fatal(err)
				}
				env["QUEUEBOX_CONFIG_FILE"] = file
			}
			// A serve that does not refuse would run: the deadline stops it, and the test fails.
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			serve := run(t, ctx, env, "serve")
			check := run(t, context.Background(), env, "config", "check")
			refusal := ""
			for _, line := range strings.Split(serve.stderr, "\n") {
				if strings.HasPrefix(line, "QueueBox could not") {
					refusal = line
				}
			}
			if serve.code != ExitFailure || !strings.HasPrefix(refusal, tt.want) {
				t.Fatalf("serve: exit %d, refusal %q, want %q; stderr:\n%s", serve.code, refusal, tt.want, serve.stderr)
			}
			if check.code != ExitFailure || !strings.Contains(check.stderr, refusal+"\n") {
				t.Errorf("config check: exit %d, want 1 and the line %q; stderr:\n%s", check.code, refusal, check.stderr)
			}
		})
	}
}

// TestConfigCheckAcceptsSQLServerCDC: sqlserver-cdc on SQL Server passes `config check`,
// which builds its capture connector without connecting.
func TestConfigCheckAcceptsSQLServerCDC(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"QUEUEBOX_DATABASE_TYPE": "sqlserver", "QUEUEBOX_DATABASE_URL": "jdbc:sqlserver://127.0.0.1:1;databaseName=q",
		"QUEUEBOX_DATABASE_USERNAME": "sa", "QUEUEBOX_DATABASE_PASSWORD": "p",
		"QUEUEBOX_OUTBOX_CAPTURE_MODE": "sqlserver-cdc", "QUEUEBOX_OUTBOX_CAPTURE_ENABLED": "true",
		"QUEUEBOX_OUTBOX_CAPTURE_STATEDIRECTORY": t.TempDir(),
	}
	if r := run(t, context.Background(), env, "config", "check"); r.code != ExitOK {
		t.Errorf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
}

// TestConfigCheckBoundsNumbersAndSecretFiles runs `config check` as the process does (ReadFile
// nil) on values that passed it before: a number that exhausted memory at start, and a secret
// file that is read without end.
func TestConfigCheckBoundsNumbersAndSecretFiles(t *testing.T) {
	t.Parallel()
	base := map[string]string{
		"QUEUEBOX_DATABASE_URL":      "jdbc:postgresql://db:5432/queuebox",
		"QUEUEBOX_DATABASE_USERNAME": "queuebox",
		"QUEUEBOX_DATABASE_PASSWORD": "x",
	}
	tests := []struct {
		name, key, value, want string
	}{
		{"concurrency", "QUEUEBOX_OUTBOX_CONCURRENCY", "1000000000",
			"  - outbox.concurrency (QUEUEBOX_OUTBOX_CONCURRENCY) must be at most 1000, not 1000000000\n"},
		{"secret file /dev/zero", "QUEUEBOX_DATABASE_PASSWORD", "file:/dev/zero",
			"  - database.password (QUEUEBOX_DATABASE_PASSWORD) names the secret file /dev/zero, which is not a regular file\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := map[string]string{}
			for k, v := range base {
				env[k] = v
			}
			env[tt.key] = tt.value
			done := make(chan result, 1)
			go func() { done <- run(t, context.Background(), env, "config", "check") }()
			var r result
			select {
			case r = <-done:
			case <-time.After(60 * time.Second):
				t.Fatal("config check did not return within 60 s")
			}
			if r.code != ExitFailure || !strings.Contains(r.stderr, tt.want) {
				t.Errorf("exit %d, want 1 and %q; stderr:\n%s", r.code, tt.want, r.stderr)
			}
		})
	}
}
