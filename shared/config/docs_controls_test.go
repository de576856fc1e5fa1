package config

import (
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// yamlBlocks returns the ```yaml blocks of a Markdown page, in order.
func yamlBlocks(page string) []string {
	var out []string
	for _, part := range strings.Split(page, "```yaml\n")[1:] {
		block, _, ok := strings.Cut(part, "```")
		if ok {
			out = append(out, block)
		}
	}
	return out
}

// TestDeliveryControlsDocumentationLoads loads every YAML block of docs/delivery-controls.md
// (with the database keys prepended to a block that has none) without a problem or a warning,
// checks what the full example of its Configuration section sets, and checks each row of its
// variable table: the variable is the key's, and the key is one of the model.
func TestDeliveryControlsDocumentationLoads(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("../../docs/delivery-controls.md")
	require.NoError(t, err)
	page := string(data)
	blocks := yamlBlocks(page)
	require.GreaterOrEqual(t, len(blocks), 2, "the recommended schedule and the Configuration example")
	var example *Config
	for i, block := range blocks {
		body := block
		if !strings.Contains(body, "database:") {
			body = minimalDatabase + body
		}
		cfg, warnings, err := loadYAML(t, body, map[string]string{"DB_PASSWORD": "secret"}, nil)
		require.NoError(t, err, "block %d:\n%s", i, block)
		assert.Empty(t, warnings, "block %d:\n%s", i, block)
		if strings.Contains(block, "circuitBreaker") && strings.Contains(block, "outbox:") {
			example = cfg
		}
	}
	require.NotNil(t, example, "the Configuration section has its full example")
	orders := example.Destinations["orders"]
	require.NotNil(t, orders)
	assert.Equal(t, EffectiveRetry{
		MaxDelayMs: 21600000, Jitter: true, HonorRetryAfter: true,
		ScheduleMs: []Milliseconds{5000, 30000, 120000, 600000, 3600000, 21600000},
	}, example.EffectiveRetry(orders))
	assert.Equal(t, []int{410}, orders.TerminalStatuses)
	assert.Equal(t, &CircuitBreaker{FailureThreshold: 5, WindowMs: 60000, CoolDownMs: 30000}, orders.CircuitBreaker)
	assert.Equal(t, &DestinationRateLimit{RequestsPerSecond: 50, Burst: 10}, orders.RateLimit)
	assert.Equal(t, &CircuitBreaker{FailureThreshold: 5, WindowMs: 60000, CoolDownMs: 30000}, example.Destinations["events"].CircuitBreaker)
	assert.Equal(t, EffectiveRetry{MaxDelayMs: 120000, Jitter: true, HonorRetryAfter: true}, example.EffectiveRetry(example.Destinations["events"]))

	_, section, ok := strings.Cut(page, "\n## Configuration\n")
	require.True(t, ok)
	row := regexp.MustCompile("(?m)^\\| `([^`]+)` \\| `(QUEUEBOX_[A-Z0-9_]+)` \\|")
	rows := row.FindAllStringSubmatch(section, -1)
	require.Len(t, rows, 14, "a row for each key")
	for _, r := range rows {
		assert.Equal(t, r[2], EnvVarName(r[1]), r[1])
		assert.True(t, schemaHasKey(reflect.TypeFor[Config](), parseKeyPath(r[1])), "the model has no key %s", r[1])
	}
}
