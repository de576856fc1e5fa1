package webhook_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/connect/webhook"
	"github.com/alternayte/queuebox/shared/outbox"
)

// rebindingDNS is a DNS server on loopback whose answers the test changes, as an attacker who
// controls a zone changes a record after QueueBox checked it (DNS rebinding).
type rebindingDNS struct {
	mu       sync.Mutex
	records  map[string]netip.Addr
	resolver *net.Resolver
}

func newRebindingDNS(t *testing.T) *rebindingDNS {
	d := &rebindingDNS{records: map[string]netip.Addr{}}
	d.resolver = serveDNS(t, func(name string) ([]netip.Addr, bool) {
		d.mu.Lock()
		defer d.mu.Unlock()
		a, ok := d.records[name]
		if !ok {
			return nil, false
		}
		return []netip.Addr{a}, true
	})
	return d
}

// set makes name resolve to addr from now on.
func (d *rebindingDNS) set(name, addr string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.records[name] = netip.MustParseAddr(addr)
}

// countingServer is a loopback HTTP server that counts the requests it receives.
func countingServer(t *testing.T) (*httptest.Server, *atomic.Int32) {
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		n.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

// portOf returns the port of a test server.
func portOf(t *testing.T, srv *httptest.Server) string {
	u, err := url.Parse(srv.URL)
	require.NoError(t, err)
	return u.Port()
}

// A name that passes the start-up check with a public address and then resolves to loopback
// is refused when the connection is dialled: the local server receives nothing. The same
// name and resolver without blockPrivateAddresses reach the server, which shows that the
// refusal is the dial-time check's. No test traffic leaves loopback: the public answer is
// only ever seen by the start-up check.
func TestBlockPrivateAddressesRefusesARebindAtDialTime(t *testing.T) {
	t.Parallel()
	srv, received := countingServer(t)
	dns := newRebindingDNS(t)
	const secret = "header-S3CRET-value"
	baseURL := "http://rebind.test:" + portOf(t, srv)
	cfg := webhook.Config{
		Name: "orders-api", BaseURL: baseURL, Path: "/events", Timeout: 5 * time.Second,
		Auth:     webhook.Auth{Kind: webhook.AuthHeader, Header: webhook.Header{Name: "X-Api-Key", Value: secret}},
		Resolver: dns.resolver,
	}
	msg := outbox.Message{ID: "m-1", Topic: "order.created", Payload: []byte(`{}`), Attempt: 1}

	// At start the name resolves to a public address and passes the check.
	dns.set("rebind.test", "93.184.216.34")
	require.NoError(t, webhook.CheckPrivateAddresses(context.Background(), baseURL, dns.resolver))

	// Then the record changes to loopback.
	dns.set("rebind.test", "127.0.0.1")

	guarded := cfg
	guarded.BlockPrivateAddresses = true
	p, err := webhook.New(guarded, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	for attempt := 1; attempt <= 2; attempt++ {
		err = p.Publish(context.Background(), msg)
		require.Error(t, err, "attempt %d reached a loopback address", attempt)
		assert.ErrorIs(t, err, webhook.ErrPrivateAddress)
		assert.Contains(t, err.Error(), "posting to destination orders-api")
		assert.Contains(t, err.Error(), "private address refused: host rebind.test resolves to loopback address 127.0.0.1")
		assert.NotContains(t, err.Error(), secret)
	}
	assert.Zero(t, received.Load(), "the loopback server received a request")

	// Without the setting the same name reaches the loopback server.
	open, err := webhook.New(cfg, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = open.Close() })
	require.NoError(t, open.Publish(context.Background(), msg))
	assert.EqualValues(t, 1, received.Load())
}

// The loopback forms of an answer are refused at dial time, IPv4 and IPv6 alike. Only
// loopback answers are dialled here, so that a broken check could not send test traffic
// off the machine; checkDialedAddress's test covers the other classes without dialling.
func TestBlockPrivateAddressesDialTimeLoopbackForms(t *testing.T) {
	t.Parallel()
	srv, received := countingServer(t)
	dns := newRebindingDNS(t)
	tests := []struct{ answer, want string }{
		{"127.0.0.1", "loopback address 127.0.0.1"},
		{"127.9.9.9", "loopback address 127.9.9.9"},
		{"::1", "loopback address ::1"},
		{"::ffff:127.0.0.1", "loopback address 127.0.0.1"},
	}
	for i, tt := range tests {
		addr := tt.answer
		name := "loop" + strconv.Itoa(i) + ".test"
		dns.set(name, addr)
		p, err := webhook.New(webhook.Config{
			Name: "d", BaseURL: "http://" + name + ":" + portOf(t, srv), Timeout: 5 * time.Second,
			BlockPrivateAddresses: true, Resolver: dns.resolver,
		}, nil)
		require.NoError(t, err)
		err = p.Publish(context.Background(), outbox.Message{ID: "m", Topic: "t", Payload: []byte(`{}`)})
		_ = p.Close()
		require.ErrorIs(t, err, webhook.ErrPrivateAddress, addr)
		assert.Contains(t, err.Error(), "host "+name+" resolves to "+tt.want, addr)
	}
	assert.Zero(t, received.Load())
}

// The OAuth2 token endpoint is checked at dial time as well: its request carries the client
// secret. A token URL that rebinds to loopback fails the publish, and neither the token
// endpoint nor the destination receives anything.
func TestBlockPrivateAddressesRefusesARebindOfTheTokenURL(t *testing.T) {
	t.Parallel()
	tokenSrv, tokenRequests := countingServer(t)
	destSrv, destRequests := countingServer(t)
	dns := newRebindingDNS(t)
	const secret = "client-S3CRET"
	cfg := webhook.Config{
		Name: "orders-api", BaseURL: "http://dest.test:" + portOf(t, destSrv), Timeout: 5 * time.Second,
		Auth: webhook.Auth{Kind: webhook.AuthOAuth2, OAuth2: webhook.OAuth2{
			ClientID: "queuebox", ClientSecret: secret, TokenURL: "http://auth.test:" + portOf(t, tokenSrv) + "/token",
		}},
		BlockPrivateAddresses: true,
		Resolver:              dns.resolver,
	}
	dns.set("auth.test", "93.184.216.34")
	dns.set("dest.test", "93.184.216.34")
	require.NoError(t, webhook.CheckPrivateAddresses(context.Background(), cfg.Auth.OAuth2.TokenURL, dns.resolver))
	require.NoError(t, webhook.CheckPrivateAddresses(context.Background(), cfg.BaseURL, dns.resolver))
	dns.set("auth.test", "127.0.0.1")
	dns.set("dest.test", "127.0.0.1")

	p, err := webhook.New(cfg, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	err = p.Publish(context.Background(), outbox.Message{ID: "m-1", Topic: "order.created", Payload: []byte(`{}`)})
	require.ErrorIs(t, err, webhook.ErrPrivateAddress)
	assert.Contains(t, err.Error(), "fetching the OAuth2 token of destination orders-api")
	assert.Contains(t, err.Error(), "host auth.test resolves to loopback address 127.0.0.1")
	assert.NotContains(t, err.Error(), secret)
	assert.Zero(t, tokenRequests.Load(), "the token endpoint received the client secret")
	assert.Zero(t, destRequests.Load())
}
