package config

import (
	"reflect"
	"strings"
	"sync"
)

// A bound is the largest value of one numeric key. spec/23-configuration.md gives the lower
// bounds (above 0, at least 2000, from 1 to 65535), which validate.go checks key by key; it
// gives no upper bound, so every numeric key takes the largest value that the column, the driver
// and memory allow, from this one table. docs/configuration-bounds.md documents the table, and
// a test keeps the two and the configuration types in step: every numeric key of Config has a
// row here.
type bound struct {
	// key is the key path, with * for a map key (a destination or a source name) and [*] for
	// a list index.
	key string
	// max is the largest value.
	max int64
	// why says what the bound protects.
	why string
}

// The bounds that several keys share.
const (
	// maxPort is the largest TCP port.
	maxPort = 65535
	// maxMillis is the largest value of a key in milliseconds: 2^31-1 ms, about 24.8 days. It
	// fits a 32-bit signed integer, which SQL Server's DATEADD(millisecond, ...) of the claim
	// leases takes, and its conversion to time.Duration cannot overflow.
	maxMillis = 1<<31 - 1
	// maxInt4 is the largest PostgreSQL int4 (and SQL Server int): the max_attempts and
	// attempt columns.
	maxInt4 = 1<<31 - 1
	// maxBatch is the largest number of rows or messages of one claim or fetch: each is held
	// in memory, and the claim allocates its slice up front.
	maxBatch = 10000
	// maxJSONB is the largest jsonb value of PostgreSQL, 2^28-1 bytes: an inbox body becomes
	// one, and QueueBox holds it in memory.
	maxJSONB = 1<<28 - 1
	// maxDepth is the deepest transform evaluation: each level is a Go call.
	maxDepth = 10000
	// maxReadMillis is the longest read deadline of a request's headers or body: one hour.
	maxReadMillis = 3600000
)

const (
	whyPort     = "a TCP port"
	whyMillis   = "fits a 32-bit signed integer of milliseconds (about 24.8 days), so no driver or time.Duration conversion overflows"
	whyAttempts = "the max_attempts column is a 32-bit integer (int4)"
	whyBatch    = "every row of a batch is held in memory"
	// whyRelayBatch: the relay claims its next batch while it forwards one (shared/relay).
	whyRelayBatch = "every row of a batch is held in memory, and a relay holds up to two batches: the one it forwards and the next one, which it claims meanwhile"
	whyDepth      = "each level of a transform evaluation is a nested call"
	whyRead       = "a connection that sends slowly holds a goroutine, a connection and its buffers for this long; an hour is more than any request body of inbox.maxBodyBytes needs"
)

