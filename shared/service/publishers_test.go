package service

import (
	"context"
	"log/slog"
	"testing"

	"github.com/alternayte/queuebox/shared/config"
	"github.com/alternayte/queuebox/shared/connect"
	"github.com/alternayte/queuebox/shared/connect/kafka/kafkaconfig"
	"github.com/alternayte/queuebox/shared/connect/rabbitmq/rabbitmqconfig"
	"github.com/alternayte/queuebox/shared/outbox"
)

type namedPublisher struct{ outbox.Publisher }

// Publishers builds a broker destination with the constructor that the composition root
// passes for its kind, and leaves out, with its rows going dead, a destination whose kind
// the program passes no constructor for.
func TestPublishersUsesThePassedBrokerDestinations(t *testing.T) {
	t.Parallel()
	cfg := &config.Config{Destinations: map[string]*config.Destination{
		"orders-bus":    rabbitmqconfig.NewDestination("orders-bus"),
		"orders-stream": kafkaconfig.NewDestination("orders-stream"),
	}}
	log := slog.New(slog.DiscardHandler)

	none, closeNone, err := Publishers(context.Background(), cfg, nil, newEngine(), log)
	if err != nil {
		t.Fatalf("Publishers without brokers: %v", err)
	}
	closeNone()
	if len(none) != 0 {
		t.Fatalf("without broker destinations Publishers built %d destinations, want 0", len(none))
	}

	var built []string
	closed := 0
	rabbit := connect.Connector{Kind: rabbitmqconfig.Kind, Publisher: func(_ context.Context, p connect.PublisherParams) (outbox.Publisher, func(), error) {
		built = append(built, p.Name+"/"+string(p.Destination.Kind))
		return namedPublisher{}, func() { closed++ }, nil
	}}
	dests, closeAll, err := Publishers(context.Background(), cfg, nil, newEngine(), log, rabbit)
	if err != nil {
		t.Fatalf("Publishers: %v", err)
	}
	if len(dests) != 1 || dests[0].Name != "orders-bus" {
		t.Fatalf("destinations %+v, want only orders-bus (kafka has no constructor)", dests)
	}
	if len(built) != 1 || built[0] != "orders-bus/rabbitmq" {
		t.Fatalf("the constructor built %v, want [orders-bus/rabbitmq]", built)
	}
	closeAll()
	if closed != 1 {
		t.Fatalf("closeAll closed %d publishers, want 1", closed)
	}
}
