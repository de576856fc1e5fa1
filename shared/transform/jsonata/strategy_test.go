package jsonata

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/transform"
)

func step(t *testing.T, expr string, onError transform.OnError) *transform.Step {
	t.Helper()
	s, err := sharedEngine().CompileStep(&transform.Config{Expression: expr, Timeout: 10 * time.Second, MaxDepth: 100, OnError: onError})
	require.NoError(t, err)
	return s
}

func TestRunDelivery(t *testing.T) {
	t.Parallel()
	payload := json.RawMessage(`{"orderId":"1001"}`)
	vars := transform.DeliveryVars("m-1", "order.created", 0, time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	routeOK := func(onError transform.OnError) *transform.Step { return step(t, `{ "order": orderId }`, onError) }
	destOK := func(onError transform.OnError) *transform.Step {
		return step(t, `{ "data": $, "type": $topic }`, onError)
	}
	failing := func(onError transform.OnError) *transform.Step { return step(t, `$error("broken")`, onError) }

	tests := []struct {
		name        string
		route, dest *transform.Step
		wantAction  transform.Action
		wantBody    string
		wantStage   transform.Stage
	}{
		{name: "no transforms deliver the payload", wantAction: transform.ActionContinue, wantBody: `{"orderId":"1001"}`},
		{name: "the destination stage sees the output of the route stage",
			route: routeOK(transform.OnErrorFail), dest: destOK(transform.OnErrorFail),
			wantAction: transform.ActionContinue, wantBody: `{"data":{"order":"1001"},"type":"order.created"}`},
		{name: "only a route transform", route: routeOK(transform.OnErrorFail),
			wantAction: transform.ActionContinue, wantBody: `{"order":"1001"}`},
		{name: "only a destination transform", dest: destOK(transform.OnErrorFail),
			wantAction: transform.ActionContinue, wantBody: `{"data":{"orderId":"1001"},"type":"order.created"}`},
		{name: "route Fail retries", route: failing(transform.OnErrorFail), dest: destOK(transform.OnErrorFail),
			wantAction: transform.ActionRetry, wantStage: transform.StageRoute},
		{name: "route Dead goes dead", route: failing(transform.OnErrorDead), dest: destOK(transform.OnErrorFail),
			wantAction: transform.ActionDead, wantStage: transform.StageRoute},
		{name: "route Skip delivers the payload as it was, and the destination transform does not run",
			route: failing(transform.OnErrorSkip), dest: destOK(transform.OnErrorFail),
			wantAction: transform.ActionContinue, wantBody: `{"orderId":"1001"}`, wantStage: transform.StageRoute},
		{name: "destination Fail retries", route: routeOK(transform.OnErrorFail), dest: failing(transform.OnErrorFail),
			wantAction: transform.ActionRetry, wantStage: transform.StageDestination},
		{name: "destination Dead goes dead", route: routeOK(transform.OnErrorFail), dest: failing(transform.OnErrorDead),
			wantAction: transform.ActionDead, wantStage: transform.StageDestination},
		{name: "destination Skip delivers the output of the route stage",
			route: routeOK(transform.OnErrorFail), dest: failing(transform.OnErrorSkip),
			wantAction: transform.ActionContinue, wantBody: `{"order":"1001"}`, wantStage: transform.StageDestination},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o, err := transform.RunDelivery(context.Background(), tt.route, tt.dest, payload, vars)
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
			assert.ErrorIs(t, o.Failure.Err, transform.ErrEvaluation)
			assert.ErrorContains(t, o.Failure.Err, "broken")
		})
	}
}

func TestRunDeliveryCountsATimeoutAsAFailure(t *testing.T) {
	t.Parallel()
	s, err := sharedEngine().CompileStep(&transform.Config{Expression: `( $f := function($x){ $f($x) }; $f(1) )`,
		Timeout: 50 * time.Millisecond, MaxDepth: 100, OnError: transform.OnErrorDead})
	require.NoError(t, err)
	o, err := transform.RunDelivery(context.Background(), s, nil, json.RawMessage(`{}`), nil)
	require.NoError(t, err)
	assert.Equal(t, transform.ActionDead, o.Action)
	require.NotNil(t, o.Failure)
	assert.ErrorIs(t, o.Failure.Err, transform.ErrTimeout)
	assert.Equal(t, transform.OnErrorDead, o.Failure.OnError)
}

func TestRunDeliveryReturnsACancelledContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	o, err := transform.RunDelivery(ctx, step(t, `$`, transform.OnErrorDead), nil, json.RawMessage(`{}`), nil)
	require.ErrorIs(t, err, context.Canceled)
	assert.Zero(t, o, "no strategy applies when the context ends")
}

func TestRunSource(t *testing.T) {
	t.Parallel()
	body := json.RawMessage(`{"action":"opened","repository":{"full_name":"octo/hello"}}`)
	vars := transform.SourceVars(transform.Inbound{MessageID: "m-1", Source: "github", Headers: map[string]string{"x-github-event": "push"}})
	expr := `{ "action": action, "repository": repository.full_name, "event": $headers."x-github-event" }`
	tests := []struct {
		name       string
		step       *transform.Step
		wantAction transform.Action
		wantBody   string
		wantFailed bool
	}{
		{name: "no transform stores the body", wantAction: transform.ActionContinue, wantBody: string(body)},
		{name: "the transform's output is stored", step: step(t, expr, transform.OnErrorFail),
			wantAction: transform.ActionContinue, wantBody: `{"action":"opened","repository":"octo/hello","event":"push"}`},
		{name: "Fail rejects", step: step(t, `$error("no")`, transform.OnErrorFail), wantAction: transform.ActionReject, wantFailed: true},
		{name: "Dead rejects like Fail", step: step(t, `$error("no")`, transform.OnErrorDead), wantAction: transform.ActionReject, wantFailed: true},
		{name: "Skip stores the original body", step: step(t, `$error("no")`, transform.OnErrorSkip),
			wantAction: transform.ActionContinue, wantBody: string(body), wantFailed: true},
		{name: "no result is a failure", step: step(t, `missing`, transform.OnErrorSkip),
			wantAction: transform.ActionContinue, wantBody: string(body), wantFailed: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o, err := transform.RunSource(context.Background(), tt.step, body, vars)
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
			assert.Equal(t, transform.StageSource, o.Failure.Stage)
			assert.True(t, transform.IsFailure(o.Failure.Err))
		})
	}
}

func TestCompileStep(t *testing.T) {
	t.Parallel()
	s, err := sharedEngine().CompileStep(nil)
	require.NoError(t, err)
	assert.Nil(t, s, "no block, no step")

	block := transform.Config{}.WithDefaults()
	block.Expression = `$`
	s, err = sharedEngine().CompileStep(&block)
	require.NoError(t, err)
	assert.Equal(t, transform.OnErrorFail, s.OnError)
	assert.Equal(t, transform.Limits{Timeout: 100 * time.Millisecond, MaxDepth: 100}, s.Expression.Limits())
	assert.Equal(t, `$`, s.Expression.Source())

	_, err = sharedEngine().CompileStep(&transform.Config{Expression: `$bad(`, OnError: transform.OnErrorSkip})
	assert.ErrorIs(t, err, transform.ErrCompile)
}
