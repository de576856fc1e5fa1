package config

import (
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/alternayte/queuebox/shared/forwarded"
	"github.com/alternayte/queuebox/shared/kind"
)

// Validate checks every rule of spec/23-configuration.md and returns a *ValidationError that
// lists every problem, or nil. Load calls it; a Config built in code can call it too, with the
// components of the composition root (service.Components). It does not compile transform
// expressions: Load does that when LoadOptions.CompileTransform is set.
func (c *Config) Validate(comps *Components) error {
	if comps == nil {
		return errNoComponents
	}
	if err := comps.checkConnectors(); err != nil {
		return err
	}
	if problems := c.validate(comps, nil); len(problems) > 0 {
		return &ValidationError{Problems: problems}
	}
	return nil
}

// validator collects problems.
type validator struct {
	problems []Problem
	compile  TransformCompiler
	// comps are the rules that the components own.
	comps *Components
	// reported lists the keys that already have a problem from the decoder: the validator
	// says nothing more about them or the keys below them.
	reported []string
}

func (c *Config) validate(comps *Components, compile TransformCompiler, reported ...Problem) []Problem {
	v := &validator{compile: compile, comps: comps}
	for _, p := range reported {
		if p.Key != "" {
			v.reported = append(v.reported, p.Key)
		}
	}
	v.server(c.Server)
	v.database(&c.Database)
	v.outbox(c)
	v.inbox(c.Inbox)
	v.nonNegative(keyPath{"http", "maxErrorBodyBytes"}, int64(c.HTTP.MaxErrorBodyBytes))
	v.admin(c.Admin)
	for _, name := range sortedKeys(c.Destinations) {
		v.destination(keyPath{"destinations", name}, c.Destinations[name])
	}
	for i, r := range c.Routes {
		v.route(keyPath{"routes"}.index(i), r, c.Destinations)
	}
	httpPaths := map[string]string{}
	for _, name := range sortedKeys(c.Sources) {
		v.source(keyPath{"sources", name}, c.Sources[name], httpPaths)
	}
	v.retention(c.Retention)
	v.oneOf(keyPath{"logging", "level"}, string(c.Logging.Level), string(LogDebug), string(LogInfo), string(LogWarn), string(LogError))
	v.tracing(c.Tracing)
	v.checkBounds(c)
	return v.problems
}

// tracing checks the tracing section. The endpoints are checked only for their form, and an
// error never quotes them: a URL may hold a credential.
func (v *validator) tracing(t Tracing) {
	for _, e := range []struct {
		key string
		url string
	}{{"endpoint", t.Endpoint}, {"tracesEndpoint", t.TracesEndpoint}} {
		if e.url == "" {
			continue
		}
		if u, err := url.Parse(e.url); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			v.add(keyPath{"tracing", e.key}, "must be an http:// or https:// URL with a host")
		}
	}
	v.oneOf(keyPath{"tracing", "protocol"}, t.Protocol, "http/protobuf", "grpc")
	if t.SampleRatio < 0 || t.SampleRatio > 1 {
		v.add(keyPath{"tracing", "sampleRatio"}, "must be from 0 to 1, not %g", t.SampleRatio)
	}
	v.positive(keyPath{"tracing", "exportTimeoutMs"}, int64(t.ExportTimeoutMs))
	if t.ServiceName == "" {
		v.add(keyPath{"tracing", "serviceName"}, "must not be empty")
	}
}

func (v *validator) add(p keyPath, format string, args ...any) {
	key := p.String()
	for _, r := range v.reported {
		if key == r || strings.HasPrefix(key, r+".") || strings.HasPrefix(key, r+"[") {
			return
		}
	}
	v.problems = append(v.problems, newProblem(p, fmt.Sprintf(format, args...)))
}

func (v *validator) positive(p keyPath, n int64) {
	if n <= 0 {
		v.add(p, "must be above 0")
	}
}

func (v *validator) nonNegative(p keyPath, n int64) {
	if n < 0 {
		v.add(p, "must not be negative")
	}
}

func (v *validator) required(p keyPath, s string) bool {
	if strings.TrimSpace(s) == "" {
		v.add(p, "is required")
		return false
	}
	return true
}

func (v *validator) requiredSecret(p keyPath, s Secret) {
	if s.IsEmpty() {
		v.add(p, "is required")
	}
}

func (v *validator) port(p keyPath, n int) {
	if n < 1 || n > 65535 {
		v.add(p, "must be from 1 to 65535, not %d", n)
	}
}

