package inbox_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/inbox"
	"github.com/alternayte/queuebox/shared/transform"
	"github.com/alternayte/queuebox/shared/transform/jsonata"
)

// TestSourceTransformBindsTheSourceStage: a compiled source transform sees the received body
// as $ and the variables of the source stage; an attribute that was not extracted binds null.
func TestSourceTransformBindsTheSourceStage(t *testing.T) {
	t.Parallel()
	engine := jsonata.NewEngine(jsonata.EngineOptions{})
	st, err := inbox.CompileTransform(engine, &transform.Config{
		Expression: `{"body": $, "id": $messageId, "topic": $topic, "attempt": $attempt, "at": $timestamp,
			"source": $source, "headers": $headers, "key": $idempotencyKey, "type": $eventType}`,
		Timeout: 20 * time.Second,
	})
	require.NoError(t, err)
	assert.Equal(t, 20*time.Second, st.Expression().Limits().Timeout)

	at := time.Date(2026, 5, 1, 12, 0, 0, 250_000_000, time.UTC)
	out, err := st.Transform(context.Background(), inbox.TransformInput{
		Payload: json.RawMessage(`{"n":1}`), MessageID: "m-1", Topic: "order.created", Timestamp: at,
		Source: "shop", Headers: map[string]string{"x-env": "prod"}, IdempotencyKey: "k-1", EventType: "order.created",
	})
	require.NoError(t, err)
	assert.JSONEq(t, `{"body":{"n":1},"id":"m-1","topic":"order.created","attempt":0,"at":"2026-05-01T12:00:00.250Z",
		"source":"shop","headers":{"x-env":"prod"},"key":"k-1","type":"order.created"}`, string(out))

	out, err = st.Transform(context.Background(), inbox.TransformInput{Payload: json.RawMessage(`{}`), Source: "shop", Timestamp: at})
	require.NoError(t, err)
	assert.JSONEq(t, `{"body":{},"id":"","topic":"","attempt":0,"at":"2026-05-01T12:00:00.250Z",
		"source":"shop","headers":{},"key":null,"type":null}`, string(out))

	_, err = inbox.CompileTransform(engine, &transform.Config{Expression: `{`})
	assert.ErrorIs(t, err, transform.ErrCompile)
}
