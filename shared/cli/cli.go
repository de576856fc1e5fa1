// Package cli is the queuebox command line: `queuebox [serve]`, `queuebox config check`,
// `queuebox migrate [--baseline N]`, `queuebox destinations list|pause <name>|resume <name>`
// `queuebox dead list|show|replay` (docs/console.md) and `queuebox replay` (docs/replay.md).
// local/main.go only calls Main.
//
// Exit codes: 0 success, 1 failure, 2 usage. Unknown arguments print
// "Unknown arguments: ..." and the usage text on stderr.
package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/alternayte/queuebox/shared/config"
	"github.com/alternayte/queuebox/shared/gctune"
	"github.com/alternayte/queuebox/shared/localserver"
	"github.com/alternayte/queuebox/shared/redact"
	"github.com/alternayte/queuebox/shared/service"
	"github.com/alternayte/queuebox/shared/transform/jsonata"
)

// Exit codes.
const (
	ExitOK      = 0
	ExitFailure = 1
	ExitUsage   = 2
)

// Env is what a command reads and writes; tests pass their own.
type Env struct {
	Stdout io.Writer
	Stderr io.Writer
	// Environ is the process environment, as os.Environ returns it.
	Environ []string
	// ReadFile reads the configuration file and file: secrets; nil means the file system of
	// the process, which reads a file: secret with the bound of config.MaxSecretFileBytes
	// (see config.LoadOptions.ReadFile).
	ReadFile func(string) ([]byte, error)
}

// OSEnv returns the environment of the running process.
func OSEnv() Env {
	return Env{Stdout: os.Stdout, Stderr: os.Stderr, Environ: os.Environ()}
}

// Main runs the command line args (without the program name) and returns the exit code. ctx
// is cancelled by the caller on SIGTERM or SIGINT.
func Main(ctx context.Context, args []string, env Env) int {
	cmd, err := parseArgs(args)
	if err != nil {
		fmt.Fprintln(env.Stderr, err.Error())
		fmt.Fprint(env.Stderr, Usage)
		return ExitUsage
	}
	switch cmd.name {
	case "help":
		fmt.Fprint(env.Stdout, Usage)
		return ExitOK
	case "version":
		fmt.Fprintf(env.Stdout, "queuebox %s\n", service.Version)
		return ExitOK
	case "config-check":
		return configCheck(ctx, env)
	case "migrate":
		return migrateCommand(ctx, env, cmd.baseline)
	case "destinations-list":
		return destinationsList(ctx, env, cmd.json)
	case "dead":
		return deadCommand(ctx, env, cmd.dead)
	case "replay":
		return replayCommand(ctx, env, cmd.replay)
	case "destinations-pause", "destinations-resume":
		return destinationsSetPaused(ctx, env, cmd.destination, cmd.name == "destinations-pause", cmd.json)
	default:
		return serveCommand(ctx, env)
	}
}

// loadOptions are the load options of a command: every transform expression compiles at
// load on engine, so that an error names its key; the command then builds its parts on the
// same engine, which holds the compiled expressions.
func loadOptions(env Env, engine *jsonata.Engine) config.LoadOptions {
	return config.LoadOptions{Env: config.EnvMap(env.Environ), ReadFile: env.ReadFile, CompileTransform: engine.Check}
}

// configCheck loads and validates the configuration, then runs the start-time checks of serve
// that need no database (localserver.Check); it prints the resolved configuration with every
// secret masked, or every error, a refusal of serve with the text that serve prints.
func configCheck(ctx context.Context, env Env) int {
	engine := jsonata.NewEngine(jsonata.EngineOptions{})
	cfg, warnings, err := service.Load(loadOptions(env, engine))
	for _, w := range warnings {
		fmt.Fprintf(env.Stderr, "warning: %s\n", w.String())
	}
	if err != nil {
		printConfigError(env.Stderr, err)
		return ExitFailure
	}
	if err := localserver.CheckWithEngine(ctx, cfg, engine); err != nil {
		fmt.Fprintln(env.Stderr, err.Error())
		return ExitFailure
	}
	out, err := cfg.MaskedYAML()
	if err != nil {
		fmt.Fprintf(env.Stderr, "QueueBox could not print the configuration. Reason: %s\n", redact.Error(err))
		return ExitFailure
	}
	_, _ = env.Stdout.Write(out)
	fmt.Fprintf(env.Stderr, "The configuration is valid (%s).\n", originText(cfg))
	return ExitOK
}