func (v *validator) identifier(p keyPath, s string) {
	if !sqlIdentifierPattern().MatchString(s) {
		v.add(p, "must be a SQL identifier: a letter or _ first, then letters, digits and _, not %q", s)
	}
}

func (v *validator) oneOf(p keyPath, got string, allowed ...string) bool {
	if slices.Contains(allowed, got) {
		return true
	}
	v.add(p, "must be %s, not %q", joinOr(allowed), got)
	return false
}

func joinOr(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}

func (v *validator) server(s Server) {
	v.port(keyPath{"server", "httpPort"}, s.HTTPPort)
	v.positive(keyPath{"server", "readHeaderTimeoutMs"}, int64(s.ReadHeaderTimeoutMs))
	v.positive(keyPath{"server", "readBodyTimeoutMs"}, int64(s.ReadBodyTimeoutMs))
	if s.ManagementPort == 0 {
		return
	}
	p := keyPath{"server", "managementPort"}
	v.port(p, s.ManagementPort)
	if s.ManagementPort == s.HTTPPort {
		v.add(p, "must differ from server.httpPort (%d)", s.HTTPPort)
	}
}

func (v *validator) database(d *Database) {
	p := keyPath{"database"}
	typeOK := v.oneOf(p.child("type"), string(d.Type), v.comps.dialectNames()...)
	if raw := d.URL.Reveal(); v.required(p.child("url"), raw) {
		if u, err := v.comps.ParseDatabaseURL(raw); err != nil {
			hint := ""
			if strings.HasPrefix(raw, "file:") {
				hint = " (database.url takes no file: reference; supply the URL through QUEUEBOX_DATABASE_URL)"
			}
			v.add(p.child("url"), "%v%s", err, hint)
		} else if u.Dialect != string(d.Type) && typeOK {
			v.add(p.child("url"), "names a %s database, but database.type is %s", u.Dialect, d.Type)
		}
	}
	v.required(p.child("username"), d.Username)
	v.requiredSecret(p.child("password"), d.Password)
	v.positive(p.child("poolSize"), int64(d.PoolSize))
	v.nonNegative(p.child("connectionTimeoutMs"), int64(d.ConnectionTimeoutMs))
	v.nonNegative(p.child("startupTimeoutMs"), int64(d.StartupTimeoutMs))
	v.identifier(p.child("outboxTableName"), d.OutboxTableName)
	v.identifier(p.child("inboxTableName"), d.InboxTableName)
	if strings.EqualFold(d.OutboxTableName, d.InboxTableName) {
		v.add(p.child("inboxTableName"), "must differ from database.outboxTableName (%s)", d.OutboxTableName)
	}
	v.columns(p.child("columnMapping").child("outbox"), outboxColumnKeys, d.ColumnMapping.Outbox.All())
	v.columns(p.child("columnMapping").child("inbox"), inboxColumnKeys, d.ColumnMapping.Inbox.All())
	if d.Migrate {
		for _, key := range d.renamedSettings() {
			v.add(parseKeyPath(key), "sets a custom name, so database.migrate (QUEUEBOX_DATABASE_MIGRATE) must be false: "+
				"the bundled migrations create the default names only; apply your own schema first")
		}
	}
}

// columns checks the column names of one table: SQL identifiers, no name twice.
func (v *validator) columns(p keyPath, keys, names []string) {
	seen := map[string]string{}
	for i, name := range names {
		cp := p.child(keys[i])
		v.identifier(cp, name)
		lower := strings.ToLower(name)
		if prev, dup := seen[lower]; dup {
			v.add(cp, "names the column %s, which %s names too", name, p.child(prev))
			continue
		}
		seen[lower] = keys[i]
	}
}

// minLockPoolSize is the smallest database.poolSize of outbox.claimMode lock: a connection for
// a held claim and two for the other statements.
const minLockPoolSize = 3

