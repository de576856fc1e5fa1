package deploy_test

import (
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/alternayte/queuebox/shared/config"
	"github.com/alternayte/queuebox/shared/service"
)

// instruction is one instruction of a Dockerfile, its continuation lines joined.
type instruction struct {
	cmd  string // upper case: FROM, RUN, COPY, ...
	args string
	line int
}

// stage is one FROM stage of a Dockerfile.
type stage struct {
	name, base string
	flags      []string
	body       []instruction
}

// parseDockerfile splits a Dockerfile into stages. It joins lines that end in a backslash,
// and skips blank lines and comments.
func parseDockerfile(data string) ([]stage, error) {
	var stages []stage
	var cur strings.Builder
	start := 0
	lines := strings.Split(data, "\n")
	for i, raw := range lines {
		trimmed := strings.TrimSpace(raw)
		if cur.Len() == 0 && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue
		}
		if cur.Len() > 0 && strings.HasPrefix(trimmed, "#") {
			continue // a comment inside a continued instruction
		}
		if cur.Len() == 0 {
			start = i + 1
		}
		if strings.HasSuffix(trimmed, "\\") {
			cur.WriteString(strings.TrimSuffix(trimmed, "\\"))
			cur.WriteByte(' ')
			continue
		}
		cur.WriteString(trimmed)
		text := cur.String()
		cur.Reset()
		cmd, args, _ := strings.Cut(text, " ")
		in := instruction{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args), line: start}
		switch in.cmd {
		case "FROM":
			fields := strings.Fields(in.args)
			var st stage
			for len(fields) > 0 && strings.HasPrefix(fields[0], "--") {
				st.flags = append(st.flags, fields[0])
				fields = fields[1:]
			}
			if len(fields) == 0 {
				return nil, fmt.Errorf("line %d: FROM without an image", in.line)
			}
			st.base = fields[0]
			if len(fields) == 3 && strings.EqualFold(fields[1], "AS") {
				st.name = fields[2]
			}
			stages = append(stages, st)
		case "ARG":
			if len(stages) == 0 {
				continue // a global ARG
			}
			fallthrough
		default:
			if len(stages) == 0 {
				return nil, fmt.Errorf("line %d: %s before the first FROM", in.line, in.cmd)
			}
			stages[len(stages)-1].body = append(stages[len(stages)-1].body, in)
		}
	}
	if cur.Len() > 0 {
		return nil, fmt.Errorf("the file ends in a continued line")
	}
	return stages, nil
}

func (s stage) all(cmd string) []instruction {
	var out []instruction
	for _, in := range s.body {
		if in.cmd == cmd {
			out = append(out, in)
		}
	}
	return out
}

func (s stage) one(t *testing.T, cmd string) instruction {
	t.Helper()
	ins := s.all(cmd)
	require.Len(t, ins, 1, "stage %s has one %s", s.name, cmd)
	return ins[0]
}

func loadDockerfile(t *testing.T) map[string]stage {
	t.Helper()
	stages, err := parseDockerfile(string(readRepoFile(t, "local/Dockerfile")))
	require.NoError(t, err)
	byName := map[string]stage{}
	for _, s := range stages {
		require.NotEmpty(t, s.name, "every stage is named")
		byName[s.name] = s
	}
	require.Equal(t, "queuebox", stages[len(stages)-1].name, "the last stage, the default target, is QueueBox")
	return byName
}

// execForm decodes the JSON array of an exec-form CMD, ENTRYPOINT or HEALTHCHECK CMD.
func execForm(t *testing.T, args string) []string {
	t.Helper()
	var out []string
	require.NoError(t, yaml.Unmarshal([]byte(args), &out), "exec form %s", args)
	return out
}

