// Package kind names the external systems that QueueBox connects to: the type of a kind,
// which a destination or a source of the configuration selects (destinations.<name>,
// sources.<name>), which the connector registry of the composition root
// (shared/service/connectors) keys its constructors by, and which each connector's publisher
// reports as its destination_type label. The built-in kind, HTTP, is defined here; every other
// kind is defined once, by its connector's configuration package (rabbitmqconfig.Kind,
// kafkaconfig.Kind, natsconfig.Kind), which config.Components lists.
//
// It imports nothing, so that shared/config, the connectors and the domain packages can all
// name a kind without linking one another.
package kind

// Kind is the kind of a destination or a source: the name of its external system.
type Kind string

// HTTP is the built-in kind: an HTTP destination (shared/connect/webhook) or an HTTP source
// (the inbox).
const HTTP Kind = "http"
