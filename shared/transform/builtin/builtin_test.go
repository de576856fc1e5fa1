//go:build !queuebox_no_jsonata

package builtin_test

import (
	"context"
	"errors"
	"testing"

	"github.com/alternayte/queuebox/shared/transform"
	"github.com/alternayte/queuebox/shared/transform/builtin"
)

// TestEngineIsTheBuildsEngine: built without the tag, Engine runs JSONata; LeftOut refuses
// every expression with ErrLeftOut, which names the tag.
func TestEngineIsTheBuildsEngine(t *testing.T) {
	t.Parallel()
	if !builtin.Included {
		t.Fatal("Included is false in a build without " + builtin.Tag)
	}
	expr, err := builtin.Engine().Compile(`{"n": n + 1}`, transform.Limits{})
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	out, err := expr.Evaluate(context.Background(), []byte(`{"n": 41}`), nil)
	if err != nil {
		t.Fatalf("Evaluate: %v", err)
	}
	if string(out) != `{"n":42}` {
		t.Errorf("Evaluate = %s, want {\"n\":42}", out)
	}
	if _, err := builtin.LeftOut().Compile(`{"n": n}`, transform.Limits{}); !errors.Is(err, builtin.ErrLeftOut) {
		t.Errorf("LeftOut().Compile error = %v, want ErrLeftOut", err)
	}
}
