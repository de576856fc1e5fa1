package config

import (
	"fmt"
	"reflect"

	"github.com/alternayte/queuebox/shared/inboundauth"
	"github.com/alternayte/queuebox/shared/kind"
)

// SourceKind is the kind of an inbox source, selected from its required keys: kind.HTTP, built
// in, or the kind of a connector (Components.Connectors).
type SourceKind = kind.Kind

// Source is one entry of sources. Kind says which one of HTTP (the built-in kind) and Block (a
// connector's kind, a broker source) is set.
type Source struct {
	// Name is the map key of the entry, stored in the source column of each inbox row. It is not
	// a configuration key.
	Name string `yaml:"-"`
	// Kind is selected from the required keys that the entry sets: path and idempotencyKeyPath
	// (http), or those of a connector kind (ConnectorSpec; rabbitmq: queueName and
	// connectionUrl, for example).
	Kind SourceKind `yaml:"-"`
	// Type is the type key as written: documentation only, the loader does not check it.
	Type string `yaml:"type,omitempty"`
	// Consumption is push (the relay copies the row into the outbox) or pull (a pull client
	// claims it). Default: push.
	Consumption Consumption `yaml:"consumption"`
	// Topic is the outbox topic that the relay writes; {{ source }} and {{ eventType }} render.
	// It must not be blank on a push source. Default: {{ eventType }} for HTTP, {{ source }} for
	// the others.
	Topic string `yaml:"topic"`
	// IdempotencyKeyPath is the definite JSONPath of the idempotency key in the body. Required
	// for HTTP; default $.id for the others.
	IdempotencyKeyPath string `yaml:"idempotencyKeyPath"`
	// AggregateIDPath is the definite JSONPath of the aggregate identifier. Default: empty, none.
	AggregateIDPath string `yaml:"aggregateIdPath,omitempty"`
	// EventTypePath is the definite JSONPath of the event type. Default: empty, none.
	EventTypePath string `yaml:"eventTypePath,omitempty"`
	// Transform runs before the store. Default: nil, none.
	Transform *Transform `yaml:"transform,omitempty"`
	// Filter is the header filter. Default: empty, every message passes.
	Filter Filter `yaml:"filter,omitempty"`
	// ForwardHeaders lists the received headers, by name in any letter case, that the relay
	// copies onto the outbox row; the others are dropped. Beyond the documented product
	// (docs/headers.md). Default: nil, every received header is copied (apart from the
	// hop-by-hop and framing headers, which never are).
	ForwardHeaders []string `yaml:"forwardHeaders,omitempty"`
	// RateLimit limits the requests of an HTTP source; the other kinds ignore it.
	// Default: nil, none.
	RateLimit *RateLimit `yaml:"rateLimit,omitempty"`

	// HTTP is set when Kind is http.
	HTTP *HTTPSource `yaml:"-"`
	// Block is the block of a connector's kind (its ConnectorSpec.Source), the connector's own
	// type, which embeds BrokerSource; nil when Kind is http.
	Block Block `yaml:"-"`
}

// NewSource returns a source of the built-in kind http with every default, as the loader
// builds it before it reads the entry's keys. Code that builds a configuration by hand, a test
// for example, starts from it; a connector's configuration package builds one of its kind with
// NewConnectorSource.
func NewSource(name string, k SourceKind) *Source {
	s := &Source{Name: name}
	s.setDefaults()
	s.selectKind(kindSpec{name: string(k)})
	return s
}

// NewConnectorSource returns a source of a connector's kind k whose block is b (with its
// defaults), with every default of a broker source.
func NewConnectorSource(name string, k SourceKind, b Block) *Source {
	s := &Source{Name: name}
	s.setDefaults()
	s.selectKind(kindSpec{name: string(k), block: &BlockSpec{New: func() Block { return b }}})
	return s
}

