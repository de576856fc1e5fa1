package service

import (
	"os"

	"github.com/alternayte/queuebox/shared/config"
)

// LoadEnv loads and validates the configuration from the QUEUEBOX_ variables of env alone: it
// reads no configuration file and compiles no transform expression at load (the components
// compile them when they start). It serves the harnesses that build a configuration in code,
// bench/inboxbench for one, without importing shared/config.
func LoadEnv(env map[string]string) (*config.Config, error) {
	cfg, _, err := config.Load(config.LoadOptions{Env: env, ReadFile: func(string) ([]byte, error) { return nil, os.ErrNotExist }})
	return cfg, err
}
