package deploy_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/alternayte/queuebox/shared/cli"
	"github.com/alternayte/queuebox/shared/config"
	"github.com/alternayte/queuebox/shared/service"
)

// stackService is the part of a service of the root docker-compose.yml or of
// examples/http-fanout/docker-compose.yml that the tests read.
type stackService struct {
	Image    string
	Profiles []string
	Build    struct {
		Context, Dockerfile, Target string
	}
	Environment map[string]string
	DependsOn   map[string]struct{ Condition string } `yaml:"depends_on"`
	Ports       []string
	Volumes     []string
	Healthcheck map[string]any
}

type stackFile struct {
	Name     string
	Services map[string]stackService
	Volumes  map[string]any
}

func loadStack(t *testing.T, path string) stackFile {
	t.Helper()
	var c stackFile
	require.NoError(t, yaml.Unmarshal(readRepoFile(t, path), &c), path)
	return c
}

// readEnvExample reads .env.example: NAME=value lines, comments and blank lines.
func readEnvExample(t *testing.T) map[string]string {
	t.Helper()
	vars := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(readRepoFile(t, ".env.example")))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, value, ok := strings.Cut(line, "=")
		require.True(t, ok, ".env.example line %d is NAME=value: %q", n, line)
		require.Regexp(t, `^[A-Z_][A-Z0-9_]*$`, name, ".env.example line %d", n)
		vars[name] = value
	}
	require.NoError(t, sc.Err())
	return vars
}

// interpolateWith replaces the variables of a Compose value as Compose does with the
// variables vars (an --env-file): ${NAME}, ${NAME:-default} and ${NAME:?message}. A variable
// that vars lacks takes its default; one without a default fails the test.
func interpolateWith(t *testing.T, vars map[string]string, v string) string {
	t.Helper()
	return interpolation.ReplaceAllStringFunc(v, func(m string) string {
		sub := interpolation.FindStringSubmatch(m)
		if val, ok := vars[sub[1]]; ok && val != "" {
			return val
		}
		require.True(t, strings.HasPrefix(sub[2], ":-"), "%s is not set by .env.example and has no default", m)
		return sub[3]
	})
}

// composeVariables returns every ${NAME...} of a Compose file, with whether it stops the
// start when unset (${NAME:?message}). $$ is a literal dollar for the container.
func composeVariables(data []byte) map[string]bool {
	text := strings.ReplaceAll(string(data), "$$", "")
	out := map[string]bool{}
	for _, m := range interpolation.FindAllStringSubmatch(text, -1) {
		out[m[1]] = out[m[1]] || strings.HasPrefix(m[2], ":?")
	}
	return out
}

func TestRootComposeServicesAndProfiles(t *testing.T) {
	t.Parallel()
	c := loadStack(t, "docker-compose.yml")
	stages := loadDockerfile(t)

	// The stack of the tutorials starts without a profile.
	for _, name := range []string{"postgres", "queuebox", "receiver"} {
		require.Contains(t, c.Services, name)
		assert.Empty(t, c.Services[name].Profiles, "%s runs without --profile", name)
	}
	// Each broker is in the profile of its name, and only there.
	for _, name := range []string{"rabbitmq", "kafka", "nats"} {
		require.Contains(t, c.Services, name)
		assert.Equal(t, []string{name}, c.Services[name].Profiles, "--profile %s starts %s", name, name)
		assert.NotEmpty(t, c.Services[name].Image)
	}
	assert.Len(t, c.Services, 6)
	assert.Contains(t, c.Services["nats"].Image, "nats:")
	assert.Contains(t, strings.Join(readStackCommand(t, "nats"), " "), "-js", "NATS runs with JetStream")

	pg := c.Services["postgres"]
	assert.Regexp(t, `^postgres:16(\b|-)`, pg.Image, "PostgreSQL 16, as spec/32 says")
	assert.NotEmpty(t, pg.Healthcheck["test"])

	qb := c.Services["queuebox"]
	assert.Equal(t, "service_healthy", qb.DependsOn["postgres"].Condition)
	for _, name := range []string{"queuebox", "receiver"} {
		b := c.Services[name].Build
		assert.Equal(t, ".", filepath.Clean(b.Context), "%s builds from the repository root", name)
		assert.Equal(t, "local/Dockerfile", b.Dockerfile)
		assert.Contains(t, stages, b.Target)
		assert.Equal(t, name, b.Target)
	}

	// The configuration is examples/queuebox.yml, mounted as a single file (spec/33 appends
	// to it), and the capture state is a named volume.
	mounts := map[string]string{}
	for _, v := range qb.Volumes {
		src, dst, _ := strings.Cut(v, ":")
		dst, _, _ = strings.Cut(dst, ":")
		mounts[dst] = src
	}
	assert.Equal(t, "./examples/queuebox.yml", mounts["/etc/queuebox/queuebox.yml"])
	_, err := os.Stat(filepath.Join(repoRoot, "examples/queuebox.yml"))
	require.NoError(t, err)
	assert.Contains(t, c.Volumes, mounts["/var/lib/queuebox/capture"])
}