func printConfigError(w io.Writer, err error) {
	fmt.Fprint(w, service.LoadErrorText(err))
}

func originText(cfg *config.Config) string {
	var parts []string
	if cfg.Origin.File != "" {
		parts = append(parts, "file "+cfg.Origin.File)
	}
	if cfg.Origin.Packaged {
		parts = append(parts, "the packaged default")
	}
	if n := len(cfg.Origin.Variables); n > 0 {
		parts = append(parts, fmt.Sprintf("%d QUEUEBOX_ variable(s)", n))
	}
	if len(parts) == 0 {
		return "no source"
	}
	return "from " + strings.Join(parts, ", ")
}

// load loads the configuration for a command that runs, logging the warnings; its transforms
// compile on engine.
func load(env Env, log *slog.Logger, engine *jsonata.Engine) (*config.Config, bool) {
	cfg, warnings, err := service.Load(loadOptions(env, engine))
	for _, w := range warnings {
		log.Warn("configuration warning", "warning", w.String())
	}
	if err != nil {
		printConfigError(env.Stderr, err)
		return nil, false
	}
	return cfg, true
}

// connect loads the configuration and connects to its database, logging at level. It prints
// a failure to load or connect itself and returns false.
func connect(ctx context.Context, env Env, level slog.Level) (*config.Config, *service.Database, bool) {
	log := service.NewLogger(env.Stderr, level)
	cfg, ok := load(env, log, jsonata.NewEngine(jsonata.EngineOptions{}))
	if !ok {
		return nil, nil, false
	}
	db, err := service.Connect(ctx, cfg, log)
	if err != nil {
		fmt.Fprintln(env.Stderr, err.Error())
		return nil, nil, false
	}
	return cfg, db, true
}

func migrateCommand(ctx context.Context, env Env, baseline int) int {
	_, db, ok := connect(ctx, env, slog.LevelInfo)
	if !ok {
		return ExitFailure
	}
	defer db.Close()
	if baseline > 0 {
		res, err := db.Migrations.Baseline(ctx, baseline)
		if err != nil {
			fmt.Fprintf(env.Stderr, "QueueBox could not record the baseline. Reason: %s\n", redact.Error(err))
			return ExitFailure
		}
		fmt.Fprintln(env.Stdout, res.String())
		return ExitOK
	}
	res, err := db.Migrations.Migrate(ctx)
	if err != nil {
		fmt.Fprintf(env.Stderr, "QueueBox could not apply the database migrations. Reason: %s\n", redact.Error(err))
		return ExitFailure
	}
	fmt.Fprintln(env.Stdout, res.String())
	return ExitOK
}

func serveCommand(ctx context.Context, env Env) int {
	level := service.NewLevel()
	log := service.NewLogger(env.Stderr, level)
	engine := jsonata.NewEngine(jsonata.EngineOptions{})
	cfg, ok := load(env, log, engine)
	if !ok {
		return ExitFailure
	}
	service.SetLevel(level, cfg)
	log.Info("configuration loaded", "config", cfg.LogValue(), "runtime", gctune.Apply(service.EnvMap(env.Environ)))
	local, err := localserver.NewWithEngine(ctx, cfg, log, engine)
	if err != nil {
		fmt.Fprintln(env.Stderr, err.Error())
		return ExitFailure
	}
	if err := local.Run(ctx); err != nil {
		fmt.Fprintf(env.Stderr, "QueueBox stopped with an error. Reason: %s\n", redact.Error(err))
		return ExitFailure
	}
	return ExitOK
}
