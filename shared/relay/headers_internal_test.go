package relay

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/store"
)

func TestOutboxHeadersCarryTheRelaySpanOnlyWhenTracingIsOn(t *testing.T) {
	t.Parallel()
	row := store.InboxMessage{ID: "in-1", Source: "hooks", IdempotencyKey: "k",
		Headers: json.RawMessage(`{"TraceParent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01","tracestate":"sender=1","x-a":"1"}`)}
	decode := func(raw json.RawMessage) map[string]string {
		var m map[string]string
		require.NoError(t, json.Unmarshal(raw, &m))
		return m
	}
	tests := []struct {
		name  string
		allow map[string]bool
		trace map[string]string
		want  map[string]string
	}{
		{
			name: "off: the received values pass as any received header",
			want: map[string]string{"TraceParent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "tracestate": "sender=1", "x-a": "1",
				"x-inbox-id": "in-1", "x-source": "hooks", "x-idempotency-key": "k"},
		},
		{
			name:  "off with forwardHeaders: dropped unless listed",
			allow: map[string]bool{"x-a": true},
			want:  map[string]string{"x-a": "1", "x-inbox-id": "in-1", "x-source": "hooks", "x-idempotency-key": "k"},
		},
		{
			name:  "on: the relay span's context replaces the received one in any letter case",
			trace: map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-1111111111111111-01"},
			want: map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-1111111111111111-01", "x-a": "1",
				"x-inbox-id": "in-1", "x-source": "hooks", "x-idempotency-key": "k"},
		},
		{
			name:  "on with forwardHeaders that do not list it: kept",
			allow: map[string]bool{},
			trace: map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-1111111111111111-01", "tracestate": "sender=1"},
			want: map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-1111111111111111-01", "tracestate": "sender=1",
				"x-inbox-id": "in-1", "x-source": "hooks", "x-idempotency-key": "k"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			raw, dropped, err := outboxHeaders(row, tt.allow, tt.trace)
			require.NoError(t, err)
			assert.False(t, dropped)
			assert.Equal(t, tt.want, decode(raw))
		})
	}
}
