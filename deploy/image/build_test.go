package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// fakeInputs builds a small static program for arch under the names of the image's binaries,
// and writes a CA bundle and a time-zone tree with a link inside it and one that leaves it.
func fakeInputs(t *testing.T, arch string) options {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, "main.go")
	if err := os.WriteFile(src, []byte("package main\n\nfunc main() {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "bin")
	cmd := exec.Command("go", "build", "-o", filepath.Join(bin, release.Binaries[0]), src)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building a static program for %s: %v\n%s", arch, err, out)
	}
	data, err := os.ReadFile(filepath.Join(bin, release.Binaries[0]))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range release.Binaries[1:] {
		if err := os.WriteFile(filepath.Join(bin, b), data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ca := filepath.Join(dir, "ca.crt")
	zi := filepath.Join(dir, "zoneinfo")
	must(t, os.WriteFile(ca, []byte("-----BEGIN CERTIFICATE-----\n"), 0o644))
	must(t, os.MkdirAll(filepath.Join(zi, "Europe"), 0o755))
	must(t, os.WriteFile(filepath.Join(zi, "Europe", "Berlin"), []byte("TZif"), 0o644))
	must(t, os.Symlink("Europe/Berlin", filepath.Join(zi, "CET-link")))
	must(t, os.Symlink("/etc/localtime", filepath.Join(zi, "localtime")))
	return options{Arch: arch, BinDir: bin, Version: "v1.2.3", Revision: "abc", Created: time.Unix(1700000000, 0),
		CAFile: ca, ZoneInfo: zi, RepoRoot: "../.."}
}

// withHostDocs returns the release definition with the Debian copyright files taken from the
// repository's LICENSE, so that the test needs neither package.
func withHostDocs() Definition {
	def := release
	def.Docs = nil
	for _, d := range release.Docs {
		if filepath.IsAbs(d.Source) {
			d.Source = "LICENSE"
		}
		def.Docs = append(def.Docs, d)
	}
	return def
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// entries reads the files of every layer of the image, by path.
func entries(t *testing.T, img v1.Image) map[string]*tar.Header {
	t.Helper()
	out := map[string]*tar.Header{}
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		must(t, err)
		out["/"+strings.TrimSuffix(h.Name, "/")] = h
	}
}

// TestBuildImage builds the arm64 image from a fake program and reads back its archive: the
// config, the files and their owners, and the same digest from the same inputs.
func TestBuildImage(t *testing.T) {
	o := fakeInputs(t, "arm64")
	img, err := buildImage(withHostDocs(), o)
	must(t, err)
	var buf bytes.Buffer
	tag, err := name.NewTag("queuebox:" + imageTag(o.Version))
	must(t, err)
	must(t, tarball.Write(tag, img, &buf))
	data := buf.Bytes()
	back, err := tarball.Image(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }, &tag)
	must(t, err)

	mt, err := back.MediaType()
	must(t, err)
	if string(mt) != "application/vnd.docker.distribution.manifest.v2+json" {
		t.Errorf("media type %s, want Docker v2 schema 2", mt)
	}
	cf, err := back.ConfigFile()
	must(t, err)
	if cf.Architecture != "arm64" || cf.OS != "linux" {
		t.Errorf("platform %s/%s", cf.OS, cf.Architecture)
	}
	c := cf.Config
	if c.Healthcheck == nil || strings.Join(c.Healthcheck.Test, " ") != strings.Join(release.Health.Test, " ") || c.Healthcheck.StartPeriod != time.Minute {
		t.Errorf("health check %+v", c.Healthcheck)
	}
	if c.User != "10001:10001" || c.WorkingDir != release.WorkDir || c.Labels["org.opencontainers.image.version"] != "v1.2.3" {
		t.Errorf("config %+v", c)
	}
	if _, ok := c.ExposedPorts["8080/tcp"]; !ok {
		t.Errorf("exposed ports %v", c.ExposedPorts)
	}

	files := entries(t, back)
	for _, d := range release.StateDirs {
		if h := files[d]; h == nil || h.Uid != 10001 || h.Gid != 10001 || h.Typeflag != tar.TypeDir {
			t.Errorf("%s: %+v, want a directory of 10001:10001", d, h)
		}
	}
	if h := files["/tmp"]; h == nil || h.Mode != 0o1777 {
		t.Errorf("/tmp: %+v, want mode 1777", h)
	}
	for _, b := range release.Binaries {
		if h := files["/usr/local/bin/"+b]; h == nil || h.Mode != 0o755 || h.Uid != 0 {
			t.Errorf("/usr/local/bin/%s: %+v, want root's, mode 0755", b, h)
		}
	}
	for _, f := range []string{"/etc/passwd", "/etc/group", release.CABundle, "/usr/share/zoneinfo/Europe/Berlin",
		"/usr/share/doc/queuebox/LICENSE", "/usr/share/doc/queuebox/THIRD_PARTY_NOTICES.md", "/usr/share/doc/ca-certificates/copyright"} {
		if h := files[f]; h == nil || h.Typeflag != tar.TypeReg {
			t.Errorf("%s is missing", f)
		}
	}
	if h := files["/usr/share/zoneinfo/CET-link"]; h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != "Europe/Berlin" {
		t.Errorf("the link inside the zoneinfo tree: %+v", h)
	}
	if h := files["/usr/share/zoneinfo/localtime"]; h != nil {
		t.Errorf("the link that leaves the zoneinfo tree is in the image: %+v", h)
	}

	// The same inputs give the same image.
	again, err := buildImage(withHostDocs(), o)
	must(t, err)
	d1, err := img.Digest()
	must(t, err)
	d2, err := again.Digest()
	must(t, err)
	if d1 != d2 {
		t.Errorf("two builds of the same inputs differ: %s and %s", d1, d2)
	}
}

// TestBuildRefusesAnotherArchitecture checks that the amd64 image does not take arm64
// binaries.
func TestBuildRefusesAnotherArchitecture(t *testing.T) {
	o := fakeInputs(t, "arm64")
	o.Arch = "amd64"
	_, err := buildImage(withHostDocs(), o)
	if err == nil || !strings.Contains(err.Error(), "not for amd64") {
		t.Errorf("err = %v, want the architecture named", err)
	}
}

func TestImageTag(t *testing.T) {
	for in, want := range map[string]string{
		"v1.2.3": "1.2.3", "v1.2.3-4-gabc-dirty": "1.2.3-4-gabc-dirty", "07ab95a": "07ab95a", "1.0.0+meta": "1.0.0-meta",
	} {
		if got := imageTag(in); got != want {
			t.Errorf("imageTag(%q) = %q, want %q", in, got, want)
		}
	}
}
