package webhook_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/connect/webhook"
)

// A keep-alive connection that the server closed while it sat idle (its idle timeout) does
// not fail the next delivery: the publisher sees it closed and dials another.
func TestPublishDialsAgainAfterTheServerClosedAnIdleConnection(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var serverConns []net.Conn
	var accepted atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	srv.Config.ConnState = func(c net.Conn, s http.ConnState) {
		if s == http.StateNew {
			accepted.Add(1)
			mu.Lock()
			serverConns = append(serverConns, c)
			mu.Unlock()
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	p := newPublisher(t, webhook.Config{BaseURL: srv.URL}, nil)

	require.NoError(t, p.Publish(context.Background(), message()))
	require.Eventually(t, func() bool { return webhook.OpenIdleConns(p) == 1 }, 30*time.Second, 5*time.Millisecond, "the idle connection")
	mu.Lock()
	require.Len(t, serverConns, 1)
	require.NoError(t, serverConns[0].Close())
	mu.Unlock()
	require.Eventually(t, func() bool { return webhook.OpenIdleConns(p) == 0 }, 30*time.Second, 5*time.Millisecond, "the client to see the close")

	require.NoError(t, p.Publish(context.Background(), message()), "the closed connection is not used")
	assert.Equal(t, int64(2), accepted.Load())
}

// rawServer accepts connections and hands each to serve in its own goroutine, closing it
// after; it counts the connections.
func rawServer(t *testing.T, serve func(c net.Conn, tp *textproto.Reader)) (string, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	var conns atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			go func() {
				defer c.Close()
				serve(c, textproto.NewReader(bufio.NewReader(c)))
			}()
		}
	}()
	return "http://" + ln.Addr().String(), &conns
}

// answerEach reads every request of a connection, its body included, and answers each with
// answer.
func answerEach(answer string) func(net.Conn, *textproto.Reader) {
	return func(c net.Conn, tp *textproto.Reader) {
		for {
			if _, err := tp.ReadLine(); err != nil {
				return
			}
			h, err := tp.ReadMIMEHeader()
			if err != nil {
				return
			}
			n, _ := strconv.Atoi(h.Get("Content-Length"))
			if _, err := io.CopyN(io.Discard, tp.R, int64(n)); err != nil {
				return
			}
			if _, err := io.WriteString(c, answer); err != nil {
				return
			}
		}
	}
}

// Informational answers (1xx) before the final one are read past; the connection carries
// the next request.
func TestPublishReadsPastInformationalAnswers(t *testing.T) {
	t.Parallel()
	base, conns := rawServer(t, answerEach("HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n"+
		"HTTP/1.1 100 Continue\r\n\r\n"+
		"HTTP/1.1 204 No Content\r\n\r\n"))
	p := newPublisher(t, webhook.Config{BaseURL: base}, nil)
	for range 3 {
		require.NoError(t, p.Publish(context.Background(), message()))
	}
	assert.Equal(t, int64(1), conns.Load())
}

// An answer that says Connection: close is the last of its connection; the next delivery
// dials again and does not fail.
func TestPublishHonoursConnectionClose(t *testing.T) {
	t.Parallel()
	base, conns := rawServer(t, answerEach("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok"))
	p := newPublisher(t, webhook.Config{BaseURL: base}, nil)
	for range 3 {
		require.NoError(t, p.Publish(context.Background(), message()))
	}
	assert.Equal(t, int64(3), conns.Load())
}

// An error answer whose body never ends within the timeout still reports the status, with
// the part of the body that arrived. The timeout leaves a loaded machine time to send the
// header; the body's end never comes.
func TestPublishTimesOutInTheBody(t *testing.T) {
	t.Parallel()
	base, _ := rawServer(t, answerEach("HTTP/1.1 500 Internal Server Error\r\nContent-Length: 1000\r\n\r\npartial"))
	p := newPublisher(t, webhook.Config{BaseURL: base, Timeout: 2 * time.Second}, nil)
	err := p.Publish(context.Background(), message())
	var se *webhook.StatusError
	require.ErrorAs(t, err, &se, "the status arrived; the body is what was read of it")
	assert.Equal(t, 500, se.StatusCode)
	assert.Equal(t, "partial", se.Body)
}

// An https destination is reached over HTTP/1.1 with keep-alive.
func TestPublishOverTLS(t *testing.T) {
	t.Parallel()
	var protos sync.Map
	srv, conns := countConns(t, true, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		protos.Store(r.Proto, true)
	})
	p := newPublisher(t, webhook.Config{BaseURL: srv.URL}, nil)
	pool := srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	webhook.SetRootCAs(p, pool)
	for range 5 {
		require.NoError(t, p.Publish(context.Background(), message()))
	}
	assert.Equal(t, int64(1), conns.Load())
	_, ok := protos.Load("HTTP/1.1")
	assert.True(t, ok, "the server saw HTTP/1.1")
}

// Behind a proxy of the environment the deliveries go through http.Transport; that way sends
// the same request and keeps the same timeout.
func TestPublishThroughTheTransport(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t, nil)
	p := newPublisher(t, webhook.Config{BaseURL: rc.srv.URL, Path: "/events"}, nil)
	webhook.UseTransport(p)
	m := message()
	require.NoError(t, p.Publish(context.Background(), m))
	got := rc.requests()
	require.Len(t, got, 1)
	assert.Equal(t, "/events", got[0].RequestURI)
	assert.Equal(t, m.ID, got[0].Header.Get("X-Message-Id"))
	assert.Equal(t, string(m.Payload), string(got[0].Body))

	release := make(chan struct{})
	stall := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(stall.Close)
	t.Cleanup(func() { close(release) })
	q := newPublisher(t, webhook.Config{BaseURL: stall.URL, Timeout: 200 * time.Millisecond}, nil)
	webhook.UseTransport(q)
	err := q.Publish(context.Background(), message())
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "no response within 200ms")
}

// A destination that answers before it has read a large body and closes the connection
// fails the write of the body; its answer is what the publish reports, as with
// http.Transport.
func TestPublishReportsAnAnswerThatCameBeforeTheBodyWasRead(t *testing.T) {
	t.Parallel()
	// The server reads the request's header only, answers and closes.
	base, _ := rawServer(t, func(c net.Conn, tp *textproto.Reader) {
		if _, err := tp.ReadLine(); err != nil {
			return
		}
		if _, err := tp.ReadMIMEHeader(); err != nil {
			return
		}
		_, _ = io.WriteString(c, "HTTP/1.1 413 Request Entity Too Large\r\nConnection: close\r\nContent-Length: 8\r\n\r\ntoo big!")
	})
	p := newPublisher(t, webhook.Config{BaseURL: base, Timeout: 10 * time.Second}, nil)
	m := message()
	m.Payload = []byte(`{"blob":"` + strings.Repeat("x", 16<<20) + `"}`)
	err := p.Publish(context.Background(), m)
	var se *webhook.StatusError
	require.ErrorAs(t, err, &se, "the answer, not the write error: %v", err)
	assert.Equal(t, http.StatusRequestEntityTooLarge, se.StatusCode)
	assert.Equal(t, "too big!", se.Body)
}