// readStackCommand reads the command of a service of the root Compose file, which is a list.
func readStackCommand(t *testing.T, service string) []string {
	t.Helper()
	var c struct {
		Services map[string]struct{ Command []string }
	}
	require.NoError(t, yaml.Unmarshal(readRepoFile(t, "docker-compose.yml"), &c))
	return c.Services[service].Command
}

// TestComposeVariablesAreInTheEnvExample checks that .env.example sets every variable of the
// root Compose files, and that the database variables stop the start without an env file
// (spec/19: "Without it, the start fails with a message that names the variables to set").
func TestComposeVariablesAreInTheEnvExample(t *testing.T) {
	t.Parallel()
	env := readEnvExample(t)
	for _, path := range []string{"docker-compose.yml", "docker-compose.release.yml"} {
		vars := composeVariables(readRepoFile(t, path))
		require.NotEmpty(t, vars, path)
		for name := range vars {
			assert.Contains(t, env, name, "%s uses ${%s}: .env.example sets it", path, name)
		}
	}
	required := composeVariables(readRepoFile(t, "docker-compose.yml"))
	for _, name := range []string{"POSTGRES_DB", "POSTGRES_USER", "POSTGRES_PASSWORD"} {
		assert.True(t, required[name], "${%s:?...}: the start names it when it is unset", name)
	}
	assert.True(t, composeVariables(readRepoFile(t, "docker-compose.release.yml"))["RELEASE_IMAGE"])
}

// loadServiceConfig loads the configuration of a queuebox service exactly as its container
// does: its QUEUEBOX_ variables (interpolated with vars) over the file mounted at
// QUEUEBOX_CONFIG_FILE, which is the repository file hostPath. It fails the test on a warning,
// so every QUEUEBOX_ variable that the service sets is a configuration key.
func loadServiceConfig(t *testing.T, svc stackService, vars map[string]string, hostPath string) *config.Config {
	t.Helper()
	env := map[string]string{}
	for k, v := range svc.Environment {
		env[k] = interpolateWith(t, vars, v)
	}
	target := env[config.ConfigFileVariable]
	require.NotEmpty(t, target, "the service names its configuration file")
	data := readRepoFile(t, hostPath)
	readFile := func(name string) ([]byte, error) {
		if name == target {
			return data, nil
		}
		return nil, fmt.Errorf("open %s: %w", name, fs.ErrNotExist)
	}
	cfg, warnings, err := service.Load(service.LoadOptions{Env: env, ReadFile: readFile})
	require.NoError(t, err)
	assert.Empty(t, warnings, "every QUEUEBOX_ variable and every key of %s is a configuration key", hostPath)
	return cfg
}

