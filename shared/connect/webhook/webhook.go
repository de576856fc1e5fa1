// Package webhook is the HTTP destination of the outbox: a Publisher that POSTs each row's
// payload to one endpoint, with the standard QueueBox headers, the destination's static
// headers, its credentials (OAuth2 client credentials, basic or a static header) and the
// row's own headers, and, when the destination signs, a signature of every request (Standard
// Webhooks or an HMAC header; Signer).
//
// A 2xx answer completes the delivery. Every other answer, a redirect included (redirects are
// never followed), a timeout and a connection error fail it. The error of a failed delivery
// names the destination and the status and keeps the first bytes of the response body; it
// never holds a credential of the destination. The caller still redacts it before it reaches a
// log or last_error, since the body is text of the endpoint's choosing.
//
// The deliveries travel over HTTP/1.1 keep-alive connections that the publisher keeps itself
// and uses in the goroutine of each delivery (wirePool), or through net/http's transport when
// a proxy of the environment stands in front of the destination.
//
// CheckPrivateAddresses implements http.blockPrivateAddresses: the start-up check that refuses
// a destination or token endpoint on a loopback, link-local or private address.
// Config.BlockPrivateAddresses applies the same rule to every connection when it is dialled.
package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/alternayte/queuebox/shared/forwarded"
	"github.com/alternayte/queuebox/shared/kind"
	"github.com/alternayte/queuebox/shared/outbox"
)

// Type is the destination type of every HTTP destination, the destination_type label.
const Type = string(kind.HTTP)

const (
	// maxDrainBytes is the most of a response body that is read and discarded after the
	// publish has what it needs, so that the connection can carry the next request. A longer
	// body closes the connection instead.
	maxDrainBytes = 64 << 10
	// maxIdleConnsPerHost keeps enough idle connections for outbox.concurrency up to 64 with
	// room for the token endpoint and a second replica of the process's pools.
	maxIdleConnsPerHost = 128
	// idleConnTimeout closes a connection that has carried nothing for this long.
	idleConnTimeout = 90 * time.Second
	// redactedMark replaces a credential of the destination in the text of an error.
	redactedMark = "[REDACTED]"
)

// standardHeaders are the headers that Publish sets itself. A row header of one of these names
// is added as a second value instead of replacing the standard one (spec/25-headers.md).
var standardHeaders = map[string]bool{
	"Content-Type":  true,
	"X-Message-Id":  true,
	"X-Topic":       true,
	"X-Attempt":     true,
	"X-Message-Key": true,
}

// Metrics receives the measurements of the HTTP publisher. Implementations must be safe for
// concurrent use; the metrics.Registry of the process satisfies it.
type Metrics interface {
	// HTTPResponse counts queuebox_http_publish_responses_total{status_class}: 1xx to 5xx for
	// a response of the destination, other for a publish that got no response (connection
	// error, timeout, cancellation). A token endpoint's responses are not counted.
	HTTPResponse(statusClass string)
}

type nopMetrics struct{}

func (nopMetrics) HTTPResponse(string) {}

// Publisher delivers outbox messages to one HTTP destination. It implements outbox.Publisher
// and is safe for concurrent use. It keeps one pool of keep-alive connections, shared by the
// requests to the destination and to its token endpoint.
type Publisher struct {
	name      string
	url       string
	target    *url.URL // url parsed; read only
	timeout   time.Duration
	maxBody   int
	headers   [][2]string // static headers, canonical names, sorted
	authName  string      // the credential header of basic and header auth; empty otherwise
	authValue string
	tokens    *tokenSource // set for oauth2
	// guard drops the received headers of a relayed row that would replace a standard,
	// static or credential header, and the hop-by-hop ones (package forwarded).
	guard forwarded.Guard
	// secrets are the credential strings that must never appear in an error.
	secrets []string
	// wire sends the deliveries when no proxy of the environment stands in front of the
	// destination; transport sends them otherwise. The OAuth2 token fetch goes through a
	// client over transport.
	wire      *wirePool
	transport *http.Transport
	metrics   Metrics
	cancel    context.CancelFunc
	// terminal holds the statuses of Config.TerminalStatuses.
	terminal map[int]bool
	// signer signs every request; nil signs nothing.
	signer *Signer
	// now is the clock of the signature timestamps.
	now func() time.Time
}