// bounds lists the largest value of every numeric key, in the order of
// spec/23-configuration.md.
var bounds = []bound{
	{"server.httpPort", maxPort, whyPort},
	{"server.managementPort", maxPort, whyPort},
	{"server.readHeaderTimeoutMs", maxReadMillis, whyRead},
	{"server.readBodyTimeoutMs", maxReadMillis, whyRead},
	{"database.poolSize", 1000, "each connection is a database server process or session"},
	{"database.connectionTimeoutMs", maxMillis, whyMillis},
	{"database.startupTimeoutMs", maxMillis, whyMillis},
	{"outbox.pollIntervalMs", maxMillis, whyMillis},
	{"outbox.batchSize", maxBatch, whyBatch},
	{"outbox.concurrency", 1000, "each publish in flight holds a goroutine, a row and a connection"},
	{"outbox.retryBaseDelayMs", maxMillis, whyMillis},
	{"outbox.retry.maxDelayMs", maxMillis, whyMillis},
	{"outbox.retry.scheduleMs[*]", maxMillis, whyMillis},
	{"outbox.maxAttempts", maxInt4, whyAttempts},
	{"outbox.claimTimeoutMs", maxMillis, whyMillis},
	{"outbox.pendingGaugeIntervalMs", maxMillis, whyMillis},
	{"outbox.shutdownTimeoutMs", maxMillis, whyMillis},
	{"outbox.capture.reconciliationIntervalMs", maxMillis, whyMillis},
	{"outbox.capture.connection.port", maxPort, whyPort},
	{"inbox.maxBodyBytes", maxJSONB, "the body is stored as one jsonb value, at most 2^28-1 bytes, and held in memory"},
	{"inbox.relay.pollIntervalMs", maxMillis, whyMillis},
	{"inbox.relay.batchSize", maxBatch, whyRelayBatch},
	{"inbox.relay.claimTimeoutMs", maxMillis, whyMillis},
	{"inbox.relay.pendingGaugeIntervalMs", maxMillis, whyMillis},
	{"inbox.relay.maxAttempts", maxInt4, whyAttempts},
	{"http.maxErrorBodyBytes", 1 << 20, "the kept part of a failed response is held in memory and written into last_error"},
	{"admin.maxTransformTimeoutMs", maxMillis, whyMillis},
	{"admin.maxPayloadBytes", 1 << 26, "the admin request body is held in memory and copied by the transform"},
	{"admin.auth.timestampTolerance", maxMillis, whyMillis},
	{"destinations.*.timeoutMs", maxMillis, whyMillis},
	{"destinations.*.transform.timeoutMs", maxMillis, whyMillis},
	{"destinations.*.transform.maxDepth", maxDepth, whyDepth},
	{"destinations.*.retry.maxDelayMs", maxMillis, whyMillis},
	{"destinations.*.retry.scheduleMs[*]", maxMillis, whyMillis},
	{"destinations.*.terminalStatuses[*]", maxTerminalStatus, "an HTTP status is at most 599; the lower bound is 400 (a 4xx or 5xx answer), so a 2xx or 3xx status is refused"},
	{"destinations.*.circuitBreaker.failureThreshold", 1000000, "a threshold of more than a million failures in one window is a typo (the failures column of queuebox_destination_state is an int4)"},
	{"destinations.*.circuitBreaker.windowMs", maxMillis, whyMillis},
	{"destinations.*.circuitBreaker.coolDownMs", maxMillis, whyMillis},
	{"destinations.*.rateLimit.requestsPerSecond", maxRequestsPerSecond, "each request takes its slot with one statement on the destination's row of queuebox_destination_state"},
	{"destinations.*.rateLimit.burst", maxRequestsPerSecond, "a burst of more requests than one second of the largest rate is a typo"},
	{"routes[*].transform.timeoutMs", maxMillis, whyMillis},
	{"routes[*].transform.maxDepth", maxDepth, whyDepth},
	{"sources.*.transform.timeoutMs", maxMillis, whyMillis},
	{"sources.*.transform.maxDepth", maxDepth, whyDepth},
	{"sources.*.rateLimit.requestsPerMinute", 60000000, "one million requests a second; the limiter's burst is this many requests"},
	{"sources.*.auth.timestampTolerance", maxMillis, whyMillis},
	{"sources.*.maxBodyBytes", maxJSONB, "a stored body is one jsonb value, at most 2^28-1 bytes: a larger limit limits nothing"},
	{"retention.outbox.maxCount", maxInt4, "the largest 32-bit signed integer: a larger count of kept rows is a typo"},
	{"retention.outbox.batchSize", 100000, "one delete statement holds the locks of this many rows"},
	{"retention.inbox.maxCount", maxInt4, "the largest 32-bit signed integer: a larger count of kept rows is a typo"},
	{"retention.inbox.batchSize", 100000, "one delete statement holds the locks of this many rows"},
	{"tracing.exportTimeoutMs", 60000, "one export of spans holds a batch in memory and, in Lambda, the end of an invocation"},
}

// boundOf returns the bounds by key pattern.
var boundOf = sync.OnceValue(func() map[string]bound {
	m := make(map[string]bound, len(bounds))
	for _, b := range bounds {
		m[b.key] = b
	}
	return m
})

