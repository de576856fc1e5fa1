//go:build !queuebox_no_rabbitmq && !queuebox_no_kafka && !queuebox_no_nats

package connectors

import (
	"slices"
	"testing"

	"github.com/alternayte/queuebox/shared/config"
	"github.com/alternayte/queuebox/shared/kind"
	"github.com/alternayte/queuebox/shared/service"
)

// TestEveryKindOfTheTreeHasAConnector: every destination kind of the configuration tree but
// http (the built-in connector of shared/service) has one line in All with a publisher
// constructor, and every source kind but http (a route of the inbox) a source constructor;
// All names no kind that the tree does not know.
func TestEveryKindOfTheTreeHasAConnector(t *testing.T) {
	t.Parallel()
	byKind := map[kind.Kind]int{}
	for i, c := range All() {
		if _, dup := byKind[c.Kind]; dup {
			t.Errorf("All registers %s twice", c.Kind)
		}
		byKind[c.Kind] = i
	}
	for _, k := range config.DestinationKinds(service.Components()) {
		i, ok := byKind[k]
		switch {
		case k == kind.HTTP:
			if ok {
				t.Errorf("All registers http, which is the built-in connector of shared/service")
			}
		case !ok || All()[i].Publisher == nil:
			t.Errorf("no publisher constructor for the destination kind %s", k)
		}
	}
	for _, k := range config.SourceKinds(service.Components()) {
		if i, ok := byKind[k]; k != kind.HTTP && (!ok || All()[i].Source == nil) {
			t.Errorf("no source constructor for the source kind %s", k)
		}
	}
	for k := range byKind {
		if !slices.Contains(config.DestinationKinds(service.Components()), k) {
			t.Errorf("All registers %s, which the configuration tree does not know", k)
		}
	}
}
