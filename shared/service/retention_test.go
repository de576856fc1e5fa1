package service

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/alternayte/queuebox/shared/config"
	"github.com/alternayte/queuebox/shared/retention"
)

// TestRetentionConfigMapsEveryKey sets every retention.* key (spec/23-configuration.md,
// "retention") and checks that each reaches the cleaner's Config.
func TestRetentionConfigMapsEveryKey(t *testing.T) {
	t.Parallel()
	cfg := loadYAML(t, `retention:
  enabled: true
  outbox:
    policy: COUNT
    maxAge: 2d
    maxCount: 5000
    cleanupInterval: 15m
    batchSize: 250
  inbox:
    policy: AGE
    maxAge: 30s
    cleanupInterval: 2h
    batchSize: 10
`, nil)
	assert.Equal(t, retention.Config{
		Enabled: true,
		Outbox: retention.TableConfig{Policy: retention.PolicyCount, MaxAge: 48 * time.Hour, MaxCount: 5000,
			CleanupInterval: 15 * time.Minute, BatchSize: 250},
		Inbox: retention.TableConfig{Policy: retention.PolicyAge, MaxAge: 30 * time.Second,
			CleanupInterval: 2 * time.Hour, BatchSize: 10},
	}, RetentionConfig(cfg))
}

// TestRetentionConfigDefaults checks that the defaults of the configuration and those of the
// cleaner agree: retention off, both tables DISABLED, cleanupInterval 1h, batchSize 1000.
func TestRetentionConfigDefaults(t *testing.T) {
	t.Parallel()
	got := RetentionConfig(config.Default())
	assert.Equal(t, retention.Config{}.WithDefaults(), got)
	assert.False(t, got.Enabled)
	assert.Equal(t, retention.PolicyDisabled, got.Outbox.Policy)
	assert.Equal(t, time.Hour, got.Inbox.CleanupInterval)
	assert.Equal(t, 1000, got.Inbox.BatchSize)
	for _, p := range []config.RetentionPolicy{config.RetentionAge, config.RetentionCount, config.RetentionDisabled} {
		assert.EqualValues(t, p, tableRetention(config.TableRetention{Policy: p}).Policy)
	}
	assert.EqualValues(t, config.RetentionAge, retention.PolicyAge)
	assert.EqualValues(t, config.RetentionCount, retention.PolicyCount)
	assert.EqualValues(t, config.RetentionDisabled, retention.PolicyDisabled)
}