// NewInboundAuth returns a source or admin auth block of the given kind with its defaults.
func NewInboundAuth(k InboundAuthKind) *InboundAuth {
	a := &InboundAuth{}
	a.selectKind(kindSpec{name: string(k)})
	if a.HMAC != nil {
		a.HMAC.resolveDefaults()
	}
	return a
}

// Broker returns the keys that every broker source shares (those of the block of a connector's
// kind), or nil for an HTTP source.
func (s *Source) Broker() *BrokerSource {
	if b, ok := s.Block.(interface{ Broker() *BrokerSource }); ok {
		return b.Broker()
	}
	return nil
}

// RateLimit is sources.<name>.rateLimit.
type RateLimit struct {
	// RequestsPerMinute is the request limit; a request over it gets 429. It must be above 0.
	RequestsPerMinute int `yaml:"requestsPerMinute"`
}

// Filter is sources.<name>.filter: a message must match every Require rule and no Exclude rule.
type Filter struct {
	// Require lists the rules that a message must all match. Default: empty.
	Require []FilterRule `yaml:"require,omitempty"`
	// Exclude lists the rules that a message must not match. Default: empty.
	Exclude []FilterRule `yaml:"exclude,omitempty"`
}

// IsZero reports whether the filter has no rule.
func (f Filter) IsZero() bool { return len(f.Require) == 0 && len(f.Exclude) == 0 }

// FilterRule is one rule of a filter. It sets exactly one of Equals, In, Matches and Exists
// (and Exists only as true).
type FilterRule struct {
	// Header is the header name; it matches in any letter case. Required.
	Header string `yaml:"header"`
	// Equals: the value must equal this string. Default: nil, not set.
	Equals *string `yaml:"equals,omitempty"`
	// In: the value must equal one entry; the list must not be empty. Default: nil, not set.
	In []string `yaml:"in,omitempty"`
	// Matches: the value must match this topic glob. Default: nil, not set.
	Matches *string `yaml:"matches,omitempty"`
	// Exists: true means the header must be present; false stops the start. Default: nil, not set.
	Exists *bool `yaml:"exists,omitempty"`
}

// HTTPSource holds the keys of an HTTP source, which answers POST <inbox.basePath><path>.
type HTTPSource struct {
	// Path is the path after inbox.basePath. Required.
	Path string `yaml:"path"`
	// Auth holds the credentials that each request must carry: bearer, api-key, hmac, stripe or
	// standard-webhooks. Default: nil, none.
	Auth *InboundAuth `yaml:"auth,omitempty"`
}

// AttributeHeaders names the headers from which a broker source reads three attributes.
type AttributeHeaders struct {
	// IdempotencyKey is the header of the idempotency key. Default: x-idempotency-key.
	IdempotencyKey string `yaml:"idempotencyKey"`
	// AggregateID is the header of the aggregate identifier. Default: x-aggregate-id.
	AggregateID string `yaml:"aggregateId"`
	// EventType is the header of the event type. Default: x-event-type.
	EventType string `yaml:"eventType"`
}

// BrokerSource holds the keys that every broker source shares: the source block of a
// connector's kind embeds it (NewBrokerSource gives its defaults).
type BrokerSource struct {
	// EventTypeFromHeader declares that every publisher sets the event type header.
	// Default: false.
	EventTypeFromHeader bool `yaml:"eventTypeFromHeader"`
	// AttributeHeaders names the attribute headers.
	AttributeHeaders AttributeHeaders `yaml:"attributeHeaders"`
	// MaxBodyBytes is the largest body that the source stores; a larger one becomes a dead row
	// that names its size, without the body. An extension (docs/broker-sources.md); when set
	// it must be above 0. Default: nil, no limit (inbox.maxBodyBytes is the data port's).
	MaxBodyBytes *int `yaml:"maxBodyBytes,omitempty"`
}

// Broker returns b: the block of a broker source reports its shared keys through it.
func (b *BrokerSource) Broker() *BrokerSource { return b }

