package config

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"sync"
)

// scalarDecoder is a type that parses itself from the text of a scalar.
type scalarDecoder interface {
	decodeScalar(text string) error
}

// defaulter is a type that sets its defaults before the decoder fills it.
type defaulter interface {
	setDefaults()
}

// namer is a map value that takes its map key as its name.
type namer interface {
	setName(name string)
}

// kinded is an entry whose kind the loader selects from its required keys.
type kinded interface {
	// kinds returns the kinds in the order the loader tries them, and the noun of the entry;
	// comps adds the connector kinds (nil: the built-in kinds alone).
	kinds(comps *Components) ([]kindSpec, string)
	// selectKind sets the kind, allocates its part with its defaults and returns it.
	selectKind(spec kindSpec) any
	// kindPart returns the selected kind and its part.
	kindPart() (string, any)
	// typeKey returns the type key as written.
	typeKey() string
}

// typeSelected is a kinded entry that also has kinds that its type key selects, because their
// required keys are those of another kind (the stripe and standard-webhooks auth kinds share
// hmac's secret).
type typeSelected interface {
	// typedKinds returns the kinds that a type key of the same name, in any letter case, selects
	// before the required keys are looked at.
	typedKinds() []kindSpec
}

// kindSpec describes one kind of a kinded entry.
type kindSpec struct {
	name     string
	required []string
	typ      reflect.Type
	// block describes a connector kind's block; nil for a built-in kind.
	block *BlockSpec
}

// describeKinds lists the required keys of every kind, for the error of an entry that sets none.
func describeKinds(specs []kindSpec) string {
	parts := make([]string, len(specs))
	for i, s := range specs {
		parts[i] = s.name + " needs " + joinAnd(s.required)
	}
	return strings.Join(parts, "; ")
}

func joinAnd(words []string) string {
	switch len(words) {
	case 0:
		return ""
	case 1:
		return words[0]
	}
	return strings.Join(words[:len(words)-1], ", ") + " and " + words[len(words)-1]
}

var (
	secretType        = reflect.TypeFor[Secret]()
	connectionURLType = reflect.TypeFor[ConnectionURL]()
)

// decoder turns the generic tree into typed structs. It collects every problem instead of
// stopping at the first one, and warns about every key that it does not know.
type decoder struct {
	lookupEnv func(string) (string, bool)
	// readSecret reads a file: secret, at most MaxSecretFileBytes; its error completes the
	// sentence "names the secret file <name>, which ...".
	readSecret func(string) ([]byte, error)
	file       string
	problems   []Problem
	warnings   []Warning
	// comps are the components: the connector kinds of destinations and sources.
	comps *Components
}

// problem records a problem with the key at p. When the node came from the file, the message
// says on which line.
func (d *decoder) problem(p keyPath, n *node, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if n != nil && n.env == "" {
		if o := n.origin(d.file); o != "" {
			msg += " (" + o + ")"
		}
	}
	d.problems = append(d.problems, newProblem(p, msg))
}

func (d *decoder) warn(p keyPath, n *node, msg string) {
	w := Warning{Key: p.String(), Message: msg}
	if n != nil {
		w.Origin = n.origin(d.file)
	}
	d.warnings = append(d.warnings, w)
}

// decodeValue decodes n into v. A null node leaves v as it is, so that the default stays.
func (d *decoder) decodeValue(n *node, p keyPath, v reflect.Value) {
	if v.CanAddr() {
		if k, ok := v.Addr().Interface().(kinded); ok {
			d.decodeKinded(n, p, k)
			return
		}
	}
	if n.kind == nullNode || d.decodeSpecial(n, p, v) {
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		elem := reflect.New(v.Type().Elem())
		if df, ok := elem.Interface().(defaulter); ok {
			df.setDefaults()
		}
		d.decodeValue(n, p, elem.Elem())
		v.Set(elem)
	case reflect.Struct:
		d.decodeStruct(n, p, []reflect.Value{v}, nil)
	case reflect.String, reflect.Int, reflect.Int64, reflect.Float64, reflect.Bool:
		if s, ok := d.text(n, p); ok {
			d.decodeScalarKind(n, p, s, v)
		}
	case reflect.Slice:
		d.decodeList(n, p, v)
	case reflect.Map:
		d.decodeMap(n, p, v)
	default:
		panic(fmt.Sprintf("config: no decoder for %s at %s", v.Type(), p))
	}
}

