//go:build image

package image_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// podman runs podman with its own storage in a folder of the test, and the settings that a
// machine without systemd and without a container daemon needs (scripts/ensure-podman.sh
// says why each is there).
type podman struct {
	bin  string
	root string
}

// runFlags are the flags of every `podman run` and `podman create`: podman's default limits
// ask for more open files and processes than the machine's hard limits allow.
var runFlags = []string{"--ulimit", "nofile=20000:20000", "--ulimit", "nproc=4096:4096"}

// hostNetwork lets the container reach the host's loopback at hostAddress, with ports of its
// own, so that the image's 8080 does not meet another program's.
const (
	hostNetwork = "slirp4netns:allow_host_loopback=true"
	hostAddress = "10.0.2.2"
)

func newPodman(t *testing.T) *podman {
	t.Helper()
	bin, err := exec.LookPath("podman")
	if err != nil {
		t.Fatalf("podman is not installed, so the release image cannot be tested: run scripts/ensure-podman.sh (make test-image runs it; it installs podman, runc and slirp4netns from Debian as root)")
	}
	return &podman{bin: bin, root: t.TempDir()}
}

// globals are the flags before the podman command.
func (p *podman) globals() []string {
	return []string{
		"--root", p.root + "/storage", "--runroot", p.root + "/run", "--tmpdir", p.root + "/tmp",
		"--storage-driver", "vfs", "--runtime", "runc", "--cgroup-manager", "cgroupfs", "--events-backend", "file",
	}
}

// run runs a podman command and returns its standard output and error, and its error.
func (p *podman) run(ctx context.Context, args ...string) (string, string, error) {
	cmd := exec.CommandContext(ctx, p.bin, append(p.globals(), args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// must runs a podman command, fails the test when it fails, and returns its standard output.
func (p *podman) must(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	stdout, stderr, err := p.run(ctx, args...)
	if err != nil {
		t.Fatalf("podman %s: %v\n%s%s", strings.Join(args, " "), err, stdout, withoutTimerNoise(stderr))
	}
	return stdout
}

// withoutTimerNoise drops podman's complaint that it has no systemd to start the health
// check's timer: the test runs the health check itself.
func withoutTimerNoise(stderr string) string {
	var keep []string
	for _, line := range strings.Split(stderr, "\n") {
		if !strings.Contains(line, "unable to get systemd connection") && line != "" {
			keep = append(keep, line)
		}
	}
	return strings.Join(keep, "\n")
}

// randomName is a container name of this test run.
func randomName(prefix string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// waitFor calls cond until it returns true or the deadline passes; then it fails the test
// with what and the last reason that cond gave.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for {
		ok, reason := cond()
		if ok {
			return
		}
		last = reason
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s; last: %s", timeout, what, last)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// environment reads the variables that `make test-image` sets.
func environment(t *testing.T) (archive, version string) {
	t.Helper()
	archive, version = os.Getenv("QUEUEBOX_IMAGE_ARCHIVE"), os.Getenv("QUEUEBOX_IMAGE_VERSION")
	if archive == "" || version == "" {
		t.Fatalf("QUEUEBOX_IMAGE_ARCHIVE and QUEUEBOX_IMAGE_VERSION name the image to test: run make test-image")
	}
	if _, err := os.Stat(archive); err != nil {
		t.Fatalf("the image archive: %v (make test-image builds it)", err)
	}
	return archive, version
}

func fatalWithLogs(t *testing.T, p *podman, ctr string, format string, args ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stdout, stderr, _ := p.run(ctx, "logs", ctr)
	t.Fatalf("%s\ncontainer log:\n%s%s", fmt.Sprintf(format, args...), stdout, stderr)
}