var _ outbox.Publisher = (*Publisher)(nil)

// New returns the publisher of one destination. It fills the defaults of cfg and validates
// it; the error names the bad key and never holds a secret. metrics may be nil. New does no
// network I/O: the OAuth2 token is fetched by the first publish. Call Close when the
// publisher is no longer used.
func New(cfg Config, metrics Metrics) (*Publisher, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	target := joinURL(cfg.BaseURL, cfg.Path)
	base, _ := url.Parse(cfg.BaseURL)
	joined, err := url.Parse(target)
	if err != nil || joined.Host != base.Host || joined.Scheme != base.Scheme {
		return nil, fmt.Errorf("destinations.%s.path: joined with baseUrl it does not make a URL of the same host", cfg.Name)
	}
	if metrics == nil {
		metrics = nopMetrics{}
	}
	transport, dial := newTransport(cfg, target)
	// The client of the OAuth2 token fetch. A redirect is never followed, there or in a
	// delivery (which goes to the transport itself): it could take the credentials elsewhere.
	// The 3xx answer itself comes back and fails the request.
	client := &http.Client{
		Transport:     transport,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}

	ctx, cancel := context.WithCancel(context.Background())
	var wire *wirePool
	if proxyAddr(target) == "" {
		wire = newWirePool(joined, dial, maxIdleConnsPerHost, idleConnTimeout)
	}
	p := &Publisher{
		wire:      wire,
		name:      cfg.Name,
		url:       target,
		target:    joined,
		timeout:   cfg.Timeout,
		maxBody:   cfg.MaxErrorBodyBytes,
		transport: transport,
		metrics:   metrics,
		cancel:    cancel,
		now:       time.Now,
	}
	if p.signer, err = NewSigner(cfg.Signing); err != nil {
		cancel()
		return nil, fmt.Errorf("destinations.%s.signing.%w", cfg.Name, err)
	}
	for _, code := range cfg.TerminalStatuses {
		if p.terminal == nil {
			p.terminal = map[int]bool{}
		}
		p.terminal[code] = true
	}
	for name, value := range cfg.Headers {
		p.headers = append(p.headers, [2]string{http.CanonicalHeaderKey(name), value})
	}
	sort.Slice(p.headers, func(i, j int) bool { return p.headers[i][0] < p.headers[j][0] })
	p.setAuth(ctx, cfg, client)
	p.setGuard(cfg)
	return p, nil
}

// dialFunc dials a connection, as net.Dialer.DialContext does.
type dialFunc = func(ctx context.Context, network, addr string) (net.Conn, error)

// newTransport returns the transport of a destination whose URL is target, and the dial
// function it uses, which refuses private addresses with Config.BlockPrivateAddresses.
func newTransport(cfg Config, target string) (*http.Transport, dialFunc) {
	dialer := &net.Dialer{Timeout: cfg.Timeout / 2, KeepAlive: 30 * time.Second, Resolver: cfg.Resolver}
	dial := dialer.DialContext
	if cfg.BlockPrivateAddresses {
		dial = newGuardedDialer(dialer, target, cfg.Auth.OAuth2.TokenURL).DialContext
	}
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           dial,
		ForceAttemptHTTP2:     true,
		TLSClientConfig:       &tls.Config{MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout:   cfg.Timeout / 2,
		MaxIdleConns:          2 * maxIdleConnsPerHost,
		MaxIdleConnsPerHost:   maxIdleConnsPerHost,
		IdleConnTimeout:       idleConnTimeout,
		ExpectContinueTimeout: time.Second,
	}, dial
}

