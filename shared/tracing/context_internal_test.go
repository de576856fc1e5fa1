package tracing

import (
	"strings"
	"testing"
)

// containsFold must agree with strings.Contains over a lower-cased copy, which it replaces.
func TestContainsFoldAgreesWithLowerCaseContains(t *testing.T) {
	t.Parallel()
	for _, s := range []string{
		"", "t", "traceparen", "traceparent", "TRACEPARENT", `{"TraceParent":"x"}`,
		`{"x":"y","tracepareNT"`, "tracepar3nt", "ttraceparent", "trace parent", `{"a":"b"}`,
	} {
		want := strings.Contains(strings.ToLower(s), HeaderTraceparent)
		if got := containsFold([]byte(s), HeaderTraceparent); got != want {
			t.Errorf("containsFold(%q) = %v, want %v", s, got, want)
		}
	}
}
