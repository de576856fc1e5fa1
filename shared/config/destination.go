package config

import (
	"fmt"
	"reflect"

	"github.com/alternayte/queuebox/shared/connect/kind"
)

// DestinationKind is the kind of a destination, selected from its required keys: one of the
// kinds of shared/connect/kind (kind.HTTP, kind.RabbitMQ, kind.Kafka, kind.NATS).
type DestinationKind = kind.Kind

// Destination is one entry of destinations. Kind says which one of HTTP, RabbitMQ, Kafka and
// NATS is set; the others are nil.
type Destination struct {
	// Name is the map key of the entry. It is not a configuration key.
	Name string `yaml:"-"`
	// Kind is selected from the required keys that the entry sets: baseUrl (http); url and
	// exchange (rabbitmq); bootstrapServers and topic (kafka); servers and subject (nats).
	Kind DestinationKind `yaml:"-"`
	// Type is the type key as written: documentation only, the loader does not check it.
	Type string `yaml:"type,omitempty"`
	// Headers are static headers on every message; a row header of the same name wins.
	// Default: empty.
	Headers map[string]string `yaml:"headers,omitempty"`
	// Transform runs before the publish, after the route transform. Default: nil, none.
	Transform *Transform `yaml:"transform,omitempty"`
	// DeliveryControls holds retry, terminalStatuses, circuitBreaker and rateLimit, the
	// delivery controls of docs/delivery-controls.md. Default: none set.
	DeliveryControls `yaml:",inline"`

	// HTTP is set when Kind is http.
	HTTP *HTTPDestination `yaml:"-"`
	// RabbitMQ is set when Kind is rabbitmq.
	RabbitMQ *RabbitMQDestination `yaml:"-"`
	// Kafka is set when Kind is kafka.
	Kafka *KafkaDestination `yaml:"-"`
	// NATS is set when Kind is nats.
	NATS *NATSDestination `yaml:"-"`
	// Signing signs every request of an http destination (an extension; signing.go).
	// Default: nil, none.
	Signing *Signing `yaml:"signing,omitempty"`
}

// NewDestination returns a destination of the given kind with every default of that kind, as
// the loader builds it before it reads the entry's keys. Code that builds a configuration by
// hand, a test for example, starts from it.
func NewDestination(name string, k DestinationKind) *Destination {
	d := &Destination{Name: name}
	d.selectKind(string(k))
	return d
}

// NewDestinationAuth returns a destination auth block of the given kind with its defaults.
func NewDestinationAuth(k DestinationAuthKind) *DestinationAuth {
	a := &DestinationAuth{}
	a.selectKind(string(k))
	return a
}

// HTTPDestination holds the keys of an HTTP destination.
type HTTPDestination struct {
	// BaseURL is an absolute http or https URL with a host and no user info. Required.
	BaseURL string `yaml:"baseUrl"`
	// Path is the path after BaseURL, with no . or .. segment. Default: /.
	Path string `yaml:"path"`
	// TimeoutMs is the request timeout. It must be above 0. Default: 30000.
	TimeoutMs Milliseconds `yaml:"timeoutMs"`
	// Auth holds the credentials of each request. Default: nil, none.
	Auth *DestinationAuth `yaml:"auth,omitempty"`
}

// RabbitMQDestination holds the keys of a RabbitMQ destination.
type RabbitMQDestination struct {
	// URL is the AMQP URI of the broker. Required. It takes no file: reference.
	URL ConnectionURL `yaml:"url"`
	// Exchange is the exchange name or an address template. Required.
	Exchange string `yaml:"exchange"`
	// ExchangeFrom names the row column that holds the exchange name: aggregate_type, topic or
	// key. It wins over Exchange. Default: empty, none.
	ExchangeFrom AddressColumn `yaml:"exchangeFrom,omitempty"`
	// ExchangeType is the type of the declared exchange: topic, direct or fanout.
	// Default: topic.
	ExchangeType ExchangeType `yaml:"exchangeType"`
	// RoutingKeyTemplate is the routing key when the matched route sets none.
	// Default: {{ topic }}.
	RoutingKeyTemplate string `yaml:"routingKeyTemplate"`
	// DeliveryMode is persistent or transient. Default: persistent.
	DeliveryMode DeliveryMode `yaml:"deliveryMode"`
}

// KafkaSecurity holds the security keys of a Kafka destination or source.
type KafkaSecurity struct {
	// SecurityProtocol is PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL. Default: PLAINTEXT.
	SecurityProtocol SecurityProtocol `yaml:"securityProtocol"`
	// SASLMechanism, for example SCRAM-SHA-512. Required by a SASL_ protocol. Default: empty.
	SASLMechanism string `yaml:"saslMechanism,omitempty"`
	// SASLUsername is required by a SASL_ protocol. Default: empty.
	SASLUsername string `yaml:"saslUsername,omitempty"`
	// SASLPassword is required by a SASL_ protocol. Default: empty.
	SASLPassword Secret `yaml:"saslPassword,omitempty"`
}

