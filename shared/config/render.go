package config

import (
	"bytes"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// MaskedYAML renders the resolved configuration as YAML, every key with its effective value,
// for `queuebox config check`. Every secret prints as Secret(***) or Secret(empty), and so does
// every value of a destination's headers and of an OAuth2 grant's extraParams; every URL prints
// with its password masked. Each destination, source and auth block shows the kind that the
// loader selected as its type.
func (c *Config) MaskedYAML() ([]byte, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(encodeValue(reflect.ValueOf(c).Elem())); err != nil {
		return nil, fmt.Errorf("encoding the configuration: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("encoding the configuration: %w", err)
	}
	return buf.Bytes(), nil
}

var retentionDurationType = reflect.TypeFor[RetentionDuration]()

// queryKeys are the keys of HTTP URLs and paths, whose query values print masked (see
// MaskQuery): a destination baseUrl and path, an OAuth2 tokenUrl and the tracing endpoints.
var queryKeys = map[string]bool{"baseUrl": true, "path": true, "tokenUrl": true, "endpoint": true, "tracesEndpoint": true}

// maskedValueKeys are the maps whose values print masked, as a Secret prints, and whose names
// print as they are: the static headers of a destination (an Authorization header is the usual
// case, often from ${VAR}) and the extra parameters of an OAuth2 grant (a client assertion).
var maskedValueKeys = map[string]bool{"headers": true, "extraParams": true}

// maskedValues renders a map of strings with every value masked as Secret masks it.
func maskedValues(v reflect.Value) *yaml.Node {
	out := &yaml.Node{Kind: yaml.MappingNode}
	keys := make([]string, 0, v.Len())
	for _, k := range v.MapKeys() {
		keys = append(keys, k.String())
	}
	slices.Sort(keys)
	for _, k := range keys {
		out.Content = append(out.Content, scalar("!!str", k), scalar("!!str", NewSecret(v.MapIndex(reflect.ValueOf(k)).String()).String()))
	}
	return out
}

func scalar(tag, value string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: value}
}

func encodeValue(v reflect.Value) *yaml.Node {
	switch v.Type() {
	case secretType:
		return scalar("!!str", v.Interface().(Secret).String())
	case connectionURLType:
		return scalar("!!str", v.Interface().(ConnectionURL).String())
	case retentionDurationType:
		return scalar("!!str", v.Interface().(RetentionDuration).String())
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return scalar("!!null", "null")
		}
		if k, ok := v.Interface().(kinded); ok {
			return encodeKinded(k)
		}
		return encodeValue(v.Elem())
	case reflect.Struct:
		out := &yaml.Node{Kind: yaml.MappingNode}
		encodeFields(out, v, nil)
		return out
	case reflect.String:
		return scalar("!!str", MaskURL(v.String()))
	case reflect.Int, reflect.Int64:
		return scalar("!!int", strconv.FormatInt(v.Int(), 10))
	case reflect.Bool:
		return scalar("!!bool", strconv.FormatBool(v.Bool()))
	case reflect.Float64:
		return scalar("!!float", strconv.FormatFloat(v.Float(), 'g', -1, 64))
	case reflect.Slice:
		out := &yaml.Node{Kind: yaml.SequenceNode}
		for i := 0; i < v.Len(); i++ {
			out.Content = append(out.Content, encodeValue(v.Index(i)))
		}
		return out
	case reflect.Map:
		out := &yaml.Node{Kind: yaml.MappingNode}
		keys := make([]string, 0, v.Len())
		for _, k := range v.MapKeys() {
			keys = append(keys, k.String())
		}
		slices.Sort(keys)
		for _, k := range keys {
			out.Content = append(out.Content, scalar("!!str", k), encodeValue(v.MapIndex(reflect.ValueOf(k))))
		}
		return out
	}
	return scalar("!!str", fmt.Sprint(v.Interface()))
}

// encodeFields appends the keys of a struct to a mapping node, leaving out the empty values of
// keys tagged omitempty and the keys in skip.
func encodeFields(out *yaml.Node, v reflect.Value, skip map[string]bool) {
	t := v.Type()
	for _, f := range fieldsOf(t) {
		if skip[f.name] {
			continue
		}
		fv := v.FieldByIndex(f.index)
		if omitEmpty(t, f.index) && isEmptyValue(fv) {
			continue
		}
		if maskedValueKeys[f.name] && fv.Kind() == reflect.Map && fv.Type().Elem().Kind() == reflect.String {
			out.Content = append(out.Content, scalar("!!str", f.name), maskedValues(fv))
			continue
		}
		if queryKeys[f.name] && fv.Kind() == reflect.String {
			out.Content = append(out.Content, scalar("!!str", f.name), scalar("!!str", MaskURL(MaskQuery(fv.String()))))
			continue
		}
		out.Content = append(out.Content, scalar("!!str", f.name), encodeValue(fv))
	}
}

