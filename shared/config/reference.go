package config

import (
	"reflect"
	"slices"
)

// KeyDoc describes one key of the configuration for its reference page
// (docs/reference/configuration.md, which tools/refdocs writes from Reference).
type KeyDoc struct {
	// Pattern is the key path, with * for a map key (a destination or source name) and [*] for
	// a list index, as the bounds name it: destinations.*.auth.clientId.
	Pattern string
	// Entry is the pattern of the innermost entry with kinds that holds the key
	// (destinations.*, destinations.*.auth), or "" when no such entry does.
	Entry string
	// Kind is the kind of Entry whose defaults Default shows; "" when Entry is "".
	Kind string
	// Common is true for a key of the entry itself, which each of its kinds has (Reference
	// then returns the key once per kind, each with that kind's default), and false for a key
	// of the part of the kind Kind.
	Common bool
	// Type is the Go type of the key.
	Type reflect.Type
	// Block is true for a key whose value is a map of keys, a list of them or a map of entries
	// (outbox.capture, routes, destinations), false for a value.
	Block bool
	// Default is the value that the loader starts from: the default of the key, or its zero
	// value when it has none.
	Default reflect.Value
	// Owner is the struct type that declares the key's field, and Field the field's Go name:
	// where the key's doc comment is.
	Owner reflect.Type
	// Field is the Go name of the key's field in Owner.
	Field string
	// Max is the largest value of a numeric key (the bounds table and the connectors'
	// bounds); 0 for a key without one.
	Max int64
	// Why says what Max protects.
	Why string
}

// EntryDoc describes an entry with kinds: a destination, a source, an auth or a signing block.
type EntryDoc struct {
	// Pattern is the entry's key path, as KeyDoc.Pattern writes it.
	Pattern string
	// Noun names the entry in a problem: destination, source, auth, signing.
	Noun string
	// Kinds lists the kinds in the order that the loader tries them.
	Kinds []KindDoc
}

// KindDoc is one kind of an entry.
type KindDoc struct {
	// Name is the kind.
	Name string
	// Required lists the keys that select the kind: an entry that sets all of them is of it.
	Required []string
	// Typed is true for a kind that the type key selects before the required keys are looked
	// at (type: hmac).
	Typed bool
	// ByType is true for a kind that only the type key selects (its required keys are those of
	// another kind).
	ByType bool
}

// Reference describes every key of the configuration, in the order of the types: every kind
// of every entry (the connector kinds of comps too), with the defaults the loader starts from
// and the bounds. It is what the configuration reference is generated from.
func Reference(comps *Components) ([]EntryDoc, []KeyDoc) {
	w := &refWalker{bounds: boundsOf(comps), comps: comps, seen: map[string]bool{}}
	w.fields(reflect.ValueOf(Default()).Elem(), nil, refContext{})
	return w.entries, w.keys
}

// refContext is the entry with kinds that the walk is in.
type refContext struct {
	entry, kind string
	common      bool
}

// refWalker collects the keys and entries of Reference.
type refWalker struct {
	comps   *Components
	bounds  map[string]bound
	keys    []KeyDoc
	entries []EntryDoc
	seen    map[string]bool // the keys and entries already collected
}

// resolver is a block whose default depends on another of its keys (HMACAuth).
type resolver interface{ resolveDefaults() }

// fields walks the keys of the struct v.
func (w *refWalker) fields(v reflect.Value, p keyPath, c refContext) {
	t := v.Type()
	for _, f := range fieldsOf(t) {
		owner := t
		if len(f.index) > 1 {
			owner = t.FieldByIndex(f.index[:len(f.index)-1]).Type
		}
		w.key(v.FieldByIndex(f.index), p.child(f.name), c, owner, t.FieldByIndex(f.index).Name)
	}
}

