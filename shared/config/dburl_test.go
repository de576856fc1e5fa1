package config

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

func TestUnsupportedParamsAreWarnings(t *testing.T) {
	t.Parallel()
	_, warnings, err := loadYAML(t, minimalDatabase, map[string]string{"QUEUEBOX_DATABASE_URL": "jdbc:postgresql://db/q?socketTimeout=30&sslmode=require&reWriteBatchedInserts=true"}, nil)
	require.NoError(t, err)
	assert.Equal(t, []string{
		"database.url: the JDBC parameter socketTimeout has no equivalent in this implementation and has no effect",
		"database.url: the JDBC parameter reWriteBatchedInserts has no equivalent in this implementation and has no effect",
	}, warningStrings(warnings))
}

func TestValueHelpers(t *testing.T) {
	t.Parallel()
	assert.Equal(t, Milliseconds(1500).Duration().String(), "1.5s")
	y, err := yaml.Marshal(map[string]any{"maxAge": MustRetentionDuration("7d")})
	require.NoError(t, err)
	assert.Equal(t, "maxAge: 7d\n", string(y))
	assert.Equal(t, []string{"a:1", "b:2"}, SplitList(" a:1, ,b:2 "))
	assert.Equal(t, []string{"nats://a", "nats://b"}, SplitList("nats://a,nats://b"))
}