// DefaultAttributeHeaders returns the default attribute header names.
func DefaultAttributeHeaders() AttributeHeaders {
	return AttributeHeaders{IdempotencyKey: "x-idempotency-key", AggregateID: "x-aggregate-id", EventType: "x-event-type"}
}

// httpSource is the built-in kind of source, which the loader tries first.
var httpSource = kindSpec{name: string(kind.HTTP), required: []string{"path", "idempotencyKeyPath"}, typ: reflect.TypeFor[HTTPSource]()}

func (s *Source) setDefaults() { s.Consumption = ConsumptionPush }

func (s *Source) kinds(comps *Components) ([]kindSpec, string) {
	return connectorKinds(httpSource, comps, func(c ConnectorSpec) *BlockSpec { return c.Source }), "source"
}

func (s *Source) selectKind(spec kindSpec) any {
	s.Kind = SourceKind(spec.name)
	if s.Kind == kind.HTTP {
		s.Topic = "{{ eventType }}"
	} else {
		s.Topic = "{{ source }}"
		s.IdempotencyKeyPath = "$.id"
	}
	switch {
	case spec.block != nil:
		s.Block = spec.block.New()
		return s.Block
	case s.Kind == kind.HTTP:
		s.HTTP = &HTTPSource{}
		return s.HTTP
	}
	panic(fmt.Sprintf("config: unknown source kind %q", spec.name))
}

func (s *Source) kindPart() (string, any) {
	switch {
	case s.HTTP != nil:
		return string(s.Kind), s.HTTP
	case s.Block != nil:
		return string(s.Kind), s.Block
	}
	return "", nil
}

func (s *Source) typeKey() string { return s.Type }

func (s *Source) setName(name string) { s.Name = name }

// InboundAuthKind is the kind of a source or admin auth block.
type InboundAuthKind string

// The kinds of inbound auth. The required keys select bearer, api-key and hmac. Stripe and
// standard-webhooks go beyond the documented product: their required key secret is also hmac's,
// so only the type key selects them (type: stripe, type: standard-webhooks). Only a source
// takes them; admin.auth refuses them.
const (
	AuthBearer           InboundAuthKind = "bearer"
	AuthAPIKey           InboundAuthKind = "api-key"
	AuthHMAC             InboundAuthKind = "hmac"
	AuthStripe           InboundAuthKind = "stripe"
	AuthStandardWebhooks InboundAuthKind = "standard-webhooks"
)

// InboundAuth is sources.<name>.auth and admin.auth: the credentials that a request must carry.
// Kind says which one of Bearer, APIKey, HMAC, Stripe and StandardWebhooks is set.
type InboundAuth struct {
	// Kind is selected from the required keys: token (bearer), key (api-key), secret (hmac).
	// The exception: type: stripe and type: standard-webhooks (in any letter case) select the
	// stripe and standard-webhooks kinds, whatever keys the block sets.
	Kind InboundAuthKind `yaml:"-"`
	// Type is the type key as written: documentation only, except that stripe and
	// standard-webhooks select those kinds.
	Type string `yaml:"type,omitempty"`
	// Bearer is set when Kind is bearer.
	Bearer *BearerAuth `yaml:"-"`
	// APIKey is set when Kind is api-key.
	APIKey *APIKeyAuth `yaml:"-"`
	// HMAC is set when Kind is hmac.
	HMAC *HMACAuth `yaml:"-"`
	// Stripe is set when Kind is stripe.
	Stripe *StripeAuth `yaml:"-"`
	// StandardWebhooks is set when Kind is standard-webhooks.
	StandardWebhooks *StandardWebhooksAuth `yaml:"-"`
}

