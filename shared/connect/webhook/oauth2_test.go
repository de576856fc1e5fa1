package webhook_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/connect/webhook"
)

// tokenEndpoint is a loopback OAuth2 token endpoint. It issues tok-1, tok-2, ... and records
// the form of every request.
type tokenEndpoint struct {
	srv       *httptest.Server
	expiresIn any // the expires_in of every answer; nil leaves it out
	delay     time.Duration
	// fail, when set, answers instead of issuing a token.
	fail func(w http.ResponseWriter, rawBody string)

	mu    sync.Mutex
	forms []url.Values
	types []string
}

func newTokenEndpoint(t *testing.T, configure func(te *tokenEndpoint)) *tokenEndpoint {
	t.Helper()
	te := &tokenEndpoint{expiresIn: 3600}
	if configure != nil {
		configure(te)
	}
	te.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		form, _ := url.ParseQuery(string(raw))
		te.mu.Lock()
		te.forms = append(te.forms, form)
		te.types = append(te.types, r.Method+" "+r.Header.Get("Content-Type"))
		n := len(te.forms)
		te.mu.Unlock()
		if te.fail != nil {
			te.fail(w, string(raw))
			return
		}
		if te.delay > 0 {
			// Widens the window in which concurrent publishes wait for this one fetch.
			time.Sleep(te.delay)
		}
		answer := map[string]any{"access_token": fmt.Sprintf("tok-%d", n), "token_type": "Bearer"}
		if te.expiresIn != nil {
			answer["expires_in"] = te.expiresIn
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(answer)
	}))
	t.Cleanup(te.srv.Close)
	return te
}

func (te *tokenEndpoint) requests() []url.Values {
	te.mu.Lock()
	defer te.mu.Unlock()
	return append([]url.Values(nil), te.forms...)
}

const clientSecret = "cl1ent-s3cret+/=&value"

func oauth2Config(baseURL string, te *tokenEndpoint) webhook.Config {
	return webhook.Config{
		BaseURL: baseURL,
		Auth: webhook.Auth{Kind: webhook.AuthOAuth2, OAuth2: webhook.OAuth2{
			ClientID:     "queuebox",
			ClientSecret: clientSecret,
			TokenURL:     te.srv.URL + "/oauth/token",
			Scope:        "api:write",
			ExtraParams: map[string]string{
				"audience":   "https://api.example.com",
				"resource":   "orders",
				"grant_type": "password", // cannot replace the grant
			},
		}},
	}
}

func TestOAuth2TokenFetchedOnceForConcurrentPublishes(t *testing.T) {
	t.Parallel()

	te := newTokenEndpoint(t, func(te *tokenEndpoint) { te.delay = 50 * time.Millisecond })
	rc := newReceiver(t, nil)
	p := newPublisher(t, oauth2Config(rc.srv.URL, te), nil)

	const publishes = 50
	var wg sync.WaitGroup
	var failures atomic.Int64
	for range publishes {
		wg.Go(func() {
			if err := p.Publish(context.Background(), message()); err != nil {
				failures.Add(1)
				t.Errorf("publish: %v", err)
			}
		})
	}
	wg.Wait()
	require.Zero(t, failures.Load())

	forms := te.requests()
	require.Len(t, forms, 1, "one token request serves every publish")
	form := forms[0]
	assert.Equal(t, "client_credentials", form.Get("grant_type"))
	assert.Equal(t, "queuebox", form.Get("client_id"))
	assert.Equal(t, clientSecret, form.Get("client_secret"))
	assert.Equal(t, "api:write", form.Get("scope"))
	assert.Equal(t, "https://api.example.com", form.Get("audience"))
	assert.Equal(t, "orders", form.Get("resource"))
	assert.Equal(t, []string{"client_credentials"}, form["grant_type"])
	assert.Equal(t, []string{"POST application/x-www-form-urlencoded"}, te.types)

	reqs := rc.requests()
	require.Len(t, reqs, publishes)
	for _, r := range reqs {
		assert.Equal(t, "Bearer tok-1", r.Header.Get("Authorization"))
	}
}

func TestOAuth2TokenRequestWithoutScope(t *testing.T) {
	t.Parallel()

	te := newTokenEndpoint(t, nil)
	rc := newReceiver(t, nil)
	cfg := oauth2Config(rc.srv.URL, te)
	cfg.Auth.OAuth2.Scope = ""
	cfg.Auth.OAuth2.ExtraParams = nil
	p := newPublisher(t, cfg, nil)
	require.NoError(t, p.Publish(context.Background(), message()))

	forms := te.requests()
	require.Len(t, forms, 1)
	_, hasScope := forms[0]["scope"]
	assert.False(t, hasScope)
	assert.Len(t, forms[0], 3, "grant_type, client_id and client_secret only")
}