func TestRootComposeConfiguration(t *testing.T) {
	t.Parallel()
	c := loadStack(t, "docker-compose.yml")
	vars := readEnvExample(t)
	cfg := loadServiceConfig(t, c.Services["queuebox"], vars, "examples/queuebox.yml")

	// spec/32 and spec/33 call /health on 8080: the data port, published, no management port.
	assert.Equal(t, 8080, cfg.Server.HTTPPort)
	assert.Zero(t, cfg.Server.ManagementPort)
	assert.Contains(t, c.Services["queuebox"].Ports, "${HOST_HTTP_PORT:-8080}:8080")
	assert.Equal(t, "8080", vars["HOST_HTTP_PORT"])
	assert.Equal(t, "5432", vars["HOST_POSTGRES_PORT"])

	// The database is the postgres service with the role and password that it creates:
	// the tutorials' psql -U queuebox -d queuebox and postgres://queuebox:queuebox@localhost:5432/queuebox.
	u, err := url.Parse(strings.TrimPrefix(cfg.Database.URL.Reveal(), "jdbc:"))
	require.NoError(t, err)
	assert.Equal(t, "postgres", u.Hostname())
	assert.Equal(t, "/"+vars["POSTGRES_DB"], u.Path)
	assert.Equal(t, vars["POSTGRES_USER"], cfg.Database.Username)
	assert.Equal(t, vars["POSTGRES_PASSWORD"], cfg.Database.Password.Reveal())
	assert.Equal(t, "queuebox", vars["POSTGRES_USER"])
	assert.Equal(t, "queuebox", vars["POSTGRES_DB"])
	assert.Equal(t, "queuebox", vars["POSTGRES_PASSWORD"])
	assert.True(t, cfg.Database.Migrate, "QueueBox creates its tables at startup (spec/32)")
	assert.Equal(t, config.Milliseconds(100), cfg.Outbox.PollIntervalMs)

	// spec/32's route: order.* to webhook-api, POST http://receiver:8080/webhook.
	d, ok := cfg.Destinations["webhook-api"]
	require.True(t, ok)
	require.NotNil(t, d.HTTP)
	assert.Equal(t, "http://receiver:8080", d.HTTP.BaseURL)
	assert.Equal(t, "/webhook", d.HTTP.Path)
	require.Len(t, cfg.Routes, 1)
	assert.Equal(t, "order.*", cfg.Routes[0].TopicPattern)
	assert.Equal(t, "webhook-api", cfg.Routes[0].Destination)
	assert.Equal(t, "/inbox", cfg.Inbox.BasePath)
	assert.Empty(t, cfg.Sources, "spec/33 adds the first source")
}

func TestReleaseComposeRunsTheReleasedImage(t *testing.T) {
	t.Parallel()
	var doc yaml.Node
	require.NoError(t, yaml.Unmarshal(readRepoFile(t, "docker-compose.release.yml"), &doc))
	qb := nodeAt(t, &doc, "services", "queuebox")
	require.NotNil(t, qb, "the release file overrides the queuebox service")
	img := nodeAt(t, qb, "image")
	require.NotNil(t, img)
	assert.Regexp(t, `^\$\{RELEASE_IMAGE:\?`, img.Value)
	build := nodeAt(t, qb, "build")
	require.NotNil(t, build, "the release file removes the build")
	assert.Equal(t, "!reset", build.Tag, "build: !reset null, so Compose pulls the image instead of building it")

	// The comment names the archive that `make release` writes and the tag it carries, as the
	// Makefile names them, so that a user can load it and set RELEASE_IMAGE with no registry.
	text := string(readRepoFile(t, "docker-compose.release.yml"))
	makefile := string(readRepoFile(t, "Makefile"))
	assert.Contains(t, makefile, "/queuebox-image-$(VERSION)-linux-$$arch.tar", "the Makefile's image archive name")
	assert.Contains(t, text, "dist/queuebox-image-<version>-linux-<arch>.tar")
	assert.Contains(t, text, "RELEASE_IMAGE=queuebox:1.2.3")

	// Only services of the base file, so the merge adds nothing by accident.
	base := loadStack(t, "docker-compose.yml")
	var rel struct{ Services map[string]any }
	require.NoError(t, yaml.Unmarshal(readRepoFile(t, "docker-compose.release.yml"), &rel))
	for name := range rel.Services {
		assert.Contains(t, base.Services, name)
	}
}

