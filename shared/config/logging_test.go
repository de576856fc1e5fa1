package config

import (
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLoggingLevelDefaultsToInfoAndLoadsFromTheFileOrTheVariable(t *testing.T) {
	t.Parallel()
	cfg := mustLoad(t, minimalDatabase, nil)
	assert.Equal(t, LogInfo, cfg.Logging.Level)
	assert.Equal(t, slog.LevelInfo, cfg.Logging.Level.Slog())

	cfg = mustLoad(t, minimalDatabase+"logging:\n  level: WARN\n", nil)
	assert.Equal(t, LogWarn, cfg.Logging.Level)
	assert.Equal(t, slog.LevelWarn, cfg.Logging.Level.Slog())

	cfg = mustLoad(t, minimalDatabase+"logging:\n  level: error\n", map[string]string{"QUEUEBOX_LOGGING_LEVEL": "debug"})
	assert.Equal(t, LogDebug, cfg.Logging.Level)
	assert.Equal(t, slog.LevelDebug, cfg.Logging.Level.Slog())
}

func TestLoggingLevelRefusesAnUnknownLevel(t *testing.T) {
	t.Parallel()
	_, _, err := loadYAML(t, minimalDatabase+"logging:\n  level: verbose\n", nil, nil)
	require.Error(t, err)
	assert.Contains(t, problemStrings(t, err), `logging.level (QUEUEBOX_LOGGING_LEVEL) must be debug, info, warn or error, not "verbose"`)
}
