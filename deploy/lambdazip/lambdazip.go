// Package lambdazip builds the Lambda functions of functions/ and packages them as Lambda
// deployment packages: a zip with the executable `bootstrap` at its root, which the
// provided.al2023 runtime starts, and optionally the configuration file next to it. It uses
// archive/zip, so packaging needs no zip program. `make lambda` (through
// deploy/cmd/lambdazip) and the size benchmark (bench/lambda) use it.
package lambdazip

import (
	"archive/zip"
	"compress/flate"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// BootstrapName is the name of the executable that the provided.al2023 runtime starts.
const BootstrapName = "bootstrap"

// ConfigName is the name of the configuration file in a package built with a configuration.
const ConfigName = "queuebox.yml"

// ConfigPath is where a bundled configuration file is inside a running function (Lambda
// unpacks the package in /var/task): the value of QUEUEBOX_CONFIG_FILE for such a package.
const ConfigPath = "/var/task/" + ConfigName

// BuildEnv is the environment of a function build besides the process's own: a static
// binary for Graviton (linux/arm64). The Makefile's lambda target uses the same.
var BuildEnv = []string{"CGO_ENABLED=0", "GOOS=linux", "GOARCH=arm64"}

// BuildTag is the build tag of every function build: no net/rpc in the runtime API client.
const BuildTag = "lambda.norpc"

// BuildFlags are the flags of a function build: no net/rpc in the runtime API client
// (BuildTag), no symbol table and no DWARF (-s -w), no local paths (-trimpath). The
// Makefile's lambda target uses the same.
var BuildFlags = []string{"-tags", BuildTag, "-trimpath", "-ldflags", "-s -w"}

// Connector is a broker destination of the poll function that a build tag leaves out, client
// and all (shared/service/connectors). The http destination is part of every build.
type Connector struct {
	// Kind is the destination kind (destinations.<name>.kind).
	Kind string `json:"kind"`
	// Tag is the build tag that leaves it out.
	Tag string `json:"tag"`
}

// Connectors are the broker destinations of the poll function, in the order of
// LAMBDA_BROKERS in the Makefile, whose LAMBDA_DESTINATIONS sets their tags.
var Connectors = []Connector{
	{Kind: "rabbitmq", Tag: "queuebox_no_rabbitmq"},
	{Kind: "kafka", Tag: "queuebox_no_kafka"},
	{Kind: "nats", Tag: "queuebox_no_nats"},
}

// buildFlags returns BuildFlags with tags added to BuildTag.
func buildFlags(tags []string) []string {
	flags := slices.Clone(BuildFlags)
	if len(tags) > 0 {
		i := slices.Index(flags, "-tags")
		flags[i+1] = strings.Join(append([]string{BuildTag}, tags...), ",")
	}
	return flags
}

// modTime is the time of every entry, so that the same binary gives the same zip.
var modTime = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)

// Functions returns the names of the functions of the repository at root, sorted: every
// folder functions/<name> that holds a main.go.
func Functions(root string) ([]string, error) {
	mains, err := filepath.Glob(filepath.Join(root, "functions", "*", "main.go"))
	if err != nil {
		return nil, fmt.Errorf("listing the functions: %w", err)
	}
	names := make([]string, 0, len(mains))
	for _, m := range mains {
		names = append(names, filepath.Base(filepath.Dir(m)))
	}
	slices.Sort(names)
	return names, nil
}

// Build compiles functions/<name> of the repository at root into the file out with
// BuildEnv and BuildFlags, using the go command of PATH.
func Build(ctx context.Context, root, name, out string) error {
	return BuildTagged(ctx, root, name, out)
}

// BuildTagged is Build with the build tags tags besides BuildTag: the Tag of a Connector
// leaves that broker destination out of the poll function.
func BuildTagged(ctx context.Context, root, name, out string, tags ...string) error {
	args := append([]string{"build"}, buildFlags(tags)...)
	args = append(args, "-o", out, "./functions/"+name)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), BuildEnv...)
	if output, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building function %s: %w\n%s", name, err, output)
	}
	return nil
}

