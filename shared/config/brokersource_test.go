package config

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// kafkaSource is a valid Kafka source with extra keys (YAML, indented under the source).
func kafkaSource(extra string) string {
	return minimalDatabase + `sources:
  log:
    type: kafka
    bootstrapServers: b1:9092
    topics: [orders]
    groupId: g1
` + extra
}

func TestSkipTombstones(t *testing.T) {
	t.Parallel()
	assert.False(t, mustLoad(t, kafkaSource(""), nil).Sources["log"].Kafka.SkipTombstones, "the default")
	assert.True(t, mustLoad(t, kafkaSource("    skipTombstones: true\n"), nil).Sources["log"].Kafka.SkipTombstones)
	assert.True(t, mustLoad(t, kafkaSource(""), map[string]string{"QUEUEBOX_SOURCES_LOG_SKIPTOMBSTONES": "true"}).Sources["log"].Kafka.SkipTombstones)

	_, _, err := loadYAML(t, kafkaSource("    skipTombstones: sometimes\n"), nil, nil)
	require.Error(t, err)
	problems := problemStrings(t, err)
	require.Len(t, problems, 1)
	assert.Contains(t, problems[0], "sources.log.skipTombstones (QUEUEBOX_SOURCES_LOG_SKIPTOMBSTONES)")

	// Another kind of source has no tombstones: the key has no effect there, and says so.
	_, warnings, err := loadYAML(t, minimalDatabase+`sources:
  q:
    type: rabbitmq
    queueName: incoming
    connectionUrl: amqp://rabbit:5672/
    skipTombstones: true
`, nil, nil)
	require.NoError(t, err)
	assert.Contains(t, warningStrings(warnings), "sources.q.skipTombstones is a key of the kafka kind, but sources.q is of the rabbitmq kind: it has no effect")
}
