package localserver

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/config"
	"github.com/alternayte/queuebox/shared/store/postgres/dbtest"
)

const limitsAdminToken = "limits-token-5d1e"

// limitsConfig is a local process on its own database with inbox.maxBodyBytes 1000, the admin
// routes and the console on, one pull source, and extra appended at the top level.
func limitsConfig(t *testing.T, extra string) *config.Config {
	t.Helper()
	u, err := url.Parse(dbtest.NewDatabase(t))
	require.NoError(t, err)
	cfg := loadYAML(t, fmt.Sprintf(`
database:
  url: jdbc:postgresql://%s%s
  username: postgres
  password: trust-auth
  migrate: true
inbox:
  maxBodyBytes: 1000
admin:
  enabled: true
  maxPayloadBytes: 65536
  auth:
    type: bearer
    token: %s
sources:
  orders:
    type: http
    path: /orders
    idempotencyKeyPath: $.id
    consumption: pull
%s`, u.Host, u.Path, limitsAdminToken, extra))
	cfg.Server.HTTPPort = 0
	return cfg
}

// rawRequest sends one HTTP/1.1 request over a new connection, with the body as one
// Content-Length body or, when chunked, as chunks of at most 512 bytes with no Content-Length,
// and returns the answer.
func rawRequest(t *testing.T, addr, method, path string, header map[string]string, body string, chunked bool) (int, string) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(2*time.Minute)))
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: queuebox\r\nConnection: close\r\nContent-Type: application/json\r\n", method, path)
	for k, v := range header {
		fmt.Fprintf(&b, "%s: %s\r\n", k, v)
	}
	if chunked {
		b.WriteString("Transfer-Encoding: chunked\r\n\r\n")
		for rest := body; rest != ""; {
			n := min(len(rest), 512)
			fmt.Fprintf(&b, "%x\r\n%s\r\n", n, rest[:n])
			rest = rest[n:]
		}
		b.WriteString("0\r\n\r\n")
	} else {
		fmt.Fprintf(&b, "Content-Length: %d\r\n\r\n%s", len(body), body)
	}
	// The server may answer 413 and close before it read everything: a write error after the
	// headers is not the test's failure, the answer is.
	_, _ = io.WriteString(conn, b.String())
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err, "%s %s: reading the answer", method, path)
	defer resp.Body.Close()
	text, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(text)
}

// TestMaxBodyBytesCapsEveryRouteOfTheDataPort sends a 2 KB body to every route of the data
// port (no management port, so the health, metrics, admin and console routes are there too),
// with a Content-Length and chunked: each answers 413 with inbox.maxBodyBytes, 1000. A chunked
// body under the cap still reaches its route whole. With a management port, the cap stays on the
// data port: the management port's routes do not take it.
func TestMaxBodyBytesCapsEveryRouteOfTheDataPort(t *testing.T) {
	t.Parallel()
	l, err := New(context.Background(), limitsConfig(t, ""), quietLog())
	require.NoError(t, err)
	base := runLocal(t, l)
	addr := strings.TrimPrefix(base, "http://")

	admin := map[string]string{"Authorization": "Bearer " + limitsAdminToken}
	big := `{"id":"` + strings.Repeat("x", 2048) + `"}`
	const tooLarge = `{"error":"Request body exceeds 1000 bytes"}`
	routes := []struct {
		method, path string
		header       map[string]string
	}{
		{"GET", "/", nil},
		{"GET", "/health", nil},
		{"GET", "/health/live", nil},
		{"GET", "/health/ready", nil},
		{"GET", "/metrics", nil},
		{"GET", "/openapi.json", nil},
		{"POST", "/admin/transform/test", admin},
		{"POST", "/admin/replay", admin},
		{"POST", "/admin/inbox/replay", admin},
		{"GET", "/admin/destinations", admin},
		{"GET", "/console", nil},
		{"POST", "/inbox/orders", nil},
	}
	for _, rt := range routes {
		for _, chunked := range []bool{false, true} {
			status, body := rawRequest(t, addr, rt.method, rt.path, rt.header, big, chunked)
			assert.Equal(t, http.StatusRequestEntityTooLarge, status, "%s %s (chunked %v) with 2 KB: %s", rt.method, rt.path, chunked, body)
			assert.JSONEq(t, tooLarge, body, "%s %s (chunked %v)", rt.method, rt.path, chunked)
		}
	}

	// Under the cap, a chunked body is read by its route as it was sent.
	payload := `{"expression":"$.a","payload":{"a":"` + strings.Repeat("y", 800) + `"}}`
	status, body := rawRequest(t, addr, "POST", "/admin/transform/test", admin, payload, true)
	require.Equal(t, http.StatusOK, status, body)
	assert.Contains(t, body, strings.Repeat("y", 800))
	status, body = rawRequest(t, addr, "GET", "/", nil, strings.Repeat("z", 900), true)
	assert.Equal(t, http.StatusOK, status, body)
	assert.Equal(t, "QueueBox is running!", body)

	// With a management port: the data port keeps the cap, the management port does not.
	cfg := limitsConfig(t, "")
	cfg.Server.ManagementPort = freePort(t)
	l2, err := New(context.Background(), cfg, quietLog())
	require.NoError(t, err)
	runLocal(t, l2)
	data, mgmt := l2.Addrs()[0].String(), l2.Addrs()[1].String()
	for _, chunked := range []bool{false, true} {
		status, body := rawRequest(t, data, "GET", "/", nil, big, chunked)
		assert.Equal(t, http.StatusRequestEntityTooLarge, status, "data port GET / (chunked %v): %s", chunked, body)
		status, body = rawRequest(t, data, "POST", "/inbox/orders", nil, big, chunked)
		assert.Equal(t, http.StatusRequestEntityTooLarge, status, "data port POST /inbox/orders (chunked %v): %s", chunked, body)
		status, body = rawRequest(t, mgmt, "GET", "/health/live", nil, big, chunked)
		assert.Equal(t, http.StatusOK, status, "management port GET /health/live (chunked %v): %s", chunked, body)
	}
}