func TestOAuth2TokenRefetchedAfter401(t *testing.T) {
	t.Parallel()

	te := newTokenEndpoint(t, nil)
	rc := newReceiver(t, func(r *http.Request, _ int) (int, string) {
		if r.Header.Get("Authorization") == "Bearer tok-1" {
			return http.StatusUnauthorized, "token revoked: " + r.Header.Get("Authorization")
		}
		return http.StatusOK, ""
	})
	p := newPublisher(t, oauth2Config(rc.srv.URL, te), nil)

	err := p.Publish(context.Background(), message())
	require.Error(t, err, "the attempt that got 401 fails")
	var se *webhook.StatusError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, http.StatusUnauthorized, se.StatusCode)
	assert.NotContains(t, err.Error(), "tok-1", "the echoed token is redacted")

	require.NoError(t, p.Publish(context.Background(), message()))
	require.NoError(t, p.Publish(context.Background(), message()))
	assert.Len(t, te.requests(), 2, "one new token after the 401, then reused")
	reqs := rc.requests()
	require.Len(t, reqs, 3)
	assert.Equal(t, "Bearer tok-2", reqs[1].Header.Get("Authorization"))
	assert.Equal(t, "Bearer tok-2", reqs[2].Header.Get("Authorization"))
}

// fakeClock is a clock that moves only when the test advances it.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func TestOAuth2TokenRefetchedBeforeExpiry(t *testing.T) {
	t.Parallel()

	tests := []struct {
		name      string
		expiresIn any
		stillUsed time.Duration // a token this old is reused
		replaced  time.Duration // a token this old is replaced
	}{
		// 60 s minus 10 % = 54 s.
		{name: "short lifetime gives up a tenth", expiresIn: 60, stillUsed: 53 * time.Second, replaced: 54 * time.Second},
		// 3600 s minus 30 s.
		{name: "long lifetime gives up 30 s", expiresIn: 3600, stillUsed: 3569 * time.Second, replaced: 3570 * time.Second},
		{name: "expires_in as a string", expiresIn: "60", stillUsed: 53 * time.Second, replaced: 54 * time.Second},
		{name: "no expires_in lasts 5 minutes", expiresIn: nil, stillUsed: 299 * time.Second, replaced: 300 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			te := newTokenEndpoint(t, func(te *tokenEndpoint) { te.expiresIn = tt.expiresIn })
			rc := newReceiver(t, nil)
			p := newPublisher(t, oauth2Config(rc.srv.URL, te), nil)
			clock := &fakeClock{now: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
			webhook.SetClock(p, clock.Now)

			require.NoError(t, p.Publish(context.Background(), message()))
			clock.Advance(tt.stillUsed)
			require.NoError(t, p.Publish(context.Background(), message()))
			assert.Len(t, te.requests(), 1, "the token is still reused")
			clock.Advance(tt.replaced - tt.stillUsed)
			require.NoError(t, p.Publish(context.Background(), message()))
			assert.Len(t, te.requests(), 2, "a new token replaces one near its expiry")

			reqs := rc.requests()
			require.Len(t, reqs, 3)
			assert.Equal(t, "Bearer tok-1", reqs[1].Header.Get("Authorization"))
			assert.Equal(t, "Bearer tok-2", reqs[2].Header.Get("Authorization"))
		})
	}
}

