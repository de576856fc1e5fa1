package webhook_test

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alternayte/queuebox/shared/connect/publishtest"
	"github.com/alternayte/queuebox/shared/connect/webhook"
	"github.com/alternayte/queuebox/shared/outbox"
)

// receivers holds the server of each contract target's publisher, for Break.
var receivers sync.Map // *webhook.Publisher -> *contractServer

// contractServer is a loopback server that records every request and counts the
// connections it accepted.
type contractServer struct {
	srv   *httptest.Server
	mu    sync.Mutex
	got   []publishtest.Delivery
	conns atomic.Int64
}

// The HTTP destination passes the publisher contract against a real loopback server.
func TestPublisherContract(t *testing.T) {
	t.Parallel()
	publishtest.Run(t, publishtest.Features{
		Type: webhook.Type,
		Stalls: func(t *testing.T) []publishtest.Stall {
			arrived := make(chan struct{}, 1)
			release := make(chan struct{})
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				select {
				case arrived <- struct{}{}:
				default:
				}
				select {
				case <-r.Context().Done():
				case <-release:
				}
			}))
			t.Cleanup(srv.Close)
			t.Cleanup(func() { close(release) })
			p := newPublisher(t, webhook.Config{BaseURL: srv.URL, Timeout: time.Minute}, nil)
			return []publishtest.Stall{{Name: "server never answers", Publisher: p, Reached: arrived}}
		},
		CheckCancelled: func(t *testing.T, err error) {
			if strings.Contains(err.Error(), "no response within") {
				t.Errorf("the error of a cancelled publish %q blames the destination timeout", err)
			}
		},
		WithSecret: func(t *testing.T, secret string) []outbox.Publisher {
			// The server refuses the credentials and echoes the request headers in its body.
			rc := newReceiver(t, echoHeaders(http.StatusUnauthorized))
			return []outbox.Publisher{
				newPublisher(t, webhook.Config{BaseURL: rc.srv.URL, Auth: webhook.Auth{Kind: webhook.AuthBasic, Basic: webhook.Basic{Username: "queuebox", Password: secret}}}, nil),
				newPublisher(t, webhook.Config{BaseURL: rc.srv.URL, Auth: webhook.Auth{Kind: webhook.AuthHeader, Header: webhook.Header{Name: "X-Api-Key", Value: secret}}}, nil),
			}
		},
		ErrorNames: "orders-api",
		Break: func(t *testing.T, tg publishtest.Target) (func(), func()) {
			v, ok := receivers.Load(tg.Publisher)
			if !ok {
				t.Fatal("the target has no server")
			}
			cs := v.(*contractServer)
			before := cs.conns.Load()
			cs.srv.CloseClientConnections()
			return nil, func() {
				if n := cs.conns.Load(); n <= before {
					t.Fatalf("the server accepted %d connections, %d before the cut: want a new one", n, before)
				}
			}
		},
		// A POST on a kept-alive connection that the server has closed fails (net/http does
		// not send a POST again); the row retries, and the retry dials anew.
		RetryAfterBreak: true,
	}, newContractTarget)
}

// newContractTarget is a publisher on a server of its own that records every request;
// Received returns them, as a publish returns only once the server answered.
func newContractTarget(t *testing.T) publishtest.Target {
	cs := &contractServer{}
	cs.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		cs.mu.Lock()
		cs.got = append(cs.got, publishtest.Delivery{ID: r.Header.Get("X-Message-Id"), Body: body})
		cs.mu.Unlock()
	}))
	cs.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			cs.conns.Add(1)
		}
	}
	cs.srv.Start()
	t.Cleanup(cs.srv.Close)
	p := newPublisher(t, webhook.Config{BaseURL: cs.srv.URL}, nil)
	receivers.Store(p, cs)
	t.Cleanup(func() { receivers.Delete(p) })
	return publishtest.Target{
		Publisher: p,
		Close:     p.Close,
		Received: func(t *testing.T, n int) []publishtest.Delivery {
			t.Helper()
			cs.mu.Lock()
			out := append([]publishtest.Delivery(nil), cs.got...)
			cs.mu.Unlock()
			if len(out) < n {
				t.Fatalf("the server received %d requests, want %d", len(out), n)
			}
			return out
		},
	}
}