// setAuth sets the credential of cfg.Auth: the header of basic and header auth, or the token
// source of OAuth2, whose fetches use client and end with ctx; and the secrets that no error
// may hold.
func (p *Publisher) setAuth(ctx context.Context, cfg Config, client *http.Client) {
	switch cfg.Auth.Kind {
	case AuthBasic:
		credential := base64.StdEncoding.EncodeToString([]byte(cfg.Auth.Basic.Username + ":" + cfg.Auth.Basic.Password))
		p.authName, p.authValue = "Authorization", "Basic "+credential
		p.secrets = []string{p.authValue, credential, cfg.Auth.Basic.Password}
	case AuthHeader:
		p.authName, p.authValue = http.CanonicalHeaderKey(cfg.Auth.Header.Name), cfg.Auth.Header.Value
		p.secrets = []string{cfg.Auth.Header.Value}
		if _, rest, ok := strings.Cut(cfg.Auth.Header.Value, " "); ok && strings.TrimSpace(rest) != "" {
			// "Bearer abc": the credential alone is a secret too.
			p.secrets = append(p.secrets, strings.TrimSpace(rest))
		}
	case AuthOAuth2:
		secret := cfg.Auth.OAuth2.ClientSecret
		p.secrets = []string{secret}
		if escaped := url.QueryEscape(secret); escaped != secret {
			p.secrets = append(p.secrets, escaped)
		}
		p.tokens = &tokenSource{
			cfg:         cfg.Auth.OAuth2,
			destination: cfg.Name,
			client:      client,
			timeout:     cfg.Timeout,
			maxBody:     cfg.MaxErrorBodyBytes,
			secrets:     p.secrets,
			baseCtx:     ctx,
			now:         time.Now,
		}
	}
}

// setGuard sets the guard of relayed rows, which protects the standard, static, signature
// and credential headers, and adds the signing secrets to the secrets that no error may hold.
// Call it after setAuth.
func (p *Publisher) setGuard(cfg Config) {
	protected := make([]string, 0, len(standardHeaders)+len(p.headers)+1)
	for name := range standardHeaders {
		protected = append(protected, name)
	}
	for _, kv := range p.headers {
		protected = append(protected, kv[0])
	}
	if p.signer != nil {
		protected = append(protected, p.signer.Headers()...)
		// A signing secret is never sent, but an endpoint could still echo it.
		p.secrets = append(p.secrets, cfg.Signing.Secrets...)
		if cfg.Signing.Secret != "" {
			p.secrets = append(p.secrets, cfg.Signing.Secret)
		}
	}
	switch {
	case p.tokens != nil:
		protected = append(protected, "Authorization")
	case p.authName != "":
		protected = append(protected, p.authName)
	}
	p.guard = forwarded.NewGuard(protected...)
}

// Type returns "http", the destination_type label.
func (p *Publisher) Type() string { return Type }

// Close stops a token fetch in flight and closes the idle connections. Publish must not be
// called after Close. Close always returns nil.
func (p *Publisher) Close() error {
	p.cancel()
	if p.wire != nil {
		p.wire.closeIdle()
	}
	p.transport.CloseIdleConnections()
	return nil
}

// Publish POSTs m to the destination and returns nil when it answers 2xx.
//
// The request carries m.Payload as its body, byte for byte, and these headers in this order of
// precedence, the later replacing the earlier of the same name in any letter case:
// Content-Type: application/json, X-Message-Id, X-Topic, X-Attempt and X-Message-Key (only
// when m.Key is not empty); then the static headers; then the credential header; then the row
// headers m.Headers. A row header named like one of the five standard headers does not replace
// it: it is added, and the request carries both values (spec/25-headers.md).
//
// A relayed row (forwarded.IsRelayed: its headers came from a webhook sender or a broker
// producer) is stricter: a row header named like a standard, static or credential header, or
// like a hop-by-hop or framing header, is dropped, so the request carries the destination's
// own value once (docs/headers.md).
//
// With Config.Signing, the signature headers come last and replace any header of the same
// name: webhook-id (m.ID), webhook-timestamp and webhook-signature for standard-webhooks, or the
// hmac header, computed over m.Payload, the exact bytes of the body (see Signer.Sign).
//
// The whole publish, waiting for an OAuth2 token included, is bounded by the destination
// timeout and by ctx. Any answer outside 2xx returns a *StatusError; a 401 also drops the
// cached OAuth2 token, so that the next publish fetches a new one. A row header whose name or
// value cannot travel in HTTP fails the publish before any request.
func (p *Publisher) Publish(ctx context.Context, m outbox.Message) error {
	parent := ctx
	deadline := time.Now().Add(p.timeout)
	if p.wire == nil || p.tokens != nil {
		// The transport and the token fetch follow a context; the wire pool takes the
		// deadline itself, without a timer context per publish.
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	h, token, err := p.requestHeaders(ctx, m)
	if err != nil {
		return err
	}
	// The wire pool or the transport, not a client: the client would only add what this
	// publisher never uses (following redirects, a URL's user info, a client timeout), and it
	// copies every request's headers for the redirects it would follow.
	var resp *http.Response
	if p.wire != nil {
		resp, err = p.wire.roundTrip(ctx, p.wireRequest(h, m.Payload), deadline)
	} else {
		var req *http.Request
		if req, err = p.transportRequest(ctx, h, m.Payload); err != nil {
			return err
		}
		resp, err = p.transport.RoundTrip(req)
	}
	if err != nil {
		p.metrics.HTTPResponse("other")
		return p.requestError(parent, ctx, err)
	}
	p.metrics.HTTPResponse(statusClass(resp.StatusCode))
	if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
		closeBody(resp.Body)
		return nil
	}
	return p.statusError(resp, token)
}