func TestOAuth2TokenEndpointFailureFailsThePublish(t *testing.T) {
	t.Parallel()

	escapedSecret := url.QueryEscape(clientSecret)
	tests := []struct {
		name    string
		fail    func(w http.ResponseWriter, rawBody string)
		wantErr []string
	}{
		{
			name: "401 that echoes the form",
			fail: func(w http.ResponseWriter, rawBody string) {
				w.WriteHeader(http.StatusUnauthorized)
				_, _ = io.WriteString(w, `{"error":"invalid_client","request":"`+rawBody+`","secret":"`+clientSecret+`"}`)
			},
			wantErr: []string{
				"fetching the OAuth2 token of destination orders-api: token endpoint answered HTTP 401 Unauthorized",
				"invalid_client",
			},
		},
		{
			name: "500 without body",
			fail: func(w http.ResponseWriter, _ string) {
				w.WriteHeader(http.StatusInternalServerError)
			},
			wantErr: []string{"token endpoint answered HTTP 500 Internal Server Error"},
		},
		{
			name: "redirect is not followed",
			fail: func(w http.ResponseWriter, _ string) {
				w.Header().Set("Location", "http://169.254.169.254/")
				w.WriteHeader(http.StatusFound)
			},
			wantErr: []string{"token endpoint answered HTTP 302 Found"},
		},
		{
			name: "2xx that is not JSON",
			fail: func(w http.ResponseWriter, rawBody string) {
				_, _ = io.WriteString(w, "<html>"+rawBody)
			},
			wantErr: []string{"parsing the OAuth2 token response of destination orders-api: invalid JSON"},
		},
		{
			name: "2xx without access_token",
			fail: func(w http.ResponseWriter, _ string) {
				_, _ = io.WriteString(w, `{"token_type":"Bearer","expires_in":60}`)
			},
			wantErr: []string{"no access_token"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			te := newTokenEndpoint(t, func(te *tokenEndpoint) { te.fail = tt.fail })
			rc := newReceiver(t, nil)
			metrics := newCountingMetrics()
			p := newPublisher(t, oauth2Config(rc.srv.URL, te), metrics)

			err := p.Publish(context.Background(), message())
			require.Error(t, err)
			for _, want := range tt.wantErr {
				assert.Contains(t, err.Error(), want)
			}
			assert.NotContains(t, err.Error(), clientSecret)
			assert.NotContains(t, err.Error(), escapedSecret)
			assert.NotContains(t, err.Error(), "s3cret")
			assert.Zero(t, rc.count(), "the destination is not called without a token")
			assert.Empty(t, metrics.snapshot(), "token endpoint answers are not publish responses")

			// A failed fetch is not cached: the next publish asks again.
			require.Error(t, p.Publish(context.Background(), message()))
			assert.Len(t, te.requests(), 2)
		})
	}
}

func TestOAuth2TokenErrorCarriesStatus(t *testing.T) {
	t.Parallel()

	te := newTokenEndpoint(t, func(te *tokenEndpoint) {
		te.fail = func(w http.ResponseWriter, _ string) { w.WriteHeader(http.StatusBadRequest) }
	})
	p := newPublisher(t, oauth2Config("http://127.0.0.1:1", te), nil)
	err := p.Publish(context.Background(), message())
	var tokenErr *webhook.TokenError
	require.ErrorAs(t, err, &tokenErr)
	assert.Equal(t, http.StatusBadRequest, tokenErr.StatusCode)
}

func TestOAuth2WaitForTokenStopsWithContext(t *testing.T) {
	t.Parallel()

	release := make(chan struct{})
	arrived := make(chan struct{}, 1)
	tokenSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case arrived <- struct{}{}:
		default:
		}
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(tokenSrv.Close)
	t.Cleanup(func() { close(release) })

	rc := newReceiver(t, nil)
	cfg := webhook.Config{
		BaseURL: rc.srv.URL,
		Timeout: time.Minute,
		Auth: webhook.Auth{Kind: webhook.AuthOAuth2, OAuth2: webhook.OAuth2{
			ClientID: "queuebox", ClientSecret: clientSecret, TokenURL: tokenSrv.URL,
		}},
	}
	p := newPublisher(t, cfg, nil)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Publish(ctx, message()) }()
	select {
	case <-arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("the token request never arrived")
	}
	cancel()
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.Canceled)
		assert.Contains(t, err.Error(), "waiting for the OAuth2 token of destination orders-api")
	case <-time.After(5 * time.Second):
		t.Fatal("Publish did not return after the context was cancelled")
	}
	assert.Zero(t, rc.count())
}

func TestOAuth2TokenEndpointTimeout(t *testing.T) {
	t.Parallel()

	release := make(chan struct{})
	tokenSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(tokenSrv.Close)
	t.Cleanup(func() { close(release) })

	rc := newReceiver(t, nil)
	p := newPublisher(t, webhook.Config{
		BaseURL: rc.srv.URL,
		Timeout: 200 * time.Millisecond,
		Auth: webhook.Auth{Kind: webhook.AuthOAuth2, OAuth2: webhook.OAuth2{
			ClientID: "queuebox", ClientSecret: clientSecret, TokenURL: tokenSrv.URL + "/token?secret=" + url.QueryEscape(clientSecret),
		}},
	}, nil)
	start := time.Now()
	err := p.Publish(context.Background(), message())
	require.Error(t, err)
	assert.Less(t, time.Since(start), 10*time.Second, "the token endpoint never answers: returning at all is the timeout")
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.False(t, strings.Contains(err.Error(), "s3cret"), "the token URL is not repeated: %v", err)
}