func TestDockerfileBuildStage(t *testing.T) {
	t.Parallel()
	stages := loadDockerfile(t)
	build, ok := stages["build"]
	require.True(t, ok, "a build stage")
	assert.Regexp(t, `^golang:`, build.base)

	// Every file that the build copies exists.
	for _, in := range build.all("COPY") {
		fields := strings.Fields(in.args)
		require.GreaterOrEqual(t, len(fields), 2)
		for _, src := range fields[:len(fields)-1] {
			if strings.HasPrefix(src, "--") {
				continue
			}
			_, err := os.Stat(filepath.Join(repoRoot, src))
			assert.NoError(t, err, "COPY %s (line %d)", src, in.line)
		}
	}
	// Static binaries of packages that exist.
	env := strings.Join(func() []string {
		var a []string
		for _, in := range build.all("ENV") {
			a = append(a, in.args)
		}
		return a
	}(), " ")
	assert.Contains(t, strings.Fields(env), "CGO_ENABLED=0", "a static binary")
	var built []string
	for _, in := range build.all("RUN") {
		for _, m := range regexp.MustCompile(`go build [^&]*?-o (\S+) (\./\S+)`).FindAllStringSubmatch(in.args, -1) {
			built = append(built, filepath.Base(m[1]))
			mains, err := filepath.Glob(filepath.Join(repoRoot, m[2], "*.go"))
			require.NoError(t, err)
			assert.NotEmpty(t, mains, "%s is a package of the repository", m[2])
		}
	}
	assert.ElementsMatch(t, []string{"queuebox", "receiver", "healthprobe", "capturenode"}, built)
}

// passwdEntry finds the passwd line of user that the build stage writes, and returns its uid
// and gid.
func passwdEntry(t *testing.T, build stage, user string) (string, string) {
	t.Helper()
	re := regexp.MustCompile(`'` + user + `:x:([0-9]+):([0-9]+):[^']*'`)
	for _, in := range build.all("RUN") {
		if m := re.FindStringSubmatch(in.args); m != nil && strings.Contains(in.args, "/etc/passwd") {
			return m[1], m[2]
		}
	}
	t.Fatalf("the build stage writes no passwd entry for %s", user)
	return "", ""
}

func TestDockerfileRuntimeStage(t *testing.T) {
	t.Parallel()
	stages := loadDockerfile(t)
	build := stages["build"]
	uid, gid := passwdEntry(t, build, "queuebox")
	assert.NotEqual(t, "0", uid, "queuebox is not root")

	qb := stages["queuebox"]
	assert.Regexp(t, `^gcr\.io/distroless/static`, qb.base, "a small static runtime base")
	assert.Equal(t, "queuebox", qb.one(t, "USER").args, "the non-root user queuebox")

	// The capture directory exists in the build stage and is copied with the owner queuebox.
	var mkdirs string
	for _, in := range build.all("RUN") {
		mkdirs += in.args
	}
	assert.Contains(t, mkdirs, "/var/lib/queuebox/capture")
	owned := false
	copied := map[string]bool{}
	for _, in := range qb.all("COPY") {
		fields := strings.Fields(in.args)
		dest := fields[len(fields)-1]
		for _, f := range fields[:len(fields)-1] {
			if !strings.HasPrefix(f, "--") {
				copied[filepath.Base(f)] = true
			}
		}
		if strings.HasPrefix(dest, "/var/lib/queuebox") && slices.Contains(fields, "--chown="+uid+":"+gid) {
			owned = true
		}
	}
	assert.True(t, owned, "/var/lib/queuebox (with capture) is copied with --chown=%s:%s", uid, gid)
	assert.True(t, copied["passwd"], "the passwd file that names queuebox")

	hc := qb.one(t, "HEALTHCHECK")
	_, cmd, ok := strings.Cut(hc.args, "CMD ")
	require.True(t, ok, "HEALTHCHECK ... CMD [...]")
	probe := execForm(t, cmd)
	require.Len(t, probe, 2)
	assert.Equal(t, "/usr/local/bin/healthprobe", probe[0])
	assert.True(t, copied["healthprobe"], "the probe is in the image")
	u, err := url.Parse(probe[1])
	require.NoError(t, err)
	assert.Equal(t, "/health", u.Path)
	assert.Equal(t, "8080", u.Port())
	assert.Contains(t, strings.Fields(qb.one(t, "EXPOSE").args), "8080")
	assert.Equal(t, []string{"/usr/local/bin/queuebox"}, execForm(t, qb.one(t, "ENTRYPOINT").args))
	assert.Equal(t, []string{"serve"}, execForm(t, qb.one(t, "CMD").args))

	rc, ok := stages["receiver"]
	require.True(t, ok, "a receiver stage")
	assert.Equal(t, "queuebox", rc.one(t, "USER").args)
	assert.Equal(t, []string{"/usr/local/bin/receiver", "-addr", ":8080"}, execForm(t, rc.one(t, "ENTRYPOINT").args))
}