// KafkaDestination holds the keys of a Kafka destination.
type KafkaDestination struct {
	// BootstrapServers lists the brokers, separated by commas. Required. See Brokers.
	BootstrapServers string `yaml:"bootstrapServers"`
	// Topic is the Kafka topic or an address template. Required.
	Topic string `yaml:"topic"`
	// TopicFrom names the row column that holds the topic: aggregate_type, topic or key. It wins
	// over Topic. Default: empty, none.
	TopicFrom AddressColumn `yaml:"topicFrom,omitempty"`
	// KeyTemplate is the record key; {{ key }} and {{ topic }} render, an empty result sends no
	// key, and a route routingKeyTemplate wins. Default: {{ key }}.
	KeyTemplate string `yaml:"keyTemplate"`
	// TimeoutMs is the whole publish budget. It must be at least 2000. Default: 30000.
	TimeoutMs Milliseconds `yaml:"timeoutMs"`
	// KafkaSecurity holds securityProtocol and the SASL keys.
	KafkaSecurity `yaml:",inline"`
}

// Brokers returns BootstrapServers split at the commas.
func (k *KafkaDestination) Brokers() []string { return splitList(k.BootstrapServers) }

// NATSCredentials holds the credentials of a NATS destination or source: a user name and a
// password, or a token.
type NATSCredentials struct {
	// Username is a user name; it needs Password. Default: empty.
	Username string `yaml:"username,omitempty"`
	// Password needs Username. Default: empty.
	Password Secret `yaml:"password,omitempty"`
	// Token is a token; set a token or a user name, not both. Default: empty.
	Token Secret `yaml:"token,omitempty"`
}

// NATSDestination holds the keys of a NATS destination.
type NATSDestination struct {
	// Servers lists the server URLs, separated by commas. Required. See ServerList.
	Servers string `yaml:"servers"`
	// Subject is the subject or an address template. Required.
	Subject string `yaml:"subject"`
	// SubjectFrom names the row column that holds the subject: aggregate_type, topic or key. It
	// wins over Subject. Default: empty, none.
	SubjectFrom AddressColumn `yaml:"subjectFrom,omitempty"`
	// JetStream publishes through JetStream and waits for its acknowledgement; false publishes
	// on core NATS. Default: true.
	JetStream bool `yaml:"jetStream"`
	// TimeoutMs is the publish timeout. It must be above 0. Default: 30000.
	TimeoutMs Milliseconds `yaml:"timeoutMs"`
	// NATSCredentials holds username, password and token.
	NATSCredentials `yaml:",inline"`
}

// ServerList returns Servers split at the commas.
func (n *NATSDestination) ServerList() []string { return splitList(n.Servers) }

// DestinationAuthKind is the kind of a destination auth block.
type DestinationAuthKind string

// The kinds of destination auth.
const (
	AuthOAuth2 DestinationAuthKind = "oauth2"
	AuthBasic  DestinationAuthKind = "basic"
	AuthHeader DestinationAuthKind = "header"
)

// DestinationAuth is destinations.<name>.auth. Kind says which one of OAuth2, Basic and Header
// is set.
type DestinationAuth struct {
	// Kind is selected from the required keys: clientId, clientSecret and tokenUrl (oauth2);
	// username and password (basic); headerValue (header).
	Kind DestinationAuthKind `yaml:"-"`
	// Type is the type key as written: documentation only.
	Type string `yaml:"type,omitempty"`
	// OAuth2 is set when Kind is oauth2.
	OAuth2 *OAuth2Auth `yaml:"-"`
	// Basic is set when Kind is basic.
	Basic *BasicAuth `yaml:"-"`
	// Header is set when Kind is header.
	Header *HeaderAuth `yaml:"-"`
}

// OAuth2Auth is the client credentials grant: QueueBox sends Authorization: Bearer <token>.
type OAuth2Auth struct {
	// ClientID is the client identifier. Required.
	ClientID string `yaml:"clientId"`
	// ClientSecret is the client secret. Required.
	ClientSecret Secret `yaml:"clientSecret"`
	// TokenURL is the token endpoint; the rules of baseUrl apply. Required.
	TokenURL string `yaml:"tokenUrl"`
	// Scope is the scope parameter of the token request. Default: empty, none.
	Scope string `yaml:"scope,omitempty"`
	// ExtraParams are extra form parameters of the token request. Default: empty.
	ExtraParams map[string]string `yaml:"extraParams,omitempty"`
}