// key records the key p of value v and walks the keys below it.
func (w *refWalker) key(v reflect.Value, p keyPath, c refContext, owner reflect.Type, field string) {
	t := v.Type()
	elem := refElem(t)
	block := elem.Kind() == reflect.Struct && !isScalarStruct(elem)
	w.add(KeyDoc{Pattern: patternString(p), Entry: c.entry, Kind: c.kind, Common: c.common, Type: t,
		Block: block, Default: v, Owner: owner, Field: field})
	if !block {
		return
	}
	switch {
	case t.Kind() == reflect.Map:
		w.kinded(elem, p.child("*"))
	case t.Kind() == reflect.Slice:
		w.fields(newWithDefaults(elem).Elem(), p.child("[*]"), c)
	case isKinded(elem):
		w.kinded(elem, p)
	case t.Kind() == reflect.Pointer && v.IsNil():
		w.fields(newWithDefaults(elem).Elem(), p, c)
	case t.Kind() == reflect.Pointer:
		w.fields(v.Elem(), p, c)
	default:
		w.fields(v, p, c)
	}
}

// kinded walks every kind of the entry type t at p: the entry's own keys and its kind's.
func (w *refWalker) kinded(t reflect.Type, p keyPath) {
	proto := reflect.New(t).Interface().(kinded)
	specs, noun := proto.kinds(w.comps)
	entry := EntryDoc{Pattern: patternString(p), Noun: noun}
	var typed []kindSpec
	if ts, ok := proto.(typeSelected); ok {
		typed = ts.typedKinds()
	}
	has := func(list []kindSpec, name string) bool {
		return slices.ContainsFunc(list, func(k kindSpec) bool { return k.name == name })
	}
	all := slices.Clone(specs)
	for _, s := range specs {
		entry.Kinds = append(entry.Kinds, KindDoc{Name: s.name, Required: s.required, Typed: has(typed, s.name)})
	}
	for _, s := range typed {
		if !has(all, s.name) {
			all = append(all, s)
			entry.Kinds = append(entry.Kinds, KindDoc{Name: s.name, Required: s.required, Typed: true, ByType: true})
		}
	}
	if !w.seen["entry "+entry.Pattern] {
		w.seen["entry "+entry.Pattern] = true
		w.entries = append(w.entries, entry)
	}
	for _, s := range all {
		e := reflect.New(t)
		if df, ok := e.Interface().(defaulter); ok {
			df.setDefaults()
		}
		part := e.Interface().(kinded).selectKind(s)
		if r, ok := part.(resolver); ok {
			r.resolveDefaults()
		}
		w.fields(e.Elem(), p, refContext{entry: entry.Pattern, kind: s.name, common: true})
		w.fields(reflect.ValueOf(part).Elem(), p, refContext{entry: entry.Pattern, kind: s.name})
	}
}

// add records k once per entry and kind, with its bound.
func (w *refWalker) add(k KeyDoc) {
	id := k.Pattern + " " + k.Entry + " " + k.Kind
	if w.seen[id] {
		return
	}
	w.seen[id] = true
	if b, ok := w.bounds[k.Pattern]; ok {
		k.Max, k.Why = b.max, b.why
	} else if b, ok := w.bounds[k.Pattern+"[*]"]; ok {
		k.Max, k.Why = b.max, b.why
	}
	w.keys = append(w.keys, k)
}

// refElem returns the type whose keys a key of type t holds: the element of a pointer, a list
// or a map (the entry of destinations and sources), or t.
func refElem(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
		t = t.Elem()
	}
	return t
}

// isScalarStruct reports whether t is a struct that loads from one scalar.
func isScalarStruct(t reflect.Type) bool {
	return t == secretType || t == connectionURLType || t == retentionDurationType
}

// isKinded reports whether the struct type t is an entry with kinds.
func isKinded(t reflect.Type) bool {
	_, ok := reflect.New(t).Interface().(kinded)
	return ok
}

// newWithDefaults returns a pointer to a new t with the defaults that the loader gives a block
// that a source sets (defaulter).
func newWithDefaults(t reflect.Type) reflect.Value {
	v := reflect.New(t)
	if df, ok := v.Interface().(defaulter); ok {
		df.setDefaults()
	}
	return v
}
