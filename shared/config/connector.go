package config

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/alternayte/queuebox/shared/forwarded"
	"github.com/alternayte/queuebox/shared/kind"
)

// ConnectorSpec is what the configuration knows of one connector kind that a folder under
// shared/connect registers (Components.Connectors): the keys of its destination block and of
// its source block, their defaults, their checks and the bounds of their numeric keys. The
// configuration tree holds the block as the connector's own type (Destination.Block,
// Source.Block), so that a new kind adds no field, no case and no bound here. HTTP is the one
// built-in kind (Destination.HTTP, Source.HTTP): the inbox is QueueBox's own HTTP source, and
// the webhook destination shares its auth and signing blocks with the rest of the tree.
type ConnectorSpec struct {
	// Kind is the kind: the name of the external system (shared/kind).
	Kind kind.Kind
	// Destination describes the destination block of the kind; nil when the kind has no
	// destination.
	Destination *BlockSpec
	// Source describes the source block of the kind; nil when the kind has no source. A source
	// block embeds BrokerSource (the keys that every broker source shares).
	Source *BlockSpec
	// Headers is what a destination of the kind carries of a header (docs/headers.md): the
	// validation checks a destination's static headers with it, and the outbox fits a row's
	// headers to it before each publish. The zero Rule carries every header.
	Headers forwarded.Rule
}

// BlockSpec describes the block of one kind of destination or source.
type BlockSpec struct {
	// Required lists the keys that select the kind: an entry that sets all of them is of it.
	Required []string
	// New returns a pointer to a new block (a struct whose fields carry yaml tags, as every
	// type of this package does) with the defaults of its keys. The block implements Block.
	New func() Block
	// Bounds are the largest values of the block's numeric keys, by key name; every numeric
	// key of the block needs one (the configuration reference lists them).
	Bounds []Bound
}

// Block is the typed block of a connector kind.
type Block interface {
	// Check reports the problems of the block's keys; c is the entry's key path.
	Check(c Check)
}

// Normalizer is a Block whose enumerations load in any letter case: Normalize stores their
// canonical spelling after the decode and before the checks.
type Normalizer interface {
	Normalize()
}

// Bound is the largest value of one numeric key of a connector's block.
type Bound struct {
	// Key is the key's name in the block (timeoutMs).
	Key string
	// Max is the largest value.
	Max int64
	// Why says what the bound protects.
	Why string
}

// The bounds that connector blocks share with the rest of the tree.
const (
	// MaxMillis is the largest value of a key in milliseconds (about 24.8 days).
	MaxMillis = maxMillis
	// WhyMillis says why MaxMillis bounds a key in milliseconds.
	WhyMillis = whyMillis
	// MaxBatch is the largest number of messages of one fetch.
	MaxBatch = maxBatch
	// WhyBatch says why MaxBatch bounds a batch.
	WhyBatch = whyBatch
)

// Check is where a Block reports its problems: one key path and the validation that collects
// them. Key and Index move down the path; the other methods check the key that c names.
type Check struct {
	v *validator
	p keyPath
}

// Key returns the check of the key name below c.
func (c Check) Key(name string) Check { return Check{v: c.v, p: c.p.child(name)} }

// Index returns the check of list item i of c.
func (c Check) Index(i int) Check { return Check{v: c.v, p: c.p.index(i)} }

// String returns the key path, as a problem names it: destinations.orders.url.
func (c Check) String() string { return c.p.String() }

// Problem reports a problem of the key: its text follows the key path in the error.
func (c Check) Problem(format string, args ...any) { c.v.add(c.p, format, args...) }

// Required reports "is required" when s is blank, and whether s is set.
func (c Check) Required(s string) bool { return c.v.required(c.p, s) }

// RequiredSecret reports "is required" when s is empty.
func (c Check) RequiredSecret(s Secret) { c.v.requiredSecret(c.p, s) }

// Positive reports a value that is not above 0.
func (c Check) Positive(n int64) { c.v.positive(c.p, n) }

// OneOf reports a value outside allowed, and whether it is one of them.
func (c Check) OneOf(got string, allowed ...string) bool { return c.v.oneOf(c.p, got, allowed...) }

