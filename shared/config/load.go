package config

import (
	_ "embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"reflect"
	"sort"
	"strings"
)

// DefaultConfigFile is the file that Load reads when QUEUEBOX_CONFIG_FILE is not set.
const DefaultConfigFile = "/etc/queuebox/queuebox.yml"

// packagedConfig is the packaged default configuration: the queuebox.yml resource of the image.
//
//go:embed queuebox.yml
var packagedConfig []byte

// PackagedConfig returns the packaged default queuebox.yml.
func PackagedConfig() []byte {
	return append([]byte(nil), packagedConfig...)
}

// ErrNoConfiguration is the cause of the error that Load returns when no source holds a
// configuration.
var ErrNoConfiguration = errors.New("no configuration")

// ErrConfigFile is the cause of the error that Load returns when the configuration file cannot
// be read or parsed.
var ErrConfigFile = errors.New("configuration file")

// LoadOptions are the inputs of Load. Only Load reads the environment and files, and only
// through these, so that a test passes a map and an in-memory file system.
type LoadOptions struct {
	// Env is the environment: the QUEUEBOX_ variables, QUEUEBOX_CONFIG_FILE, and the variables
	// that ${NAME} placeholders read. Nil is an empty environment. EnvMap turns os.Environ()
	// into this form.
	Env map[string]string
	// ReadFile reads the configuration file and the file: secrets. A missing file must give an
	// error that wraps fs.ErrNotExist. Nil means the file system of the process: os.ReadFile
	// for the configuration file, and for a file: secret a read that refuses anything but a
	// regular file of at most MaxSecretFileBytes before it reads it. A ReadFile that is set
	// reads the whole secret file, which Load then refuses above MaxSecretFileBytes.
	ReadFile func(name string) ([]byte, error)
	// Packaged is the packaged default configuration. Nil means the queuebox.yml embedded in
	// this package.
	Packaged []byte
	// NoPackaged leaves out the packaged default, as an image without the resource would.
	NoPackaged bool
	// CompileTransform, when set, compiles the expression of every transform block; an error
	// stops the load and names the key path. The JSONata engine lives outside this package.
	CompileTransform TransformCompiler
	// Components are the rules that the components own: the database dialects and the
	// connectors (see Components). Required: the composition root fills it (service.Load
	// does), so that every program checks with the same rules.
	Components *Components
}

// TransformCompiler compiles a JSONata expression and reports whether it is valid.
type TransformCompiler func(expression string) error

// OSOptions returns the options of a real process: the process environment and its file
// system (ReadFile nil, so that a file: secret is read with a bound). The composition root
// adds the Components (service.OSLoadOptions).
func OSOptions() LoadOptions {
	return LoadOptions{Env: EnvMap(os.Environ())}
}

// EnvMap turns KEY=VALUE lines, as os.Environ returns them, into a map. A later line wins.
func EnvMap(environ []string) map[string]string {
	m := make(map[string]string, len(environ))
	for _, kv := range environ {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			m[k] = v
		}
	}
	return m
}

// Warning is a finding that does not stop the start: a key or a variable that matches no
// configuration key, a key of another kind of entry, a type key that disagrees with the keys.
type Warning struct {
	// Key is the key path that the warning is about, when there is one.
	Key string
	// Origin says where the key came from: "set by QUEUEBOX_..." or "<file> line N".
	Origin string
	// Message is the whole text of the warning.
	Message string
}

// String returns the text of the warning.
func (w Warning) String() string { return w.Message }

// Problem is one reason why a configuration is invalid.
type Problem struct {
	// Key is the key path, for example outbox.pollIntervalMs; empty for a problem of the whole.
	Key string
	// Variable is the QUEUEBOX_ variable of Key, for example QUEUEBOX_OUTBOX_POLLINTERVALMS.
	Variable string
	// Message says what is wrong, for example "must be above 0".
	Message string
}

// String returns the problem as it prints: key path, variable and message.
func (p Problem) String() string {
	if p.Key == "" {
		return p.Message
	}
	return p.Key + " (" + p.Variable + ") " + p.Message
}

func newProblem(p keyPath, msg string) Problem {
	if len(p) == 0 {
		return Problem{Message: msg}
	}
	return Problem{Key: p.String(), Variable: p.envVar(), Message: msg}
}

// ValidationError lists every problem of a configuration. Load returns it, so that an operator
// sees all of them at once.
type ValidationError struct {
	// Problems lists the problems in the order of the configuration.
	Problems []Problem
}

// Error lists every problem, one per line.
func (e *ValidationError) Error() string {
	var b strings.Builder
	if len(e.Problems) == 1 {
		b.WriteString("invalid configuration: ")
		b.WriteString(e.Problems[0].String())
		return b.String()
	}
	fmt.Fprintf(&b, "invalid configuration, %d problems:", len(e.Problems))
	for _, p := range e.Problems {
		b.WriteString("\n  - ")
		b.WriteString(p.String())
	}
	return b.String()
}

