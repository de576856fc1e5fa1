package sourcebench

import (
	"encoding/json"
	"testing"
)

func TestBodiesAreJSONOfTheSizeWithUniqueIDs(t *testing.T) {
	seen := map[string]bool{}
	for _, b := range bodies(1000, 300) {
		var doc struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatalf("body %s is not JSON: %v", b, err)
		}
		if len(b) != 300 {
			t.Fatalf("body of %d bytes, want 300", len(b))
		}
		if doc.ID == "" || seen[doc.ID] {
			t.Fatalf("id %q empty or repeated", doc.ID)
		}
		seen[doc.ID] = true
	}
}

func TestMedianAndTargets(t *testing.T) {
	rounds := []Result{
		{Broker: RabbitMQ, Batch: 10, Default: true, Round: 1, Share: 0.9},
		{Broker: RabbitMQ, Batch: 10, Default: true, Round: 2, Share: 0.5},
		{Broker: RabbitMQ, Batch: 10, Default: true, Round: 3, Share: 0.7},
	}
	if m := median(rounds); m.Share != 0.7 || m.Round != 0 {
		t.Fatalf("median = share %v round %d, want 0.7 round 0", m.Share, m.Round)
	}
	r := Result{Broker: NATS, Batch: 100, Default: true, Consume: Measure{PerSec: 20000}, Insert: Measure{PerSec: 10000}, Source: Measure{PerSec: 7000}}
	r.judge()
	if r.Ceiling != 10000 || r.Share != 0.7 {
		t.Fatalf("ceiling %v share %v, want 10000 and 0.7", r.Ceiling, r.Share)
	}
	// Taking turns at 20,000/s and 10,000/s: 1/(1/20000 + 1/10000) = 6,667/s.
	if r.TurnsBound != 6667 || r.TurnsShare != 1.05 {
		t.Fatalf("turns bound %v share %v, want 6667 and 1.05", r.TurnsBound, r.TurnsShare)
	}
	got := targets([]Result{r, {Broker: Kafka, Batch: 100, Default: true, Share: 0.5}})
	if len(got) != 3 || !got[0].Met || !got[1].Met || got[2].Met {
		t.Fatalf("targets = %+v, want NATS stored and share met, Kafka share missed", got)
	}
}
