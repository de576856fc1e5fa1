package lambdafn_test

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/alternayte/queuebox/shared/lambdafn"
	"github.com/alternayte/queuebox/shared/service"
	"github.com/alternayte/queuebox/shared/store/postgres/dbtest"
	"github.com/alternayte/queuebox/shared/transform/builtin"
)

// TestAFunctionBuiltWithoutJSONataRefusesATransformAtItsStart: a poll function built with
// the tag queuebox_no_jsonata (whose engine is builtin.LeftOut) stops at its start, naming the
// key and the tag, when the configuration holds a route transform; without one it starts.
func TestAFunctionBuiltWithoutJSONataRefusesATransformAtItsStart(t *testing.T) {
	t.Parallel()
	_, dbURL := dbtest.Migrated(t)
	rc := newReceiver(t, false)
	initWith := func(extra map[string]string) (*lambdafn.Runtime, error) {
		load := service.OSLoadOptions(builtin.LeftOut())
		load.Env, load.ReadFile = functionEnv(dbURL, rc, extra), noFile
		return lambdafn.Init(context.Background(), lambdafn.Options{Load: load, LogOutput: io.Discard, Engine: builtin.LeftOut()})
	}

	rt, err := initWith(map[string]string{"QUEUEBOX_ROUTES_0_TRANSFORM_EXPRESSION": `{"id": messageId}`})
	if err == nil {
		rt.Close()
		t.Fatal("Init succeeded with a route transform and no JSONata engine")
	}
	for _, want := range []string{"routes[0].transform.expression", builtin.Tag} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Init error = %q, want it to name %q", err.Error(), want)
		}
	}

	rt, err = initWith(nil)
	if err != nil {
		t.Fatalf("Init without a transform: %v", err)
	}
	defer rt.Close()
	if _, err := rt.Build(context.Background(), service.AppOptions{Poller: true}); err != nil {
		t.Fatalf("Build without a transform: %v", err)
	}
}