// decodeSpecial decodes the types that decode themselves from one scalar: a Secret, a
// ConnectionURL and a scalarDecoder. It reports whether v is one of them.
func (d *decoder) decodeSpecial(n *node, p keyPath, v reflect.Value) bool {
	switch v.Type() {
	case secretType:
		if s, ok := d.text(n, p); ok {
			d.decodeSecret(n, p, s, v)
		}
		return true
	case connectionURLType:
		if s, ok := d.text(n, p); ok {
			v.Set(reflect.ValueOf(NewConnectionURL(s)))
		}
		return true
	}
	if !v.CanAddr() {
		return false
	}
	sd, ok := v.Addr().Interface().(scalarDecoder)
	if !ok {
		return false
	}
	if s, ok := d.text(n, p); ok {
		if err := sd.decodeScalar(s); err != nil {
			d.problem(p, n, "%v", err)
		}
	}
	return true
}

// decodeScalarKind sets the string, whole number, number or boolean v from the scalar text s.
func (d *decoder) decodeScalarKind(n *node, p keyPath, s string, v reflect.Value) {
	switch v.Kind() {
	case reflect.String:
		v.SetString(s)
	case reflect.Int, reflect.Int64:
		i, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil {
			d.problem(p, n, "must be a whole number, not %q", s)
			return
		}
		v.SetInt(i)
	case reflect.Float64:
		f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			d.problem(p, n, "must be a number, not %q", s)
			return
		}
		v.SetFloat(f)
	case reflect.Bool:
		switch strings.ToLower(strings.TrimSpace(s)) {
		case "true":
			v.SetBool(true)
		case "false":
			v.SetBool(false)
		default:
			d.problem(p, n, "must be true or false, not %q", s)
		}
	}
}

// text returns the text of a scalar with its placeholders resolved.
func (d *decoder) text(n *node, p keyPath) (string, bool) {
	if n.kind != scalarNode {
		if n.env != "" && n.kind == mapNode {
			// Variables with an extra underscore below a value: they set keys that do not
			// exist, which is not an error.
			d.reportUnknown(p, n, "")
			return "", false
		}
		d.problem(p, n, "must be a single value, not %s", n.kind)
		return "", false
	}
	s, err := expandPlaceholders(n.value, d.lookupEnv)
	if err != nil {
		d.problem(p, n, "%v", err)
		return "", false
	}
	return s, true
}

// decodeSecret sets a Secret, reading a file: reference once and removing one trailing newline.
func (d *decoder) decodeSecret(n *node, p keyPath, s string, v reflect.Value) {
	if name, ok := strings.CutPrefix(s, "file:"); ok {
		if name == "" {
			d.problem(p, n, "names no file after file:")
			return
		}
		data, err := d.readSecret(name)
		if err != nil {
			d.problem(p, n, "names the secret file %s, which %v", name, err)
			return
		}
		s = trimTrailingNewline(string(data))
	}
	v.Set(reflect.ValueOf(NewSecret(s)))
}

// trimTrailingNewline removes one trailing "\n" or "\r\n".
func trimTrailingNewline(s string) string {
	if t, ok := strings.CutSuffix(s, "\r\n"); ok {
		return t
	}
	t, _ := strings.CutSuffix(s, "\n")
	return t
}

