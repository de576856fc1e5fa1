package config

import (
	"fmt"
	"os"
	"reflect"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestEveryNumericKeyHasABound lists the numeric keys of the configuration types, every kind of
// every entry included, and checks that the bounds table has exactly those keys: a new numeric
// key without a bound fails here.
func TestEveryNumericKeyHasABound(t *testing.T) {
	t.Parallel()
	keys := numericKeys(testComponents())
	require.NotEmpty(t, keys)
	all := boundsOf(testComponents())
	for _, k := range keys {
		_, ok := all[k]
		assert.True(t, ok, "the numeric key %s has no row in bounds", k)
	}
	for _, b := range all {
		assert.Contains(t, keys, b.key, "bounds has a row for %s, which is not a numeric key", b.key)
		assert.Positive(t, b.max, b.key)
		assert.NotEmpty(t, b.why, b.key)
	}
}

// allKindsYAML sets an entry of every kind that has a numeric key, so that every row of the
// bounds table has a key to check.
const allKindsYAML = minimalDatabase + `server:
  managementPort: 9090
outbox:
  retry:
    maxDelayMs: 60000
    scheduleMs: [1000]
  capture:
    connection:
      port: 5432
admin:
  enabled: true
  auth:
    secret: s
destinations:
  web:
    baseUrl: https://example.com
    transform:
      expression: $
    retry:
      maxDelayMs: 60000
      scheduleMs: [1000]
    terminalStatuses: [410]
    circuitBreaker: {}
    rateLimit:
      requestsPerSecond: 10
  kaf:
    bootstrapServers: k:9092
    topic: t
  nat:
    servers: nats://n:4222
    subject: s
routes:
  - topicPattern: "**"
    destination: web
    transform:
      expression: $
sources:
  hook:
    path: /hook
    idempotencyKeyPath: $.id
    eventTypePath: $.type
    rateLimit:
      requestsPerMinute: 60
    auth:
      secret: s
    transform:
      expression: $
  rab:
    queueName: q
    connectionUrl: amqp://r:5672
    maxBodyBytes: 1048576
  kfk:
    bootstrapServers: k:9092
    topics: [t]
    groupId: g
  nts:
    servers: nats://n:4222
    stream: S
    durable: d
retention:
  outbox:
    policy: COUNT
    maxCount: 10
  inbox:
    maxCount: 10
`

// TestEveryBoundIsEnforced sets every numeric key of a configuration that has every kind to its
// bound, which validates, and to one above, which gives exactly one problem that names the key
// path, its variable and the bound.
func TestEveryBoundIsEnforced(t *testing.T) {
	t.Parallel()
	base := mustLoad(t, allKindsYAML, nil)
	covered := map[string]bool{}
	walkNumbers(reflect.ValueOf(base).Elem(), nil, nil, func(p, pattern keyPath, _ reflect.Value) {
		covered[patternString(pattern)] = true
	})
	all := boundsOf(testComponents())
	for _, b := range all {
		assert.True(t, covered[b.key], "allKindsYAML sets no key of the pattern %s", b.key)
	}

	var paths []string
	walkNumbers(reflect.ValueOf(base).Elem(), nil, nil, func(p, _ keyPath, _ reflect.Value) {
		paths = append(paths, p.String())
	})
	slices.Sort(paths)
	for _, path := range paths {
		t.Run(path, func(t *testing.T) {
			for _, over := range []bool{false, true} {
				cfg := mustLoad(t, allKindsYAML, nil)
				var max int64
				var variable string
				walkNumbers(reflect.ValueOf(cfg).Elem(), nil, nil, func(p, pattern keyPath, field reflect.Value) {
					if p.String() != path {
						return
					}
					max = all[patternString(pattern)].max
					variable = p.envVar()
					n := max
					if over {
						n++
					}
					field.SetInt(n)
				})
				if path == "server.httpPort" || path == "server.managementPort" {
					// The two ports must differ.
					if path == "server.httpPort" {
						cfg.Server.ManagementPort = 9090
					} else {
						cfg.Server.HTTPPort = 8080
					}
				}
				err := cfg.Validate(testComponents())
				if !over {
					assert.NoError(t, err, "%s at its bound %d", path, max)
					continue
				}
				require.Error(t, err, "%s above its bound", path)
				problems := problemStrings(t, err)
				require.Len(t, problems, 1, "%v", problems)
				if path == "server.httpPort" || path == "server.managementPort" || path == "outbox.capture.connection.port" {
					// The port rule of spec/23 says it first.
					assert.Equal(t, fmt.Sprintf("%s (%s) must be from 1 to 65535, not 65536", path, variable), problems[0])
					continue
				}
				if path == "destinations.web.terminalStatuses[0]" {
					// The status rule says it first, with both bounds.
					assert.Equal(t, fmt.Sprintf("%s (%s) must be an HTTP status from 400 to 599, not 600", path, variable), problems[0])
					continue
				}
				assert.Equal(t, fmt.Sprintf("%s (%s) must be at most %d, not %d", path, variable, max, max+1), problems[0])
			}
		})
	}
}

// TestBoundsOfTheReportedValues loads the values of the defect report through the variables
// and through the file: each passed the check before, then crashed or stalled the service.
func TestBoundsOfTheReportedValues(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		env  map[string]string
		yaml string
		want []string
	}{
		{name: "concurrency", env: map[string]string{"QUEUEBOX_OUTBOX_CONCURRENCY": "1000000000"},
			want: []string{"outbox.concurrency (QUEUEBOX_OUTBOX_CONCURRENCY) must be at most 1000, not 1000000000"}},
		{name: "batch size", env: map[string]string{"QUEUEBOX_OUTBOX_BATCHSIZE": "2000000000"},
			want: []string{"outbox.batchSize (QUEUEBOX_OUTBOX_BATCHSIZE) must be at most 10000, not 2000000000"}},
		{name: "max attempts beyond int4", env: map[string]string{"QUEUEBOX_OUTBOX_MAXATTEMPTS": "2147483648"},
			// inbox.relay.maxAttempts takes the value of outbox.maxAttempts.
			want: []string{"outbox.maxAttempts (QUEUEBOX_OUTBOX_MAXATTEMPTS) must be at most 2147483647, not 2147483648",
				"inbox.relay.maxAttempts (QUEUEBOX_INBOX_RELAY_MAXATTEMPTS) must be at most 2147483647, not 2147483648"}},
		{name: "relay max attempts beyond int4", env: map[string]string{"QUEUEBOX_INBOX_RELAY_MAXATTEMPTS": "2147483648"},
			want: []string{"inbox.relay.maxAttempts (QUEUEBOX_INBOX_RELAY_MAXATTEMPTS) must be at most 2147483647, not 2147483648"}},
		{name: "timeout that overflows a duration",
			yaml: "destinations:\n  web:\n    baseUrl: https://example.com\n    timeoutMs: " + strconv.FormatInt(1<<63-1, 10) + "\n",
			want: []string{"destinations.web.timeoutMs (QUEUEBOX_DESTINATIONS_WEB_TIMEOUTMS) must be at most 2147483647, not 9223372036854775807"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, _, err := loadYAML(t, minimalDatabase+tt.yaml, tt.env, nil)
			require.Error(t, err)
			assert.Equal(t, tt.want, problemStrings(t, err))
		})
	}
}

// TestBoundsAreDocumented checks that docs/configuration-bounds.md gives every bound, those of
// the connector kinds included.
func TestBoundsAreDocumented(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/configuration-bounds.md")
	require.NoError(t, err)
	text := string(doc)
	for _, b := range boundsOf(testComponents()) {
		row := fmt.Sprintf("| `%s` | %d |", b.key, b.max)
		assert.Contains(t, text, row, "docs/configuration-bounds.md has no row %q", row)
	}
}