// Load reads, merges, resolves and validates the configuration, as
// spec/24-environment-variables.md describes: the QUEUEBOX_ variables of opts.Env win over the
// file that QUEUEBOX_CONFIG_FILE names (by default /etc/queuebox/queuebox.yml); the packaged
// default is read only when there is no file and no QUEUEBOX_ variable.
//
// Load returns the warnings even when it fails. A problem of the configuration itself gives a
// *ValidationError that lists every problem; a missing or broken file gives an error that
// wraps ErrConfigFile; no source at all gives an error that wraps ErrNoConfiguration. A file
// that QUEUEBOX_CONFIG_FILE names and that does not exist is an error only when no QUEUEBOX_
// variable is set; otherwise the variables alone configure QueueBox, Origin.MissingFile names
// the file, and a warning says so.
func Load(opts LoadOptions) (*Config, []Warning, error) {
	if opts.Components == nil {
		return nil, nil, errNoComponents
	}
	if err := opts.Components.checkConnectors(); err != nil {
		return nil, nil, err
	}
	readFile, readSecret := opts.ReadFile, readSecretFile
	if readFile == nil {
		readFile = os.ReadFile
	} else {
		readSecret = boundedSecretReader(readFile)
	}
	vars := queueboxVariables(opts.Env)
	root, origin, err := readSources(opts, readFile, len(vars) > 0)
	if err != nil {
		return nil, nil, err
	}
	var warnings []Warning
	if origin.MissingFile != "" {
		warnings = append(warnings, Warning{Origin: "set by " + ConfigFileVariable, Message: fmt.Sprintf(
			"the configuration file %s, named by %s, does not exist: the %d QUEUEBOX_ variable(s) alone configure QueueBox, without the packaged default",
			origin.MissingFile, ConfigFileVariable, len(vars))})
	}
	warnings = append(warnings, overlayEnv(root, vars)...)
	origin.Variables = sortedKeys(vars)

	d := &decoder{
		lookupEnv:  func(name string) (string, bool) { v, ok := opts.Env[name]; return v, ok },
		readSecret: readSecret,
		file:       origin.File,
		comps:      opts.Components,
	}
	cfg := Default()
	d.decodeStruct(root, nil, []reflect.Value{reflect.ValueOf(cfg).Elem()}, nil)
	cfg.resolve(root)
	cfg.resolveTracing(root, opts.Env)
	cfg.Origin = origin
	warnings = append(warnings, d.warnings...)
	warnings = append(warnings, cfg.databaseURLWarnings(opts.Components)...)
	warnings = append(warnings, cfg.retryWarnings()...)

	problems := append(d.problems, cfg.validate(opts.Components, opts.CompileTransform, d.problems...)...)
	if origin.File == "" && !origin.Packaged && len(vars) > 0 {
		explainVariablesOnly(problems, opts.Env)
	}
	if len(problems) > 0 {
		return nil, warnings, &ValidationError{Problems: problems}
	}
	if u, ok := opts.Components.databaseURL(&cfg.Database); ok {
		cfg.target = hostsAndDatabase(u)
	}
	return cfg, warnings, nil
}

// explainVariablesOnly adds to a missing database key the reason that surprises a first run:
// QUEUEBOX_ variables are set and there is no configuration file, so the packaged default
// (which names a database) is not read at all.
func explainVariablesOnly(problems []Problem, env map[string]string) {
	path := env[ConfigFileVariable]
	if path == "" {
		path = DefaultConfigFile
	}
	for i, p := range problems {
		if p.Key == "database.url" && p.Message == "is required" {
			problems[i].Message = fmt.Sprintf("is required: QUEUEBOX_ variables are set and the configuration file %s does not exist, "+
				"so the packaged default queuebox.yml is not read (it is read only when no QUEUEBOX_ variable is set); "+
				"set %s or name a file with %s", path, p.Variable, ConfigFileVariable)
		}
	}
}

