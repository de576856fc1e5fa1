//go:build !queuebox_no_rabbitmq

package rabbitmq

import (
	"fmt"
	"sort"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/alternayte/queuebox/shared/redact"
	"github.com/alternayte/queuebox/shared/template"
)

// ExchangeType is the type of the exchange that the publisher declares.
type ExchangeType string

// The exchange types.
const (
	ExchangeTopic  ExchangeType = "topic"
	ExchangeDirect ExchangeType = "direct"
	ExchangeFanout ExchangeType = "fanout"
)

// DeliveryMode is the delivery mode of the published messages.
type DeliveryMode string

// The delivery modes.
const (
	// DeliveryPersistent publishes with delivery_mode 2: a message in a durable queue survives
	// a broker restart.
	DeliveryPersistent DeliveryMode = "persistent"
	// DeliveryTransient publishes with delivery_mode 1.
	DeliveryTransient DeliveryMode = "transient"
)

// Defaults of Config, applied by WithDefaults.
const (
	// DefaultExchangeType is the default of Config.ExchangeType.
	DefaultExchangeType = ExchangeTopic
	// DefaultRoutingKeyTemplate is the default of Config.RoutingKeyTemplate.
	DefaultRoutingKeyTemplate = "{{ topic }}"
	// DefaultDeliveryMode is the default of Config.DeliveryMode.
	DefaultDeliveryMode = DeliveryPersistent
)

// Config holds the settings of one RabbitMQ destination. The caller maps them from the
// configuration (destinations.<name>); the zero value of an optional field takes the default
// that its comment names. Errors about it name the configuration key.
type Config struct {
	// URL is the AMQP URI of the broker. It may hold a password: errors, String and GoString
	// never show it. Required.
	URL string
	// Exchange is the exchange name or an address template (shared/template). Required
	// unless ExchangeFrom is set.
	Exchange string
	// ExchangeFrom names the row column that holds the exchange name: aggregate_type, topic
	// or key. It wins over Exchange. Default empty, none.
	ExchangeFrom string
	// ExchangeType is the type of the declared exchange. Default ExchangeTopic.
	ExchangeType ExchangeType
	// RoutingKeyTemplate is the routing key when the matched route sets none.
	// Default "{{ topic }}".
	RoutingKeyTemplate string
	// DeliveryMode is the delivery mode of every message. Default DeliveryPersistent.
	DeliveryMode DeliveryMode
	// Headers are the static headers of every message; a row header of the same name wins.
	// Default none.
	Headers map[string]string
}

// WithDefaults returns the config with every zero optional value replaced by its default.
func (c Config) WithDefaults() Config {
	if c.ExchangeType == "" {
		c.ExchangeType = DefaultExchangeType
	}
	if c.RoutingKeyTemplate == "" {
		c.RoutingKeyTemplate = DefaultRoutingKeyTemplate
	}
	if c.DeliveryMode == "" {
		c.DeliveryMode = DefaultDeliveryMode
	}
	return c
}

// validate checks a config that WithDefaults filled for the destination name. Its messages
// name the bad key (destinations.<name>.<key>) and never hold the URL or its password.
func (c Config) validate(name string) error {
	if c.URL == "" {
		return fmt.Errorf("destinations.%s.url: required", name)
	}
	if _, err := amqp.ParseURI(c.URL); err != nil {
		return fmt.Errorf("destinations.%s.url: not an AMQP URI: %s", name, uriError(err, c.URL))
	}
	if _, err := c.exchange(name); err != nil {
		return err
	}
	switch c.ExchangeType {
	case ExchangeTopic, ExchangeDirect, ExchangeFanout:
	default:
		return fmt.Errorf("destinations.%s.exchangeType: %q: use topic, direct or fanout", name, string(c.ExchangeType))
	}
	if _, err := c.amqpDeliveryMode(name); err != nil {
		return err
	}
	return nil
}

// exchange compiles the exchange address: the ExchangeFrom column, or else the Exchange
// template.
func (c Config) exchange(name string) (*template.Address, error) {
	exchange, err := template.NewAddress(c.Exchange, c.ExchangeFrom)
	if err != nil {
		key := "exchange"
		if c.ExchangeFrom != "" {
			key = "exchangeFrom"
		}
		return nil, fmt.Errorf("destinations.%s.%s: %w", name, key, err)
	}
	return exchange, nil
}

// amqpDeliveryMode returns the delivery_mode property of DeliveryMode.
func (c Config) amqpDeliveryMode(name string) (uint8, error) {
	switch c.DeliveryMode {
	case DeliveryPersistent:
		return amqp.Persistent, nil
	case DeliveryTransient:
		return amqp.Transient, nil
	}
	return 0, fmt.Errorf("destinations.%s.deliveryMode: %q: use persistent or transient", name, string(c.DeliveryMode))
}

// String prints the config with the password of the URL masked and the names of the static
// headers without their values.
func (c Config) String() string {
	names := make([]string, 0, len(c.Headers))
	for k := range c.Headers {
		names = append(names, k)
	}
	sort.Strings(names)
	return fmt.Sprintf("rabbitmq.Config{URL: %q, Exchange: %q, ExchangeFrom: %q, ExchangeType: %q, RoutingKeyTemplate: %q, DeliveryMode: %q, Headers: %q}",
		redact.String(c.URL), c.Exchange, c.ExchangeFrom, string(c.ExchangeType), c.RoutingKeyTemplate, string(c.DeliveryMode), names)
}

// GoString is String, so %#v shows no password either.
func (c Config) GoString() string { return c.String() }