func (v *validator) outbox(c *Config) {
	o := c.Outbox
	p := keyPath{"outbox"}
	v.positive(p.child("pollIntervalMs"), int64(o.PollIntervalMs))
	v.positive(p.child("batchSize"), int64(o.BatchSize))
	v.positive(p.child("concurrency"), int64(o.Concurrency))
	v.nonNegative(p.child("retryBaseDelayMs"), int64(o.RetryBaseDelayMs))
	v.positive(p.child("maxAttempts"), int64(o.MaxAttempts))
	v.positive(p.child("claimTimeoutMs"), int64(o.ClaimTimeoutMs))
	v.nonNegative(p.child("pendingGaugeIntervalMs"), int64(o.PendingGaugeIntervalMs))
	v.nonNegative(p.child("shutdownTimeoutMs"), int64(o.ShutdownTimeoutMs))
	v.retry(p.child("retry"), &c.Outbox.Retry)
	if v.oneOf(p.child("claimMode"), string(o.ClaimMode), string(ClaimModeLease), string(ClaimModeLock)) && o.ClaimMode == ClaimModeLock {
		if d, ok := v.comps.dialect(c.Database.Type); ok && !d.ClaimLock {
			v.add(p.child("claimMode"), "is lock, which database.type %s does not offer; use lease", d.Name)
		}
		if c.Database.PoolSize > 0 && c.Database.PoolSize < minLockPoolSize {
			v.add(p.child("claimMode"), "is lock, which holds a connection per claim and needs database.poolSize %d or more, not %d",
				minLockPoolSize, c.Database.PoolSize)
		}
	}
	v.capture(c)
}

func (v *validator) capture(c *Config) {
	cp := c.Outbox.Capture
	p := keyPath{"outbox", "capture"}
	modes := v.comps.captureModes()
	if v.oneOf(p.child("mode"), string(cp.Mode), append([]string{string(CapturePolling)}, modes...)...) {
		d, ok := v.comps.captureDialect(cp.Mode)
		switch {
		case cp.Enabled && cp.Mode == CapturePolling:
			v.add(p.child("enabled"), "is true, which needs outbox.capture.mode %s, not polling", joinOr(modes))
		case ok && c.Database.Type != d.Name:
			v.add(p.child("mode"), "%s needs database.type %s, not %s", cp.Mode, d.Name, c.Database.Type)
		}
	}
	if cp.Enabled && strings.TrimSpace(cp.StateDirectory) == "" {
		v.add(p.child("stateDirectory"), "is required when outbox.capture.enabled is true")
	}
	for _, k := range []struct{ key, value string }{{"identity", cp.Identity}, {"slot", cp.Slot}, {"publication", cp.Publication}} {
		if !captureNamePattern().MatchString(k.value) {
			v.add(p.child(k.key), "must be a lower case letter, then lower case letters, digits and _, at most 63 characters, not %q", k.value)
		}
	}
	if cp.Schema != "" {
		v.identifier(p.child("schema"), cp.Schema)
	}
	v.positive(p.child("reconciliationIntervalMs"), int64(cp.ReconciliationIntervalMs))
	if cp.Connection.Port != 0 {
		v.port(p.child("connection").child("port"), cp.Connection.Port)
	}
	if cp.Enabled && cp.Connection.Hostname == "" {
		if u, ok := v.comps.databaseURL(&c.Database); ok && len(u.Hosts) > 1 {
			v.add(p.child("connection").child("hostname"), "is required when outbox.capture.enabled is true and database.url names more than one host")
		}
	}
}

func (v *validator) inbox(in Inbox) {
	p := keyPath{"inbox"}
	if in.BasePath != "" && !strings.HasPrefix(in.BasePath, "/") {
		v.add(p.child("basePath"), "must start with /, not %q", in.BasePath)
	}
	v.positive(p.child("maxBodyBytes"), in.MaxBodyBytes)
	r := p.child("relay")
	v.positive(r.child("pollIntervalMs"), int64(in.Relay.PollIntervalMs))
	v.positive(r.child("batchSize"), int64(in.Relay.BatchSize))
	v.positive(r.child("claimTimeoutMs"), int64(in.Relay.ClaimTimeoutMs))
	v.nonNegative(r.child("pendingGaugeIntervalMs"), int64(in.Relay.PendingGaugeIntervalMs))
	v.positive(r.child("maxAttempts"), int64(in.Relay.MaxAttempts))
}

func (v *validator) admin(a Admin) {
	p := keyPath{"admin"}
	if a.Enabled && a.Auth == nil && !a.Insecure {
		v.add(p.child("auth"), "is required when admin.enabled is true: set a bearer, api-key or hmac block, "+
			"or admin.insecure: true (QUEUEBOX_ADMIN_INSECURE) for a local test only")
	}
	v.positive(p.child("maxTransformTimeoutMs"), int64(a.MaxTransformTimeoutMs))
	v.positive(p.child("maxPayloadBytes"), a.MaxPayloadBytes)
	if a.Auth != nil && (a.Auth.Stripe != nil || a.Auth.StandardWebhooks != nil) {
		v.add(p.child("auth").child("type"), "is %s, which only a source takes: admin.auth takes bearer, api-key or hmac", a.Auth.Kind)
		return
	}
	v.inboundAuth(p.child("auth"), a.Auth)
}