// requestHeaders builds the headers of the request of m, in their order of precedence (see
// Publish), and returns the OAuth2 token that it carries, if any.
func (p *Publisher) requestHeaders(ctx context.Context, m outbox.Message) (h http.Header, token string, err error) {
	rowHeaders, err := sortedRowHeaders(m.Headers)
	if err != nil {
		return nil, "", fmt.Errorf("publishing to destination %s: %w", p.name, err)
	}
	// Sized once for the standard headers and a few more, instead of growing while they go in.
	h = make(http.Header, 8+len(p.headers)+len(rowHeaders))
	h["Content-Type"] = []string{"application/json"}
	h["X-Message-Id"] = []string{m.ID}
	h["X-Topic"] = []string{m.Topic}
	h["X-Attempt"] = []string{strconv.Itoa(m.Attempt)}
	if m.Key != "" {
		h["X-Message-Key"] = []string{m.Key}
	}
	for _, kv := range p.headers {
		h[kv[0]] = []string{kv[1]}
	}
	switch {
	case p.tokens != nil:
		token, err = p.tokens.Token(ctx)
		if err != nil {
			return nil, "", err
		}
		h["Authorization"] = []string{"Bearer " + token}
	case p.authName != "":
		h[p.authName] = []string{p.authValue}
	}
	relayed := forwarded.IsRelayed(m.Headers)
	for _, kv := range rowHeaders {
		if relayed && p.guard.Drops(kv[0]) {
			continue
		}
		if standardHeaders[kv[0]] {
			h[kv[0]] = append(h[kv[0]], kv[1])
		} else {
			h[kv[0]] = []string{kv[1]}
		}
	}
	if p.signer != nil {
		// Last, so that the signature headers replace any header of the same name and sign
		// the very bytes of the body.
		if err := p.signer.Sign(h, m.ID, m.Payload, p.now()); err != nil {
			return nil, "", fmt.Errorf("signing the request to destination %s: %w", p.name, err)
		}
	}
	return h, token, nil
}

// transportRequest returns the request of a delivery through the transport.
func (p *Publisher) transportRequest(ctx context.Context, h http.Header, payload []byte) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url, bytes.NewReader(payload))
	if err != nil {
		return nil, fmt.Errorf("building the request to destination %s: %w", p.name, stripURL(err))
	}
	req.Header = h
	return req, nil
}

// statusError returns the *StatusError of an answer outside 2xx and closes its body; a 401
// drops the cached OAuth2 token, which the request carried.
func (p *Publisher) statusError(resp *http.Response, token string) error {
	if resp.StatusCode == http.StatusUnauthorized && p.tokens != nil {
		p.tokens.Invalidate(token)
	}
	secrets := p.secrets
	if token != "" {
		secrets = append(secrets[:len(secrets):len(secrets)], token)
	}
	body := readErrorBody(resp.Body, p.maxBody, secrets)
	closeBody(resp.Body)
	se := &StatusError{Destination: p.name, StatusCode: resp.StatusCode, Body: body, terminal: p.terminal[resp.StatusCode]}
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
		se.RetryAfterDelay = parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
	}
	return se
}