// Address checks an address template (the key of c) and the column key from that names the
// row column that wins over it (exchangeFrom, topicFrom, subjectFrom).
func (c Check) Address(tmpl string, from Check, column AddressColumn) {
	c.v.address(c.p, tmpl, from.p, column)
}

// NewBrokerSource returns the keys that every broker source shares, with their defaults: a
// connector's source block embeds it.
func NewBrokerSource() BrokerSource {
	return BrokerSource{AttributeHeaders: DefaultAttributeHeaders()}
}

// SplitList splits a comma-separated list (bootstrapServers, servers), trimming each entry
// and dropping the empty ones.
func SplitList(s string) []string { return splitList(s) }

// connectorKinds returns the kinds of an entry: the built-in HTTP kind, then the connector
// kinds of comps that have the block that spec selects, in their order.
func connectorKinds(http kindSpec, comps *Components, block func(ConnectorSpec) *BlockSpec) []kindSpec {
	out := []kindSpec{http}
	if comps == nil {
		return out
	}
	for _, c := range comps.Connectors {
		if b := block(c); b != nil {
			out = append(out, kindSpec{name: string(c.Kind), required: b.Required, typ: reflect.TypeOf(b.New()).Elem(), block: b})
		}
	}
	return out
}

// checkConnectors refuses a Components whose connectors clash: a kind twice, the built-in
// kind, or a block that is not a pointer to a struct.
func (c *Components) checkConnectors() error {
	seen := map[kind.Kind]bool{kind.HTTP: true}
	for _, s := range c.Connectors {
		if seen[s.Kind] {
			return fmt.Errorf("config: the connector kind %q is registered twice or is built in", s.Kind)
		}
		seen[s.Kind] = true
		for _, b := range []*BlockSpec{s.Destination, s.Source} {
			if b == nil {
				continue
			}
			if t := reflect.TypeOf(b.New()); t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
				return fmt.Errorf("config: the block of the connector kind %q is %s, not a pointer to a struct", s.Kind, t)
			}
		}
	}
	// A key pattern has one bound: a connector's bound of a key that the table or another
	// connector also bounds must be the same.
	all := map[string]bound{}
	for _, b := range bounds {
		all[b.key] = b
	}
	for _, s := range c.Connectors {
		for key, b := range connectorBoundsOf(s) {
			if prev, ok := all[key]; ok && prev.max != b.max {
				return fmt.Errorf("config: the connector kind %q bounds %s at %d, which is bounded at %d already", s.Kind, key, b.max, prev.max)
			}
			all[key] = b
		}
	}
	return nil
}

// connectorBounds returns the bounds of the connectors' numeric keys by key pattern
// (destinations.*.timeoutMs).
func (c *Components) connectorBounds() map[string]bound {
	out := map[string]bound{}
	if c == nil {
		return out
	}
	for _, s := range c.Connectors {
		for key, b := range connectorBoundsOf(s) {
			out[key] = b
		}
	}
	return out
}

// connectorBoundsOf returns the bounds of one connector's numeric keys by key pattern.
func connectorBoundsOf(s ConnectorSpec) map[string]bound {
	out := map[string]bound{}
	for _, e := range []struct {
		section string
		block   *BlockSpec
	}{{"destinations", s.Destination}, {"sources", s.Source}} {
		if e.block == nil {
			continue
		}
		for _, b := range e.block.Bounds {
			key := e.section + ".*." + strings.TrimPrefix(b.Key, ".")
			out[key] = bound{key: key, max: b.Max, why: b.Why}
		}
	}
	return out
}

// HeaderRule returns what a destination of kind k carries of a header: forwarded.HTTP for the
// built-in kind http, the connector's rule for a connector's kind, and every header for a kind
// that c does not know.
func (c *Components) HeaderRule(k kind.Kind) forwarded.Rule {
	if k == kind.HTTP {
		return forwarded.HTTP
	}
	if c != nil {
		for _, s := range c.Connectors {
			if s.Kind == k {
				return s.Headers
			}
		}
	}
	return forwarded.Rule{}
}