func (v *validator) inboundAuth(p keyPath, a *InboundAuth) {
	switch {
	case a == nil:
	case a.Bearer != nil:
		v.requiredSecret(p.child("token"), a.Bearer.Token)
	case a.APIKey != nil:
		v.requiredSecret(p.child("key"), a.APIKey.Key)
		v.required(p.child("headerName"), a.APIKey.HeaderName)
	case a.HMAC != nil:
		h := a.HMAC
		v.requiredSecret(p.child("secret"), h.Secret)
		v.required(p.child("headerName"), h.HeaderName)
		if h.Algorithm != HmacSHA256 && h.Algorithm != HmacSHA512 {
			v.add(p.child("algorithm"), "must be HmacSHA256 or HmacSHA512, in this letter case, not %q", h.Algorithm)
		}
		v.positive(p.child("timestampTolerance"), int64(h.TimestampTolerance))
		switch h.SignaturePayloadFormat {
		case PayloadBody:
		case PayloadTimestampDotBody:
			if h.TimestampHeader == "" {
				v.add(p.child("signaturePayloadFormat"), "is TIMESTAMP_DOT_BODY, which needs %s", p.child("timestampHeader"))
			}
		default:
			v.add(p.child("signaturePayloadFormat"), "must be BODY, TIMESTAMP_DOT_BODY, body or timestamp-dot-body, not %q", h.SignaturePayloadFormat)
		}
	case a.Stripe != nil:
		v.requiredSecret(p.child("secret"), a.Stripe.Secret)
		v.positive(p.child("timestampTolerance"), int64(a.Stripe.TimestampTolerance))
	case a.StandardWebhooks != nil:
		sw := a.StandardWebhooks
		v.requiredSecret(p.child("secret"), sw.Secret)
		if !sw.Secret.IsEmpty() {
			if _, err := sw.SigningKey(); err != nil {
				v.add(p.child("secret"), "%v", err)
			}
		}
		v.positive(p.child("timestampTolerance"), int64(sw.TimestampTolerance))
	}
}

func (v *validator) transform(p keyPath, t *Transform) {
	if t == nil {
		return
	}
	if v.required(p.child("expression"), t.Expression) && v.compile != nil {
		if err := v.compile(t.Expression); err != nil {
			v.add(p.child("expression"), "does not compile: %v", err)
		}
	}
	v.positive(p.child("timeoutMs"), int64(t.TimeoutMs))
	v.positive(p.child("maxDepth"), int64(t.MaxDepth))
	if t.OnError != OnErrorFail && t.OnError != OnErrorSkip && t.OnError != OnErrorDead {
		v.add(p.child("onError"), "must be Fail, Skip or Dead, in this letter case, not %q", t.OnError)
	}
}

func (v *validator) destination(p keyPath, d *Destination) {
	names := make([]string, 0, len(d.Headers))
	for name := range d.Headers {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if strings.TrimSpace(name) == "" {
			v.add(p.child("headers"), "has a header without a name")
			continue
		}
		// Every publish would fail on it (docs/headers.md); the value is never shown, since it
		// may come from a secret.
		rule := v.comps.HeaderRule(d.Kind)
		if f := rule.Check(name, d.Headers[name]); f != forwarded.Carried {
			v.add(p.child("headers"), "has the header %q, which a destination of type %s cannot send: %s", name, d.Kind, rule.Reason(f))
		}
	}
	v.transform(p.child("transform"), d.Transform)
	v.deliveryControls(p, d)
	v.signing(p.child("signing"), d.Kind, d.Signing)
	switch {
	case d.HTTP != nil:
		h := d.HTTP
		if v.required(p.child("baseUrl"), h.BaseURL) {
			if err := checkHTTPURL(h.BaseURL); err != nil {
				v.add(p.child("baseUrl"), "%v", err)
			}
		}
		if hasDotSegment(h.Path) {
			v.add(p.child("path"), "must not hold a . or a .. segment, not %q", MaskQuery(h.Path))
		}
		v.positive(p.child("timeoutMs"), int64(h.TimeoutMs))
		v.destinationAuth(p.child("auth"), h.Auth)
	case d.Block != nil:
		d.Block.Check(Check{v: v, p: p})
	}
}

