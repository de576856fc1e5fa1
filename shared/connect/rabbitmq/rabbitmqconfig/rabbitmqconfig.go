// Package rabbitmqconfig is the configuration of the RabbitMQ connector: the keys of a
// destination and of a source of kind rabbitmq, their defaults, their checks and the bounds of
// their numeric keys (Spec). Every program links it, to check the whole configuration the same
// way; it links no AMQP client, which only shared/connect/rabbitmq does.
package rabbitmqconfig

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/alternayte/queuebox/shared/config"
	"github.com/alternayte/queuebox/shared/forwarded"
	"github.com/alternayte/queuebox/shared/kind"
)

// Kind is the kind of a RabbitMQ destination or source (AMQP 0-9-1).
const Kind kind.Kind = "rabbitmq"

// Spec is what the configuration knows of the kind rabbitmq; the composition root lists it in
// config.Components.
func Spec() config.ConnectorSpec {
	return config.ConnectorSpec{
		Kind:    Kind,
		Headers: Headers,
		Destination: &config.BlockSpec{
			Required: []string{"url", "exchange"},
			New:      func() config.Block { return newDestination() },
		},
		Source: &config.BlockSpec{
			Required: []string{"queueName", "connectionUrl"},
			New:      func() config.Block { return newSource() },
			Bounds:   []config.Bound{{Key: "prefetchCount", Max: 65535, Why: "the AMQP prefetch count is a 16-bit field"}},
		},
	}
}

// MaxHeaderNameBytes is the longest header name that an AMQP 0-9-1 table holds: a key is a
// short string, one length octet and at most 255 bytes.
const MaxHeaderNameBytes = 255

// Headers is what a RabbitMQ message carries of a header: a name of at most
// MaxHeaderNameBytes bytes, and any value.
var Headers = forwarded.NewRule(func(name, _ string) forwarded.Fault {
	if len(name) > MaxHeaderNameBytes {
		return forwarded.BadName
	}
	return forwarded.Carried
}, func(forwarded.Fault) string {
	return "its name is longer than 255 bytes, the most that an AMQP header name holds"
})

// ExchangeType is the type of the exchange that a RabbitMQ destination declares.
type ExchangeType string

// The values of exchangeType.
const (
	ExchangeTopic  ExchangeType = "topic"
	ExchangeDirect ExchangeType = "direct"
	ExchangeFanout ExchangeType = "fanout"
)

// DeliveryMode is the delivery mode of a RabbitMQ destination.
type DeliveryMode string

// The values of deliveryMode.
const (
	DeliveryPersistent DeliveryMode = "persistent"
	DeliveryTransient  DeliveryMode = "transient"
)

// Destination holds the keys of a RabbitMQ destination.
type Destination struct {
	// URL is the AMQP URI of the broker. Required. It takes no file: reference.
	URL config.ConnectionURL `yaml:"url"`
	// Exchange is the exchange name or an address template. Required.
	Exchange string `yaml:"exchange"`
	// ExchangeFrom names the row column that holds the exchange name: aggregate_type, topic or
	// key. It wins over Exchange. Default: empty, none.
	ExchangeFrom config.AddressColumn `yaml:"exchangeFrom,omitempty"`
	// ExchangeType is the type of the declared exchange: topic, direct or fanout.
	// Default: topic.
	ExchangeType ExchangeType `yaml:"exchangeType"`
	// RoutingKeyTemplate is the routing key when the matched route sets none.
	// Default: {{ topic }}.
	RoutingKeyTemplate string `yaml:"routingKeyTemplate"`
	// DeliveryMode is persistent or transient. Default: persistent.
	DeliveryMode DeliveryMode `yaml:"deliveryMode"`
}

func newDestination() *Destination {
	return &Destination{ExchangeType: ExchangeTopic, RoutingKeyTemplate: "{{ topic }}", DeliveryMode: DeliveryPersistent}
}

// NewDestination returns a destination of kind rabbitmq with every default, as the loader
// builds it before it reads the entry's keys.
func NewDestination(name string) *config.Destination {
	return &config.Destination{Name: name, Kind: Kind, Block: newDestination()}
}

// DestinationOf returns the RabbitMQ block of d, or nil when d is of another kind.
func DestinationOf(d *config.Destination) *Destination {
	r, _ := d.Block.(*Destination)
	return r
}

// Normalize stores exchangeType and deliveryMode in lower case.
func (r *Destination) Normalize() {
	r.ExchangeType = ExchangeType(strings.ToLower(string(r.ExchangeType)))
	r.DeliveryMode = DeliveryMode(strings.ToLower(string(r.DeliveryMode)))
}

// Check checks the keys of the destination c.
func (r *Destination) Check(c config.Check) {
	checkURL(c.Key("url"), r.URL)
	c.Key("exchange").Address(r.Exchange, c.Key("exchangeFrom"), r.ExchangeFrom)
	c.Key("exchangeType").OneOf(string(r.ExchangeType), string(ExchangeTopic), string(ExchangeDirect), string(ExchangeFanout))
	c.Key("deliveryMode").OneOf(string(r.DeliveryMode), string(DeliveryPersistent), string(DeliveryTransient))
}

// Source holds the keys of a RabbitMQ source.
type Source struct {
	// QueueName is the queue to consume. Required.
	QueueName string `yaml:"queueName"`
	// ConnectionURL is the AMQP URI of the broker. Required. It takes no file: reference.
	ConnectionURL config.ConnectionURL `yaml:"connectionUrl"`
	// PrefetchCount is the largest number of unacknowledged deliveries. It must be above 0.
	// Default: 10.
	PrefetchCount int `yaml:"prefetchCount"`
	// DeclareQueue declares the queue as durable before the consumer starts. Default: false.
	DeclareQueue bool `yaml:"declareQueue"`
	// BrokerSource holds the keys that every broker source shares.
	config.BrokerSource `yaml:",inline"`
}

func newSource() *Source { return &Source{PrefetchCount: 10, BrokerSource: config.NewBrokerSource()} }

// NewSource returns a source of kind rabbitmq with every default, as the loader builds it
// before it reads the entry's keys.
func NewSource(name string) *config.Source { return config.NewConnectorSource(name, Kind, newSource()) }

// SourceOf returns the RabbitMQ block of s, or nil when s is of another kind.
func SourceOf(s *config.Source) *Source {
	r, _ := s.Block.(*Source)
	return r
}

// Check checks the keys of the source c.
func (r *Source) Check(c config.Check) {
	c.Key("queueName").Required(r.QueueName)
	checkURL(c.Key("connectionUrl"), r.ConnectionURL)
	c.Key("prefetchCount").Positive(int64(r.PrefetchCount))
}

// checkURL checks a RabbitMQ URI: amqp:// or amqps:// with a host. Its problem masks the
// password.
func checkURL(c config.Check, u config.ConnectionURL) {
	raw := u.Reveal()
	if !c.Required(raw) {
		return
	}
	p, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || (!strings.EqualFold(p.Scheme, "amqp") && !strings.EqualFold(p.Scheme, "amqps")) || p.Hostname() == "" {
		hint := ""
		if strings.HasPrefix(raw, "file:") {
			hint = " (a file: reference is read literally here; supply the URI through its variable)"
		}
		c.Problem("%s", fmt.Sprintf("must be an amqp:// or amqps:// URI with a host, not %q%s", config.MaskURL(raw), hint))
	}
}
