package transform

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDecideFollowsTheErrorStrategyTable checks every cell of the error strategy table of
// spec/31-transforms-and-templates.md (and spec/12's "Choose what a failed transform does").
func TestDecideFollowsTheErrorStrategyTable(t *testing.T) {
	t.Parallel()
	tests := []struct {
		stage   Stage
		onError OnError
		want    Action
	}{
		{StageRoute, OnErrorFail, ActionRetry},
		{StageRoute, OnErrorSkip, ActionContinue},
		{StageRoute, OnErrorDead, ActionDead},
		{StageDestination, OnErrorFail, ActionRetry},
		{StageDestination, OnErrorSkip, ActionContinue},
		{StageDestination, OnErrorDead, ActionDead},
		{StageSource, OnErrorFail, ActionReject},
		{StageSource, OnErrorSkip, ActionContinue},
		{StageSource, OnErrorDead, ActionReject},
		{StageRoute, "", ActionRetry}, // the default is Fail
		{StageSource, "", ActionReject},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, Decide(tt.stage, tt.onError), "%s %q", tt.stage, tt.onError)
	}
}

// TestCompileStepWithoutAnEngine: no block gives no step with or without an engine; a block
// without an engine is refused with ErrNoEngine. shared/transform/jsonata tests CompileStep on
// the engine.
func TestCompileStepWithoutAnEngine(t *testing.T) {
	t.Parallel()
	s, err := CompileStep(nil, nil)
	require.NoError(t, err)
	assert.Nil(t, s, "no block, no step")

	_, err = CompileStep(nil, &Config{Expression: `$`})
	require.ErrorIs(t, err, ErrNoEngine)
	assert.False(t, IsFailure(err), "a missing engine is not a failure of the expression")
}