// nodeAt walks the mapping keys of a YAML document; nil when one is missing.
func nodeAt(t *testing.T, n *yaml.Node, keys ...string) *yaml.Node {
	t.Helper()
	if n.Kind == yaml.DocumentNode {
		n = n.Content[0]
	}
	for _, k := range keys {
		if n.Kind != yaml.MappingNode {
			return nil
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == k {
				next = n.Content[i+1]
			}
		}
		if next == nil {
			return nil
		}
		n = next
	}
	return n
}

func TestHTTPFanoutStack(t *testing.T) {
	t.Parallel()
	c := loadStack(t, "examples/http-fanout/docker-compose.yml")
	for _, name := range []string{"postgres", "queuebox", "analytics", "audit"} {
		require.Contains(t, c.Services, name)
	}
	qb := c.Services["queuebox"]
	assert.Contains(t, qb.Ports, "18081:8080", "spec/10 posts to localhost:18081")
	assert.Contains(t, qb.Volumes, "./queuebox.yml:/etc/queuebox/queuebox.yml:ro")
	cfg := loadServiceConfig(t, qb, nil, "examples/http-fanout/queuebox.yml")
	assert.Equal(t, c.Services["postgres"].Environment["POSTGRES_PASSWORD"], cfg.Database.Password.Reveal())

	// Each destination is a receiver service of the stack, on the receiver's port.
	stages := loadDockerfile(t)
	entry := execForm(t, stages["receiver"].one(t, "ENTRYPOINT").args)
	_, port, _ := strings.Cut(entry[slices.Index(entry, "-addr")+1], ":")
	require.Len(t, cfg.Destinations, 2)
	for name, d := range cfg.Destinations {
		require.NotNil(t, d.HTTP, name)
		u, err := url.Parse(d.HTTP.BaseURL)
		require.NoError(t, err)
		assert.Equal(t, name, u.Hostname(), "destination %s is the service %s", name, name)
		assert.Equal(t, port, u.Port())
		assert.Equal(t, "receiver", c.Services[name].Build.Target)
		assert.Equal(t, ".", filepath.Clean(filepath.Join("examples/http-fanout", c.Services[name].Build.Context)))
	}
	src, ok := cfg.Sources["stripe"]
	require.True(t, ok)
	require.NotNil(t, src.HTTP)
	assert.Equal(t, "/stripe", src.HTTP.Path)
	assert.Equal(t, "{{ eventType }}", src.Topic, "the event type routes the row")
}

// configCheck runs `queuebox config check` on the file path with the variables env.
func configCheck(t *testing.T, path string, env map[string]string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	environ := []string{config.ConfigFileVariable + "=" + path}
	for k, v := range env {
		environ = append(environ, k+"="+v)
	}
	code := cli.Main(context.Background(), []string{"config", "check"}, cli.Env{Stdout: &stdout, Stderr: &stderr, Environ: environ})
	return code, stdout.String(), stderr.String()
}

// TestExampleConfigurationsPassConfigCheck runs `queuebox config check` on the example
// configurations, as a user would, with only the password that the Compose file passes.
func TestExampleConfigurationsPassConfigCheck(t *testing.T) {
	t.Parallel()
	for _, path := range []string{"examples/queuebox.yml", "examples/http-fanout/queuebox.yml", "examples/cdc/queuebox.yml"} {
		code, stdout, stderr := configCheck(t, filepath.Join(repoRoot, path), map[string]string{"QUEUEBOX_DATABASE_PASSWORD": "pw-3d1e"})
		assert.Equal(t, cli.ExitOK, code, "%s: %s", path, stderr)
		assert.NotContains(t, stderr, "warning", path)
		assert.NotContains(t, stdout, "pw-3d1e", "the secret is masked")
	}
}

// tutorialSource is what spec/33-receive-a-webhook.md appends to examples/queuebox.yml with
// `cat >> examples/queuebox.yml`, with the indentation that the flattened page lost.
const tutorialSource = `  orders:
    type: http
    path: /orders
    idempotencyKeyPath: $.id
    consumption: pull
`

