package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

// run parses the flags, builds the image and writes its archive.
func run(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	var o options
	fs.StringVar(&o.Arch, "arch", "amd64", "the architecture: amd64 or arm64")
	fs.StringVar(&o.BinDir, "bin", "", "the folder of the static binaries "+strings.Join(release.Binaries, ", "))
	fs.StringVar(&o.Version, "version", "0.1.0-dev", "the version, as `queuebox version` prints it")
	fs.StringVar(&o.Revision, "revision", "", "the commit of the build, for the label")
	fs.StringVar(&o.CAFile, "ca", "/etc/ssl/certs/ca-certificates.crt", "the CA bundle to copy (Debian's ca-certificates)")
	fs.StringVar(&o.ZoneInfo, "zoneinfo", "/usr/share/zoneinfo", "the time-zone database to copy (Debian's tzdata)")
	fs.StringVar(&o.RepoRoot, "repo", "../..", "the repository, whose LICENSE and THIRD_PARTY_NOTICES.md the image carries")
	repo := fs.String("repository", "queuebox", "the image name that the archive tags, with the version as its tag")
	out := fs.String("out", "", "the docker-archive to write")
	epoch := fs.String("created", os.Getenv("SOURCE_DATE_EPOCH"), "the time of the image and its files, in Unix seconds (default now)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.BinDir == "" || *out == "" {
		return fmt.Errorf("-bin and -out are required")
	}
	o.Created = time.Now().Truncate(time.Second)
	if *epoch != "" {
		secs, err := strconv.ParseInt(*epoch, 10, 64)
		if err != nil {
			return fmt.Errorf("-created %q: %w", *epoch, err)
		}
		o.Created = time.Unix(secs, 0)
	}
	tag, err := name.NewTag(*repo+":"+imageTag(o.Version), name.WeakValidation)
	if err != nil {
		return fmt.Errorf("the image name: %w", err)
	}
	img, err := buildImage(release, o)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
		return fmt.Errorf("creating the output folder: %w", err)
	}
	if err := tarball.WriteToFile(*out, tag, img); err != nil {
		return fmt.Errorf("writing %s: %w", *out, err)
	}
	return report(stdout, *out, tag, o.Arch, img)
}

// tagChars are the characters that an image tag may not hold.
var tagChars = regexp.MustCompile(`[^A-Za-z0-9_.-]`)

// imageTag is the image tag of a version: without the v of the git tag (v1.2.3 is the image
// 1.2.3), other characters that a tag cannot hold replaced by '-'.
func imageTag(version string) string {
	t := tagChars.ReplaceAllString(strings.TrimPrefix(version, "v"), "-")
	if len(t) > 128 {
		t = t[:128]
	}
	return t
}

// report prints the archive's size, the image's uncompressed size and its id.
func report(w io.Writer, out string, tag name.Tag, arch string, img v1.Image) error {
	st, err := os.Stat(out)
	if err != nil {
		return fmt.Errorf("reading %s: %w", out, err)
	}
	layers, err := img.Layers()
	if err != nil {
		return fmt.Errorf("reading the layers: %w", err)
	}
	var unpacked int64
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			return fmt.Errorf("reading a layer: %w", err)
		}
		n, err := io.Copy(io.Discard, rc)
		rc.Close()
		if err != nil {
			return fmt.Errorf("reading a layer: %w", err)
		}
		unpacked += n
	}
	id, err := img.ConfigName()
	if err != nil {
		return fmt.Errorf("the image id: %w", err)
	}
	_, err = fmt.Fprintf(w, "image %s linux/%s: %s, archive %.1f MB, uncompressed %.1f MB, id %s\n",
		tag, arch, out, float64(st.Size())/1e6, float64(unpacked)/1e6, id)
	return err
}