// address checks an address template and its column key.
func (v *validator) address(p keyPath, tmpl string, fromPath keyPath, from AddressColumn) {
	if v.required(p, tmpl) {
		for _, ph := range unknownAddressPlaceholders(tmpl) {
			v.add(p, "uses the placeholder %s, which an address template does not know: use {{ topic }}, {{ key }}, "+
				"{{ aggregateType }}, {{ payload.<field> }} or {{ data.<field> }}", ph)
		}
	}
	if from != "" {
		v.oneOf(fromPath, string(from), string(ColumnAggregateType), string(ColumnTopic), string(ColumnKey))
	}
}

func (v *validator) destinationAuth(p keyPath, a *DestinationAuth) {
	switch {
	case a == nil:
	case a.OAuth2 != nil:
		v.required(p.child("clientId"), a.OAuth2.ClientID)
		v.requiredSecret(p.child("clientSecret"), a.OAuth2.ClientSecret)
		if v.required(p.child("tokenUrl"), a.OAuth2.TokenURL) {
			if err := checkHTTPURL(a.OAuth2.TokenURL); err != nil {
				v.add(p.child("tokenUrl"), "%v", err)
			}
		}
	case a.Basic != nil:
		v.required(p.child("username"), a.Basic.Username)
		v.requiredSecret(p.child("password"), a.Basic.Password)
	case a.Header != nil:
		v.required(p.child("headerName"), a.Header.HeaderName)
		v.requiredSecret(p.child("headerValue"), a.Header.HeaderValue)
	}
}

func (v *validator) route(p keyPath, r Route, destinations map[string]*Destination) {
	if v.required(p.child("topicPattern"), r.TopicPattern) && strings.Contains(r.TopicPattern, "***") {
		v.add(p.child("topicPattern"), "must not contain ***, not %q", r.TopicPattern)
	}
	if v.required(p.child("destination"), r.Destination) {
		if _, ok := destinations[r.Destination]; !ok {
			v.add(p.child("destination"), "names the destination %q, which destinations does not define", r.Destination)
		}
	}
	v.transform(p.child("transform"), r.Transform)
}

func (v *validator) source(p keyPath, s *Source, httpPaths map[string]string) {
	if s.Kind == "" {
		return // the decoder reported it
	}
	v.oneOf(p.child("consumption"), string(s.Consumption), string(ConsumptionPush), string(ConsumptionPull))
	if s.Consumption == ConsumptionPush {
		v.sourceTopic(p, s)
	}
	if s.Kind == kind.HTTP {
		v.required(p.child("idempotencyKeyPath"), s.IdempotencyKeyPath)
	}
	for _, jp := range []struct{ key, path string }{
		{"idempotencyKeyPath", s.IdempotencyKeyPath}, {"aggregateIdPath", s.AggregateIDPath}, {"eventTypePath", s.EventTypePath},
	} {
		if strings.TrimSpace(jp.path) == "" {
			continue
		}
		if err := checkDefiniteJSONPath(jp.path); err != nil {
			v.add(p.child(jp.key), "%v", err)
		}
	}
	v.transform(p.child("transform"), s.Transform)
	v.filter(p.child("filter"), s.Filter)
	v.forwardHeaders(p.child("forwardHeaders"), s.ForwardHeaders)
	if s.RateLimit != nil {
		v.positive(p.child("rateLimit").child("requestsPerMinute"), int64(s.RateLimit.RequestsPerMinute))
	}
	switch {
	case s.HTTP != nil:
		v.httpSource(p, s, httpPaths)
	case s.Block != nil:
		s.Block.Check(Check{v: v, p: p})
	}
	if b := s.Broker(); b != nil {
		if b.MaxBodyBytes != nil {
			v.positive(p.child("maxBodyBytes"), int64(*b.MaxBodyBytes))
		}
		ah := p.child("attributeHeaders")
		v.required(ah.child("idempotencyKey"), b.AttributeHeaders.IdempotencyKey)
		v.required(ah.child("aggregateId"), b.AttributeHeaders.AggregateID)
		v.required(ah.child("eventType"), b.AttributeHeaders.EventType)
	}
}