// composeFile is the part of local/docker-compose.yml that the test reads.
type composeFile struct {
	Services map[string]struct {
		Image string
		Build struct {
			Context, Dockerfile, Target string
		}
		Environment map[string]string
		DependsOn   map[string]struct{ Condition string } `yaml:"depends_on"`
		Ports       []string
		Volumes     []string
		Configs     []struct{ Source, Target string }
		Healthcheck map[string]any
	}
	Configs map[string]struct{ Content string }
	Volumes map[string]any
}

// interpolation matches ${NAME}, ${NAME:-default} and ${NAME:?message} of Compose.
var interpolation = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(:-([^}]*)|:\?([^}]*))?\}`)

// interpolate replaces the variables of a Compose value as Compose does with an empty
// environment: the default of ${NAME:-default}; a variable without one is an error.
func interpolate(t *testing.T, v string) string {
	t.Helper()
	return interpolation.ReplaceAllStringFunc(v, func(m string) string {
		sub := interpolation.FindStringSubmatch(m)
		require.NotEmpty(t, sub[2], "%s has no default: the stack would not start without an env file", m)
		require.True(t, strings.HasPrefix(sub[2], ":-"), "%s stops the start without an env file", m)
		return sub[3]
	})
}

func loadCompose(t *testing.T) composeFile {
	t.Helper()
	var c composeFile
	require.NoError(t, yaml.Unmarshal(readRepoFile(t, "local/docker-compose.yml"), &c))
	for _, name := range []string{"postgres", "queuebox", "receiver"} {
		require.Contains(t, c.Services, name, "the stack of spec/32 has %s", name)
	}
	return c
}

func TestComposeBuildsFromTheRepository(t *testing.T) {
	t.Parallel()
	c := loadCompose(t)
	stages := loadDockerfile(t)
	for _, name := range []string{"queuebox", "receiver"} {
		b := c.Services[name].Build
		// Compose resolves the context against the folder of the file.
		assert.Equal(t, ".", filepath.Clean(filepath.Join("local", b.Context)), "%s builds from the repository root", name)
		assert.Equal(t, "local/Dockerfile", b.Dockerfile)
		assert.Contains(t, stages, b.Target, "%s builds a stage of local/Dockerfile", name)
		assert.Equal(t, name, b.Target)
	}
}

func TestComposeStack(t *testing.T) {
	t.Parallel()
	c := loadCompose(t)

	pg := c.Services["postgres"]
	assert.Regexp(t, `^postgres:16(\b|-)`, pg.Image, "PostgreSQL 16, as spec/32 says")
	assert.NotEmpty(t, pg.Healthcheck["test"], "a readiness check for depends_on")

	qb := c.Services["queuebox"]
	assert.Equal(t, "service_healthy", qb.DependsOn["postgres"].Condition, "QueueBox starts when the database answers")
	assert.Contains(t, qb.Ports, "8080:8080")
	captureMounted := false
	for _, v := range qb.Volumes {
		src, dst, _ := strings.Cut(v, ":")
		if dst == "/var/lib/queuebox/capture" {
			captureMounted = true
			assert.Contains(t, c.Volumes, src, "the capture state is a named volume (it takes the owner queuebox)")
		}
	}
	assert.True(t, captureMounted, "the capture state directory is a volume")

	// The database account of QueueBox is the one that PostgreSQL creates.
	assert.Equal(t, interpolate(t, pg.Environment["POSTGRES_PASSWORD"]), interpolate(t, qb.Environment["QUEUEBOX_DATABASE_PASSWORD"]))
	assert.Equal(t, pg.Environment["POSTGRES_USER"], qb.Environment["QUEUEBOX_DATABASE_USERNAME"])
}

// TestComposeConfiguration loads the configuration of the queuebox service exactly as the
// container does (its variables over the mounted file) and checks that it points at the
// other services.
func TestComposeConfiguration(t *testing.T) {
	t.Parallel()
	c := loadCompose(t)
	qb := c.Services["queuebox"]
	require.Len(t, qb.Configs, 1)
	mount := qb.Configs[0]
	content, ok := c.Configs[mount.Source]
	require.True(t, ok, "config %s is defined", mount.Source)
	assert.NotContains(t, content.Content, "$", "Compose would interpolate a $ of the configuration")

	env := map[string]string{}
	for k, v := range qb.Environment {
		env[k] = interpolate(t, v)
	}
	require.Equal(t, mount.Target, env[config.ConfigFileVariable], "QUEUEBOX_CONFIG_FILE names the mounted file")
	readFile := func(name string) ([]byte, error) {
		if name == mount.Target {
			return []byte(content.Content), nil
		}
		return nil, fmt.Errorf("open %s: %w", name, fs.ErrNotExist)
	}
	cfg, warnings, err := service.Load(service.LoadOptions{Env: env, ReadFile: readFile})
	require.NoError(t, err)
	assert.Empty(t, warnings)

	// The data port is the published port and the port of the image's health check, with
	// /health on it (no management port).
	assert.Equal(t, 8080, cfg.Server.HTTPPort)
	assert.Zero(t, cfg.Server.ManagementPort, "the HEALTHCHECK calls /health on the data port")

	// The database is the postgres service.
	u, err := url.Parse(strings.TrimPrefix(cfg.Database.URL.Reveal(), "jdbc:"))
	require.NoError(t, err)
	assert.Equal(t, "postgres", u.Hostname())
	assert.Equal(t, "5432", u.Port())

	// Every HTTP destination is the receiver service on the port it listens on.
	stages := loadDockerfile(t)
	entry := execForm(t, stages["receiver"].one(t, "ENTRYPOINT").args)
	addr := entry[slices.Index(entry, "-addr")+1]
	_, port, _ := strings.Cut(addr, ":")
	require.NotEmpty(t, cfg.Destinations)
	for name, d := range cfg.Destinations {
		require.NotNil(t, d.HTTP, "destination %s is HTTP", name)
		du, err := url.Parse(d.HTTP.BaseURL)
		require.NoError(t, err)
		assert.Equal(t, "receiver", du.Hostname(), "destination %s", name)
		assert.Equal(t, port, du.Port(), "destination %s", name)
	}
	require.NotEmpty(t, cfg.Routes)
	for _, r := range cfg.Routes {
		assert.Contains(t, cfg.Destinations, r.Destination)
	}
	_, err = strconv.Atoi(port)
	assert.NoError(t, err)
}

func TestParseDockerfile(t *testing.T) {
	t.Parallel()
	stages, err := parseDockerfile("# syntax=docker/dockerfile:1\nARG V=1\nFROM --platform=$BUILDPLATFORM golang:${V} AS build\n" +
		"RUN a && \\\n    # a comment\n    b\nFROM scratch AS final\nUSER x\n")
	require.NoError(t, err)
	require.Len(t, stages, 2)
	assert.Equal(t, "build", stages[0].name)
	assert.Equal(t, []string{"--platform=$BUILDPLATFORM"}, stages[0].flags)
	assert.Equal(t, "a &&  b", stages[0].body[0].args)
	assert.Equal(t, "x", stages[1].one(t, "USER").args)

	_, err = parseDockerfile("RUN x\n")
	assert.Error(t, err)
	_, err = parseDockerfile("FROM a\nRUN x \\")
	assert.Error(t, err)
}
