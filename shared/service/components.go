package service

import (
	"sync"

	"github.com/alternayte/queuebox/shared/config"
	"github.com/alternayte/queuebox/shared/connect/kafka/kafkaconfig"
	"github.com/alternayte/queuebox/shared/connect/nats/natsconfig"
	"github.com/alternayte/queuebox/shared/connect/rabbitmq/rabbitmqconfig"
	"github.com/alternayte/queuebox/shared/dburl"
	"github.com/alternayte/queuebox/shared/store/dialect"
)

// Components returns the rules that shared/config asks of the components (config.Components):
// the dialects of the dialect table (shared/store/dialect), the configuration of every
// connector kind (ConnectorSpecs) and the rules of the built-in connectors (Connector.Rules,
// read without linking their publishers). Load, OSLoadOptions and LoadEnv load with it, so
// that `queuebox config check`, queuebox serve, the Lambda functions and the capture node
// refuse the same configurations with the same text. The value is shared: do not modify it.
func Components() *config.Components { return components() }

var components = sync.OnceValue(func() *config.Components {
	c := &config.Components{
		ParseDatabaseURL: dialect.ParseURL,
		Destinations:     map[config.DestinationKind]config.DestinationRules{},
		Connectors:       ConnectorSpecs(),
	}
	for k, rules := range builtinRules() {
		c.Destinations[k] = rules
	}
	for _, d := range dialect.All() {
		c.Dialects = append(c.Dialects, config.Dialect{
			Name:        config.DatabaseType(d.Name),
			CaptureMode: config.CaptureMode(d.CaptureMode),
			ClaimLock:   d.ClaimLock,
			UnsupportedParams: func(u dburl.URL) []string {
				_, dropped := d.Params(u)
				return dropped
			},
		})
	}
	return c
})

// ConnectorSpecs lists the configuration of every connector kind beside the built-in http, one
// line each, in the order that the loader tries them: the keys, defaults, checks and bounds of
// a kind's destination and source blocks. Every program links these packages, which link no
// client, so that each checks the whole configuration the same way; a connector's client and
// constructors are registered in shared/service/connectors, which only the programs that
// deliver or consume link.
func ConnectorSpecs() []config.ConnectorSpec {
	return []config.ConnectorSpec{
		rabbitmqconfig.Spec(),
		kafkaconfig.Spec(),
		natsconfig.Spec(),
	}
}