// TestTutorialSourceAppendsToTheExample appends spec/33's source to a copy of
// examples/queuebox.yml and checks that config check accepts the result with the source.
func TestTutorialSourceAppendsToTheExample(t *testing.T) {
	t.Parallel()
	data := readRepoFile(t, "examples/queuebox.yml")
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	require.Equal(t, "sources:", lines[len(lines)-1], "sources: is the last line, so that the tutorial can append to it")
	require.True(t, bytes.HasSuffix(data, []byte("\n")), "the file ends in a newline, so that cat >> starts a new line")

	path := filepath.Join(t.TempDir(), "queuebox.yml")
	require.NoError(t, os.WriteFile(path, append(slices.Clone(data), tutorialSource...), 0o600))
	code, stdout, stderr := configCheck(t, path, map[string]string{"QUEUEBOX_DATABASE_PASSWORD": "pw"})
	require.Equal(t, cli.ExitOK, code, stderr)
	assert.Regexp(t, regexp.MustCompile(`(?m)^sources:\n  orders:\n`), stdout)
	assert.Contains(t, stdout, "consumption: pull")
}

// TestComposeOverrideIsTheDevelopmentLoop checks docker-compose.override.yml, which Compose
// reads beside docker-compose.yml when no -f names the files (spec/19, spec/32): it changes
// only the queuebox service, to the `dev` stage of local/Dockerfile with the source tree
// mounted at the stage's working directory, where the stage's command runs
// `go run ./local serve`; its caches are named volumes that it declares.
func TestComposeOverrideIsTheDevelopmentLoop(t *testing.T) {
	t.Parallel()
	base := loadStack(t, "docker-compose.yml")
	over := loadStack(t, "docker-compose.override.yml")
	require.Len(t, over.Services, 1, "the override changes only queuebox")
	qb, ok := over.Services["queuebox"]
	require.True(t, ok, "the override changes the queuebox service")
	// Compose merges the override into the base service: the context and the Dockerfile stay
	// the base's, the target and the image name change.
	assert.Empty(t, qb.Build.Context, "the context stays the base file's")
	assert.Empty(t, qb.Build.Dockerfile, "the Dockerfile stays the base file's")
	assert.Equal(t, "local/Dockerfile", base.Services["queuebox"].Build.Dockerfile)
	assert.Equal(t, "dev", qb.Build.Target)
	assert.NotEqual(t, base.Services["queuebox"].Image, qb.Image, "the dev image does not replace the built one")

	stages := loadDockerfile(t)
	require.Contains(t, stages, "dev")
	dev := stages["dev"]
	assert.True(t, strings.HasPrefix(dev.base, "golang:"), "the dev stage is the Go toolchain: %s", dev.base)
	workdir := strings.TrimSpace(dev.one(t, "WORKDIR").args)
	assert.Equal(t, []string{"go", "run", "./local", "serve"}, execForm(t, dev.one(t, "CMD").args))

	mounts := map[string]string{}
	for _, v := range qb.Volumes {
		src, dst, _ := strings.Cut(v, ":")
		dst, _, _ = strings.Cut(dst, ":")
		mounts[dst] = src
	}
	assert.Equal(t, ".", mounts[workdir], "the source tree is mounted at the stage's WORKDIR")
	for dst, src := range mounts {
		if dst == workdir {
			continue
		}
		assert.Contains(t, over.Volumes, src, "the cache volume %s (at %s) is declared", src, dst)
		assert.NotContains(t, base.Volumes, src, "the cache volume %s is the override's own", src)
	}
	assert.Contains(t, mounts, "/go/pkg/mod", "the module cache survives a restart")

	// The last stage stays queuebox, the image of a plain docker build.
	all, err := parseDockerfile(string(readRepoFile(t, "local/Dockerfile")))
	require.NoError(t, err)
	assert.Equal(t, "queuebox", all[len(all)-1].name, "the default target is the last stage")
}

