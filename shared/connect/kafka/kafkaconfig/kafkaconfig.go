// Package kafkaconfig is the configuration of the Kafka connector: the keys of a destination
// and of a source of kind kafka, their defaults, their checks and the bounds of their numeric
// keys (Spec). Every program links it, to check the whole configuration the same way; it links
// no Kafka client, which only shared/connect/kafka does.
package kafkaconfig

import (
	"strings"

	"github.com/alternayte/queuebox/shared/config"
	"github.com/alternayte/queuebox/shared/kind"
)

// Kind is the kind of a Kafka destination or source.
const Kind kind.Kind = "kafka"

// Spec is what the configuration knows of the kind kafka; the composition root lists it in
// config.Components.
func Spec() config.ConnectorSpec {
	return config.ConnectorSpec{
		Kind: Kind,
		Destination: &config.BlockSpec{
			Required: []string{"bootstrapServers", "topic"},
			New:      func() config.Block { return newDestination() },
			Bounds:   []config.Bound{{Key: "timeoutMs", Max: config.MaxMillis, Why: config.WhyMillis}},
		},
		Source: &config.BlockSpec{
			Required: []string{"bootstrapServers", "topics", "groupId"},
			New:      func() config.Block { return newSource() },
			Bounds:   []config.Bound{{Key: "maxPollRecords", Max: config.MaxBatch, Why: config.WhyBatch}},
		},
	}
}

// SecurityProtocol is securityProtocol.
type SecurityProtocol string

// The values of securityProtocol.
const (
	SecurityPlaintext     SecurityProtocol = "PLAINTEXT"
	SecuritySSL           SecurityProtocol = "SSL"
	SecuritySASLPlaintext SecurityProtocol = "SASL_PLAINTEXT"
	SecuritySASLSSL       SecurityProtocol = "SASL_SSL"
)

// IsSASL reports whether the protocol authenticates with SASL.
func (p SecurityProtocol) IsSASL() bool { return strings.HasPrefix(string(p), "SASL_") }

// AutoOffsetReset is where a new consumer group starts.
type AutoOffsetReset string

// The values of autoOffsetReset.
const (
	OffsetEarliest AutoOffsetReset = "earliest"
	OffsetLatest   AutoOffsetReset = "latest"
)

// Security holds the security keys of a Kafka destination or source.
type Security struct {
	// SecurityProtocol is PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL. Default: PLAINTEXT.
	SecurityProtocol SecurityProtocol `yaml:"securityProtocol"`
	// SASLMechanism, for example SCRAM-SHA-512. Required by a SASL_ protocol. Default: empty.
	SASLMechanism string `yaml:"saslMechanism,omitempty"`
	// SASLUsername is required by a SASL_ protocol. Default: empty.
	SASLUsername string `yaml:"saslUsername,omitempty"`
	// SASLPassword is required by a SASL_ protocol. Default: empty.
	SASLPassword config.Secret `yaml:"saslPassword,omitempty"`
}

// check checks the security keys of the entry c.
func (s *Security) check(c config.Check) {
	if !c.Key("securityProtocol").OneOf(string(s.SecurityProtocol), string(SecurityPlaintext), string(SecuritySSL),
		string(SecuritySASLPlaintext), string(SecuritySASLSSL)) || !s.SecurityProtocol.IsSASL() {
		return
	}
	for _, f := range []struct {
		key string
		set bool
	}{{"saslMechanism", strings.TrimSpace(s.SASLMechanism) != ""}, {"saslUsername", strings.TrimSpace(s.SASLUsername) != ""}, {"saslPassword", !s.SASLPassword.IsEmpty()}} {
		if !f.set {
			c.Key(f.key).Problem("is required by securityProtocol %s", s.SecurityProtocol)
		}
	}
}

// Destination holds the keys of a Kafka destination.
type Destination struct {
	// BootstrapServers lists the brokers, separated by commas. Required. See Brokers.
	BootstrapServers string `yaml:"bootstrapServers"`
	// Topic is the Kafka topic or an address template. Required.
	Topic string `yaml:"topic"`
	// TopicFrom names the row column that holds the topic: aggregate_type, topic or key. It wins
	// over Topic. Default: empty, none.
	TopicFrom config.AddressColumn `yaml:"topicFrom,omitempty"`
	// KeyTemplate is the record key; {{ key }} and {{ topic }} render, an empty result sends no
	// key, and a route routingKeyTemplate wins. Default: {{ key }}.
	KeyTemplate string `yaml:"keyTemplate"`
	// TimeoutMs is the whole publish budget. It must be at least 2000. Default: 30000.
	TimeoutMs config.Milliseconds `yaml:"timeoutMs"`
	// Security holds securityProtocol and the SASL keys.
	Security `yaml:",inline"`
}