// freePort returns a TCP port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	return port
}

// slowBody opens a connection, sends the headers of a request whose Content-Length promises
// 100 bytes and 10 bytes of the body, then never more. It returns what the server sent until
// it closed the connection, or fails the test when the connection is still open after the
// test's own safety bound (which is far above the deadline under test, so that a busy machine
// does not fail it).
func slowBody(t *testing.T, addr, method, path string, header map[string]string) string {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Errorf("dial %s: %v", addr, err)
		return ""
	}
	defer conn.Close()
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: queuebox\r\nContent-Type: application/json\r\nContent-Length: 100\r\n", method, path)
	for k, v := range header {
		fmt.Fprintf(&b, "%s: %s\r\n", k, v)
	}
	b.WriteString("\r\n{\"id\":\"ab")
	if _, err := io.WriteString(conn, b.String()); err != nil {
		t.Errorf("%s %s: writing: %v", method, path, err)
		return ""
	}
	_ = conn.SetReadDeadline(time.Now().Add(90 * time.Second))
	got, err := io.ReadAll(conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Errorf("%s %s: the connection of a body that never completes is still open (%d bytes answered)", method, path, len(got))
	}
	return string(got)
}

// TestABodyThatNeverCompletesIsCutOff holds connections whose bodies never complete, on the
// inbox, an admin route and a route that reads no body, of both ports, with
// server.readHeaderTimeoutMs and server.readBodyTimeoutMs 300: the server closes every one of them, and the inbox answers
// such a body as a body that broke off (400), never as stored.
func TestABodyThatNeverCompletesIsCutOff(t *testing.T) {
	t.Parallel()
	cfg := limitsConfig(t, "")
	cfg.Server.ReadHeaderTimeoutMs = 300
	cfg.Server.ReadBodyTimeoutMs = 300
	cfg.Server.ManagementPort = freePort(t)
	l, err := New(context.Background(), cfg, quietLog())
	require.NoError(t, err)
	runLocal(t, l)
	data, mgmt := l.Addrs()[0].String(), l.Addrs()[1].String()
	admin := map[string]string{"Authorization": "Bearer " + limitsAdminToken}

	type target struct {
		addr, method, path string
		header             map[string]string
	}
	targets := []target{
		{data, "POST", "/inbox/orders", nil},
		{data, "GET", "/", nil},
		{mgmt, "POST", "/admin/replay", admin},
		{mgmt, "GET", "/health/live", nil},
	}
	var wg sync.WaitGroup
	answers := make([]string, 0, 40)
	var mu sync.Mutex
	for i := range 40 {
		tg := targets[i%len(targets)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			got := slowBody(t, tg.addr, tg.method, tg.path, tg.header)
			mu.Lock()
			answers = append(answers, tg.path+" "+firstLine(got))
			mu.Unlock()
		}()
	}
	wg.Wait()
	for _, a := range answers {
		assert.NotContains(t, a, " 202 ", "a body that never completed must not be stored: %s", a)
		if strings.HasPrefix(a, "/inbox/orders ") && strings.Contains(a, "HTTP/") {
			assert.Contains(t, a, " 400 ", a)
		}
	}

}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\r\n")
	return line
}