// wireRequest returns the request of a delivery through the wire pool. It carries no context:
// the pool bounds the exchange by the deadline and by the publish's context itself.
func (p *Publisher) wireRequest(h http.Header, payload []byte) *http.Request {
	var body io.ReadCloser = http.NoBody
	if len(payload) > 0 {
		body = io.NopCloser(bytes.NewReader(payload))
	}
	return &http.Request{
		Method:        http.MethodPost,
		URL:           p.target,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		Body:          body,
		ContentLength: int64(len(payload)),
		Host:          p.target.Host,
	}
}

// requestError describes a request that got no response: the caller's ctx ended, the
// destination timeout ran out, or the connection failed.
func (p *Publisher) requestError(parent, ctx context.Context, err error) error {
	err = stripURL(err)
	// The wire pool returns context.DeadlineExceeded itself when the destination timeout
	// passed; a dial timeout, which only matches it through errors.Is, is not that.
	if parent.Err() == nil && (errors.Is(ctx.Err(), context.DeadlineExceeded) || err == context.DeadlineExceeded) {
		return fmt.Errorf("posting to destination %s: no response within %s: %w", p.name, p.timeout, err)
	}
	return fmt.Errorf("posting to destination %s: %w", p.name, err)
}

// sortedRowHeaders returns the row headers with canonical names, in name order (so that two
// entries differing only in letter case resolve the same way every time), or an error naming
// a header that cannot travel in HTTP. The error never holds a header value.
func sortedRowHeaders(headers map[string]string) ([][2]string, error) {
	if len(headers) == 0 {
		return nil, nil
	}
	out := make([][2]string, 0, len(headers))
	for name, value := range headers {
		if !forwarded.ValidName(name) {
			return nil, fmt.Errorf("%w: row header name %q", ErrInvalidHeader, name)
		}
		if !validHeaderValue(value) {
			return nil, fmt.Errorf("%w: the value of row header %q holds a control character", ErrInvalidHeader, name)
		}
		out = append(out, [2]string{name, value})
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	for i := range out {
		out[i][0] = http.CanonicalHeaderKey(out[i][0])
	}
	return out, nil
}

// ErrInvalidHeader is the cause of a publish refused because a row header cannot travel in
// HTTP. Retrying such a row cannot succeed.
var ErrInvalidHeader = errors.New("webhook: invalid header")

// StatusError is the error of a publish that the destination answered with a status outside
// 2xx, a 3xx included (redirects are never followed).
type StatusError struct {
	// Destination is the destination name.
	Destination string
	// StatusCode is the status of the answer.
	StatusCode int
	// Body is the start of the response body: at most http.maxErrorBodyBytes bytes of it, made
	// valid UTF-8 without NUL characters, with the destination's own credentials replaced by
	// [REDACTED] and surrounding space trimmed. Other secrets that the endpoint echoes stay:
	// the caller redacts the text before it logs or stores it.
	Body string
	// RetryAfterDelay is the wait that the Retry-After header of a 429 or 503 answer asked
	// for (delay-seconds, or an HTTP date less the clock); zero when there was none or it was
	// not valid. The outbox honours it when the destination's retry policy says so.
	RetryAfterDelay time.Duration

	terminal bool
}

// RetryAfter returns RetryAfterDelay (outbox.RetryAfterError).
func (e *StatusError) RetryAfter() time.Duration { return e.RetryAfterDelay }

// Terminal reports whether the status is one of the destination's terminal statuses
// (outbox.TerminalError): the row goes to dead at once.
func (e *StatusError) Terminal() bool { return e.terminal }

// maxRetryAfter bounds a parsed Retry-After; the retry policy caps it further.
const maxRetryAfter = 1 << 31 * time.Millisecond

// parseRetryAfter reads a Retry-After value: delay-seconds or an HTTP date. It returns zero for
// an empty or invalid value and for a date in the past.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.ParseUint(v, 10, 64); err == nil || errors.Is(err, strconv.ErrRange) {
		if err != nil || n > uint64(maxRetryAfter/time.Second) {
			return maxRetryAfter
		}
		return time.Duration(n) * time.Second
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0
	}
	return min(max(t.Sub(now), 0), maxRetryAfter)
}

