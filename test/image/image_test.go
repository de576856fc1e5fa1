//go:build image

package image_test

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/alternayte/queuebox/shared/store/postgres/dbtest"
)

// inspected is the part of `podman image inspect` that the test reads.
type inspected struct {
	Architecture string
	ManifestType string
	Healthcheck  *struct {
		Test    []string
		Retries int
	}
	Config struct {
		User         string
		ExposedPorts map[string]struct{}
		Entrypoint   []string
		Cmd          []string
		WorkingDir   string
	}
}

var loaded = regexp.MustCompile(`Loaded image(?:\(s\))?: (\S+)`)

// TestReleaseImage loads the image, checks what it declares and what it holds, migrates a
// database of its own with `queuebox migrate`, runs `queuebox serve` as the image's user,
// runs its health check, and has it deliver an outbox row to a receiver on the host.
func TestReleaseImage(t *testing.T) {
	archive, version := environment(t)
	p := newPodman(t)
	out := p.must(t, "load", "-i", archive)
	m := loaded.FindStringSubmatch(out)
	require.NotNil(t, m, "podman load names the image: %s", out)
	ref := m[1]
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, stderr, err := p.run(ctx, "rmi", "--force", ref); err != nil {
			t.Logf("removing the image %s: %v %s", ref, err, stderr)
		}
	})

	t.Run("declares", func(t *testing.T) { checkDeclared(t, p, ref) })
	t.Run("version", func(t *testing.T) {
		out := p.must(t, append(append([]string{"run", "--rm", "--network", "none"}, runFlags...), ref, "version")...)
		assert.Equal(t, "queuebox "+version, strings.TrimSpace(out))
	})
	t.Run("files", func(t *testing.T) { checkFiles(t, p, ref) })
	t.Run("delivers", func(t *testing.T) { checkDelivery(t, p, ref) })
}

// checkDeclared reads the image's configuration: the user, the port, the health check and
// the entrypoint survive the docker-archive.
func checkDeclared(t *testing.T, p *podman, ref string) {
	var images []inspected
	require.NoError(t, json.Unmarshal([]byte(p.must(t, "image", "inspect", ref)), &images))
	require.Len(t, images, 1)
	img := images[0]
	assert.Equal(t, runtime.GOARCH, img.Architecture)
	assert.Equal(t, "application/vnd.docker.distribution.manifest.v2+json", img.ManifestType, "Docker v2 schema 2, which has HEALTHCHECK")
	assert.Equal(t, "10001:10001", img.Config.User)
	assert.Contains(t, img.Config.ExposedPorts, "8080/tcp")
	require.NotNil(t, img.Healthcheck, "podman image inspect shows the HEALTHCHECK (a docker-archive keeps it)")
	assert.Equal(t, []string{"CMD", "/usr/local/bin/healthprobe", "http://127.0.0.1:8080/health"}, img.Healthcheck.Test)
	assert.Equal(t, 3, img.Healthcheck.Retries)
	assert.Equal(t, []string{"/usr/local/bin/queuebox"}, img.Config.Entrypoint)
	assert.Equal(t, []string{"serve"}, img.Config.Cmd)
	assert.Equal(t, "/var/lib/queuebox", img.Config.WorkingDir)
}

// checkFiles mounts the image's file system and reads it: the capture directory belongs to
// the user, the CA bundle holds certificates, the time zones load.
func checkFiles(t *testing.T, p *podman, ref string) {
	dir := strings.TrimSpace(p.must(t, "image", "mount", ref))
	t.Cleanup(func() { p.must(t, "image", "unmount", ref) })

	for _, d := range []string{"var/lib/queuebox", "var/lib/queuebox/capture"} {
		st, err := os.Stat(filepath.Join(dir, d))
		require.NoError(t, err, "/%s is in the image", d)
		require.True(t, st.IsDir())
		sys := st.Sys().(*syscall.Stat_t)
		assert.Equal(t, uint32(10001), sys.Uid, "/%s belongs to the user queuebox", d)
		assert.Equal(t, uint32(10001), sys.Gid, "/%s belongs to the group queuebox", d)
	}
	passwd, err := os.ReadFile(filepath.Join(dir, "etc/passwd"))
	require.NoError(t, err)
	assert.Contains(t, string(passwd), "queuebox:x:10001:10001:")

	bundle, err := os.ReadFile(filepath.Join(dir, "etc/ssl/certs/ca-certificates.crt"))
	require.NoError(t, err, "the CA bundle is in the image")
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(bundle), "the CA bundle holds PEM certificates")
	assert.Greater(t, strings.Count(string(bundle), "BEGIN CERTIFICATE"), 50)

	for _, zone := range []string{"Europe/Berlin", "America/New_York", "UTC"} {
		data, err := os.ReadFile(filepath.Join(dir, "usr/share/zoneinfo", zone))
		require.NoError(t, err, "the time zone %s is in the image", zone)
		_, err = time.LoadLocationFromTZData(zone, data)
		assert.NoError(t, err, zone)
	}
	for _, doc := range []string{"queuebox/LICENSE", "queuebox/THIRD_PARTY_NOTICES.md", "ca-certificates/copyright", "tzdata/copyright"} {
		_, err := os.Stat(filepath.Join(dir, "usr/share/doc", doc))
		assert.NoError(t, err, "the image carries /usr/share/doc/%s", doc)
	}
	for _, bin := range []string{"queuebox", "healthprobe", "capturenode"} {
		st, err := os.Stat(filepath.Join(dir, "usr/local/bin", bin))
		require.NoError(t, err, "/usr/local/bin/%s", bin)
		assert.NotZero(t, st.Mode()&0o111, "%s is executable", bin)
	}
}