// BasicAuth is HTTP Basic authentication.
type BasicAuth struct {
	// Username is the user name. Required.
	Username string `yaml:"username"`
	// Password is the password. Required.
	Password Secret `yaml:"password"`
}

// HeaderAuth sends a static credential header.
type HeaderAuth struct {
	// HeaderName is the header that carries the credential. Default: Authorization.
	HeaderName string `yaml:"headerName"`
	// HeaderValue is the value of that header. Required.
	HeaderValue Secret `yaml:"headerValue"`
}

// The kinds of destination, in the order the loader tries them.
var destinationKinds = []kindSpec{
	{name: string(kind.HTTP), required: []string{"baseUrl"}, typ: reflect.TypeFor[HTTPDestination]()},
	{name: string(kind.RabbitMQ), required: []string{"url", "exchange"}, typ: reflect.TypeFor[RabbitMQDestination]()},
	{name: string(kind.Kafka), required: []string{"bootstrapServers", "topic"}, typ: reflect.TypeFor[KafkaDestination]()},
	{name: string(kind.NATS), required: []string{"servers", "subject"}, typ: reflect.TypeFor[NATSDestination]()},
}

func (d *Destination) kinds() ([]kindSpec, string) { return destinationKinds, "destination" }

func (d *Destination) selectKind(name string) any {
	d.Kind = DestinationKind(name)
	switch d.Kind {
	case kind.HTTP:
		d.HTTP = &HTTPDestination{Path: "/", TimeoutMs: 30000}
		return d.HTTP
	case kind.RabbitMQ:
		d.RabbitMQ = &RabbitMQDestination{ExchangeType: ExchangeTopic, RoutingKeyTemplate: "{{ topic }}", DeliveryMode: DeliveryPersistent}
		return d.RabbitMQ
	case kind.Kafka:
		d.Kafka = &KafkaDestination{KeyTemplate: "{{ key }}", TimeoutMs: 30000, KafkaSecurity: KafkaSecurity{SecurityProtocol: SecurityPlaintext}}
		return d.Kafka
	case kind.NATS:
		d.NATS = &NATSDestination{JetStream: true, TimeoutMs: 30000}
		return d.NATS
	}
	panic(fmt.Sprintf("config: unknown destination kind %q", name))
}

func (d *Destination) kindPart() (string, any) {
	switch d.Kind {
	case kind.HTTP:
		return string(d.Kind), d.HTTP
	case kind.RabbitMQ:
		return string(d.Kind), d.RabbitMQ
	case kind.Kafka:
		return string(d.Kind), d.Kafka
	case kind.NATS:
		return string(d.Kind), d.NATS
	}
	return "", nil
}

func (d *Destination) typeKey() string { return d.Type }

func (d *Destination) setName(name string) { d.Name = name }

// The kinds of destination auth, in the order the loader tries them.
var destinationAuthKinds = []kindSpec{
	{name: string(AuthOAuth2), required: []string{"clientId", "clientSecret", "tokenUrl"}, typ: reflect.TypeFor[OAuth2Auth]()},
	{name: string(AuthBasic), required: []string{"username", "password"}, typ: reflect.TypeFor[BasicAuth]()},
	{name: string(AuthHeader), required: []string{"headerValue"}, typ: reflect.TypeFor[HeaderAuth]()},
}

func (a *DestinationAuth) kinds() ([]kindSpec, string) { return destinationAuthKinds, "auth" }

func (a *DestinationAuth) selectKind(name string) any {
	a.Kind = DestinationAuthKind(name)
	switch a.Kind {
	case AuthOAuth2:
		a.OAuth2 = &OAuth2Auth{}
		return a.OAuth2
	case AuthBasic:
		a.Basic = &BasicAuth{}
		return a.Basic
	case AuthHeader:
		a.Header = &HeaderAuth{HeaderName: "Authorization"}
		return a.Header
	}
	panic(fmt.Sprintf("config: unknown destination auth kind %q", name))
}

func (a *DestinationAuth) kindPart() (string, any) {
	switch a.Kind {
	case AuthOAuth2:
		return string(a.Kind), a.OAuth2
	case AuthBasic:
		return string(a.Kind), a.Basic
	case AuthHeader:
		return string(a.Kind), a.Header
	}
	return "", nil
}

func (a *DestinationAuth) typeKey() string { return a.Type }

// DestinationKinds returns the kinds of destination that the configuration knows, in the
// order that the loader tries them.
func DestinationKinds() []DestinationKind {
	out := make([]DestinationKind, len(destinationKinds))
	for i, k := range destinationKinds {
		out[i] = DestinationKind(k.name)
	}
	return out
}