// CredentialHeader returns the header that carries the credential: Authorization for bearer,
// HeaderName for api-key and hmac, Stripe-Signature for stripe, webhook-signature for
// standard-webhooks. A stored inbox row never holds it.
func (a *InboundAuth) CredentialHeader() string {
	switch {
	case a.APIKey != nil:
		return a.APIKey.HeaderName
	case a.HMAC != nil:
		return a.HMAC.HeaderName
	case a.Stripe != nil:
		return StripeSignatureHeader
	case a.StandardWebhooks != nil:
		return StandardWebhooksSignatureHeader
	}
	return "Authorization"
}

// BearerAuth requires Authorization: Bearer <token>.
type BearerAuth struct {
	// Token is the expected token. Required.
	Token Secret `yaml:"token"`
}

// APIKeyAuth requires a key in a header.
type APIKeyAuth struct {
	// Key is the expected key. Required.
	Key Secret `yaml:"key"`
	// HeaderName is the header that carries the key. Default: X-API-Key.
	HeaderName string `yaml:"headerName"`
}

// HMACAuth requires an HMAC signature of the request.
type HMACAuth struct {
	// Secret is the HMAC key. Required.
	Secret Secret `yaml:"secret"`
	// HeaderName is the header that carries the signature. Default: X-Signature.
	HeaderName string `yaml:"headerName"`
	// Algorithm is HmacSHA256 or HmacSHA512, in this letter case. Default: HmacSHA256.
	Algorithm HMACAlgorithm `yaml:"algorithm"`
	// SignaturePrefix is the text before the hexadecimal signature; "" for none.
	// Default: sha256=.
	SignaturePrefix string `yaml:"signaturePrefix"`
	// TimestampHeader carries the request time in Unix milliseconds. Default: empty, none.
	TimestampHeader string `yaml:"timestampHeader,omitempty"`
	// TimestampTolerance is the largest difference between the request time and the clock. It
	// must be above 0. Default: 300000.
	TimestampTolerance Milliseconds `yaml:"timestampTolerance"`
	// SignaturePayloadFormat is BODY or TIMESTAMP_DOT_BODY (body and timestamp-dot-body load as
	// well). TIMESTAMP_DOT_BODY needs TimestampHeader. Default: TIMESTAMP_DOT_BODY when
	// TimestampHeader is set, BODY otherwise (the loader fills it in).
	SignaturePayloadFormat SignaturePayloadFormat `yaml:"signaturePayloadFormat"`
}

// The headers of the stripe and standard-webhooks kinds, fixed by their senders.
const (
	StripeSignatureHeader           = inboundauth.StripeSignatureHeader
	StandardWebhooksIDHeader        = inboundauth.StandardWebhooksIDHeader
	StandardWebhooksTimestampHeader = inboundauth.StandardWebhooksTimestampHeader
	StandardWebhooksSignatureHeader = inboundauth.StandardWebhooksSignatureHeader
)

// StripeAuth requires Stripe's Stripe-Signature header: t=<Unix seconds>,v1=<hex HMAC-SHA256 of
// t.body>. Only type: stripe selects it.
type StripeAuth struct {
	// Secret is the endpoint's signing secret, whsec_..., used as written as the HMAC key.
	// Required.
	Secret Secret `yaml:"secret"`
	// TimestampTolerance is the largest difference between t and the clock. It must be above 0.
	// Default: 300000 (Stripe's 5 minutes).
	TimestampTolerance Milliseconds `yaml:"timestampTolerance"`
}

// StandardWebhooksAuth requires the webhook-id, webhook-timestamp and webhook-signature headers of
// the Standard Webhooks specification (standardwebhooks.com). Only type: standard-webhooks
// selects it.
type StandardWebhooksAuth struct {
	// Secret is whsec_ followed by the base64 of the key, or the base64 alone. Required.
	Secret Secret `yaml:"secret"`
	// TimestampTolerance is the largest difference between webhook-timestamp and the clock. It
	// must be above 0. Default: 300000 (5 minutes).
	TimestampTolerance Milliseconds `yaml:"timestampTolerance"`
}