func (d *decoder) decodeList(n *node, p keyPath, v reflect.Value) {
	if n.kind == mapNode && n.env != "" {
		// Variables whose next level is not an index: keys that do not exist.
		d.reportUnknown(p, n, "")
		return
	}
	if n.kind != listNode {
		d.problem(p, n, "must be a list, not %s (a variable sets one element: %s)", n.kind, p.index(0).envVar())
		return
	}
	out := reflect.MakeSlice(v.Type(), len(n.items), len(n.items))
	for i, item := range n.items {
		ip := p.index(i)
		if item.kind == nullNode {
			if item.env != "" {
				d.problem(ip, item, "is not set, but a later index is: the variables of a list must number its elements from 0 without a gap")
			} else {
				d.problem(ip, item, "is empty")
			}
			continue
		}
		elem := out.Index(i)
		if df, ok := elem.Addr().Interface().(defaulter); ok {
			df.setDefaults()
		}
		d.decodeValue(item, ip, elem)
	}
	v.Set(out)
}

func (d *decoder) decodeMap(n *node, p keyPath, v reflect.Value) {
	if n.kind != mapNode {
		d.problem(p, n, "must be a map, not %s", n.kind)
		return
	}
	t := v.Type()
	out := reflect.MakeMapWithSize(t, len(n.entries))
	for _, e := range n.entries {
		ep := p.child(e.key)
		var elem reflect.Value
		if t.Elem().Kind() == reflect.Pointer {
			elem = reflect.New(t.Elem().Elem())
			if df, ok := elem.Interface().(defaulter); ok {
				df.setDefaults()
			}
			if nm, ok := elem.Interface().(namer); ok {
				nm.setName(e.key)
			}
			d.decodeValue(e.val, ep, elem.Elem())
		} else {
			elem = reflect.New(t.Elem()).Elem()
			d.decodeValue(e.val, ep, elem)
		}
		out.SetMapIndex(reflect.ValueOf(e.key), elem)
	}
	v.Set(out)
}

// decodeStruct decodes a map node into the fields of targets, which share one key space. alien,
// when set, explains a key that belongs to another kind of the entry.
func (d *decoder) decodeStruct(n *node, p keyPath, targets []reflect.Value, alien func(key string) string) {
	if n.kind == nullNode {
		return
	}
	if n.kind == listNode && n.env != "" {
		d.reportUnknown(p, n, "")
		return
	}
	if n.kind != mapNode {
		d.problem(p, n, "must be a map of keys, not %s", n.kind)
		return
	}
	seen := map[string]string{}
	for _, e := range n.entries {
		field, name, ok := findField(targets, e.key)
		if !ok {
			hint := ""
			if alien != nil {
				hint = alien(e.key)
			}
			d.reportUnknown(p.child(e.key), e.val, hint)
			continue
		}
		fp := p.child(name)
		if prev, dup := seen[name]; dup {
			d.problem(fp, e.val, "is set twice, as %s and as %s", prev, e.key)
			continue
		}
		seen[name] = e.key
		d.decodeValue(e.val, fp, field)
	}
}

// reportUnknown warns about a key that matches no configuration key. A key that variables made
// is reported once per variable; a key of the file once.
func (d *decoder) reportUnknown(p keyPath, n *node, hint string) {
	if hint != "" {
		d.warn(p, n, hint)
		return
	}
	if n.env == "" {
		msg := "unknown key " + p.String()
		if o := n.origin(d.file); o != "" {
			msg += " (" + o + ")"
		}
		d.warn(p, n, msg+": it has no effect")
	}
	d.reportEnvLeaves(p, n)
}

// reportEnvLeaves warns once for every variable below n.
func (d *decoder) reportEnvLeaves(p keyPath, n *node) {
	switch n.kind {
	case mapNode:
		for _, e := range n.entries {
			d.reportEnvLeaves(p.child(e.key), e.val)
		}
	case listNode:
		for i, item := range n.items {
			d.reportEnvLeaves(p.index(i), item)
		}
	case scalarNode:
		if n.env != "" {
			d.warn(p, n, "unknown key "+p.String()+" set by "+n.env+": it has no effect")
		}
	}
}