// BuildAll compiles the functions names of the repository at root in one go command, with
// env and BuildFlags, into dir/<name> (dir must exist). One command compiles the packages
// that the functions share once: the tests build every function this way. env is the build
// environment besides the process's own; BuildEnv builds what is deployed.
func BuildAll(ctx context.Context, root string, names []string, dir string, env []string) error {
	if len(names) == 0 {
		return fmt.Errorf("building functions: no function named")
	}
	args := append([]string{"build"}, BuildFlags...)
	// A trailing separator makes -o a folder, which go build fills with one binary per main
	// package, named as its folder.
	args = append(args, "-o", filepath.Clean(dir)+string(filepath.Separator))
	for _, name := range names {
		args = append(args, "./functions/"+name)
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), env...)
	if output, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building functions %v: %w\n%s", names, err, output)
	}
	for _, name := range names {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			return fmt.Errorf("building functions: the binary of %s: %w", name, err)
		}
		if fi.Size() == 0 {
			return fmt.Errorf("building functions: the binary of %s in %s is empty", name, dir)
		}
	}
	return nil
}

// Zip writes the deployment package zipPath: the file bootstrap as `bootstrap` at the root,
// executable, and, when config is not empty, the file config as `queuebox.yml` next to it.
// Every entry has a fixed time, so the same inputs give the same bytes.
func Zip(zipPath, bootstrap, config string) (err error) {
	f, err := os.Create(zipPath)
	if err != nil {
		return fmt.Errorf("creating %s: %w", zipPath, err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("closing %s: %w", zipPath, cerr)
		}
		if err != nil {
			_ = os.Remove(zipPath)
		}
	}()
	zw := zip.NewWriter(f)
	// The smallest package: Lambda limits and bills the upload, and a build is rare.
	zw.RegisterCompressor(zip.Deflate, func(out io.Writer) (io.WriteCloser, error) {
		return flate.NewWriter(out, flate.BestCompression)
	})
	if err := addFile(zw, BootstrapName, bootstrap, 0o755); err != nil {
		return err
	}
	if config != "" {
		if err := addFile(zw, ConfigName, config, 0o644); err != nil {
			return err
		}
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", zipPath, err)
	}
	return nil
}

func addFile(zw *zip.Writer, name, path string, mode os.FileMode) error {
	src, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("opening %s: %w", path, err)
	}
	defer src.Close()
	hdr := &zip.FileHeader{Name: name, Method: zip.Deflate, Modified: modTime}
	hdr.SetMode(mode)
	w, err := zw.CreateHeader(hdr)
	if err != nil {
		return fmt.Errorf("adding %s: %w", name, err)
	}
	if _, err := io.Copy(w, src); err != nil {
		return fmt.Errorf("compressing %s: %w", path, err)
	}
	return nil
}

// Size is the size of one function's binary and package, in bytes.
type Size struct {
	Function  string `json:"function"`
	Bootstrap int64  `json:"bootstrapBytes"`
	Zip       int64  `json:"zipBytes"`
}

// Measure returns the sizes of the files bootstrap and zip of function.
func Measure(function, bootstrap, zipPath string) (Size, error) {
	b, err := os.Stat(bootstrap)
	if err != nil {
		return Size{}, fmt.Errorf("measuring %s: %w", bootstrap, err)
	}
	z, err := os.Stat(zipPath)
	if err != nil {
		return Size{}, fmt.Errorf("measuring %s: %w", zipPath, err)
	}
	return Size{Function: function, Bootstrap: b.Size(), Zip: z.Size()}, nil
}

// WriteTable prints the sizes as a table, in bytes and in MB (10^6 bytes).
func WriteTable(w io.Writer, sizes []Size) error {
	if _, err := fmt.Fprintf(w, "%-12s %21s %21s\n", "function", "bootstrap", "zip"); err != nil {
		return fmt.Errorf("writing the size table: %w", err)
	}
	for _, s := range sizes {
		if _, err := fmt.Fprintf(w, "%-12s %10d (%5.1f MB) %10d (%5.1f MB)\n", s.Function,
			s.Bootstrap, float64(s.Bootstrap)/1e6, s.Zip, float64(s.Zip)/1e6); err != nil {
			return fmt.Errorf("writing the size table: %w", err)
		}
	}
	return nil
}