// SigningKey returns the HMAC key: the secret without its whsec_ prefix, base64-decoded. The
// error says why the secret does not decode, without its text.
func (s *StandardWebhooksAuth) SigningKey() ([]byte, error) {
	return StandardWebhooksKey(s.Secret.Reveal())
}

// StandardWebhooksKey decodes a Standard Webhooks secret, whsec_<base64> or <base64>, into the
// HMAC key (inboundauth.StandardWebhooksKey, the decoding that the verifier uses). The error
// never holds the secret.
func StandardWebhooksKey(secret string) ([]byte, error) {
	return inboundauth.StandardWebhooksKey(secret)
}

// The kinds of inbound auth, in the order the loader tries them.
var inboundAuthKinds = []kindSpec{
	{name: string(AuthBearer), required: []string{"token"}, typ: reflect.TypeFor[BearerAuth]()},
	{name: string(AuthAPIKey), required: []string{"key"}, typ: reflect.TypeFor[APIKeyAuth]()},
	{name: string(AuthHMAC), required: []string{"secret"}, typ: reflect.TypeFor[HMACAuth]()},
}

// The kinds of inbound auth that only the type key selects.
var typedInboundAuthKinds = []kindSpec{
	{name: string(AuthStripe), required: []string{"secret"}, typ: reflect.TypeFor[StripeAuth]()},
	{name: string(AuthStandardWebhooks), required: []string{"secret"}, typ: reflect.TypeFor[StandardWebhooksAuth]()},
}

func (a *InboundAuth) kinds(*Components) ([]kindSpec, string) { return inboundAuthKinds, "auth" }

func (a *InboundAuth) typedKinds() []kindSpec { return typedInboundAuthKinds }

func (a *InboundAuth) selectKind(spec kindSpec) any {
	a.Kind = InboundAuthKind(spec.name)
	switch a.Kind {
	case AuthBearer:
		a.Bearer = &BearerAuth{}
		return a.Bearer
	case AuthAPIKey:
		a.APIKey = &APIKeyAuth{HeaderName: "X-API-Key"}
		return a.APIKey
	case AuthHMAC:
		a.HMAC = &HMACAuth{HeaderName: "X-Signature", Algorithm: HmacSHA256, SignaturePrefix: "sha256=", TimestampTolerance: 300000}
		return a.HMAC
	case AuthStripe:
		a.Stripe = &StripeAuth{TimestampTolerance: 300000}
		return a.Stripe
	case AuthStandardWebhooks:
		a.StandardWebhooks = &StandardWebhooksAuth{TimestampTolerance: 300000}
		return a.StandardWebhooks
	}
	panic(fmt.Sprintf("config: unknown inbound auth kind %q", spec.name))
}

func (a *InboundAuth) kindPart() (string, any) {
	switch a.Kind {
	case AuthBearer:
		return string(a.Kind), a.Bearer
	case AuthAPIKey:
		return string(a.Kind), a.APIKey
	case AuthHMAC:
		return string(a.Kind), a.HMAC
	case AuthStripe:
		return string(a.Kind), a.Stripe
	case AuthStandardWebhooks:
		return string(a.Kind), a.StandardWebhooks
	}
	return "", nil
}

func (a *InboundAuth) typeKey() string { return a.Type }

// resolveDefaults fills the default that depends on another key: the payload format.
func (h *HMACAuth) resolveDefaults() {
	if h.SignaturePayloadFormat != "" {
		return
	}
	if h.TimestampHeader != "" {
		h.SignaturePayloadFormat = PayloadTimestampDotBody
	} else {
		h.SignaturePayloadFormat = PayloadBody
	}
}

// SourceKinds returns the kinds of source that the configuration knows with comps, in the
// order that the loader tries them: http, then the connector kinds that have a source.
func SourceKinds(comps *Components) []SourceKind {
	specs, _ := (&Source{}).kinds(comps)
	out := make([]SourceKind, len(specs))
	for i, k := range specs {
		out[i] = SourceKind(k.name)
	}
	return out
}
