package cli

import (
	"slices"
	"strconv"
	"strings"
)

// Usage is printed after a usage error and by `queuebox help`.
const Usage = `Usage:
  queuebox [serve]                  start QueueBox (the default command)
  queuebox config check             load and validate the configuration, print it with secrets masked
  queuebox migrate                  apply the bundled migrations, V1..V11 then QueueBox's own
                                    (ignores database.migrate)
  queuebox migrate --baseline <N>   record versions 1..N of V1..V11 as applied, for tables
                                    created by hand (QueueBox's own need no baseline)
  queuebox destinations list [--json]
                                    print every destination's pause and circuit breaker state
  queuebox destinations pause <name> [--json]
                                    hold the destination's rows until the resume
  queuebox destinations resume <name> [--json]
                                    deliver the destination's rows again
  queuebox dead list [--json]       the dead rows grouped by destination or source and error
  queuebox dead show <id> [--json]  one outbox or inbox row, secrets redacted
  queuebox dead replay [--table outbox|inbox] [--target NAME] [--fingerprint TEXT] [--id ID]
                       [--dry-run] [--json]
                                    move dead rows (only dead ones) back to pending, in batches
  queuebox replay [--table outbox|inbox] [--id ID]... [--topic T]... [--destination NAME]
                  [--source S]... [--consumption push|pull] [--created-after T] [--created-before T]
                  [--states dead|sent|processed,...] [--limit N] [--batch-size N]
                  [--rows-per-second R] [--dry-run] [--json]
                                    move finished rows back to pending in batches (dead only
                                    unless --states says more), with progress per batch
  queuebox version                  print the version of this build (also --version)
  queuebox help                     print this text (also --help, after any command)

The configuration comes from QUEUEBOX_ environment variables, then the file named by
QUEUEBOX_CONFIG_FILE (default /etc/queuebox/queuebox.yml), then the packaged default.
Exit codes: 0 success, 1 failure, 2 usage.
`

// command is one parsed command line.
type command struct {
	name     string // serve, config-check, migrate, destinations-list, destinations-pause, destinations-resume, version, help
	baseline int    // migrate --baseline N; 0 when absent
	// destination is the name of destinations pause|resume.
	destination string
	// json asks destinations list|pause|resume for JSON on stdout.
	json bool
	// dead holds the options of dead list|show|replay.
	dead deadArgs
	// replay holds the options of replay.
	replay *replayArgs
}

// known are the commands whose --help prints the usage.
var known = map[string]bool{"serve": true, "config": true, "migrate": true, "destinations": true, "dead": true, "replay": true, "version": true}

// isHelpFlag reports whether a is --help or -h.
func isHelpFlag(a string) bool { return a == "--help" || a == "-h" }

// usageError is a command line that QueueBox does not understand.
type usageError struct{ unknown []string }

func (e usageError) Error() string { return "Unknown arguments: " + strings.Join(e.unknown, " ") }

// parseArgs turns the arguments after the program name into a command.
func parseArgs(args []string) (command, error) {
	if len(args) == 0 {
		return command{name: "serve"}, nil
	}
	// --help after a command answers with the usage, as help does: `queuebox migrate --help`.
	if known[args[0]] && slices.ContainsFunc(args[1:], isHelpFlag) {
		return command{name: "help"}, nil
	}
	switch args[0] {
	case "version", "--version":
		if len(args) > 1 {
			return command{}, usageError{args[1:]}
		}
		return command{name: "version"}, nil
	case "serve":
		if len(args) > 1 {
			return command{}, usageError{args[1:]}
		}
		return command{name: "serve"}, nil
	case "help", "--help", "-h":
		if len(args) > 1 {
			return command{}, usageError{args[1:]}
		}
		return command{name: "help"}, nil
	case "config":
		if len(args) == 2 && args[1] == "check" {
			return command{name: "config-check"}, nil
		}
		if len(args) < 2 {
			return command{}, usageError{args}
		}
		return command{}, usageError{args[1:]}
	case "migrate":
		return parseMigrate(args[1:])
	case "destinations":
		return parseDestinations(args)
	case "dead":
		return parseDead(args)
	case "replay":
		return parseReplay(args)
	default:
		return command{}, usageError{args}
	}
}

func parseMigrate(args []string) (command, error) {
	c := command{name: "migrate"}
	for i := 0; i < len(args); i++ {
		a := args[i]
		var value string
		switch {
		case a == "--baseline" || a == "-baseline":
			if i+1 >= len(args) {
				return command{}, usageError{args[i:]}
			}
			value = args[i+1]
			i++
		case strings.HasPrefix(a, "--baseline="):
			value = strings.TrimPrefix(a, "--baseline=")
		default:
			return command{}, usageError{args[i:]}
		}
		n, err := strconv.Atoi(value)
		if err != nil || n < 1 {
			return command{}, usageError{[]string{"--baseline", value}}
		}
		if c.baseline != 0 {
			return command{}, usageError{args[i-1:]}
		}
		c.baseline = n
	}
	return c, nil
}

// parseDestinations parses `destinations list`, `destinations pause <name>` and
// `destinations resume <name>`; args starts with "destinations".
func parseDestinations(args []string) (command, error) {
	if len(args) < 2 {
		return command{}, usageError{args}
	}
	// --json may stand anywhere after the subcommand.
	asJSON := false
	rest := make([]string, 0, len(args))
	for i, a := range args {
		if i >= 2 && a == "--json" {
			asJSON = true
			continue
		}
		rest = append(rest, a)
	}
	args = rest
	switch args[1] {
	case "list":
		if len(args) > 2 {
			return command{}, usageError{args[2:]}
		}
		return command{name: "destinations-list", json: asJSON}, nil
	case "pause", "resume":
		if len(args) < 3 || args[2] == "" || strings.HasPrefix(args[2], "-") {
			return command{}, usageError{args[1:]}
		}
		if len(args) > 3 {
			return command{}, usageError{args[3:]}
		}
		return command{name: "destinations-" + args[1], destination: args[2], json: asJSON}, nil
	default:
		return command{}, usageError{args[1:]}
	}
}
