// Package natsconfig is the configuration of the NATS connector: the keys of a destination and
// of a source of kind nats, their defaults, their checks and the bounds of their numeric keys
// (Spec). Every program links it, to check the whole configuration the same way; it links no
// NATS client, which only shared/connect/nats does.
package natsconfig

import (
	"strings"

	"github.com/alternayte/queuebox/shared/config"
	"github.com/alternayte/queuebox/shared/forwarded"
	"github.com/alternayte/queuebox/shared/kind"
)

// Kind is the kind of a NATS destination or source (NATS and JetStream).
const Kind kind.Kind = "nats"

// Spec is what the configuration knows of the kind nats; the composition root lists it in
// config.Components.
func Spec() config.ConnectorSpec {
	return config.ConnectorSpec{
		Kind:    Kind,
		Headers: Headers,
		Destination: &config.BlockSpec{
			Required: []string{"servers", "subject"},
			New:      func() config.Block { return newDestination() },
			Bounds:   []config.Bound{{Key: "timeoutMs", Max: config.MaxMillis, Why: config.WhyMillis}},
		},
		Source: &config.BlockSpec{
			Required: []string{"servers", "stream", "durable"},
			New:      func() config.Block { return newSource() },
			Bounds: []config.Bound{
				{Key: "ackWaitMs", Max: config.MaxMillis, Why: config.WhyMillis},
				{Key: "batchSize", Max: config.MaxBatch, Why: config.WhyBatch},
			},
		},
	}
}

// Headers is what a NATS message carries of a header: a name that is a token of RFC 9110
// (forwarded.ValidName), as the NATS client requires, and a value without CR or LF, which the
// client turns into spaces (its header block is line based).
var Headers = forwarded.NewRule(func(name, value string) forwarded.Fault {
	switch {
	case !forwarded.ValidName(name):
		return forwarded.BadName
	case strings.ContainsAny(value, "\r\n"):
		return forwarded.BadValue
	}
	return forwarded.Carried
}, func(f forwarded.Fault) string {
	if f == forwarded.BadName {
		return forwarded.BadNameReason
	}
	return "its value holds a CR or LF character, which a NATS header value cannot hold"
})

// Credentials holds the credentials of a NATS destination or source: a user name and a
// password, or a token.
type Credentials struct {
	// Username is a user name; it needs Password. Default: empty.
	Username string `yaml:"username,omitempty"`
	// Password needs Username. Default: empty.
	Password config.Secret `yaml:"password,omitempty"`
	// Token is a token; set a token or a user name, not both. Default: empty.
	Token config.Secret `yaml:"token,omitempty"`
}

// check checks the credentials of the entry c.
func (n *Credentials) check(c config.Check) {
	switch {
	case n.Username != "" && n.Password.IsEmpty():
		c.Key("password").Problem("is required when %s is set", c.Key("username"))
	case n.Username == "" && !n.Password.IsEmpty():
		c.Key("username").Problem("is required when %s is set", c.Key("password"))
	}
	if !n.Token.IsEmpty() && n.Username != "" {
		c.Key("token").Problem("must not be set together with %s: set a token or a user name, not both", c.Key("username"))
	}
}

// Destination holds the keys of a NATS destination.
type Destination struct {
	// Servers lists the server URLs, separated by commas. Required. See ServerList.
	Servers string `yaml:"servers"`
	// Subject is the subject or an address template. Required.
	Subject string `yaml:"subject"`
	// SubjectFrom names the row column that holds the subject: aggregate_type, topic or key. It
	// wins over Subject. Default: empty, none.
	SubjectFrom config.AddressColumn `yaml:"subjectFrom,omitempty"`
	// JetStream publishes through JetStream and waits for its acknowledgement; false publishes
	// on core NATS. Default: true.
	JetStream bool `yaml:"jetStream"`
	// TimeoutMs is the publish timeout. It must be above 0. Default: 30000.
	TimeoutMs config.Milliseconds `yaml:"timeoutMs"`
	// Credentials holds username, password and token.
	Credentials `yaml:",inline"`
}

func newDestination() *Destination { return &Destination{JetStream: true, TimeoutMs: 30000} }

// NewDestination returns a destination of kind nats with every default, as the loader builds
// it before it reads the entry's keys.
func NewDestination(name string) *config.Destination {
	return &config.Destination{Name: name, Kind: Kind, Block: newDestination()}
}

// DestinationOf returns the NATS block of d, or nil when d is of another kind.
func DestinationOf(d *config.Destination) *Destination {
	n, _ := d.Block.(*Destination)
	return n
}

// ServerList returns Servers split at the commas.
func (n *Destination) ServerList() []string { return config.SplitList(n.Servers) }

// Check checks the keys of the destination c.
func (n *Destination) Check(c config.Check) {
	c.Key("servers").Required(n.Servers)
	c.Key("subject").Address(n.Subject, c.Key("subjectFrom"), n.SubjectFrom)
	c.Key("timeoutMs").Positive(int64(n.TimeoutMs))
	n.Credentials.check(c)
}

// Source holds the keys of a NATS JetStream source.
type Source struct {
	// Servers lists the server URLs, separated by commas. Required. See ServerList.
	Servers string `yaml:"servers"`
	// Stream is the JetStream stream. Required.
	Stream string `yaml:"stream"`
	// Durable is the durable consumer name. Required.
	Durable string `yaml:"durable"`
	// FilterSubject is a subject filter. Default: empty, every subject of the stream.
	FilterSubject string `yaml:"filterSubject,omitempty"`
	// AckWaitMs is how long JetStream waits for the acknowledgement before it redelivers. It
	// must be above 0. Default: 30000.
	AckWaitMs config.Milliseconds `yaml:"ackWaitMs"`
	// BatchSize is the largest number of messages in one fetch. It must be above 0.
	// Default: 100.
	BatchSize int `yaml:"batchSize"`
	// Credentials holds username, password and token.
	Credentials `yaml:",inline"`
	// BrokerSource holds the keys that every broker source shares.
	config.BrokerSource `yaml:",inline"`
}

func newSource() *Source {
	return &Source{AckWaitMs: 30000, BatchSize: 100, BrokerSource: config.NewBrokerSource()}
}

// NewSource returns a source of kind nats with every default, as the loader builds it before
// it reads the entry's keys.
func NewSource(name string) *config.Source { return config.NewConnectorSource(name, Kind, newSource()) }

// SourceOf returns the NATS block of s, or nil when s is of another kind.
func SourceOf(s *config.Source) *Source {
	n, _ := s.Block.(*Source)
	return n
}

// ServerList returns Servers split at the commas.
func (n *Source) ServerList() []string { return config.SplitList(n.Servers) }

// Check checks the keys of the source c.
func (n *Source) Check(c config.Check) {
	c.Key("servers").Required(n.Servers)
	c.Key("stream").Required(n.Stream)
	c.Key("durable").Required(n.Durable)
	c.Key("ackWaitMs").Positive(int64(n.AckWaitMs))
	c.Key("batchSize").Positive(int64(n.BatchSize))
	n.Credentials.check(c)
}