// encodeKinded writes type: <selected kind>, then the keys of the kind, then the shared keys.
func encodeKinded(k kinded) *yaml.Node {
	out := &yaml.Node{Kind: yaml.MappingNode}
	kind, part := k.kindPart()
	if kind != "" {
		out.Content = append(out.Content, scalar("!!str", "type"), scalar("!!str", kind))
	}
	if part != nil {
		encodeFields(out, reflect.ValueOf(part).Elem(), nil)
	}
	encodeFields(out, reflect.ValueOf(k).Elem(), map[string]bool{"type": kind != ""})
	return out
}

// omitEmpty reports whether the field at index is tagged omitempty.
func omitEmpty(t reflect.Type, index []int) bool {
	f := t.FieldByIndex(index)
	_, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	return strings.Contains(opts, "omitempty")
}

func isEmptyValue(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Slice, reflect.Map:
		return v.Len() == 0
	case reflect.Pointer:
		return v.IsNil()
	}
	switch x := v.Interface().(type) {
	case Filter:
		return x.IsZero()
	case Secret:
		return x.IsEmpty()
	case ConnectionURL:
		return x.IsEmpty()
	}
	return v.IsZero()
}

// Summary returns a short, masked description of the configuration for the start log, for
// example:
//
//	database postgresql db:5432/queuebox as queuebox (password Secret(***)); capture polling;
//	destinations orders-api (http), events (rabbitmq); 2 routes; sources stripe (http, push);
//	admin on (bearer); retention off; from /etc/queuebox/queuebox.yml and 3 QUEUEBOX_ variables
func (c *Config) Summary() string {
	parts := []string{
		fmt.Sprintf("database %s %s as %s (password %s)", c.Database.Type, c.databaseTarget(), c.Database.Username, c.Database.Password),
		c.captureSummary(),
		"destinations " + listOrNone(c.destinationNames()),
		fmt.Sprintf("%d routes", len(c.Routes)),
		"sources " + listOrNone(c.sourceNames()),
		c.adminSummary(),
		"retention " + onOff(c.Retention.Enabled),
		"from " + c.Origin.String(),
	}
	return strings.Join(parts, "; ")
}

// LogValue makes log/slog print the masked summary attributes of the configuration, never a
// credential.
func (c *Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("database_type", string(c.Database.Type)),
		slog.String("database", c.databaseTarget()),
		slog.String("database_user", c.Database.Username),
		slog.String("capture_mode", string(c.Outbox.Capture.Mode)),
		slog.Bool("capture_enabled", c.Outbox.Capture.Enabled),
		slog.String("destinations", strings.Join(c.destinationNames(), ", ")),
		slog.Int("routes", len(c.Routes)),
		slog.String("sources", strings.Join(c.sourceNames(), ", ")),
		slog.Bool("admin_enabled", c.Admin.Enabled),
		slog.Bool("retention_enabled", c.Retention.Enabled),
		slog.String("origin", c.Origin.String()),
	)
}

// String says which sources the configuration came from.
func (o Origin) String() string {
	var parts []string
	if o.File != "" {
		parts = append(parts, o.File)
	}
	if o.Packaged {
		parts = append(parts, "the packaged queuebox.yml")
	}
	switch n := len(o.Variables); n {
	case 0:
	case 1:
		parts = append(parts, "1 QUEUEBOX_ variable")
	default:
		parts = append(parts, fmt.Sprintf("%d QUEUEBOX_ variables", n))
	}
	if len(parts) == 0 {
		return "defaults"
	}
	text := strings.Join(parts, " and ")
	if o.MissingFile != "" {
		text += " (the file " + o.MissingFile + " named by " + ConfigFileVariable + " does not exist)"
	}
	return text
}

// databaseTarget returns host:port/database of database.url, without credentials, as Load
// parsed it; the masked URL for a configuration that Load did not parse.
func (c *Config) databaseTarget() string {
	if c.target == "" {
		return c.Database.URL.String()
	}
	return c.target
}

func (c *Config) captureSummary() string {
	s := "capture " + string(c.Outbox.Capture.Mode)
	if c.Outbox.Capture.Enabled {
		s += " (enabled, identity " + c.Outbox.Capture.Identity + ")"
	}
	return s
}

func (c *Config) adminSummary() string {
	if !c.Admin.Enabled {
		return "admin off"
	}
	switch {
	case c.Admin.Auth != nil:
		return fmt.Sprintf("admin on (%s)", c.Admin.Auth.Kind)
	case c.Admin.Insecure:
		return "admin on (INSECURE, no auth)"
	}
	return "admin on"
}

func (c *Config) destinationNames() []string {
	var out []string
	for _, name := range sortedKeys(c.Destinations) {
		out = append(out, fmt.Sprintf("%s (%s)", name, c.Destinations[name].Kind))
	}
	return out
}

func (c *Config) sourceNames() []string {
	var out []string
	for _, name := range sortedKeys(c.Sources) {
		s := c.Sources[name]
		out = append(out, fmt.Sprintf("%s (%s, %s)", name, s.Kind, s.Consumption))
	}
	return out
}

func listOrNone(items []string) string {
	if len(items) == 0 {
		return "none"
	}
	return strings.Join(items, ", ")
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}