// readSources returns the tree of the file, of the packaged default, or an empty tree for the
// variables alone.
func readSources(opts LoadOptions, readFile func(string) ([]byte, error), haveVars bool) (*node, Origin, error) {
	path, named := opts.Env[ConfigFileVariable]
	if path == "" {
		path, named = DefaultConfigFile, false
	}
	data, err := readFile(path)
	switch {
	case err == nil:
		root, err := parseYAML(data)
		if err != nil {
			return nil, Origin{}, fmt.Errorf("%w %s: parsing YAML: %w", ErrConfigFile, path, yamlErrorLine(data, err))
		}
		return root, Origin{File: path}, nil
	case !errors.Is(err, fs.ErrNotExist):
		return nil, Origin{}, fmt.Errorf("%w %s: reading: %w", ErrConfigFile, path, err)
	case named && haveVars:
		// spec/24: when the file is absent and a QUEUEBOX_ variable is set, the variables alone
		// configure QueueBox; Load warns that the named file was missing.
		return &node{kind: mapNode}, Origin{MissingFile: path}, nil
	case named:
		return nil, Origin{}, fmt.Errorf("%w %s, named by %s, does not exist and no QUEUEBOX_ variable is set: %w",
			ErrConfigFile, path, ConfigFileVariable, err)
	case haveVars:
		return &node{kind: mapNode}, Origin{}, nil
	case opts.NoPackaged:
		return nil, Origin{}, fmt.Errorf("%w: QueueBox found none of its three sources: no QUEUEBOX_ environment variable is set, "+
			"the configuration file %s (named by %s) does not exist, and there is no packaged queuebox.yml", ErrNoConfiguration, path, ConfigFileVariable)
	}
	packaged := opts.Packaged
	if packaged == nil {
		packaged = packagedConfig
	}
	root, err := parseYAML(packaged)
	if err != nil {
		return nil, Origin{}, fmt.Errorf("parsing the packaged queuebox.yml: %w", err)
	}
	return root, Origin{Packaged: true}, nil
}

// queueboxVariables returns the QUEUEBOX_ variables that set configuration keys: every one but
// QUEUEBOX_CONFIG_FILE.
func queueboxVariables(env map[string]string) map[string]string {
	vars := map[string]string{}
	for k, v := range env {
		if strings.HasPrefix(k, EnvPrefix) && k != ConfigFileVariable {
			vars[k] = v
		}
	}
	return vars
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// treeSets reports whether the tree sets the key path, matching each level in any letter case.
func treeSets(root *node, levels ...string) bool {
	cur := root
	for _, l := range levels {
		if cur.kind != mapNode {
			return false
		}
		e := cur.lookup(l)
		if e == nil {
			return false
		}
		cur = e.val
	}
	return cur.kind != nullNode
}

// resolve fills the defaults that depend on other keys and normalises the enumerations that
// load in any letter case.
func (c *Config) resolve(root *node) {
	if !treeSets(root, "inbox", "relay", "maxAttempts") {
		c.Inbox.Relay.MaxAttempts = c.Outbox.MaxAttempts
	}
	c.Database.Type = DatabaseType(strings.ToLower(strings.TrimSpace(string(c.Database.Type))))
	c.Outbox.Capture.Mode = CaptureMode(strings.ToLower(strings.TrimSpace(string(c.Outbox.Capture.Mode))))
	c.Logging.Level = LogLevel(strings.ToLower(strings.TrimSpace(string(c.Logging.Level))))
	resolveAuth(c.Admin.Auth)
	c.resolveControls(root)
	for _, d := range c.Destinations {
		if n, ok := d.Block.(Normalizer); ok {
			n.Normalize()
		}
	}
	for _, s := range c.Sources {
		s.Consumption = Consumption(strings.ToLower(string(s.Consumption)))
		if s.HTTP != nil {
			resolveAuth(s.HTTP.Auth)
		}
		if n, ok := s.Block.(Normalizer); ok {
			n.Normalize()
		}
	}
}

func resolveAuth(a *InboundAuth) {
	if a == nil || a.HMAC == nil {
		return
	}
	switch a.HMAC.SignaturePayloadFormat {
	case "body":
		a.HMAC.SignaturePayloadFormat = PayloadBody
	case "timestamp-dot-body":
		a.HMAC.SignaturePayloadFormat = PayloadTimestampDotBody
	}
	a.HMAC.resolveDefaults()
}

// resolveTracing fills the tracing keys that the file and the QUEUEBOX_ variables leave unset
// from the standard OpenTelemetry variables, and turns tracing off under
// OTEL_SDK_DISABLED=true (docs/tracing.md).
func (c *Config) resolveTracing(root *node, env map[string]string) {
	t := &c.Tracing
	fill := func(key string, dst *string, vars ...string) {
		if treeSets(root, "tracing", key) {
			return
		}
		for _, name := range vars {
			if v := strings.TrimSpace(env[name]); v != "" {
				*dst = v
				return
			}
		}
	}
	fill("endpoint", &t.Endpoint, "OTEL_EXPORTER_OTLP_ENDPOINT")
	fill("tracesEndpoint", &t.TracesEndpoint, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	fill("protocol", &t.Protocol, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
	fill("serviceName", &t.ServiceName, "OTEL_SERVICE_NAME")
	t.Endpoint, t.TracesEndpoint = strings.TrimSpace(t.Endpoint), strings.TrimSpace(t.TracesEndpoint)
	t.Protocol = strings.ToLower(strings.TrimSpace(t.Protocol))
	if strings.EqualFold(strings.TrimSpace(env["OTEL_SDK_DISABLED"]), "true") {
		t.Endpoint, t.TracesEndpoint = "", ""
	}
}
