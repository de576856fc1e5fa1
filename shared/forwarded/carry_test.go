package forwarded_test

import (
	"maps"
	"strings"
	"testing"

	"github.com/alternayte/queuebox/shared/connect/kafka/kafkaconfig"
	"github.com/alternayte/queuebox/shared/connect/nats/natsconfig"
	"github.com/alternayte/queuebox/shared/connect/rabbitmq/rabbitmqconfig"
	"github.com/alternayte/queuebox/shared/forwarded"
)

// TestCheckPerKind holds each kind's rule to what its protocol carries (docs/headers.md): the
// built-in HTTP rule and those that the connectors' configuration packages give.
func TestCheckPerKind(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", 256)
	for _, tt := range []struct {
		name, value string
		http, nats  forwarded.Fault
		rabbitmq    forwarded.Fault
	}{
		{name: "x-ok", value: "plain é \t text", http: forwarded.Carried, nats: forwarded.Carried, rabbitmq: forwarded.Carried},
		{name: "with space", value: "v", http: forwarded.BadName, nats: forwarded.BadName},
		{name: "a:b", value: "v", http: forwarded.BadName, nats: forwarded.BadName},
		{name: "é", value: "v", http: forwarded.BadName, nats: forwarded.BadName},
		{name: "", value: "v", http: forwarded.BadName, nats: forwarded.BadName},
		{name: "x-ctl", value: "\x01,", http: forwarded.BadValue},
		{name: "x-del", value: "a\x7fb", http: forwarded.BadValue},
		{name: "x-nul", value: "a\x00b", http: forwarded.BadValue},
		{name: "x-crlf", value: "a\r\nb", http: forwarded.BadValue, nats: forwarded.BadValue},
		{name: "x-lf", value: "a\nb", http: forwarded.BadValue, nats: forwarded.BadValue},
		{name: "bad name", value: "\x01", http: forwarded.BadName, nats: forwarded.BadName},
		{name: strings.Repeat("a", 255), value: "v"},
		{name: long, value: "v", rabbitmq: forwarded.BadName},
	} {
		for kind, c := range map[string]struct {
			rule forwarded.Rule
			want forwarded.Fault
		}{
			"http": {forwarded.HTTP, tt.http}, "nats": {natsconfig.Spec().Headers, tt.nats},
			"rabbitmq": {rabbitmqconfig.Spec().Headers, tt.rabbitmq},
			"kafka":    {kafkaconfig.Spec().Headers, forwarded.Carried}, "custom": {forwarded.Rule{}, forwarded.Carried},
		} {
			if got, want := c.rule.Check(tt.name, tt.value), c.want; got != want {
				t.Errorf("Check(%s, %.20q, %q) = %d, want %d", kind, tt.name, tt.value, got, want)
			}
		}
	}
}

// TestFitLeavesOutOrEncodes: a name that cannot travel is left out, a value that cannot travel
// is sent as base64:, the rest is unchanged, the input is never modified, and the adjustments
// come in name order.
func TestFitLeavesOutOrEncodes(t *testing.T) {
	t.Parallel()
	in := map[string]string{"x-ok": "fine", "bad name": "v", "": "empty", "x-ctl": "\x01,", "x-bin": "base64:AAAAAQ=="}
	before := maps.Clone(in)
	out, adj := forwarded.HTTP.Fit(in)
	want := map[string]string{"x-ok": "fine", "x-ctl": "base64:ASw=", "x-bin": "base64:AAAAAQ=="}
	if !maps.Equal(out, want) {
		t.Errorf("Fit = %q, want %q", out, want)
	}
	wantAdj := []forwarded.Adjustment{{Name: "", Fault: forwarded.BadName}, {Name: "bad name", Fault: forwarded.BadName}, {Name: "x-ctl", Fault: forwarded.BadValue}}
	if len(adj) != len(wantAdj) {
		t.Fatalf("adjustments = %v, want %v", adj, wantAdj)
	}
	for i := range adj {
		if adj[i] != wantAdj[i] {
			t.Errorf("adjustment %d = %v, want %v", i, adj[i], wantAdj[i])
		}
	}
	if !maps.Equal(in, before) {
		t.Errorf("Fit modified its input: %q", in)
	}
	same, none := kafkaconfig.Spec().Headers.Fit(in)
	if none != nil || !maps.Equal(same, in) {
		t.Errorf("Fit on kafka = %q, %v; want the headers unchanged", same, none)
	}
}

// TestReasonNamesTheProtocol: each rule says why its protocol cannot carry a header, and no
// reason quotes a value.
func TestReasonNamesTheProtocol(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		rule forwarded.Rule
		f    forwarded.Fault
		want string
	}{
		{forwarded.HTTP, forwarded.BadName, forwarded.BadNameReason},
		{forwarded.HTTP, forwarded.BadValue, "its value holds a control character, which an HTTP header value cannot hold (only tab is allowed)"},
		{natsconfig.Spec().Headers, forwarded.BadName, forwarded.BadNameReason},
		{natsconfig.Spec().Headers, forwarded.BadValue, "its value holds a CR or LF character, which a NATS header value cannot hold"},
		{rabbitmqconfig.Spec().Headers, forwarded.BadName, "its name is longer than 255 bytes, the most that an AMQP header name holds"},
		{forwarded.Rule{}, forwarded.Carried, "it travels as it is"},
		{forwarded.HTTP, forwarded.Carried, "it travels as it is"},
	} {
		if got := tt.rule.Reason(tt.f); got != tt.want {
			t.Errorf("Reason(%d) = %q, want %q", tt.f, got, tt.want)
		}
	}
}