// received is one request that the host's receiver got.
type received struct {
	path string
	body string
}

// checkDelivery runs `queuebox migrate` and `queuebox serve` from the image, waits for the
// image's health check to pass, inserts an outbox row and waits for the receiver on the host
// to get it and for the row to be sent.
func checkDelivery(t *testing.T, p *podman, ref string) {
	got := make(chan received, 16)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- received{path: r.URL.Path, body: string(body)}
	}))
	t.Cleanup(recv.Close)
	_, port, err := net.SplitHostPort(recv.Listener.Addr().String())
	require.NoError(t, err)

	dbURL := dbtest.NewDatabase(t)
	confDir := writeConfig(t, containerDatabaseURL(t, dbURL), "http://"+net.JoinHostPort(hostAddress, port))
	common := append([]string{"--network", hostNetwork, "-v", confDir + ":/etc/queuebox:ro",
		"-e", "QUEUEBOX_CONFIG_FILE=/etc/queuebox/queuebox.yml"}, runFlags...)

	out := p.must(t, append(append([]string{"run", "--rm"}, common...), ref, "migrate")...)
	t.Logf("queuebox migrate: %s", strings.TrimSpace(out))

	ctr := randomName("queuebox-image-test-")
	p.must(t, append(append([]string{"run", "--detach", "--name", ctr}, common...), ref)...)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, stderr, err := p.run(ctx, "rm", "--force", "--time", "10", ctr); err != nil {
			t.Logf("removing the container %s: %v %s", ctr, err, stderr)
		}
	})

	waitFor(t, 90*time.Second, "the image's health check to pass (podman healthcheck run)", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		stdout, stderr, err := p.run(ctx, "healthcheck", "run", ctr)
		if err != nil {
			state, _, _ := p.run(ctx, "inspect", "--format", "{{.State.Status}}", ctr)
			if s := strings.TrimSpace(state); s != "running" && s != "" {
				fatalWithLogs(t, p, ctr, "the container stopped (%s) before its health check passed", s)
			}
			return false, fmt.Sprintf("%v: %s%s", err, stdout, withoutTimerNoise(stderr))
		}
		return true, ""
	})
	// The process runs as the image's user, not root: its status in the host's /proc says so.
	pid := strings.TrimSpace(p.must(t, "inspect", "--format", "{{.State.Pid}}", ctr))
	status, err := os.ReadFile(filepath.Join("/proc", pid, "status"))
	require.NoError(t, err, "the status of queuebox serve, pid %s", pid)
	uids := regexp.MustCompile(`(?m)^Uid:\s+(.*)$`).FindSubmatch(status)
	require.NotNil(t, uids, "%s", status)
	assert.Equal(t, []string{"10001", "10001", "10001", "10001"}, strings.Fields(string(uids[1])), "queuebox serve runs as uid 10001")

	pool := dbtest.NewPool(t, dbURL)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var id string
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO outbox (topic, key, payload, headers)
		VALUES ('image.check', 'k1', '{"from":"the release image"}'::jsonb, '{}'::jsonb) RETURNING id::text`).Scan(&id))

	select {
	case r := <-got:
		assert.Equal(t, "/hook", r.path)
		assert.JSONEq(t, `{"from":"the release image"}`, r.body)
	case <-ctx.Done():
		fatalWithLogs(t, p, ctr, "the receiver on the host got no delivery of outbox row %s", id)
	}
	waitFor(t, time.Minute, "outbox row "+id+" to be sent", func() (bool, string) {
		var state string
		if err := pool.QueryRow(ctx, `SELECT state FROM outbox WHERE id::text = $1`, id).Scan(&state); err != nil {
			return false, err.Error()
		}
		return state == "sent", "state " + state
	})
}

// containerDatabaseURL is the test database as the container reaches it: the host's
// loopback through slirp4netns.
func containerDatabaseURL(t *testing.T, dbURL string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	switch u.Hostname() {
	case "127.0.0.1", "localhost", "::1":
		port := u.Port()
		if port == "" {
			port = "5432"
		}
		u.Host = net.JoinHostPort(hostAddress, port)
	}
	return u.String()
}

// writeConfig writes the container's queuebox.yml into a folder that the image's user can
// read: the database, no startup migration (`queuebox migrate` does it), and one route from
// image.* to the receiver on the host.
func writeConfig(t *testing.T, dbURL, receiver string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "conf")
	require.NoError(t, os.Mkdir(dir, 0o755))
	conf := fmt.Sprintf(`server:
  httpPort: 8080
database:
  url: %q
  username: postgres
  password: unused-with-trust
  migrate: false
outbox:
  pollIntervalMs: 100
destinations:
  host-receiver:
    type: http
    baseUrl: %s
    path: /hook
    timeoutMs: 10000
routes:
  - topicPattern: "image.*"
    destination: host-receiver
`, dbURL, receiver)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "queuebox.yml"), []byte(conf), 0o644))
	return dir
}