func (v *validator) httpSource(p keyPath, s *Source, httpPaths map[string]string) {
	path := s.HTTP.Path
	if v.required(p.child("path"), path) {
		if !strings.HasPrefix(path, "/") {
			v.add(p.child("path"), "must start with /, not %q", path)
		}
		if other, dup := httpPaths[path]; dup {
			v.add(p.child("path"), "is %q, which source %s answers already", path, other)
		} else {
			httpPaths[path] = s.Name
		}
	}
	v.inboundAuth(p.child("auth"), s.HTTP.Auth)
}

// The bounds of sources.<name>.forwardHeaders.
const (
	maxForwardHeaders       = 100
	maxForwardHeaderNameLen = 256
)

// forwardHeaders checks sources.<name>.forwardHeaders: nil, or 1 to maxForwardHeaders header
// names, each an HTTP token of at most maxForwardHeaderNameLen characters that is not a
// hop-by-hop or framing header.
func (v *validator) forwardHeaders(p keyPath, names []string) {
	if names == nil {
		return
	}
	if len(names) == 0 {
		v.add(p, "must list at least one header name; leave the key out to forward every received header")
		return
	}
	if len(names) > maxForwardHeaders {
		v.add(p, "lists %d header names, more than the %d allowed", len(names), maxForwardHeaders)
		return
	}
	for i, name := range names {
		switch {
		case len(name) > maxForwardHeaderNameLen:
			v.add(p.index(i), "is a header name longer than %d characters", maxForwardHeaderNameLen)
		case !forwarded.ValidName(name):
			v.add(p.index(i), "must be a header name (letters, digits and !#$%%&'*+-.^_`|~), not %q", name)
		case forwarded.IsHopByHop(name):
			v.add(p.index(i), "names %s, a hop-by-hop or framing header, which QueueBox never forwards", name)
		}
	}
}

func (v *validator) filter(p keyPath, f Filter) {
	for _, list := range []struct {
		key   string
		rules []FilterRule
	}{{"require", f.Require}, {"exclude", f.Exclude}} {
		for i, r := range list.rules {
			v.filterRule(p.child(list.key).index(i), r)
		}
	}
}

func (v *validator) filterRule(p keyPath, r FilterRule) {
	v.required(p.child("header"), r.Header)
	var set []string
	if r.Equals != nil {
		set = append(set, "equals")
	}
	if r.In != nil {
		set = append(set, "in")
	}
	if r.Matches != nil {
		set = append(set, "matches")
	}
	if r.Exists != nil {
		set = append(set, "exists")
	}
	switch len(set) {
	case 0:
		v.add(p, "sets no matcher: set exactly one of equals, in, matches and exists")
	case 1:
	default:
		v.add(p, "sets %s: set exactly one of equals, in, matches and exists", joinAnd(set))
	}
	if r.In != nil && len(r.In) == 0 {
		v.add(p.child("in"), "must not be empty")
	}
	if r.Exists != nil && !*r.Exists {
		v.add(p.child("exists"), "is false, which does not load: write exists: true under filter.exclude to refuse a header")
	}
}

func (v *validator) retention(r Retention) {
	p := keyPath{"retention"}
	v.tableRetention(p.child("outbox"), r.Outbox, true)
	v.tableRetention(p.child("inbox"), r.Inbox, false)
}

func (v *validator) tableRetention(p keyPath, t TableRetention, countAllowed bool) {
	allowed := []string{string(RetentionAge), string(RetentionCount), string(RetentionDisabled)}
	if !countAllowed {
		allowed = []string{string(RetentionAge), string(RetentionDisabled)}
	}
	if slices.Contains(allowed, string(t.Policy)) {
		switch t.Policy {
		case RetentionAge:
			if t.MaxAge.IsZero() {
				v.add(p.child("maxAge"), "is required by policy AGE")
			}
		case RetentionCount:
			if t.MaxCount <= 0 {
				v.add(p.child("maxCount"), "is required by policy COUNT and must be above 0")
			}
		}
	} else {
		v.add(p.child("policy"), "must be %s, in upper case, not %q", joinOr(allowed), t.Policy)
	}
	if !t.MaxAge.IsZero() && t.MaxAge.Duration() <= 0 {
		v.add(p.child("maxAge"), "must be above 0")
	}
	if t.MaxCount < 0 {
		v.add(p.child("maxCount"), "must not be negative")
	}
	if t.CleanupInterval.Duration() <= 0 {
		v.add(p.child("cleanupInterval"), "must be above 0")
	}
	v.positive(p.child("batchSize"), int64(t.BatchSize))
}
