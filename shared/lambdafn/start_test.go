package lambdafn

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/alternayte/queuebox/shared/emf"
)

// The EMF lines of an invocation come from the recorder of the Runtime that Start is given,
// not from a package variable: a Runtime with an emf.Recorder gets a line after each
// invocation, one with other metrics (or none) gets its handler unchanged.
func TestInvocationMetricsComeFromTheRuntime(t *testing.T) {
	handler := func(rt *Runtime) func(context.Context, string) (string, error) {
		return func(_ context.Context, in string) (string, error) {
			if rt != nil {
				rt.Metrics.Outcome("sent")
			}
			return "ok " + in, nil
		}
	}

	rt := &Runtime{Metrics: emf.New(emf.Options{})}
	var out bytes.Buffer
	got, err := withInvocationMetrics(rt, &out, handler(rt))(context.Background(), "x")
	if err != nil || got != "ok x" {
		t.Fatalf("handler answered %q, %v", got, err)
	}
	if !strings.Contains(out.String(), "queuebox_outbox_messages_total") || !strings.Contains(out.String(), `"_aws"`) {
		t.Errorf("no EMF line for the invocation; wrote %q", out.String())
	}

	for _, other := range []*Runtime{nil, {Metrics: NopMetrics{}}} {
		out.Reset()
		if _, err := withInvocationMetrics(other, &out, handler(other))(context.Background(), "y"); err != nil {
			t.Fatal(err)
		}
		if out.Len() != 0 {
			t.Errorf("a runtime without an emf.Recorder wrote %q", out.String())
		}
	}
}
