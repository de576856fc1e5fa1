package service

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/alternayte/queuebox/shared/config"
	"github.com/alternayte/queuebox/shared/redact"
	"github.com/alternayte/queuebox/shared/transform"
)

// Config is the loaded configuration tree of shared/config. The drivers (shared/localserver,
// shared/lambdafn, shared/capturenode) name it through this alias and hand it to Build; they
// read none of its fields, so they need not import shared/config.
type Config = config.Config

// LoadOptions are the inputs of Load: the environment, the file reader, the optional
// transform compiler and the rules of the components, which Load fills with Components when
// they are not set (see config.LoadOptions).
type LoadOptions = config.LoadOptions

// Warning is a finding of Load that does not stop the start.
type Warning = config.Warning

// Load loads and validates the configuration (config.Load) with the rules of the components
// (Components) when opts sets none.
func Load(opts LoadOptions) (*Config, []Warning, error) {
	if opts.Components == nil {
		opts.Components = Components()
	}
	return config.Load(opts)
}

// OSLoadOptions returns the load options of a real process: the process environment, its
// file system, the rules of the components (Components), and engine as the transform
// compiler, so that every expression compiles at load (with the default limits) and an error
// names its key. A nil engine compiles nothing at load: a program that runs no transform (the
// relay and retention functions) links no JavaScript engine.
func OSLoadOptions(engine transform.Compiler) LoadOptions {
	o := config.OSOptions()
	o.Components = Components()
	if engine != nil {
		o.CompileTransform = func(expression string) error {
			_, err := engine.Compile(expression, transform.Limits{})
			return err
		}
	}
	return o
}

// EnvMap turns KEY=VALUE lines, as os.Environ returns them, into a map (config.EnvMap).
func EnvMap(environ []string) map[string]string { return config.EnvMap(environ) }

// LoadErrorText is the text that a process prints when Load fails: "QueueBox could not load
// the configuration: N problem(s)." and one "  - <problem>" line per problem for a
// validation error, or "QueueBox could not load the configuration. Reason: <redacted>"; it
// ends with a newline.
func LoadErrorText(err error) string {
	var verr *config.ValidationError
	if errors.As(err, &verr) {
		var b strings.Builder
		fmt.Fprintf(&b, "QueueBox could not load the configuration: %d problem(s).\n", len(verr.Problems))
		for _, p := range verr.Problems {
			fmt.Fprintf(&b, "  - %s\n", p.String())
		}
		return b.String()
	}
	return fmt.Sprintf("QueueBox could not load the configuration. Reason: %s\n", redact.Error(err))
}

// LoadEnv loads and validates the configuration from the QUEUEBOX_ variables of env alone: it
// reads no configuration file and compiles no transform expression at load (the components
// compile them when they start). It serves the harnesses that build a configuration in code,
// bench/inboxbench for one, without importing shared/config.
func LoadEnv(env map[string]string) (*Config, error) {
	cfg, _, err := Load(LoadOptions{Env: env, ReadFile: func(string) ([]byte, error) { return nil, os.ErrNotExist }})
	return cfg, err
}
