package forwarded_test

import (
	"maps"
	"strings"
	"testing"

	"github.com/alternayte/queuebox/shared/forwarded"
)

// TestCheckPerKind holds Check to what each protocol carries (docs/headers.md).
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
		for kind, want := range map[string]forwarded.Fault{
			forwarded.KindHTTP: tt.http, forwarded.KindNATS: tt.nats, forwarded.KindRabbitMQ: tt.rabbitmq,
			forwarded.KindKafka: forwarded.Carried, "custom": forwarded.Carried,
		} {
			if got := forwarded.Check(kind, tt.name, tt.value); got != want {
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
	out, adj := forwarded.Fit(forwarded.KindHTTP, in)
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
	same, none := forwarded.Fit(forwarded.KindKafka, in)
	if none != nil || !maps.Equal(same, in) {
		t.Errorf("Fit on kafka = %q, %v; want the headers unchanged", same, none)
	}
}
