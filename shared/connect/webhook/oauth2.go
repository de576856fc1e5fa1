package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

const (
	// maxTokenResponseBytes bounds the read of a token endpoint response.
	maxTokenResponseBytes = 1 << 20
	// defaultTokenLifetime is how long a token whose response carries no expires_in is reused
	// (unless a 401 drops it first).
	defaultTokenLifetime = 5 * time.Minute
	// maxTokenMargin is the largest part of a token's lifetime that is given up, so that a
	// token is never sent in its last moments.
	maxTokenMargin = 30 * time.Second
)

// tokenSource runs the OAuth2 client credentials grant of one destination and caches the
// access token. It is safe for concurrent use: callers that find no valid token share one
// fetch.
type tokenSource struct {
	cfg         OAuth2
	destination string
	client      *http.Client
	timeout     time.Duration
	maxBody     int
	secrets     []string
	// baseCtx bounds every fetch; Close cancels it.
	baseCtx context.Context
	// now is time.Now outside tests.
	now func() time.Time

	mu        sync.Mutex
	token     string    // the cached access token; empty when none
	refreshAt time.Time // when the cached token stops being used
	call      *tokenCall
}

// tokenCall is one fetch in flight; done closes when tok and err are set.
type tokenCall struct {
	done chan struct{}
	tok  string
	err  error
}

// Token returns a valid access token, fetching one when the cache holds none. The fetch runs
// on its own context (bounded by the destination timeout), so a caller that gives up does not
// fail the others waiting for the same fetch; the caller waits at most until ctx is done.
func (s *tokenSource) Token(ctx context.Context) (string, error) {
	s.mu.Lock()
	if s.token != "" && s.now().Before(s.refreshAt) {
		tok := s.token
		s.mu.Unlock()
		return tok, nil
	}
	c := s.call
	if c == nil {
		c = &tokenCall{done: make(chan struct{})}
		s.call = c
		go s.fetch(c)
	}
	s.mu.Unlock()

	select {
	case <-c.done:
		return c.tok, c.err
	case <-ctx.Done():
		return "", fmt.Errorf("waiting for the OAuth2 token of destination %s: %w", s.destination, ctx.Err())
	}
}

// Invalidate drops the cached token when it is still tok, so that the next Token call fetches a
// new one. A token fetched since tok was handed out stays.
func (s *tokenSource) Invalidate(tok string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.token == tok {
		s.token = ""
		s.refreshAt = time.Time{}
	}
}

// fetch runs one token request, publishes its result to c and caches a token.
func (s *tokenSource) fetch(c *tokenCall) {
	tok, lifetime, err := s.request()
	s.mu.Lock()
	if err == nil {
		s.token = tok
		s.refreshAt = s.now().Add(lifetime)
	}
	s.call = nil
	s.mu.Unlock()
	c.tok, c.err = tok, err
	close(c.done)
}

// request posts the client credentials form to the token endpoint and parses the answer. It
// returns the access token and how long to reuse it.
func (s *tokenSource) request() (string, time.Duration, error) {
	ctx, cancel := context.WithTimeout(s.baseCtx, s.timeout)
	defer cancel()

	form := url.Values{}
	for k, v := range s.cfg.ExtraParams {
		form.Set(k, v)
	}
	form.Set("grant_type", "client_credentials")
	form.Set("client_id", s.cfg.ClientID)
	form.Set("client_secret", s.cfg.ClientSecret)
	if s.cfg.Scope != "" {
		form.Set("scope", s.cfg.Scope)
	}

	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.cfg.TokenURL, strings.NewReader(form.Encode()))
	if err != nil {
		return "", 0, fmt.Errorf("building the OAuth2 token request of destination %s: %w", s.destination, stripURL(err))
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")

	resp, err := s.client.Do(req)
	if err != nil {
		return "", 0, fmt.Errorf("fetching the OAuth2 token of destination %s: %w", s.destination, stripURL(err))
	}
	defer closeBody(resp.Body)

	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		body := readErrorBody(resp.Body, s.maxBody, s.secrets)
		msg := fmt.Sprintf("fetching the OAuth2 token of destination %s: token endpoint answered %s",
			s.destination, statusText(resp.StatusCode))
		if body != "" {
			msg += ": " + body
		}
		return "", 0, &TokenError{StatusCode: resp.StatusCode, msg: msg}
	}

	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxTokenResponseBytes))
	if err != nil {
		return "", 0, fmt.Errorf("reading the OAuth2 token response of destination %s: %w", s.destination, err)
	}
	var parsed struct {
		AccessToken string          `json:"access_token"`
		TokenType   string          `json:"token_type"`
		ExpiresIn   json.RawMessage `json:"expires_in"`
	}
	if err := json.Unmarshal(raw, &parsed); err != nil {
		// The body may hold the token: name only the JSON problem.
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			err = fmt.Errorf("invalid JSON at offset %d", syn.Offset)
		}
		return "", 0, fmt.Errorf("parsing the OAuth2 token response of destination %s: %w", s.destination, err)
	}
	if parsed.AccessToken == "" {
		return "", 0, fmt.Errorf("parsing the OAuth2 token response of destination %s: no access_token", s.destination)
	}
	if !validHeaderValue(parsed.AccessToken) {
		return "", 0, fmt.Errorf("parsing the OAuth2 token response of destination %s: the access_token cannot travel in a header", s.destination)
	}
	return parsed.AccessToken, tokenLifetime(parsed.ExpiresIn), nil
}

// tokenLifetime turns expires_in (seconds, as a JSON number or string) into how long a token
// is reused: expires_in minus the smaller of 30 s and a tenth of it. Without a usable
// expires_in a token is reused for defaultTokenLifetime.
func tokenLifetime(raw json.RawMessage) time.Duration {
	text := strings.Trim(strings.TrimSpace(string(raw)), `"`)
	if text == "" || text == "null" {
		return defaultTokenLifetime
	}
	secs, err := strconv.ParseFloat(text, 64)
	if err != nil || secs <= 0 || secs > 1e9 {
		return defaultTokenLifetime
	}
	d := time.Duration(secs * float64(time.Second))
	return d - min(maxTokenMargin, d/10)
}

// TokenError is the error of a token endpoint that answered a status outside 2xx. Its text
// names the destination, the status and the first bytes of the response body with the
// destination's own credentials removed.
type TokenError struct {
	// StatusCode is the status of the token endpoint.
	StatusCode int
	msg        string
}

// Error returns the text described on TokenError.
func (e *TokenError) Error() string { return e.msg }