// TestCDCStack checks examples/cdc/docker-compose.yml (spec/08): PostgreSQL with wal_level =
// logical; the migrations, then the publication that names the outbox table, then QueueBox
// with capture on, each started only when the one before completed; the capture state on a
// named volume at the configured state directory; the destination is the receiver service.
func TestCDCStack(t *testing.T) {
	t.Parallel()
	const dir = "examples/cdc"
	c := loadStack(t, dir+"/docker-compose.yml")
	var commands struct {
		Services map[string]struct{ Command []string }
	}
	require.NoError(t, yaml.Unmarshal(readRepoFile(t, dir+"/docker-compose.yml"), &commands))
	for _, name := range []string{"postgres", "migrate", "publication", "queuebox", "receiver"} {
		require.Contains(t, c.Services, name)
	}
	assert.Contains(t, commands.Services["postgres"].Command, "wal_level=logical", "capture needs wal_level = logical")
	assert.Regexp(t, `^postgres:16(\b|-)`, c.Services["postgres"].Image)

	// The order of the start: postgres healthy, migrate done, publication done, queuebox.
	mig, pub, qb := c.Services["migrate"], c.Services["publication"], c.Services["queuebox"]
	assert.Equal(t, []string{"migrate"}, commands.Services["migrate"].Command)
	assert.Equal(t, "service_healthy", mig.DependsOn["postgres"].Condition)
	assert.Equal(t, "service_completed_successfully", pub.DependsOn["migrate"].Condition)
	assert.Equal(t, "service_completed_successfully", qb.DependsOn["publication"].Condition)
	assert.Equal(t, "queuebox", mig.Build.Target)
	assert.Equal(t, ".", filepath.Clean(filepath.Join(dir, mig.Build.Context)))
	assert.Equal(t, mig.Image, qb.Image, "queuebox runs the image that migrate built")

	// The publication service runs publication.sql, which creates the configured publication.
	pubCmd := commands.Services["publication"].Command
	require.Contains(t, pubCmd, "-f")
	script := pubCmd[slices.Index(pubCmd, "-f")+1]
	assert.Contains(t, pub.Volumes, "./publication.sql:"+script+":ro")
	sql := string(readRepoFile(t, dir+"/publication.sql"))

	cfg := loadServiceConfig(t, qb, nil, dir+"/queuebox.yml")
	mcfg := loadServiceConfig(t, mig, nil, dir+"/queuebox.yml")
	assert.Equal(t, cfg.Database.URL, mcfg.Database.URL, "migrate and queuebox use one database")
	cp := cfg.Outbox.Capture
	assert.Equal(t, "postgres-logical", string(cp.Mode))
	assert.True(t, cp.Enabled)
	assert.Contains(t, sql, "CREATE PUBLICATION "+cp.Publication+" FOR TABLE outbox")
	assert.NotEmpty(t, cp.Slot)

	mounts := map[string]string{}
	for _, v := range qb.Volumes {
		src, dst, _ := strings.Cut(v, ":")
		dst, _, _ = strings.Cut(dst, ":")
		mounts[dst] = src
	}
	require.Contains(t, mounts, cp.StateDirectory, "the state directory is a volume")
	assert.Contains(t, c.Volumes, mounts[cp.StateDirectory], "a named volume, so the position survives a restart")
	assert.Contains(t, qb.Ports, "18082:8080")

	stages := loadDockerfile(t)
	entry := execForm(t, stages["receiver"].one(t, "ENTRYPOINT").args)
	_, port, _ := strings.Cut(entry[slices.Index(entry, "-addr")+1], ":")
	require.Len(t, cfg.Destinations, 1)
	for name, d := range cfg.Destinations {
		require.NotNil(t, d.HTTP, name)
		u, err := url.Parse(d.HTTP.BaseURL)
		require.NoError(t, err)
		assert.Contains(t, c.Services, u.Hostname(), "destination %s is a service of the stack", name)
		assert.Equal(t, "receiver", c.Services[u.Hostname()].Build.Target)
		assert.Equal(t, port, u.Port())
	}
}
