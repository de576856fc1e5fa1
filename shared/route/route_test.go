package route

import (
	"testing"
)

func TestPatternMatch(t *testing.T) {
	t.Parallel()
	tests := []struct {
		pattern string
		topic   string
		want    bool
	}{
		// The table of spec/10-fan-out-over-http.md.
		{"order.*", "order.created", true},
		{"order.*", "order.paid", true},
		{"order.*", "order", false},
		{"order.*", "order.item.added", false},
		{"order.**", "order.created", true},
		{"order.**", "order.item.added", true},
		{"order.**", "order", false},
		{"**", "anything.at.all", true},
		{"**", "", true},
		{"order.created", "order.created", true},
		{"order.created", "order.updated", false},
		// Literals: a dot, a dash and a plus have no special meaning.
		{"a+b.c-d", "a+b.c-d", true},
		{"a+b.c-d", "aab.c-d", false},
		{"order.?", "order.x", false},
		{"order.?", "order.?", true},
		// Whole-topic match.
		{"order", "order.created", false},
		{"created", "order.created", false},
		// `*` inside a segment.
		{"order.*ed", "order.created", true},
		{"order.*ed", "order.create", false},
		{"*.created", "order.created", true},
		{"*.created", "a.b.created", false},
		{"*", "", true},
		{"*", "a.b", false},
		{"**.created", "a.b.created", true},
		{"a.**.z", "a.b.c.z", true},
		{"a.**.z", "a.z", false},
	}
	for _, tt := range tests {
		p, err := Compile(tt.pattern)
		if err != nil {
			t.Fatalf("Compile(%q): %v", tt.pattern, err)
		}
		if got := p.Match(tt.topic); got != tt.want {
			t.Errorf("%q.Match(%q) = %v, want %v", tt.pattern, tt.topic, got, tt.want)
		}
	}
}

func TestCompileRefusesTripleStar(t *testing.T) {
	t.Parallel()
	for _, p := range []string{"***", "order.***", "a****"} {
		if _, err := Compile(p); err != ErrTripleStar {
			t.Errorf("Compile(%q) error = %v, want ErrTripleStar", p, err)
		}
	}
}

func TestTableFirstMatchWins(t *testing.T) {
	t.Parallel()
	table := NewTable([]Route{
		{Pattern: MustCompile("invoice.*"), Destination: "billing"},
		{Pattern: MustCompile("**"), Destination: "archive"},
		{Pattern: MustCompile("invoice.paid"), Destination: "never"},
	})
	cases := map[string]string{"invoice.paid": "billing", "invoice.a.b": "archive", "x": "archive"}
	for topic, want := range cases {
		r, ok := table.Match(topic)
		if !ok || r.Destination != want {
			t.Errorf("Match(%q) = %q, %v; want %q", topic, r.Destination, ok, want)
		}
	}
	empty := NewTable(nil)
	if _, ok := empty.Match("order.created"); ok {
		t.Error("an empty table matched a topic")
	}
	got := table.TopicsOf("billing", []string{"invoice.paid", "x", "invoice.sent"})
	if len(got) != 2 || got[0] != "invoice.paid" || got[1] != "invoice.sent" {
		t.Errorf("TopicsOf(billing) = %v", got)
	}
}
