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

// TestSpecExamples evaluates every example expression of spec/12-transform-payloads.md and
// spec/31-transforms-and-templates.md (and the transform examples of spec/23 and spec/26). Where
// the page shows the result, want is that result; where it shows none, want follows from the
// expression and the input chosen here, and the case says so.
func TestSpecExamples(t *testing.T) {
	t.Parallel()
	messageID := "6b1f0c1e-9a7d-4f0e-8a1c-2f3d4e5f6a7b"
	createdAt := time.Date(2026, 5, 1, 12, 0, 0, 250_000_000, time.UTC)
	delivery := transform.DeliveryVars(messageID, "order.created", 0, createdAt)
	eventType := "opened"
	key := "72d3162e-cc78-11e3-81ab-4c9367dc0958"
	github := transform.SourceVars(transform.Inbound{
		MessageID:      messageID,
		Source:         "github",
		Headers:        map[string]string{"x-github-event": "pull_request", "x-tenant": "acme"},
		IdempotencyKey: &key,
		EventType:      &eventType,
		ReceivedAt:     createdAt,
	})
	// POST /admin/transform/test binds $messageId, $topic (mockTopic), $attempt 0, $timestamp
	// and $source (mockSource), and no $headers.
	admin := transform.Vars{transform.VarMessageID: messageID, transform.VarTopic: "order.created", transform.VarAttempt: 0, transform.VarTimestamp: transform.FormatTimestamp(createdAt)}

	tests := []struct {
		name  string
		expr  string
		input string
		vars  transform.Vars
		want  string
	}{
		{
			name:  "spec/12 Reshape a payload at a destination: the envelope (documented result)",
			expr:  `{ "id": $messageId, "type": $topic, "data": $ }`,
			input: `{"orderId":"1001"}`,
			vars:  delivery,
			want:  `{ "id": "6b1f0c1e-9a7d-4f0e-8a1c-2f3d4e5f6a7b", "type": "order.created", "data": { "orderId": "1001" } }`,
		},
		{
			name: "spec/12 Shape one kind of event on a route (documented result)",
			expr: `{ "orderId": id, "customer": customer.name, "total": items.(price * quantity) ~> $sum() }`,
			input: `{"id":"1001","customer":{"name":"Ada"},"items":[{"price":10,"quantity":2},` +
				`{"price":5,"quantity":3}]}`,
			vars: delivery,
			want: `{"orderId":"1001","customer":"Ada","total":35}`,
		},
		{
			name:  "spec/12 Normalise a webhook at the source (no result shown)",
			expr:  `{ "action": action, "repository": repository.full_name, "event": $headers."x-github-event" }`,
			input: `{"action":"opened","delivery":"72d3162e","repository":{"full_name":"octo/hello","id":1}}`,
			vars:  github,
			want:  `{"action":"opened","repository":"octo/hello","event":"pull_request"}`,
		},
		{
			name:  "spec/12 Remove secret fields (no result shown)",
			expr:  `$ ~> |$|{}, ['password', 'secret', 'token']|`,
			input: `{"user":"ada","password":"p","secret":"s","token":"t","profile":{"password":"kept: only the top level"}}`,
			vars:  delivery,
			want:  `{"user":"ada","profile":{"password":"kept: only the top level"}}`,
		},
		{
			name:  "spec/12 Choose an action from a field: paid (no result shown)",
			expr:  `status = 'paid' ? { "action": "fulfill", "orderId": id } : { "action": "remind", "orderId": id }`,
			input: `{"status":"paid","id":"1001"}`,
			vars:  delivery,
			want:  `{"action":"fulfill","orderId":"1001"}`,
		},
		{
			name:  "spec/12 Choose an action from a field: not paid (no result shown)",
			expr:  `status = 'paid' ? { "action": "fulfill", "orderId": id } : { "action": "remind", "orderId": id }`,
			input: `{"status":"pending","id":"1002"}`,
			vars:  delivery,
			want:  `{"action":"remind","orderId":"1002"}`,
		},
		{
			name:  "spec/12 Add the time of the delivery (no result shown)",
			expr:  `$merge([$, { "deliveredAt": $timestamp }])`,
			input: `{"orderId":"1001"}`,
			vars:  delivery,
			want:  `{"orderId":"1001","deliveredAt":"2026-05-01T12:00:00.250Z"}`,
		},
		{
			name:  "spec/12 Test an expression: the admin request (no result shown)",
			expr:  `{ "total": items.(price * qty) ~> $sum() }`,
			input: `{"items": [{"price": 10, "qty": 2}, {"price": 5, "qty": 3}]}`,
			vars:  admin,
			want:  `{"total":35}`,
		},
		{
			name:  "spec/26 POST /admin/transform/test example (no result shown)",
			expr:  `{ "total": $sum(items.(price * qty)) }`,
			input: `{"items": [{"price": 10, "qty": 2}, {"price": 5, "qty": 3}]}`,
			vars:  admin,
			want:  `{"total":35}`,
		},
		{
			name:  "spec/23 complete example: the orders-api destination transform (no result shown)",
			expr:  `{ "data": $, "topic": $topic }`,
			input: `{"orderId":"1001"}`,
			vars:  delivery,
			want:  `{"data":{"orderId":"1001"},"topic":"order.created"}`,
		},
		{
			name:  "spec/31 Variables: a header name with a hyphen needs quotes",
			expr:  `$headers."x-tenant"`,
			input: `{}`,
			vars:  github,
			want:  `"acme"`,
		},
		{
			name:  "spec/31 Variables: $ alone is the input document",
			expr:  `$`,
			input: `{"orderId":"1001","items":[1,2]}`,
			vars:  delivery,
			want:  `{"orderId":"1001","items":[1,2]}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out, err := eval(t, sharedEngine(), tt.expr, tt.input, tt.vars)
			require.NoError(t, err)
			assert.JSONEq(t, tt.want, string(out))
		})
	}
}

// TestStageVariables checks the variable table of spec/31: what each stage binds, and that the
// source-only variables are not bound at the route and destination stages.
func TestStageVariables(t *testing.T) {
	t.Parallel()
	const expr = `{ "messageId": $messageId, "topic": $topic, "attempt": $attempt, "timestamp": $timestamp,
		"source": $source, "headers": $headers, "idempotencyKey": $idempotencyKey, "eventType": $eventType,
		"bound": [$exists($source), $exists($headers), $exists($idempotencyKey), $exists($eventType)] }`
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	eventType, key := "payment.completed", "evt_123"
	tests := []struct {
		name string
		vars transform.Vars
		want string
	}{
		{
			name: "route and destination stages",
			vars: transform.DeliveryVars("m-1", "order.created", 3, at),
			want: `{"messageId":"m-1","topic":"order.created","attempt":3,"timestamp":"2026-05-01T12:00:00Z",
				"bound":[false,false,false,false]}`,
		},
		{
			name: "source stage with an idempotency key and an event type",
			vars: transform.SourceVars(transform.Inbound{MessageID: "m-2", Source: "stripe", Headers: map[string]string{"X-Trace": "t"},
				IdempotencyKey: &key, EventType: &eventType, ReceivedAt: at}),
			want: `{"messageId":"m-2","topic":"payment.completed","attempt":0,"timestamp":"2026-05-01T12:00:00Z",
				"source":"stripe","headers":{"X-Trace":"t"},"idempotencyKey":"evt_123","eventType":"payment.completed",
				"bound":[true,true,true,true]}`,
		},
		{
			name: "source stage without an event type or headers",
			vars: transform.SourceVars(transform.Inbound{MessageID: "m-3", Source: "orders", ReceivedAt: at}),
			want: `{"messageId":"m-3","topic":"","attempt":0,"timestamp":"2026-05-01T12:00:00Z",
				"source":"orders","headers":{},"idempotencyKey":null,"eventType":null,
				"bound":[true,true,true,true]}`,
		},
	}
	x, err := sharedEngine().Compile(expr, relaxed)
	require.NoError(t, err)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out, err := x.Evaluate(context.Background(), json.RawMessage(`{}`), tt.vars)
			require.NoError(t, err)
			assert.JSONEq(t, tt.want, string(out))
		})
	}
}