// boundsOf returns every bound by key pattern: the table's and those of the connector kinds of
// comps (ConnectorSpec), which Components.checkConnectors keeps from contradicting the table.
func boundsOf(comps *Components) map[string]bound {
	out := comps.connectorBounds()
	for k, b := range boundOf() {
		out[k] = b
	}
	return out
}

// checkBounds refuses every numeric key above its bound. A key that another rule has already
// refused is left alone, so that one key gets one problem.
func (v *validator) checkBounds(c *Config) {
	refused := map[string]bool{}
	for _, p := range v.problems {
		refused[p.Key] = true
	}
	all := boundsOf(v.comps)
	walkNumbers(reflect.ValueOf(c).Elem(), nil, nil, func(p, pattern keyPath, field reflect.Value) {
		n := field.Int()
		b, ok := all[patternString(pattern)]
		if !ok || n <= b.max || refused[p.String()] {
			return
		}
		v.add(p, "must be at most %d, not %d", b.max, n)
	})
}

// walkNumbers calls fn with the path, the pattern (map keys as *, list indexes as [*]) and the
// field of every numeric key below v.
func walkNumbers(v reflect.Value, p, pattern keyPath, fn func(p, pattern keyPath, field reflect.Value)) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return
		}
		if k, ok := v.Interface().(kinded); ok {
			if _, part := k.kindPart(); part != nil {
				walkNumbers(reflect.ValueOf(part), p, pattern, fn)
			}
		}
		walkNumbers(v.Elem(), p, pattern, fn)
	case reflect.Struct:
		if v.Type() == secretType || v.Type() == connectionURLType || v.Type() == retentionDurationType {
			return
		}
		for _, f := range fieldsOf(v.Type()) {
			walkNumbers(v.FieldByIndex(f.index), p.child(f.name), pattern.child(f.name), fn)
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			walkNumbers(v.MapIndex(k), p.child(k.String()), pattern.child("*"), fn)
		}
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			walkNumbers(v.Index(i), p.index(i), pattern.child("[*]"), fn)
		}
	case reflect.Int, reflect.Int64:
		fn(p, pattern, v)
	}
}

// numericKeys returns the pattern of every numeric key of the configuration types, every kind
// of every entry included (the connector kinds of comps too): what the bounds must cover.
func numericKeys(comps *Components) []string {
	seen := map[string]bool{}
	var out []string
	var walk func(t reflect.Type, pattern keyPath)
	walk = func(t reflect.Type, pattern keyPath) {
		switch t.Kind() {
		case reflect.Pointer:
			if k, ok := reflect.New(t.Elem()).Interface().(kinded); ok {
				specs, _ := k.kinds(comps)
				if ts, ok := k.(typeSelected); ok {
					specs = append(append([]kindSpec(nil), specs...), ts.typedKinds()...)
				}
				for _, s := range specs {
					walk(s.typ, pattern)
				}
			}
			walk(t.Elem(), pattern)
		case reflect.Struct:
			if t == secretType || t == connectionURLType || t == retentionDurationType {
				return
			}
			for _, f := range fieldsOf(t) {
				walk(t.FieldByIndex(f.index).Type, pattern.child(f.name))
			}
		case reflect.Map:
			walk(t.Elem(), pattern.child("*"))
		case reflect.Slice:
			walk(t.Elem(), pattern.child("[*]"))
		case reflect.Int, reflect.Int64:
			if key := patternString(pattern); !seen[key] {
				seen[key] = true
				out = append(out, key)
			}
		}
	}
	walk(reflect.TypeFor[Config](), nil)
	return out
}

// patternString writes a pattern as a key path: routes[*].transform.timeoutMs.
func patternString(p keyPath) string {
	var b strings.Builder
	for i, seg := range p {
		if i > 0 && seg != "[*]" && !isIndexSegment(seg) {
			b.WriteByte('.')
		}
		b.WriteString(seg)
	}
	return b.String()
}
