package outbox_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/alternayte/queuebox/shared/connect/webhook"
	"github.com/alternayte/queuebox/shared/outbox"
	"github.com/alternayte/queuebox/shared/route"
	"github.com/alternayte/queuebox/shared/store"
	"github.com/alternayte/queuebox/shared/transform"
	"github.com/alternayte/queuebox/shared/transform/jsonata"
)

var engine = jsonata.NewEngine(jsonata.EngineOptions{})

func step(t *testing.T, expr string, onError transform.OnError) *transform.Step {
	t.Helper()
	s, err := engine.CompileStep(&transform.Config{Expression: expr, Timeout: 10 * time.Second, MaxDepth: 100, OnError: onError})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestTransformsAtTheRouteAndDestinationStages runs the documented destination transform
// `{ "data": $, "topic": $topic }` after a route transform, and the error strategies of a
// failing route transform: Fail retries, Skip delivers the payload as it was (without the
// destination transform), Dead goes dead.
func TestTransformsAtTheRouteAndDestinationStages(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	rc := newReceiver(t, nil)
	pub, err := webhook.New(webhook.Config{Name: "receiver", BaseURL: rc.srv.URL, Timeout: 5 * time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	m := newCountingMetrics()
	p, err := outbox.New(outbox.Options{
		Store: fx.store, Config: outbox.Config{RetryBaseDelay: time.Hour},
		Routes: route.NewTable([]route.Route{
			{Pattern: route.MustCompile("ok.*"), Destination: "receiver", Index: 0},
			{Pattern: route.MustCompile("fail.*"), Destination: "receiver", Index: 1},
			{Pattern: route.MustCompile("skip.*"), Destination: "receiver", Index: 2},
			{Pattern: route.MustCompile("dead.*"), Destination: "receiver", Index: 3},
		}),
		RouteTransforms: map[int]*transform.Step{
			0: step(t, `{ "amount": amount * 2 }`, transform.OnErrorFail),
			1: step(t, `$error("no")`, transform.OnErrorFail),
			2: step(t, `$error("no")`, transform.OnErrorSkip),
			3: step(t, `$error("no")`, transform.OnErrorDead),
		},
		Destinations: []outbox.Destination{{Name: "receiver", Publisher: pub, Transform: step(t, `{ "data": $, "topic": $topic }`, transform.OnErrorFail)}},
		Metrics:      m,
		Logger:       testLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{}
	for _, topic := range []string{"ok.one", "fail.one", "skip.one", "dead.one"} {
		ids[topic] = insert(t, fx.store, store.OutboxInsertParams{Topic: topic, Payload: json.RawMessage(`{"amount":21}`)})
	}
	sum := p.RunOnce(context.Background())
	if sum.Sent != 2 || sum.Retried != 1 || sum.Dead != 1 {
		t.Fatalf("summary = %+v, want 2 sent, 1 retried, 1 dead", sum)
	}
	bodies := map[string]string{}
	for _, r := range rc.requests() {
		bodies[r.Header.Get("X-Topic")] = r.Body
	}
	if got := bodies["ok.one"]; !jsonEqual(got, `{"data":{"amount":42},"topic":"ok.one"}`) {
		t.Errorf("ok.one body = %s", got)
	}
	// spec/12: Skip on a route transform delivers the payload as it was before that
	// transform, and the destination transform does not run.
	if got := bodies["skip.one"]; !jsonEqual(got, `{"amount":21}`) {
		t.Errorf("skip.one body = %s, want the payload as it was", got)
	}
	if s := readRow(t, fx.pool, ids["fail.one"]); s.State != "pending" || s.Attempt != 1 || !strings.Contains(s.LastError, "route transform failed") {
		t.Errorf("fail.one = %+v", s)
	}
	if s := readRow(t, fx.pool, ids["dead.one"]); s.State != "dead" || s.Attempt != 0 {
		t.Errorf("dead.one = %+v", s)
	}
	if m.get("transformFailure/Fail") != 1 || m.get("transformFailure/Skip") != 1 || m.get("transformFailure/Dead") != 1 {
		t.Errorf("transform failure metrics = %v", m.snapshot())
	}
}

func jsonEqual(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return string(xb) == string(yb)
}
