package main

import (
	"debug/elf"
	"fmt"
	"path"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// options are the inputs of one image.
type options struct {
	Arch     string    // amd64 or arm64
	BinDir   string    // holds the static binaries that the definition names
	Version  string    // what `queuebox version` prints, for the label
	Revision string    // the commit, for the label
	Created  time.Time // the time of every file and of the image
	CAFile   string    // the host's CA bundle (Debian's ca-certificates)
	ZoneInfo string    // the host's time-zone database (Debian's tzdata)
	RepoRoot string    // the repository, for the relative sources of Docs
}

// machines are the ELF machines of the architectures that the release builds.
var machines = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

// buildImage assembles the image of def for one architecture: a base layer (users, state
// directories, CA bundle, time zones) and a layer of the binaries, over nothing.
func buildImage(def Definition, o options) (v1.Image, error) {
	if _, ok := machines[o.Arch]; !ok {
		return nil, fmt.Errorf("architecture %q: the release builds amd64 and arm64", o.Arch)
	}
	base, err := baseLayer(def, o)
	if err != nil {
		return nil, fmt.Errorf("the base layer: %w", err)
	}
	bins, err := binaryLayer(def, o)
	if err != nil {
		return nil, fmt.Errorf("the binaries' layer: %w", err)
	}
	created := v1.Time{Time: o.Created.UTC()}
	img, err := mutate.Append(empty.Image,
		mutate.Addendum{Layer: base, History: v1.History{Created: created, CreatedBy: "queuebox release: users, state directories, CA certificates, time zones"}},
		mutate.Addendum{Layer: bins, History: v1.History{Created: created, CreatedBy: "queuebox release: " + strings.Join(def.Binaries, ", ")}},
	)
	if err != nil {
		return nil, fmt.Errorf("adding the layers: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("reading the config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Created = "linux", o.Arch, created
	cf.Config = imageConfig(def, o)
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("setting the config: %w", err)
	}
	return img, nil
}

// imageConfig is the runtime configuration of the image: what `docker inspect` shows.
func imageConfig(def Definition, o options) v1.Config {
	ports := map[string]struct{}{}
	for _, p := range def.Ports {
		ports[p] = struct{}{}
	}
	return v1.Config{
		User:         def.User,
		ExposedPorts: ports,
		Env:          def.Env,
		Entrypoint:   def.Entrypoint,
		Cmd:          def.Cmd,
		WorkingDir:   def.WorkDir,
		Healthcheck: &v1.HealthConfig{
			Test: def.Health.Test, Interval: def.Health.Interval, Timeout: def.Health.Timeout,
			StartPeriod: def.Health.StartPeriod, Retries: def.Health.Retries,
		},
		Labels: map[string]string{
			"org.opencontainers.image.title":    "QueueBox",
			"org.opencontainers.image.version":  o.Version,
			"org.opencontainers.image.revision": o.Revision,
			"org.opencontainers.image.created":  o.Created.UTC().Format(time.RFC3339),
			"org.opencontainers.image.source":   "https://github.com/alternayte/queuebox",
			"org.opencontainers.image.licenses": "Apache-2.0",
		},
	}
}

func baseLayer(def Definition, o options) (v1.Layer, error) {
	l := newLayerWriter(o.Created)
	if err := l.file("/etc/passwd", 0o644, []byte(strings.Join(def.Passwd, "\n")+"\n")); err != nil {
		return nil, err
	}
	if err := l.file("/etc/group", 0o644, []byte(strings.Join(def.Group, "\n")+"\n")); err != nil {
		return nil, err
	}
	if err := l.copyFile(def.CABundle, o.CAFile, 0o644); err != nil {
		return nil, fmt.Errorf("the CA bundle (apt-get install -y ca-certificates): %w", err)
	}
	if err := l.copyTree(def.ZoneInfo, o.ZoneInfo); err != nil {
		return nil, fmt.Errorf("the time zones (apt-get install -y tzdata): %w", err)
	}
	for _, d := range def.Docs {
		src := d.Source
		if !filepath.IsAbs(src) {
			src = filepath.Join(o.RepoRoot, src)
		}
		if err := l.copyFile(d.Path, src, 0o644); err != nil {
			return nil, err
		}
	}
	if err := l.dir("/tmp", 0, 0, 0o1777); err != nil {
		return nil, err
	}
	for _, d := range def.StateDirs {
		if err := l.dir(d, def.UID, def.GID, 0o755); err != nil {
			return nil, err
		}
	}
	return l.layer()
}

func binaryLayer(def Definition, o options) (v1.Layer, error) {
	l := newLayerWriter(o.Created)
	for _, name := range def.Binaries {
		src := filepath.Join(o.BinDir, name)
		if err := checkStatic(src, o.Arch); err != nil {
			return nil, err
		}
		if err := l.copyFile(path.Join(def.BinDir, name), src, 0o755); err != nil {
			return nil, err
		}
	}
	return l.layer()
}

// checkStatic fails unless the file is a Linux executable of the architecture without a
// dynamic loader, which an image FROM scratch would lack.
func checkStatic(file, arch string) error {
	f, err := elf.Open(file)
	if err != nil {
		return fmt.Errorf("reading the binary %s: %w", file, err)
	}
	defer f.Close()
	if f.Machine != machines[arch] {
		return fmt.Errorf("%s is built for %s, not for %s", file, f.Machine, arch)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is linked dynamically; build it with CGO_ENABLED=0", file)
		}
	}
	return nil
}