// Error returns, for example, "HTTP 500 Internal Server Error from destination orders-api:
// <body>".
func (e *StatusError) Error() string {
	var b strings.Builder
	b.WriteString(statusText(e.StatusCode))
	b.WriteString(" from destination ")
	b.WriteString(e.Destination)
	if e.StatusCode >= 300 && e.StatusCode <= 399 {
		b.WriteString(" (redirects are not followed)")
	}
	if e.Body != "" {
		b.WriteString(": ")
		b.WriteString(e.Body)
	}
	return b.String()
}

// statusText returns "HTTP 500 Internal Server Error", or "HTTP 599" for a code without a
// standard reason phrase. The reason phrase of the response is not used.
func statusText(code int) string {
	if text := http.StatusText(code); text != "" {
		return "HTTP " + strconv.Itoa(code) + " " + text
	}
	return "HTTP " + strconv.Itoa(code)
}

// statusClass returns the status_class label: 1xx to 5xx, or other.
func statusClass(code int) string {
	if code >= 100 && code <= 599 {
		return strconv.Itoa(code/100) + "xx"
	}
	return "other"
}

// stripURL returns the cause inside a *url.Error, whose text repeats the request URL (which
// may carry a token in its query).
func stripURL(err error) error {
	var uerr *url.Error
	if errors.As(err, &uerr) {
		return uerr.Err
	}
	return err
}

// closeBody reads and discards at most maxDrainBytes of body, so that the connection can be
// reused, and closes it.
func closeBody(body io.ReadCloser) {
	_, _ = io.Copy(io.Discard, io.LimitReader(body, maxDrainBytes))
	_ = body.Close()
}

// readErrorBody reads the first limit bytes of body and returns them as text: every
// occurrence of a secret replaced by [REDACTED], invalid UTF-8 and NUL replaced by U+FFFD,
// surrounding space trimmed. It reads limit plus the longest secret, so that a secret that
// starts inside the kept bytes is recognised whole and no prefix of it survives the cut.
func readErrorBody(body io.Reader, limit int, secrets []string) string {
	if limit <= 0 {
		return ""
	}
	longest := 0
	for _, s := range secrets {
		longest = max(longest, len(s))
	}
	buf, _ := io.ReadAll(io.LimitReader(body, int64(limit+longest)))

	// Mark every byte that belongs to an occurrence of a secret, overlapping ones included.
	var covered []bool
	for _, s := range secrets {
		if s == "" {
			continue
		}
		for from := 0; from < len(buf); {
			i := bytes.Index(buf[from:], []byte(s))
			if i < 0 {
				break
			}
			if covered == nil {
				covered = make([]bool, len(buf))
			}
			for j := from + i; j < from+i+len(s); j++ {
				covered[j] = true
			}
			from += i + 1
		}
	}

	kept := buf[:min(limit, len(buf))]
	var out strings.Builder
	for i := 0; i < len(kept); {
		if covered != nil && covered[i] {
			out.WriteString(redactedMark)
			for i < len(kept) && covered[i] {
				i++
			}
			continue
		}
		end := i + 1
		for end < len(kept) && (covered == nil || !covered[end]) {
			end++
		}
		writeText(&out, kept[i:end])
		i = end
	}
	text := out.String()
	if len(text) > limit {
		text = text[:limit]
		text = strings.ToValidUTF8(text, "")
	}
	return strings.TrimSpace(text)
}

// writeText writes b with each invalid UTF-8 sequence and each NUL replaced by U+FFFD, so that
// the text fits a PostgreSQL or SQL Server text column.
func writeText(out *strings.Builder, b []byte) {
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		if r == 0 || (r == utf8.RuneError && size == 1) {
			out.WriteRune(utf8.RuneError)
		} else {
			out.Write(b[:size])
		}
		b = b[size:]
	}
}
