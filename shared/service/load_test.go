package service

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestLoadEnv loads a configuration from the environment alone, as bench/inboxbench does.
func TestLoadEnv(t *testing.T) {
	t.Parallel()
	cfg, err := LoadEnv(map[string]string{
		"QUEUEBOX_DATABASE_URL":                     "jdbc:postgresql://db:5432/queuebox",
		"QUEUEBOX_DATABASE_USERNAME":                "queuebox",
		"QUEUEBOX_DATABASE_PASSWORD":                "secret",
		"QUEUEBOX_RETENTION_ENABLED":                "true",
		"QUEUEBOX_SOURCES_BENCH_TYPE":               "http",
		"QUEUEBOX_SOURCES_BENCH_PATH":               "/bench",
		"QUEUEBOX_SOURCES_BENCH_IDEMPOTENCYKEYPATH": "$.id",
		"QUEUEBOX_SOURCES_BENCH_CONSUMPTION":        "pull",
	})
	assert.NoError(t, err)
	if assert.NotNil(t, cfg) {
		assert.True(t, cfg.Retention.Enabled)
		assert.Equal(t, "/bench", cfg.Sources["bench"].HTTP.Path)
	}
	_, err = LoadEnv(map[string]string{"QUEUEBOX_INBOX_MAXBODYBYTES": "0"})
	assert.ErrorContains(t, err, "inbox.maxBodyBytes")
}