func newDestination() *Destination {
	return &Destination{KeyTemplate: "{{ key }}", TimeoutMs: 30000, Security: Security{SecurityProtocol: SecurityPlaintext}}
}

// NewDestination returns a destination of kind kafka with every default, as the loader builds
// it before it reads the entry's keys.
func NewDestination(name string) *config.Destination {
	return &config.Destination{Name: name, Kind: Kind, Block: newDestination()}
}

// DestinationOf returns the Kafka block of d, or nil when d is of another kind.
func DestinationOf(d *config.Destination) *Destination {
	k, _ := d.Block.(*Destination)
	return k
}

// Brokers returns BootstrapServers split at the commas.
func (k *Destination) Brokers() []string { return config.SplitList(k.BootstrapServers) }

// Normalize stores securityProtocol in upper case.
func (k *Destination) Normalize() {
	k.SecurityProtocol = SecurityProtocol(strings.ToUpper(string(k.SecurityProtocol)))
}

// Check checks the keys of the destination c.
func (k *Destination) Check(c config.Check) {
	c.Key("bootstrapServers").Required(k.BootstrapServers)
	c.Key("topic").Address(k.Topic, c.Key("topicFrom"), k.TopicFrom)
	if k.TimeoutMs < 2000 {
		c.Key("timeoutMs").Problem("must be at least 2000, not %d", k.TimeoutMs)
	}
	k.Security.check(c)
}

// Source holds the keys of a Kafka source.
type Source struct {
	// BootstrapServers lists the brokers, separated by commas. Required. See Brokers.
	BootstrapServers string `yaml:"bootstrapServers"`
	// Topics lists the Kafka topics; no entry may be blank. Required.
	Topics []string `yaml:"topics"`
	// GroupID is the consumer group. Required.
	GroupID string `yaml:"groupId"`
	// AutoOffsetReset is where a new group starts: earliest or latest. Default: earliest.
	AutoOffsetReset AutoOffsetReset `yaml:"autoOffsetReset"`
	// MaxPollRecords is the largest number of records in one poll. It must be above 0.
	// Default: 100.
	MaxPollRecords int `yaml:"maxPollRecords"`
	// SkipTombstones acknowledges a tombstone (a record whose value is null) without storing
	// a row. An extension (docs/broker-sources.md). Default: false, a tombstone is a dead row.
	SkipTombstones bool `yaml:"skipTombstones"`
	// Security holds securityProtocol and the SASL keys.
	Security `yaml:",inline"`
	// BrokerSource holds the keys that every broker source shares.
	config.BrokerSource `yaml:",inline"`
}

func newSource() *Source {
	return &Source{AutoOffsetReset: OffsetEarliest, MaxPollRecords: 100,
		Security: Security{SecurityProtocol: SecurityPlaintext}, BrokerSource: config.NewBrokerSource()}
}

// NewSource returns a source of kind kafka with every default, as the loader builds it before
// it reads the entry's keys.
func NewSource(name string) *config.Source { return config.NewConnectorSource(name, Kind, newSource()) }

// SourceOf returns the Kafka block of s, or nil when s is of another kind.
func SourceOf(s *config.Source) *Source {
	k, _ := s.Block.(*Source)
	return k
}

// Brokers returns BootstrapServers split at the commas.
func (k *Source) Brokers() []string { return config.SplitList(k.BootstrapServers) }

// Normalize stores securityProtocol in upper case and autoOffsetReset in lower case.
func (k *Source) Normalize() {
	k.SecurityProtocol = SecurityProtocol(strings.ToUpper(string(k.SecurityProtocol)))
	k.AutoOffsetReset = AutoOffsetReset(strings.ToLower(string(k.AutoOffsetReset)))
}

// Check checks the keys of the source c.
func (k *Source) Check(c config.Check) {
	c.Key("bootstrapServers").Required(k.BootstrapServers)
	if len(k.Topics) == 0 {
		c.Key("topics").Problem("must list at least one topic")
	}
	for i, t := range k.Topics {
		if strings.TrimSpace(t) == "" {
			c.Key("topics").Index(i).Problem("must not be blank")
		}
	}
	c.Key("groupId").Required(k.GroupID)
	c.Key("autoOffsetReset").OneOf(string(k.AutoOffsetReset), string(OffsetEarliest), string(OffsetLatest))
	c.Key("maxPollRecords").Positive(int64(k.MaxPollRecords))
	k.Security.check(c)
}
