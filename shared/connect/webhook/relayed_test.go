package webhook_test

import (
	"context"
	"maps"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/connect/webhook"
)

// relayMarker are the headers that the relay writes on every outbox row it creates.
var relayMarker = map[string]string{"x-inbox-id": "0191d3c4-0000-7000-8000-000000000001", "x-source": "hooks"}

// withMarker returns h plus the relay marker.
func withMarker(h map[string]string) map[string]string {
	out := maps.Clone(relayMarker)
	maps.Copy(out, h)
	return out
}

// TestRelayedRowCannotForgeDestinationHeaders: the headers of a relayed row came from a
// webhook sender, so they never replace the destination's credential or static headers, never
// add a second value to a standard header, and never carry hop-by-hop headers. The same
// headers on an application row keep the behaviour of spec/25.
func TestRelayedRowCannotForgeDestinationHeaders(t *testing.T) {
	t.Parallel()
	forged := map[string]string{
		"x-api-key": "FORGED", "x-team": "forged-team", "x-message-id": "forged", "x-attempt": "99",
		"content-type": "text/plain", "x-topic": "forged.topic", "x-message-key": "forged-key",
		"x-github-event": "push",
	}
	hopByHop := map[string]string{
		"connection": "close", "keep-alive": "timeout=1", "upgrade": "h2c", "te": "trailers",
		"trailer": "X-Late", "proxy-authorization": "Basic Zm9yZ2Vk", "proxy-foo": "bar", "host": "evil.example",
	}
	auth := webhook.Auth{Kind: webhook.AuthHeader, Header: webhook.Header{Name: "X-Api-Key", Value: "destination-key"}}
	static := map[string]string{"X-Team": "orders"}

	t.Run("relayed row", func(t *testing.T) {
		t.Parallel()
		rc := newReceiver(t, nil)
		p := newPublisher(t, webhook.Config{BaseURL: rc.srv.URL, Headers: static, Auth: auth}, nil)
		m := message()
		m.Headers = withMarker(forged)
		maps.Copy(m.Headers, hopByHop)
		require.NoError(t, p.Publish(context.Background(), m))
		reqs := rc.requests()
		require.Len(t, reqs, 1)
		h := reqs[0].Header
		assert.Equal(t, []string{"destination-key"}, h.Values("X-Api-Key"))
		assert.Equal(t, []string{"orders"}, h.Values("X-Team"))
		assert.Equal(t, []string{m.ID}, h.Values("X-Message-Id"))
		assert.Equal(t, []string{"0"}, h.Values("X-Attempt"))
		assert.Equal(t, []string{"application/json"}, h.Values("Content-Type"))
		assert.Equal(t, []string{"order.created"}, h.Values("X-Topic"))
		assert.Equal(t, []string{"cust-42"}, h.Values("X-Message-Key"))
		// Headers that collide with nothing still travel, the marker included.
		assert.Equal(t, []string{"push"}, h.Values("X-Github-Event"))
		assert.Equal(t, []string{"hooks"}, h.Values("X-Source"))
		for name := range hopByHop {
			assert.Empty(t, h.Values(name), "hop-by-hop header %s must not be forwarded", name)
		}
	})

	t.Run("relayed row, basic auth", func(t *testing.T) {
		t.Parallel()
		rc := newReceiver(t, nil)
		basic := webhook.Auth{Kind: webhook.AuthBasic, Basic: webhook.Basic{Username: "u", Password: "p"}}
		p := newPublisher(t, webhook.Config{BaseURL: rc.srv.URL, Auth: basic}, nil)
		m := message()
		m.Headers = withMarker(map[string]string{"authorization": "Bearer forged"})
		require.NoError(t, p.Publish(context.Background(), m))
		reqs := rc.requests()
		require.Len(t, reqs, 1)
		assert.Equal(t, []string{"Basic dTpw"}, reqs[0].Header.Values("Authorization"))
	})

	t.Run("application row keeps spec/25", func(t *testing.T) {
		t.Parallel()
		rc := newReceiver(t, nil)
		p := newPublisher(t, webhook.Config{BaseURL: rc.srv.URL, Headers: static, Auth: auth}, nil)
		m := message()
		m.Headers = maps.Clone(forged)
		require.NoError(t, p.Publish(context.Background(), m))
		reqs := rc.requests()
		require.Len(t, reqs, 1)
		h := reqs[0].Header
		// A row header wins over the auth and static headers...
		assert.Equal(t, []string{"FORGED"}, h.Values("X-Api-Key"))
		assert.Equal(t, []string{"forged-team"}, h.Values("X-Team"))
		// ...and one named like a standard header is a second value.
		assert.Equal(t, []string{m.ID, "forged"}, h.Values("X-Message-Id"))
		assert.Equal(t, []string{"0", "99"}, h.Values("X-Attempt"))
		assert.Equal(t, []string{"push"}, h.Values("X-Github-Event"))
	})

	t.Run("only one marker header is an application row", func(t *testing.T) {
		t.Parallel()
		rc := newReceiver(t, nil)
		p := newPublisher(t, webhook.Config{BaseURL: rc.srv.URL, Headers: static}, nil)
		m := message()
		m.Headers = map[string]string{"x-source": "billing", "X-Team": "row-team"}
		require.NoError(t, p.Publish(context.Background(), m))
		reqs := rc.requests()
		require.Len(t, reqs, 1)
		assert.Equal(t, []string{"row-team"}, reqs[0].Header.Values(http.CanonicalHeaderKey("x-team")))
	})
}