// decodeKinded selects the kind of an entry from its required keys and decodes it.
func (d *decoder) decodeKinded(n *node, p keyPath, k kinded) {
	if n.kind == nullNode {
		n = &node{kind: mapNode, line: n.line, env: n.env}
	}
	if n.kind != mapNode {
		d.problem(p, n, "must be a map of keys, not %s", n.kind)
		return
	}
	specs, noun := k.kinds(d.comps)
	chosen := d.typedKind(n, k)
	for i := 0; chosen == nil && i < len(specs); i++ {
		if setsAll(n, specs[i].required) {
			chosen = &specs[i]
		}
	}
	if chosen == nil {
		d.problem(p, n, "sets the required keys of no %s kind: %s", noun, describeKinds(specs))
		return
	}
	part := k.selectKind(*chosen)
	targets := []reflect.Value{reflect.ValueOf(k).Elem(), reflect.ValueOf(part).Elem()}
	alien := func(key string) string {
		for _, s := range specs {
			if s.name == chosen.name {
				continue
			}
			if _, name, ok := findField([]reflect.Value{reflect.New(s.typ).Elem()}, key); ok {
				return fmt.Sprintf("%s is a key of the %s kind, but %s is of the %s kind: it has no effect",
					p.child(name), s.name, p, chosen.name)
			}
		}
		return ""
	}
	d.decodeStruct(n, p, targets, alien)
	if t := k.typeKey(); t != "" && !strings.EqualFold(t, chosen.name) {
		d.warn(p.child("type"), n.lookup("type").val, fmt.Sprintf(
			"%s says %q, but the keys of %s select the %s kind (the kind comes from the required keys; type is documentation only)",
			p.child("type"), t, p, chosen.name))
	}
}

// typedKind returns the kind that the type key of n selects, or nil when the entry has no such
// kind or its type key names none of them.
func (d *decoder) typedKind(n *node, k kinded) *kindSpec {
	ts, ok := k.(typeSelected)
	if !ok {
		return nil
	}
	e := n.lookup("type")
	if e == nil || e.val.kind != scalarNode {
		return nil
	}
	t, err := expandPlaceholders(e.val.value, d.lookupEnv)
	if err != nil {
		return nil
	}
	specs := ts.typedKinds()
	for i := range specs {
		if strings.EqualFold(strings.TrimSpace(t), specs[i].name) {
			return &specs[i]
		}
	}
	return nil
}

func setsAll(n *node, keys []string) bool {
	for _, k := range keys {
		if !n.has(k) {
			return false
		}
	}
	return true
}

// fieldInfo is one configuration key of a struct.
type fieldInfo struct {
	name  string
	index []int
}

var fieldCache sync.Map // reflect.Type -> []fieldInfo

// fieldsOf returns the keys of a struct type, flattening the inline embedded structs.
func fieldsOf(t reflect.Type) []fieldInfo {
	if v, ok := fieldCache.Load(t); ok {
		return v.([]fieldInfo)
	}
	var out []fieldInfo
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			for _, inner := range fieldsOf(f.Type) {
				out = append(out, fieldInfo{name: inner.name, index: append([]int{i}, inner.index...)})
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, fieldInfo{name: name, index: []int{i}})
	}
	fieldCache.Store(t, out)
	return out
}

// findField finds the field of key, in any letter case, among the targets.
func findField(targets []reflect.Value, key string) (reflect.Value, string, bool) {
	for _, t := range targets {
		for _, f := range fieldsOf(t.Type()) {
			if strings.EqualFold(f.name, key) {
				return t.FieldByIndex(f.index), f.name, true
			}
		}
	}
	return reflect.Value{}, "", false
}
