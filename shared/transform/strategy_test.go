package transform

import (
	"context"
	"encoding/json"
	"testing"
	"time"

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

func step(t *testing.T, expr string, onError OnError) *Step {
	t.Helper()
	s, err := sharedEngine().CompileStep(&Config{Expression: expr, Timeout: 10 * time.Second, MaxDepth: 100, OnError: onError})
	require.NoError(t, err)
	return s
}

func TestRunDelivery(t *testing.T) {
	t.Parallel()
	payload := json.RawMessage(`{"orderId":"1001"}`)
	vars := DeliveryVars("m-1", "order.created", 0, time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	routeOK := func(onError OnError) *Step { return step(t, `{ "order": orderId }`, onError) }
	destOK := func(onError OnError) *Step { return step(t, `{ "data": $, "type": $topic }`, onError) }
	failing := func(onError OnError) *Step { return step(t, `$error("broken")`, onError) }

	tests := []struct {
		name        string
		route, dest *Step
		wantAction  Action
		wantBody    string
		wantStage   Stage
	}{
		{name: "no transforms deliver the payload", wantAction: ActionContinue, wantBody: `{"orderId":"1001"}`},
		{name: "the destination stage sees the output of the route stage",
			route: routeOK(OnErrorFail), dest: destOK(OnErrorFail),
			wantAction: ActionContinue, wantBody: `{"data":{"order":"1001"},"type":"order.created"}`},
		{name: "only a route transform", route: routeOK(OnErrorFail),
			wantAction: ActionContinue, wantBody: `{"order":"1001"}`},
		{name: "only a destination transform", dest: destOK(OnErrorFail),
			wantAction: ActionContinue, wantBody: `{"data":{"orderId":"1001"},"type":"order.created"}`},
		{name: "route Fail retries", route: failing(OnErrorFail), dest: destOK(OnErrorFail),
			wantAction: ActionRetry, wantStage: StageRoute},
		{name: "route Dead goes dead", route: failing(OnErrorDead), dest: destOK(OnErrorFail),
			wantAction: ActionDead, wantStage: StageRoute},
		{name: "route Skip delivers the payload as it was, and the destination transform does not run",
			route: failing(OnErrorSkip), dest: destOK(OnErrorFail),
			wantAction: ActionContinue, wantBody: `{"orderId":"1001"}`, wantStage: StageRoute},
		{name: "destination Fail retries", route: routeOK(OnErrorFail), dest: failing(OnErrorFail),
			wantAction: ActionRetry, wantStage: StageDestination},
		{name: "destination Dead goes dead", route: routeOK(OnErrorFail), dest: failing(OnErrorDead),
			wantAction: ActionDead, wantStage: StageDestination},
		{name: "destination Skip delivers the output of the route stage",
			route: routeOK(OnErrorFail), dest: failing(OnErrorSkip),
			wantAction: ActionContinue, wantBody: `{"order":"1001"}`, wantStage: StageDestination},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o, err := RunDelivery(context.Background(), tt.route, tt.dest, payload, vars)
			require.NoError(t, err)
			assert.Equal(t, tt.wantAction, o.Action)
			if tt.wantBody != "" {
				assert.JSONEq(t, tt.wantBody, string(o.Body))
			} else {
				assert.Nil(t, o.Body)
			}
			if tt.wantStage == 0 {
				assert.Nil(t, o.Failure)
				return
			}
			require.NotNil(t, o.Failure)
			assert.Equal(t, tt.wantStage, o.Failure.Stage)
			assert.ErrorIs(t, o.Failure.Err, ErrEvaluation)
			assert.ErrorContains(t, o.Failure.Err, "broken")
		})
	}
}

func TestRunDeliveryCountsATimeoutAsAFailure(t *testing.T) {
	t.Parallel()
	s, err := sharedEngine().CompileStep(&Config{Expression: `( $f := function($x){ $f($x) }; $f(1) )`,
		Timeout: 50 * time.Millisecond, MaxDepth: 100, OnError: OnErrorDead})
	require.NoError(t, err)
	o, err := RunDelivery(context.Background(), s, nil, json.RawMessage(`{}`), nil)
	require.NoError(t, err)
	assert.Equal(t, ActionDead, o.Action)
	require.NotNil(t, o.Failure)
	assert.ErrorIs(t, o.Failure.Err, ErrTimeout)
	assert.Equal(t, OnErrorDead, o.Failure.OnError)
}

func TestRunDeliveryReturnsACancelledContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	o, err := RunDelivery(ctx, step(t, `$`, OnErrorDead), nil, json.RawMessage(`{}`), nil)
	require.ErrorIs(t, err, context.Canceled)
	assert.Zero(t, o, "no strategy applies when the context ends")
}

func TestRunSource(t *testing.T) {
	t.Parallel()
	body := json.RawMessage(`{"action":"opened","repository":{"full_name":"octo/hello"}}`)
	vars := SourceVars(Inbound{MessageID: "m-1", Source: "github", Headers: map[string]string{"x-github-event": "push"}})
	transform := `{ "action": action, "repository": repository.full_name, "event": $headers."x-github-event" }`
	tests := []struct {
		name       string
		step       *Step
		wantAction Action
		wantBody   string
		wantFailed bool
	}{
		{name: "no transform stores the body", wantAction: ActionContinue, wantBody: string(body)},
		{name: "the transform's output is stored", step: step(t, transform, OnErrorFail),
			wantAction: ActionContinue, wantBody: `{"action":"opened","repository":"octo/hello","event":"push"}`},
		{name: "Fail rejects", step: step(t, `$error("no")`, OnErrorFail), wantAction: ActionReject, wantFailed: true},
		{name: "Dead rejects like Fail", step: step(t, `$error("no")`, OnErrorDead), wantAction: ActionReject, wantFailed: true},
		{name: "Skip stores the original body", step: step(t, `$error("no")`, OnErrorSkip),
			wantAction: ActionContinue, wantBody: string(body), wantFailed: true},
		{name: "no result is a failure", step: step(t, `missing`, OnErrorSkip),
			wantAction: ActionContinue, wantBody: string(body), wantFailed: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o, err := RunSource(context.Background(), tt.step, body, vars)
			require.NoError(t, err)
			assert.Equal(t, tt.wantAction, o.Action)
			if tt.wantBody != "" {
				assert.JSONEq(t, tt.wantBody, string(o.Body))
			} else {
				assert.Nil(t, o.Body)
			}
			if !tt.wantFailed {
				assert.Nil(t, o.Failure)
				return
			}
			require.NotNil(t, o.Failure)
			assert.Equal(t, StageSource, o.Failure.Stage)
			assert.True(t, IsFailure(o.Failure.Err))
		})
	}
}

func TestCompileStep(t *testing.T) {
	t.Parallel()
	s, err := sharedEngine().CompileStep(nil)
	require.NoError(t, err)
	assert.Nil(t, s, "no block, no step")

	block := Config{}.WithDefaults()
	block.Expression = `$`
	s, err = sharedEngine().CompileStep(&block)
	require.NoError(t, err)
	assert.Equal(t, OnErrorFail, s.OnError)
	assert.Equal(t, Limits{Timeout: 100 * time.Millisecond, MaxDepth: 100}, s.Expression.Limits())
	assert.Equal(t, `$`, s.Expression.Source())

	_, err = sharedEngine().CompileStep(&Config{Expression: `$bad(`, OnError: OnErrorSkip})
	assert.ErrorIs(t, err, ErrCompile)
}
