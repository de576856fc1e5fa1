package localserver

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/openapi"
	"github.com/alternayte/queuebox/shared/store/postgres/dbtest"
)

// exchange is one request of the OpenAPI test and the status it must get.
type exchange struct {
	method, path, body string
	// contentType is the body's Content-Type; application/json when empty.
	contentType string
	header      map[string]string
	status      int
	// invalidRequest marks a request that is wrong on purpose (its answer is still checked).
	invalidRequest bool
}

// TestTheServerAnswersAsItsOpenAPIDescriptionSays runs the local process and sends real
// requests to every route of spec/26 and the extensions, one per documented status that a
// test can provoke here, and validates each request (unless it is wrong on purpose) and each
// response against docs/openapi.yaml with kin-openapi. The console's routes get the answers
// of a browser without a session (the 303 to the login page, the 401 of a change), the login
// page, a login and a login from another origin. Not provoked: 500 (storage failed) and
// 503 (shutting down) of the inbox, 503 of readiness, 500 of a replay, 503 of the destination
// routes, the 404 of a route that a server does not serve, the console's pages behind a
// session, and the 413 of the health, metrics, destination, console and description routes
// (the data port's cap, provoked on GET /; TestMaxBodyBytesCapsEveryRouteOfTheDataPort sends
// it to each).
func TestTheServerAnswersAsItsOpenAPIDescriptionSays(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(openapi.YAML)
	require.NoError(t, err)
	require.NoError(t, doc.Validate(ctx), "docs/openapi.yaml is not a valid OpenAPI document")

	dbURL := dbtest.NewDatabase(t)
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	cfg := loadYAML(t, fmt.Sprintf(`
database:
  url: jdbc:postgresql://%s%s
  username: postgres
  password: trust-auth
  migrate: true
inbox:
  maxBodyBytes: 2048
admin:
  enabled: true
  maxPayloadBytes: 1024
  maxTransformTimeoutMs: 30000
  auth:
    type: bearer
    token: %s
destinations:
  hooks:
    type: http
    baseUrl: http://127.0.0.1:9
routes:
  - topicPattern: "**"
    destination: hooks
sources:
  orders:
    type: http
    path: /orders
    idempotencyKeyPath: $.id
    consumption: pull
    filter:
      exclude:
        - header: x-test
          exists: true
  secure:
    type: http
    path: /secure
    idempotencyKeyPath: $.id
    consumption: pull
    auth:
      type: bearer
      token: source-token-1
  strict:
    type: http
    path: /strict
    idempotencyKeyPath: $.id
    consumption: pull
    transform:
      expression: '$error("rejected")'
  limited:
    type: http
    path: /limited
    idempotencyKeyPath: $.id
    consumption: pull
    rateLimit:
      requestsPerMinute: 1
`, u.Host, u.Path, adminToken))
	cfg.Server.HTTPPort = 0
	l, err := New(ctx, cfg, quietLog())
	require.NoError(t, err)
	base := runLocal(t, l)
	// The listeners answer before every loop has started; on a busy machine the relay may not
	// run yet. The exchanges below expect the ready answer, so wait for it first.
	readyDeadline := time.Now().Add(60 * time.Second)
	for code, rep := readiness(t, base); code != http.StatusOK; code, rep = readiness(t, base) {
		require.True(t, time.Now().Before(readyDeadline), "not ready after 60 s: %+v", rep)
		time.Sleep(20 * time.Millisecond)
	}
	doc.Servers = openapi3.Servers{{URL: base}}
	router, err := legacy.NewRouter(doc)
	require.NoError(t, err)

	admin := map[string]string{"Authorization": "Bearer " + adminToken}
	const form = "application/x-www-form-urlencoded"
	big := `{"id":"` + strings.Repeat("x", 2100) + `"}`
	bigAdmin := `{"topics":["` + strings.Repeat("x", 1100) + `"]}`
	exchanges := []exchange{
		{method: "GET", path: "/", status: 200},
		{method: "GET", path: "/", body: big, status: 413, invalidRequest: true},
		{method: "GET", path: "/health/live", status: 200},
		{method: "GET", path: "/health/ready", status: 200},
		{method: "GET", path: "/health", status: 200},
		{method: "GET", path: "/metrics", status: 200},
		{method: "GET", path: "/openapi.json", status: 200},
		{method: "POST", path: "/inbox/orders", body: `{"id":"a1"}`, status: 202},
		{method: "POST", path: "/inbox/orders", body: `{"id":"a1"}`, status: 200},
		{method: "POST", path: "/inbox/orders", body: `{"id":"a2"}`, header: map[string]string{"X-Test": "1"}, status: 202},
		{method: "POST", path: "/inbox/orders", body: `{"id":`, status: 400, invalidRequest: true},
		{method: "POST", path: "/inbox/orders", body: `{"other":1}`, status: 400},
		{method: "POST", path: "/inbox/orders", body: big, status: 413},
		{method: "POST", path: "/inbox/secure", body: `{"id":"s1"}`, status: 401},
		{method: "POST", path: "/inbox/strict", body: `{"id":"t1"}`, status: 422},
		{method: "POST", path: "/inbox/limited", body: `{"id":"l1"}`, status: 202},
		{method: "POST", path: "/inbox/limited", body: `{"id":"l2"}`, status: 429},
		{method: "POST", path: "/inbox/nowhere", body: `{"id":"n1"}`, status: 404},
		{method: "POST", path: "/admin/transform/test", body: `{"expression":"$.a + 1","payload":{"a":1},"timeoutMs":30000}`, header: admin, status: 200},
		{method: "POST", path: "/admin/transform/test", body: `{"payload":{}}`, header: admin, status: 400, invalidRequest: true},
		{method: "POST", path: "/admin/transform/test", body: `{"expression":"$.a +","payload":{}}`, header: admin, status: 400},
		{method: "POST", path: "/admin/transform/test", body: `{"expression":"$error(\"no\")","payload":{}}`, header: admin, status: 400},
		{method: "POST", path: "/admin/transform/test", body: `{"expression":"1","payload":{}}`, status: 401},
		{method: "POST", path: "/admin/transform/test", body: `{"expression":"1","payload":"` + strings.Repeat("x", 1100) + `"}`, header: admin, status: 413},
		{method: "POST", path: "/admin/transform/test", body: `{"expression":"1","payload":"` + strings.Repeat("x", 2100) + `"}`, header: admin, status: 413},
		{method: "POST", path: "/admin/replay", body: `{"topic":"order.created"}`, header: admin, status: 200},
		{method: "POST", path: "/admin/replay", body: `{"states":["dead"],"dryRun":true}`, header: admin, status: 200},
		{method: "POST", path: "/admin/replay", body: `{"states":["dead"],"batchSize":10}`, header: admin, status: 200},
		{method: "POST", path: "/admin/replay", body: `{}`, header: admin, status: 400},
		{method: "POST", path: "/admin/replay", body: `{"ids":"x"}`, header: admin, status: 400, invalidRequest: true},
		{method: "POST", path: "/admin/replay", body: `{"topic":"x"}`, status: 401},
		{method: "POST", path: "/admin/replay", body: bigAdmin, header: admin, status: 413},
		{method: "POST", path: "/admin/inbox/replay", body: `{"sources":["orders"],"dryRun":true}`, header: admin, status: 200},
		{method: "POST", path: "/admin/inbox/replay", body: `{"consumption":"pull"}`, header: admin, status: 200},
		{method: "POST", path: "/admin/inbox/replay", body: `{}`, header: admin, status: 400},
		{method: "GET", path: "/admin/destinations", header: admin, status: 200},
		{method: "GET", path: "/admin/destinations", status: 401},
		{method: "POST", path: "/admin/destinations/hooks/pause", header: admin, status: 200},
		{method: "POST", path: "/admin/destinations/hooks/resume", header: admin, status: 200},
		{method: "POST", path: "/admin/destinations/nowhere/pause", header: admin, status: 404},
		{method: "GET", path: "/console", status: 303},
		{method: "GET", path: "/console/login", status: 200},
		{method: "POST", path: "/console/login", body: "token=" + adminToken, contentType: form, status: 303},
		{method: "POST", path: "/console/login", body: "token=" + adminToken, contentType: form, header: map[string]string{"Origin": "http://elsewhere.test"}, status: 403},
		{method: "GET", path: "/console/", status: 303},
		{method: "GET", path: "/console/dead", status: 303},
		{method: "GET", path: "/console/rows/outbox/" + uuid.NewString(), status: 303},
		{method: "GET", path: "/console/replay?target=hooks", status: 303},
		{method: "GET", path: "/console/destinations", status: 303},
		{method: "POST", path: "/console/logout", body: "csrf=x", contentType: form, status: 401},
		{method: "POST", path: "/console/replay", body: "csrf=x&target=hooks", contentType: form, status: 401},
		{method: "POST", path: "/console/destinations/hooks/pause", body: "csrf=x", contentType: form, status: 401},
	}
	// The console answers 303 to a browser; the test looks at that answer, not at the next page.
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	noAuth := openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}
	// kin-openapi decodes no HTML; the console's pages are checked as text, like text/plain.
	openapi3filter.RegisterBodyDecoder("text/html", openapi3filter.RegisteredBodyDecoder("text/plain"))
	for _, x := range exchanges {
		name := fmt.Sprintf("%s %s %d", x.method, x.path, x.status)
		var body io.Reader
		if x.body != "" {
			body = strings.NewReader(x.body)
		}
		req, err := http.NewRequest(x.method, base+x.path, body)
		require.NoError(t, err, name)
		if x.body != "" {
			req.Header.Set("Content-Type", cmp.Or(x.contentType, "application/json"))
		}
		for k, v := range x.header {
			req.Header.Set(k, v)
		}
		route, params, err := router.FindRoute(req)
		require.NoError(t, err, "%s: the description has no route for it", name)
		in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: &noAuth}
		if !x.invalidRequest {
			require.NoError(t, openapi3filter.ValidateRequest(ctx, in), "%s: the request does not match the description", name)
			if x.body != "" {
				req.Body = io.NopCloser(strings.NewReader(x.body))
			}
		}
		resp, err := client.Do(req)
		require.NoError(t, err, name)
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err, name)
		require.Equal(t, x.status, resp.StatusCode, "%s: %s", name, got)
		out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header,
			Options: &openapi3filter.Options{IncludeResponseStatus: true}}
		out.SetBodyBytes(bytes.Clone(got))
		require.NoError(t, openapi3filter.ValidateResponse(ctx, out), "%s: the answer %s does not match the description", name, got)
	}
}
