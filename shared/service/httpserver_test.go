package service_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/alternayte/queuebox/shared/service"
)

// serve runs h on a real server of service.NewHTTPServer and returns its address.
func serve(t *testing.T, h http.Handler, o service.ServerOptions) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := service.NewHTTPServer(h, o)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// readUntilClosed reads the connection until the server closes it, failing the test when it
// is still open after a safety bound far above the deadlines under test.
func readUntilClosed(t *testing.T, conn net.Conn) string {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(60 * time.Second))
	got, err := io.ReadAll(conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the server kept the connection open (%d bytes answered: %q)", len(got), got)
	}
	return string(got)
}

func TestBodyDeadlineClosesABodyThatNeverCompletes(t *testing.T) {
	t.Parallel()
	read := make(chan error, 1)
	addr := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := io.ReadAll(r.Body)
		read <- err
		if err != nil {
			http.Error(w, "the body broke off", http.StatusBadRequest)
			return
		}
		_, _ = io.WriteString(w, "read")
	}), service.ServerOptions{ReadHeaderTimeout: 200 * time.Millisecond, ReadBodyTimeout: 200 * time.Millisecond})
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nsome"); err != nil {
		t.Fatal(err)
	}
	got := readUntilClosed(t, conn)
	if err := <-read; err == nil {
		t.Error("the handler read a whole body that never arrived")
	}
	if !strings.HasPrefix(got, "HTTP/1.1 400") {
		t.Errorf("answer %q, want the handler's 400", got)
	}
}

func TestBodyDeadlineClosesAnUnreadBodyAfterTheAnswer(t *testing.T) {
	t.Parallel()
	addr := serve(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "running") // reads no body, as GET / does
	}), service.ServerOptions{ReadHeaderTimeout: 200 * time.Millisecond, ReadBodyTimeout: 200 * time.Millisecond})
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nsome"); err != nil {
		t.Fatal(err)
	}
	if got := readUntilClosed(t, conn); !strings.HasSuffix(got, "running") {
		t.Errorf("answer %q, want the handler's answer, then the close", got)
	}
}

func TestReadHeaderTimeoutClosesHeadersThatNeverComplete(t *testing.T) {
	t.Parallel()
	addr := serve(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		t.Error("a request whose headers never completed reached the handler")
	}), service.ServerOptions{ReadHeaderTimeout: 200 * time.Millisecond, ReadBodyTimeout: time.Minute})
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET / HTTP/1.1\r\nHost: x\r\n"); err != nil {
		t.Fatal(err)
	}
	readUntilClosed(t, conn)
}

// TestBodyDeadlineEndsWithTheBody: a handler that runs well past the body deadline after
// reading its whole body keeps its context (net/http's ReadTimeout would cancel it), and
// answers; so does the next request on the same connection.
func TestBodyDeadlineEndsWithTheBody(t *testing.T) {
	t.Parallel()
	const deadline = 100 * time.Millisecond
	addr := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		// Work for five times the body deadline (a paced replay, say), watching the context.
		select {
		case <-r.Context().Done():
			http.Error(w, "the context ended", http.StatusServiceUnavailable)
		case <-time.After(5 * deadline):
			_, _ = io.WriteString(w, "done")
		}
	}), service.ServerOptions{ReadHeaderTimeout: deadline, ReadBodyTimeout: deadline})
	client := &http.Client{Timeout: time.Minute}
	for i := range 2 {
		resp, err := client.Post("http://"+addr+"/", "application/json", strings.NewReader(fmt.Sprintf(`{"n":%d}`, i)))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK || string(body) != "done" {
			t.Errorf("request %d: %d %q, want 200 done", i, resp.StatusCode, body)
		}
	}
}
